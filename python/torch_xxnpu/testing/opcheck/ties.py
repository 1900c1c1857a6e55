"""Ops that return indices whose order, or choice, among equal elements is unspecified:
sort and argsort unless asked for stable=True, topk, kthvalue and mode (torch documents no
order for ties, and CUDA's differs from the CPU's, which happens to be stable). Comparing
their indices element for element with the CPU's fails a correct kernel wherever the input
has ties: the eager sweep failed sort, argsort and topk for bool, the 8-bit integers,
float16 and bfloat16 that way.

A result is accepted when it differs from the CPU's only there: its values match the CPU's,
its indices pick exactly those values out of the input, and (sort, argsort, topk) no index
repeats along the dimension. Used by opcheck's runner and the fuzzer."""
from typing import Optional, Tuple

from torch_xxnpu.testing.opcheck.compare import compare
from torch_xxnpu.testing.opcheck.samples import copy_to, flatten

# op: (position of dim among the args after the input, of keepdim (None: indices keep the
# input's shape), whether indices are distinct along dim)
_LAYOUT = {
    "sort": (0, None, True),
    "argsort": (0, None, True),
    "topk": (1, None, True),
    "kthvalue": (1, 2, False),
    "mode": (0, 1, False),
}
TIE_ORDER_OPS = tuple(_LAYOUT)


def _arg(sample, position, name, default):
    if name in sample.kwargs:
        return sample.kwargs[name]
    return sample.args[position] if len(sample.args) > position else default


def tie_order_match(op_name, cpu_sample, dev_p, cpu_p, rtol, atol) -> Optional[Tuple[float, float]]:
    """(max abs, max rel) of the values when xxnpu's result is the CPU's up to ties; None
    when it is not, or when the op's order is specified (stable=True)."""
    import torch

    name = op_name.split(".")[0]
    if name not in _LAYOUT:
        return None
    dim_pos, keepdim_pos, distinct = _LAYOUT[name]
    x = cpu_sample.input
    if not isinstance(x, torch.Tensor):
        return None
    if name in ("sort", "argsort") and _arg(cpu_sample, 2, "stable", False):
        return None
    dim = _arg(cpu_sample, dim_pos, "dim", -1)
    keepdim = True if keepdim_pos is None else _arg(cpu_sample, keepdim_pos, "keepdim", False)
    ordered = name != "topk" or _arg(cpu_sample, 3, "sorted", True)
    dev = [copy_to(t, "cpu") if isinstance(t, torch.Tensor) else t for t in flatten(dev_p)]
    cpu = flatten(cpu_p)
    src = x if x.dim() else x.reshape(1)

    def pick(idx):  # the input's elements at `idx` along dim (a 0-dim input as one element)
        return src.gather(dim, idx.reshape(-1) if not x.dim() else idx if keepdim else idx.unsqueeze(dim))

    try:
        if name == "argsort":
            (dev_idx,), (cpu_idx,) = dev, cpu
            dev_vals, cpu_vals = pick(dev_idx), pick(cpu_idx)
        else:
            (dev_vals, dev_idx), (cpu_vals, _) = dev, cpu
            picked = pick(dev_idx).reshape(dev_vals.shape)
            if not bool(((picked == dev_vals) | (picked.isnan() & dev_vals.isnan())).all()):
                return None  # the indices do not point at the values returned
        if distinct and x.dim() and dev_idx.numel() and not bool((dev_idx.sort(dim).values.diff(dim=dim) != 0).all()):
            return None  # an element taken twice
        if not ordered:  # topk(sorted=False): the values' order is unspecified too
            dev_vals, cpu_vals = dev_vals.sort(dim).values, cpu_vals.sort(dim).values
        ok, a, r, _ = compare(dev_vals, cpu_vals, rtol, atol, expect_device=False)
    except (RuntimeError, ValueError, IndexError, TypeError):  # results that do not fit: no match
        return None
    return (a, r) if ok else None
