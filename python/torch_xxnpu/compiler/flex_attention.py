"""FlexAttention on xxnpu: ``torch.nn.attention.flex_attention`` accepted for xxnpu tensors,
and compiled by Inductor's C++ flex attention template as an xxnpu device kernel.

torch 2.13 lists the devices FlexAttention runs on ({cuda, cpu, xpu, hpu, mps},
``flex_attention._validate_device``) and picks the lowering by device type (``cpu`` →
``kernel.flex.flex_cpu.lower_cpu``, ``mps`` → Metal, else Triton). xxnpu's generated kernels are the CPU's
C++ (inductor.py), so xxnpu takes the CPU's rules and the CPU's template, with its limits:

- inference only: inputs that require grad are refused (the CPU's rule: the C++ template
  has no backward), and so is ``return_lse`` / ``return_aux`` under torch.compile;
- float32, float16, bfloat16 (the template's dtypes).

Uncompiled, flex_attention runs its reference implementation (ATen ops on xxnpu), as on the
CPU; torch warns that this is slow and meant for debugging. docs/compile.md, "FlexAttention".
"""
import functools

DEVICE = "xxnpu"


def register_api(module) -> None:
    """Called when ``torch.nn.attention.flex_attention`` is imported: xxnpu tensors pass its
    device check under the CPU's rules, and forward kernels skip the log-sum-exp output
    (which only a backward or ``return_lse`` reads) as on the CPU."""
    if getattr(module._validate_device, "_xxnpu", False):
        return
    validate_device, apply_kernel_options = module._validate_device, module._apply_kernel_options

    @functools.wraps(validate_device)
    def _validate_device(query, key, value):
        if query.device.type != DEVICE:
            return validate_device(query, key, value)
        if query.requires_grad or key.requires_grad or value.requires_grad:
            raise NotImplementedError(
                "FlexAttention does not support backward on xxnpu (its compiled kernel is Inductor's C++ "
                "template, inference only, as on the CPU). Set requires_grad=False on query, key and value, "
                "or use torch.nn.functional.scaled_dot_product_attention, which trains on xxnpu."
            )

    @functools.wraps(apply_kernel_options)
    def _apply_kernel_options(query, key, value, return_lse, kernel_options, *args, **kwargs):
        options = apply_kernel_options(query, key, value, return_lse, kernel_options, *args, **kwargs)
        if query.device.type == DEVICE and not return_lse and not _aux_lse(args, kwargs):
            options["OUTPUT_LOGSUMEXP"] = False
        return options

    _validate_device._xxnpu = True
    module._validate_device = _validate_device
    module._apply_kernel_options = _apply_kernel_options


def _aux_lse(args, kwargs) -> bool:
    aux = kwargs.get("return_aux", args[0] if args else None)
    return bool(aux is not None and getattr(aux, "lse", False))


def register_lowering() -> None:
    """Inductor's lowering of the flex_attention op sends xxnpu inputs to the CPU's C++
    template (XxnpuScheduling then makes it a device kernel)."""
    from torch._higher_order_ops.flex_attention import flex_attention as flex_attention_op
    from torch._inductor import lowering
    from torch._inductor.kernel.flex.flex_cpu import lower_cpu

    lowered = lowering.lowerings[flex_attention_op]
    if getattr(lowered, "_xxnpu", False):
        return

    @functools.wraps(lowered)
    def flex_attention(query, key, value, subgraph, block_mask, scale, kernel_options, *buffers):
        if query.get_device().type != DEVICE:
            return lowered(query, key, value, subgraph, block_mask, scale, kernel_options, *buffers)
        if kernel_options.get("OUTPUT_LOGSUMEXP", False) or kernel_options.get("OUTPUT_MAX", False):
            raise NotImplementedError(
                "flex_attention on xxnpu under torch.compile is inference only (Inductor's C++ template, as on "
                "the CPU): return_lse / return_aux and backward are not supported"
            )
        return lower_cpu(query, key, value, subgraph, block_mask, scale, kernel_options, *buffers)

    flex_attention._xxnpu = True
    lowering.lowerings[flex_attention_op] = flex_attention
