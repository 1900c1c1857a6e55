"""The device under test and sample inputs moved between it and the CPU: copies that keep
strides, flattening of nested results, descriptions of a failing sample."""
from typing import Dict

from torch_xxnpu.testing.opcheck.dtypes import dtype_name


DEVICE = "xxnpu"


def copy_to(t, device):
    """t on `device` with the same sizes, strides and storage offset (a copy of its storage)."""
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    if t.layout != torch.strided or t.is_conj() or t.is_neg() or t.is_quantized:
        out = t.detach().to(device, copy=True)
    else:
        storage = t.untyped_storage()
        n = storage.nbytes() // t.element_size()
        empty = torch.empty(0, dtype=t.dtype, device=t.device)
        flat = empty.set_(storage, 0, (n,), (1,)) if n else empty
        flat = flat.detach().to(device, copy=True)
        out = flat.as_strided(t.size(), t.stride(), t.storage_offset() if n else 0)
    if t.requires_grad:
        out.requires_grad_(True)
    return out


def move_sample(sample, device):
    """A copy of `sample` with every tensor on `device` (strides kept) and a `device=`
    keyword argument (factory functions) pointing there too."""
    import torch

    moved = sample.transform(lambda t: copy_to(t, device) if isinstance(t, torch.Tensor) else t)
    target = torch.device(device).type

    def other_device(v):
        if isinstance(v, torch.device):
            return v.type != target
        # Only strings that name the other device ("xxnpu", "xxnpu:0", "cpu"), not any string.
        return isinstance(v, str) and v.split(":")[0] in ("cpu", DEVICE) and v.split(":")[0] != target

    dev = moved.kwargs.get("device")
    if other_device(dev):
        moved.kwargs["device"] = device
    if isinstance(moved.input, (str, torch.device)) and other_device(moved.input):
        moved.input = device
    moved.args = tuple(device if other_device(a) else a for a in moved.args)  # x.to("xxnpu", ...)
    return moved


def flatten(x, out=None):
    import torch

    if out is None:
        out = []
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            flatten(v, out)
    elif isinstance(x, dict):
        for k in sorted(x, key=str):
            flatten(x[k], out)
    else:
        out.append(x)
    return out


def _describe_value(v, limit=80) -> str:
    import torch

    if isinstance(v, torch.Tensor):
        if v.layout != torch.strided:
            return f"Tensor[shape={tuple(v.shape)}, dtype={dtype_name(v.dtype)}, layout={v.layout}]"
        extra = "" if v.is_contiguous() else ", non-contiguous"
        if v.numel() <= 6 and v.layout == torch.strided:
            vals = v.detach().cpu().flatten().tolist()
            extra += f", values={vals}"
        return (f"Tensor[shape={tuple(v.shape)}, stride={tuple(v.stride())}, "
                f"dtype={dtype_name(v.dtype)}{extra}]")
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_describe_value(e, limit) for e in v[:8])
        more = ", ..." if len(v) > 8 else ""
        return ("[" + inner + more + "]") if isinstance(v, list) else ("(" + inner + more + ")")
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_describe_value(e, limit)}" for k, e in v.items()) + "}"
    r = repr(v)
    return r if len(r) <= limit else r[:limit] + "..."


def describe_sample(sample) -> Dict[str, str]:
    return {
        "input": _describe_value(sample.input),
        "args": _describe_value(tuple(sample.args)),
        "kwargs": _describe_value(dict(sample.kwargs)),
    }


def touches_device(sample) -> bool:
    """Whether the op's device run involves xxnpu (an xxnpu tensor or device= argument);
    if not (torch.arange(2) has no tensor), its result rightly stays on the CPU."""
    import torch

    dev = sample.kwargs.get("device")
    if isinstance(dev, (str, torch.device)):  # x.new_full(..., device="cpu") asks for the CPU
        return torch.device(dev).type == DEVICE
    leaves = flatten([sample.input, list(sample.args), dict(sample.kwargs)])
    return any(isinstance(t, torch.Tensor) and t.device.type == DEVICE for t in leaves)
