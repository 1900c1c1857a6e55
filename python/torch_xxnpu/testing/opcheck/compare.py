"""An xxnpu result against the CPU's: values within tolerance, dtypes, shapes, devices."""
import math
from typing import Tuple

from torch_xxnpu.testing.opcheck.dtypes import DEFAULT_TOL, dtype_name
from torch_xxnpu.testing.opcheck.samples import DEVICE, flatten


def compare(dev_out, cpu_out, rtol, atol, expect_device=True) -> Tuple[bool, float, float, str]:
    """(match, max abs error, max rel error, message) of an xxnpu result against the CPU's."""
    import torch

    dev_leaves, cpu_leaves = flatten(dev_out), flatten(cpu_out)
    if len(dev_leaves) != len(cpu_leaves):
        return False, math.inf, math.inf, f"xxnpu returned {len(dev_leaves)} values, CPU {len(cpu_leaves)}"
    max_abs = max_rel = 0.0
    for i, (d, c) in enumerate(zip(dev_leaves, cpu_leaves)):
        where = f"output {i}: " if len(cpu_leaves) > 1 else ""
        if isinstance(c, torch.Tensor) != isinstance(d, torch.Tensor):
            return False, math.inf, math.inf, f"{where}xxnpu returned {type(d).__name__}, CPU {type(c).__name__}"
        if not isinstance(c, torch.Tensor):
            if isinstance(c, float) and isinstance(d, (int, float)):
                if math.isnan(c) and math.isnan(d):
                    continue
                err = abs(d - c)
                max_abs = max(max_abs, err)
                if err > atol + rtol * abs(c):
                    return False, max_abs, max_rel, f"{where}xxnpu {d!r} vs CPU {c!r}"
            elif d != c:
                return False, max_abs, max_rel, f"{where}xxnpu {d!r} vs CPU {c!r}"
            continue
        if expect_device and c.device.type == "cpu" and d.device.type != DEVICE:
            return False, math.inf, math.inf, f"{where}result is on {d.device}, expected an {DEVICE} tensor"
        if d.dtype != c.dtype:
            return False, math.inf, math.inf, f"{where}dtype {dtype_name(d.dtype)} on xxnpu, {dtype_name(c.dtype)} on CPU"
        if d.shape != c.shape:
            return False, math.inf, math.inf, f"{where}shape {tuple(d.shape)} on xxnpu, {tuple(c.shape)} on CPU"
        d = d.detach().cpu()
        c = c.detach()
        if d.layout != torch.strided:
            d = d.to_dense()
        if c.layout != torch.strided:
            c = c.to_dense()
        if c.numel() == 0:
            continue
        if c.dtype.is_complex:
            dd, cc = d.to(torch.complex128), c.to(torch.complex128)
        elif c.dtype == torch.bool:
            dd, cc = d.to(torch.float64), c.to(torch.float64)
        else:
            dd, cc = d.to(torch.float64), c.to(torch.float64)
        diff = (dd - cc).abs()
        both_nan = dd.isnan() & cc.isnan()
        same = (dd == cc) | both_nan  # equal infinities have a nan difference
        diff = torch.where(same, torch.zeros_like(diff), diff)
        diff = torch.where(diff.isnan(), torch.full_like(diff, math.inf), diff)
        ref = cc.abs()
        rel = torch.where(ref > 0, diff / ref.where(ref > 0, torch.ones_like(ref)),
                          torch.where(diff > 0, torch.full_like(diff, math.inf), torch.zeros_like(diff)))
        a, r = float(diff.max()), float(rel.max())
        max_abs, max_rel = max(max_abs, a), max(max_rel, r)
        # A floating result gets at least assert_close's default tolerance for its own dtype,
        # as assert_close would give it: cos(int) is a float computation even though the
        # sample's dtype is an exact integer one.
        out_rtol, out_atol = DEFAULT_TOL.get(dtype_name(c.dtype), (0.0, 0.0))
        rtol, atol = max(rtol, out_rtol), max(atol, out_atol)
        # "not <=" rather than ">": a NaN on the CPU side makes the bound NaN.
        bad = ~same & ~(diff <= (atol + rtol * ref))
        if bool(bad.any()):
            n_bad = int(bad.sum())
            flat = int(torch.argmax(torch.where(bad, diff, torch.zeros_like(diff)).flatten()))
            idx = tuple(int(v) for v in torch.unravel_index(torch.tensor(flat), c.shape)) if c.dim() else ()
            dv, cv = d.flatten()[flat].item() if d.dim() else d.item(), c.flatten()[flat].item() if c.dim() else c.item()
            return False, max_abs, max_rel, (
                f"{where}{n_bad} / {c.numel()} elements differ beyond rtol={rtol:g}, atol={atol:g}; "
                f"largest at index {idx}: xxnpu {dv!r} vs CPU {cv!r}")
    return True, max_abs, max_rel, ""
