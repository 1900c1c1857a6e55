"""opcheck: every op of PyTorch's OpInfo database and every torch.ops.xxnpu op, on xxnpu
against the CPU, per op and dtype.

    python -m torch_xxnpu.testing.opcheck [--ops add,mul] [--dtypes float32,float16]
        [--native-only] [--backward] [-j 2] [--timeout 300]
        [--json out.json] [--markdown out.md] [--html out.html] [--baseline old.json]

For every (op, dtype) it takes the op's sample inputs (made on the CPU, seeded), copies
each to xxnpu with its strides, runs the op on both devices and compares the results with
the OpInfo's tolerances (its toleranceOverride / precisionOverride for that dtype, else
torch.testing.assert_close's defaults). It records whether the op ran natively or went
through the CPU fallback (the fallback counters' deltas around the op call), the status
(pass / fail / error / skipped with why / xfail / crashed / timeout), the largest absolute
and relative errors and the first failing sample (shapes, strides, dtypes, arguments).

Ops run in worker subprocesses: one that segfaults or hangs is reported as crashed or
timeout, its worker is replaced and the sweep goes on.

Exit status: 0 when nothing failed (with --baseline: nothing regressed against it),
1 otherwise, 2 on bad arguments.
"""
import argparse
import json
import math
import os
import platform
import selectors
import shlex
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
import warnings
from typing import Any, Dict, Iterable, List, Optional, Tuple

STATUSES = ("pass", "fail", "error", "xfail", "skipped", "crashed", "timeout")
BAD = ("fail", "error", "crashed", "timeout")

DEVICE = "xxnpu"

# torch.testing.assert_close's defaults (rtol, atol), by dtype name.
_DEFAULT_TOL = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex32": (1e-3, 1e-5),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


# --------------------------------------------------------------------------------------
# dtypes

def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def parse_dtypes(spec: Optional[str]):
    import torch

    if not spec:
        return None
    out = []
    for name in spec.split(","):
        name = name.strip()
        d = getattr(torch, name, None)
        if not isinstance(d, torch.dtype):
            raise SystemExit(f"opcheck: unknown dtype {name!r} (use torch's names: float32, bfloat16, int64, ...)")
        out.append(d)
    return out


# --------------------------------------------------------------------------------------
# Cases: an OpInfo or a custom op, seen the same way by the runner.

class Case:
    """What the runner needs of an op: samples on the CPU, a call, tolerances, skips."""

    kind = "?"
    name = "?"

    def dtypes(self) -> List:
        raise NotImplementedError

    def backward_dtypes(self) -> set:
        return set()

    def samples(self, dtype, requires_grad: bool) -> Iterable:
        """SampleInputs on xxnpu."""
        raise NotImplementedError

    def call(self, sample):
        raise NotImplementedError

    def tolerance(self, dtype) -> Tuple[float, float, str]:
        rtol, atol = _DEFAULT_TOL.get(dtype_name(dtype), (0.0, 0.0))
        return rtol, atol, "assert_close default"

    def skip_reason(self, dtype) -> Optional[str]:
        return None

    def expected_failure(self, dtype) -> bool:
        return False

    def native_kernel(self, native: set) -> bool:
        return False


class _FakeTestSelf:
    """Stands in for a TestCase when we evaluate an OpInfo's skip decorators."""

    device_type = DEVICE
    precision = 0.0
    rel_tol = 0.0

    def __getattr__(self, name):
        raise AttributeError(name)


def _decorator_effect(decorator) -> Tuple[Optional[str], bool]:
    """(skip reason or None, expected failure?) of one test decorator."""
    def probe(self, *args, **kwargs):
        return None

    try:
        wrapped = decorator(probe)
    except unittest.SkipTest as e:
        return f"{e}" or "skipped", False
    except Exception:
        return None, False
    if getattr(wrapped, "__unittest_skip__", False):
        return getattr(wrapped, "__unittest_skip_why__", "skipped") or "skipped", False
    if getattr(wrapped, "__unittest_expecting_failure__", False):
        return None, True
    try:
        wrapped(_FakeTestSelf(), DEVICE, None, None)
    except unittest.SkipTest as e:
        return f"{e}" or "skipped", False
    except Exception:
        pass
    return None, False


class OpInfoCase(Case):
    kind = "opinfo"
    # The test whose decorators (skips, tolerances) apply: PyTorch's own device-vs-CPU check.
    TEST = ("TestCommon", "test_compare_cpu")

    def __init__(self, op):
        self.op = op
        self.name = op.full_name if hasattr(op, "full_name") else (
            op.name + ("." + op.variant_test_name if op.variant_test_name else ""))
        self.aten_name = getattr(op, "aten_name", None) or op.name

    def dtypes(self):
        return sorted(self.op.supported_dtypes("cpu"), key=dtype_name)

    def backward_dtypes(self):
        if not self.op.supports_autograd:
            return set()
        return set(self.op.supported_backward_dtypes("cpu"))

    def samples(self, dtype, requires_grad):
        # Made on xxnpu, as PyTorch's device tests do: the sample functions know which
        # arguments must stay on the CPU (tensor_split's indices, for instance).
        return self.op.sample_inputs(DEVICE, dtype, requires_grad=requires_grad)

    def call(self, sample):
        return self.op(sample.input, *sample.args, **sample.kwargs)

    def _active(self, dtype, test_names=None, any_test=False):
        from torch.testing._internal.opinfo.core import DecorateInfo

        cls_name, test_name = self.TEST
        for d in self.op.decorators:
            if not isinstance(d, DecorateInfo):
                yield d, True
                continue
            if not d.active_if:
                continue
            if d.dtypes is not None and dtype not in d.dtypes:
                continue
            exact = (d.cls_name in (None, cls_name) and d.test_name in (None, test_name)
                     and d.device_type in (None, DEVICE, "privateuse1"))
            if exact:
                for dec in d.decorators:
                    yield dec, True
            elif any_test and d.device_type in (None, "cuda", DEVICE, "privateuse1"):
                for dec in d.decorators:
                    yield dec, False

    def tolerance(self, dtype):
        from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride

        rtol, atol, _ = super().tolerance(dtype)
        exact, other = [], []
        for dec, is_exact in self._active(dtype, any_test=True):
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                (exact if is_exact else other).append((dec.d[dtype].rtol, dec.d[dtype].atol))
            elif isinstance(dec, precisionOverride) and dtype in dec.d:
                (exact if is_exact else other).append((0.0, dec.d[dtype]))
        # An override for test_compare_cpu itself wins; else the loosest the OpInfo grants
        # any of its accelerator tests (those document how far a device kernel's results
        # legitimately drift from the CPU's: reduction order, fused ops).
        chosen, source = (exact, "OpInfo override (test_compare_cpu)") if exact else (
            other, "OpInfo override (device tests)")
        if not chosen:
            return rtol, atol, "assert_close default"
        return max(rtol, max(r for r, _ in chosen)), max(atol, max(a for _, a in chosen)), source

    def _effects(self, dtype):
        from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride

        skip, xfail = None, False
        for dec, is_exact in self._active(dtype):
            if not is_exact or isinstance(dec, (toleranceOverride, precisionOverride)):
                continue
            s, x = _decorator_effect(dec)
            skip = skip or s
            xfail = xfail or x
        return skip, xfail

    def skip_reason(self, dtype):
        skip, _ = self._effects(dtype)
        if skip:
            return f"OpInfo skips TestCommon.test_compare_cpu: {skip}"
        code = getattr(self.op.op, "__code__", None)
        if code is not None and "wrapper_set_seed" in code.co_names:
            # PyTorch wraps the ops it knows to be random (randn, dropout, ...) so that each
            # call reseeds; xxnpu's Philox generator still draws other numbers than the CPU's.
            return "random op (the OpInfo reseeds it with wrapper_set_seed): xxnpu's generator is not the CPU's"
        return None

    def expected_failure(self, dtype):
        return self._effects(dtype)[1]

    def native_kernel(self, native):
        base = self.aten_name.split(".")[-1]
        return any(n.split("::", 1)[-1].split(".")[0] in (base, base + "_") for n in native)


class CustomOpCase(Case):
    """A torch.ops.<ns>.* overload: its xxnpu kernel against its own CPU kernel."""

    kind = "custom"

    def __init__(self, qualname: str):
        import torch

        self.qualname = qualname  # "xxnpu::add" or "xxnpu::add.out"
        self.name = qualname
        ns, rest = qualname.split("::", 1)
        opname, _, overload = rest.partition(".")
        self.packet = getattr(getattr(torch.ops, ns), opname)
        self.overload = getattr(self.packet, overload or "default")
        self.schema = self.overload._schema
        from torch_xxnpu.testing import custom_samples

        self.registered = custom_samples.lookup(qualname)

    def dtypes(self):
        import torch

        if self.registered:
            return list(self.registered[1])
        return [torch.float32, torch.float64, torch.float16, torch.bfloat16]

    def backward_dtypes(self):
        return {d for d in self.dtypes() if d.is_floating_point or d.is_complex}

    def _has_kernel(self, key):
        import torch

        return any(torch._C._dispatch_has_kernel_for_dispatch_key(self.qualname, k)
                   for k in (key, "CompositeImplicitAutograd", "CompositeExplicitAutograd"))

    def skip_reason(self, dtype):
        if self.qualname.split("::", 1)[1].startswith("_"):
            return "private op (name starts with _)"
        if not self._has_kernel("CPU"):
            return "no CPU kernel to compare against (register one: TORCH_LIBRARY_IMPL(<ns>, CPU, m))"
        return None

    def native_kernel(self, native):
        return self.qualname in native or self.qualname.split(".")[0] in native

    def samples(self, dtype, requires_grad):
        gen = self.registered[0] if self.registered else self._generic_samples
        return (move_sample(s, DEVICE) for s in gen(dtype, requires_grad))

    def _generic_samples(self, dtype, requires_grad):
        import torch
        from torch.testing import make_tensor
        from torch.testing._internal.opinfo.core import SampleInput

        values = []
        for arg in self.schema.arguments:
            t = str(arg.type)
            if arg.has_default_value():
                values.append(arg.default_value)
            elif t.startswith("Tensor"):
                values.append(make_tensor((4, 8), dtype=dtype, device="cpu", low=-2, high=2,
                                          requires_grad=requires_grad))
            elif t in ("float", "Scalar"):
                values.append(0.5)
            elif t in ("int", "SymInt"):
                values.append(1)
            elif t == "bool":
                values.append(False)
            elif t.startswith("int[]") or t.startswith("SymInt[]"):
                values.append([4, 8])
            else:
                raise _SampleError(f"no generic value for argument {arg.name}: {t}; register samples "
                                   "in torch_xxnpu/testing/custom_samples.py")
        if not values:
            raise _SampleError("op takes no arguments")
        yield SampleInput(values[0], args=tuple(values[1:]))

    def call(self, sample):
        out = self.overload(sample.input, *sample.args, **sample.kwargs)
        mutated = []
        flat = [sample.input, *sample.args]
        for i, arg in enumerate(self.schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write and i < len(flat):
                mutated.append(flat[i])
        return (out, mutated) if mutated else out


class _SampleError(Exception):
    pass


def discover_custom_ops(namespaces: List[str]) -> List[str]:
    import torch

    names = []
    for qual in torch._C._dispatch_get_all_op_names():
        ns = qual.split("::", 1)[0]
        if ns in namespaces:
            names.append(qual)
    return sorted(set(names))


def load_cases(namespaces: List[str], with_opinfo: bool = True) -> Dict[str, Case]:
    cases: Dict[str, Case] = {}
    if with_opinfo:
        try:
            from torch.testing._internal.common_methods_invocations import op_db
        except ModuleNotFoundError as e:
            raise SystemExit(f"opcheck: PyTorch's OpInfo database needs {e.name!r}, which is not installed "
                             f"(pip install {e.name})") from e

        for op in op_db:
            c = OpInfoCase(op)
            cases[c.name] = c
    for qual in discover_custom_ops(namespaces):
        try:
            c = CustomOpCase(qual)
        except Exception as e:  # an op whose packet cannot be resolved: report, do not die
            print(f"opcheck: cannot load custom op {qual}: {e}", file=sys.stderr)
            continue
        cases[c.name] = c
    return cases


def select_cases(cases: Dict[str, Case], ops: Optional[str]) -> List[Case]:
    if not ops:
        return [cases[k] for k in sorted(cases)]
    chosen, missing = [], []
    for want in [w.strip() for w in ops.split(",") if w.strip()]:
        # "xxnpu.add" is accepted for "xxnpu::add"; a name picks all its OpInfo variants.
        alt = want.replace(".", "::", 1) if "::" not in want else want
        hits = [c for k, c in cases.items()
                if k == want or k == alt or (c.kind == "opinfo" and c.op.name == want)]
        if not hits:
            missing.append(want)
        for h in hits:
            if h not in chosen:
                chosen.append(h)
    if missing:
        raise SystemExit(f"opcheck: no such op: {', '.join(missing)} (OpInfo names such as "
                         "'add', 'nn.functional.relu', 'div.floor_rounding', or 'xxnpu::add')")
    return sorted(chosen, key=lambda c: c.name)


# --------------------------------------------------------------------------------------
# Running one (op, dtype) in a worker.

def _copy_to(t, device):
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

    moved = sample.transform(lambda t: _copy_to(t, device) if isinstance(t, torch.Tensor) else t)
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


def _flatten(x, out=None):
    import torch

    if out is None:
        out = []
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flatten(v, out)
    elif isinstance(x, dict):
        for k in sorted(x, key=str):
            _flatten(x[k], out)
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


def _touches_device(sample) -> bool:
    """Whether the op's device run involves xxnpu (an xxnpu tensor or device= argument);
    if not (torch.arange(2) has no tensor), its result rightly stays on the CPU."""
    import torch

    dev = sample.kwargs.get("device")
    if isinstance(dev, (str, torch.device)):  # x.new_full(..., device="cpu") asks for the CPU
        return torch.device(dev).type == DEVICE
    leaves = _flatten([sample.input, list(sample.args), dict(sample.kwargs)])
    return any(isinstance(t, torch.Tensor) and t.device.type == DEVICE for t in leaves)


def compare(dev_out, cpu_out, rtol, atol, expect_device=True) -> Tuple[bool, float, float, str]:
    """(match, max abs error, max rel error, message) of an xxnpu result against the CPU's."""
    import torch

    dev_leaves, cpu_leaves = _flatten(dev_out), _flatten(cpu_out)
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
        out_rtol, out_atol = _DEFAULT_TOL.get(dtype_name(c.dtype), (0.0, 0.0))
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


class _Phase:
    """Accumulates one phase's (forward or backward) outcome over the samples."""

    def __init__(self):
        self.samples = 0
        self.both_raised = 0
        self.fallback: Dict[str, int] = {}
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.status = None
        self.reason = ""
        self.first_failure = None
        self.upcast_matches = 0

    def add_fallbacks(self, delta):
        for k, v in delta.items():
            self.fallback[k] = self.fallback.get(k, 0) + v

    def fail(self, status, index, sample, message):
        if self.first_failure is None:
            self.status = status
            desc = describe_sample(sample) if sample is not None else {"input": "", "args": "()", "kwargs": "{}"}
            self.first_failure = {"sample": index, **desc, "message": message[:2000]}

    def result(self, xfail):
        status = self.status
        if status is None:
            status = "pass" if self.samples else "skipped"
            if not self.samples:
                self.reason = self.reason or "no sample ran"
        elif xfail:
            status = "xfail"
        execution = "none" if not self.samples else ("fallback" if self.fallback else "native")
        if self.upcast_matches and not self.reason:
            self.reason = (f"{self.upcast_matches} sample(s) differ from the CPU's low-precision kernel but match "
                           "the op computed in float32 and rounded")
        return {
            "status": status,
            "reason": self.reason,
            "execution": execution,
            "fallback_ops": dict(sorted(self.fallback.items())),
            "samples": self.samples,
            "max_abs": _finite(self.max_abs),
            "max_rel": _finite(self.max_rel),
            "first_failure": self.first_failure,
        }


def _finite(x):
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf") if not math.isnan(x) else "nan"


def _fallback_delta():
    import torch_xxnpu

    d = torch_xxnpu.ops.fallback_counts()
    torch_xxnpu.ops.reset_fallback_counts()
    return d


def _short_exc(e: BaseException) -> str:
    msg = f"{type(e).__name__}: {e}".strip()
    lines = [ln for ln in msg.splitlines() if ln.strip()]
    return "\n".join(lines[:6])[:1500]


def _grad_inputs(sample):
    import torch

    return [t for t in _flatten([sample.input, list(sample.args), dict(sample.kwargs)])
            if isinstance(t, torch.Tensor) and t.requires_grad]


def _grad_outputs(out):
    import torch

    return [t for t in _flatten(out) if isinstance(t, torch.Tensor) and t.requires_grad
            and (t.dtype.is_floating_point or t.dtype.is_complex)]


def _upcast_match(case, sample, dtype, dev_p, cpu_p, rtol, atol):
    """(max abs, max rel) of xxnpu against the op computed in float32 on the CPU and
    rounded to each CPU output's dtype, if they match; else None."""
    import torch

    def up(t):
        if isinstance(t, torch.Tensor) and t.dtype == dtype:
            return _copy_to(t, "cpu").detach().to(torch.float32).requires_grad_(False)
        return t if not isinstance(t, torch.Tensor) else _copy_to(t, "cpu").detach()

    try:
        ref = sample.output_process_fn_grad(case.call(move_sample(sample, "cpu").transform(up)))
        ref_leaves, cpu_leaves = _flatten(ref), _flatten(cpu_p)
        if len(ref_leaves) != len(cpu_leaves):
            return None
        cast = [r.to(c.dtype) if isinstance(r, torch.Tensor) and isinstance(c, torch.Tensor) else r
                for r, c in zip(ref_leaves, cpu_leaves)]
        ok, a, r, _ = compare(dev_p, cast, rtol, atol)
    except Exception:
        return None
    return (a, r) if ok else None


def _is_random(case, sample, cpu_out, index) -> bool:
    """Whether the op's CPU result depends on the RNG seed (randn, dropout...): then the
    device cannot be expected to reproduce it. Checked only after a mismatch."""
    import torch

    try:
        torch.manual_seed(5000 + index)
        again = case.call(move_sample(sample, "cpu"))
        ok, _, _, _ = compare(sample.output_process_fn_grad(again), sample.output_process_fn_grad(cpu_out),
                              0.0, 0.0, expect_device=False)
        return not ok
    except Exception:
        return False


def run_task(case: Case, dtype, opts: Dict[str, Any]) -> Dict[str, Any]:
    import torch
    import torch_xxnpu

    started = time.monotonic()
    row: Dict[str, Any] = {
        "op": case.name,
        "kind": case.kind,
        "dtype": dtype_name(dtype),
        "native_kernel": case.native_kernel(set(torch_xxnpu.ops.native_ops())),
    }
    rtol, atol, tol_source = case.tolerance(dtype)
    row.update({"rtol": rtol, "atol": atol, "tol_source": tol_source})
    skip = case.skip_reason(dtype)
    if skip:
        row.update({"status": "skipped", "reason": skip, "execution": "none", "seconds": 0.0})
        return row
    xfail = case.expected_failure(dtype)
    want_bwd = bool(opts.get("backward")) and dtype in case.backward_dtypes()
    fwd, bwd = _Phase(), _Phase()
    max_samples = opts.get("max_samples") or 0
    native_only = bool(opts.get("native_only"))

    torch.manual_seed(0)

    def sample_failure(e, index):
        # A custom op's generic sample that cannot be built is a skip; a sample function
        # that fails on xxnpu (it makes tensors with xxnpu ops) is the device's error.
        status = "skipped" if isinstance(e, _SampleError) else "error"
        row.update({"status": status, "execution": "none",
                    "reason": f"making sample {index} on xxnpu failed: {_short_exc(e)}",
                    "seconds": round(time.monotonic() - started, 3)})
        return row

    try:
        samples = iter(case.samples(dtype, want_bwd))
    except Exception as e:
        return sample_failure(e, 0)

    index = -1
    while True:
        index += 1
        if max_samples and index >= max_samples:
            break
        try:
            sample = next(samples)
        except StopIteration:
            break
        except Exception as e:
            if fwd.samples == 0 and fwd.both_raised == 0:
                return sample_failure(e, index)
            fwd.fail("error", index, None, f"making sample {index} on xxnpu failed: {_short_exc(e)}")
            break
        # The CPU copy first: an op that writes into its input must not change the other side's.
        dev_sample = sample
        try:
            cpu_sample = move_sample(sample, "cpu")
        except Exception as e:  # e.g. a sparse xxnpu tensor that cannot be copied back
            fwd.samples += 1
            fwd.fail("error", index, sample, f"copying the sample from xxnpu to the CPU failed: {_short_exc(e)}")
            continue

        cpu_exc = dev_exc = None
        torch.manual_seed(1000 + index)
        try:
            cpu_out = case.call(cpu_sample)
        except Exception as e:
            cpu_exc = e
        _fallback_delta()
        try:
            dev_out = case.call(dev_sample)
            delta = _fallback_delta()
            dev_cpu = [t.detach().cpu() if isinstance(t, torch.Tensor) else t for t in _flatten(dev_out)]
            del dev_cpu  # forces the device work to finish: an asynchronous kernel fault raises here
        except Exception as e:
            dev_exc = e
            delta = _fallback_delta()
        fwd.add_fallbacks(delta)
        if native_only and index == 0 and delta:
            row.update({"status": "skipped", "execution": "fallback",
                        "reason": "not native (--native-only): falls back for " + ", ".join(sorted(delta)),
                        "fallback_ops": dict(sorted(delta.items())),
                        "seconds": round(time.monotonic() - started, 3)})
            return row

        if cpu_exc is not None and dev_exc is not None:
            fwd.both_raised += 1
            continue
        fwd.samples += 1
        if cpu_exc is not None:
            fwd.fail("fail", index, sample, f"CPU raised but xxnpu did not: {_short_exc(cpu_exc)}")
            continue
        if dev_exc is not None:
            fwd.fail("error", index, sample, _short_exc(dev_exc))
            continue
        try:
            dev_p = sample.output_process_fn_grad(dev_out)
            cpu_p = sample.output_process_fn_grad(cpu_out)
            ok, a, r, msg = compare(dev_p, cpu_p, rtol, atol, _touches_device(dev_sample))
        except Exception as e:
            ok, a, r, msg = False, math.inf, math.inf, f"comparison failed: {_short_exc(e)}"
        if not ok and dtype in (torch.float16, torch.bfloat16):
            # The CPU's own float16/bfloat16 kernels are not always the best reference: some
            # paths round intermediates to the low precision (CPU add with alpha rounds
            # alpha * other to half in its scalar loop). A kernel that computes in float and
            # rounds once is right; accept it when it matches the op run in float32 on the
            # CPU and rounded, and say so in the row.
            up = _upcast_match(case, sample, dtype, dev_p, cpu_p, rtol, atol)
            if up is not None:
                ok, a, r = True, up[0], up[1]
                fwd.upcast_matches += 1
        if not ok and cpu_exc is None and _is_random(case, sample, cpu_out, index):
            row.update({"status": "skipped", "execution": "fallback" if fwd.fallback else "native",
                        "fallback_ops": dict(sorted(fwd.fallback.items())),
                        "reason": "random output: the CPU's own results differ between seeds",
                        "seconds": round(time.monotonic() - started, 3)})
            return row
        fwd.max_abs, fwd.max_rel = max(fwd.max_abs, a), max(fwd.max_rel, r)
        if not ok:
            fwd.fail("fail", index, sample, msg)

        if not want_bwd:
            continue
        try:
            cpu_outs = _grad_outputs(sample.output_process_fn_grad(cpu_out))
            cpu_ins = _grad_inputs(cpu_sample)
            if not cpu_outs or not cpu_ins:
                continue
            gen = torch.Generator().manual_seed(index)
            grads = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in cpu_outs]
            cpu_grads = torch.autograd.grad(cpu_outs, cpu_ins, grads, allow_unused=True)
        except Exception:
            continue  # no CPU gradient to compare against for this sample
        try:
            dev_outs = _grad_outputs(sample.output_process_fn_grad(dev_out))
            dev_ins = _grad_inputs(dev_sample)
            _fallback_delta()
            dev_grads = torch.autograd.grad(dev_outs, dev_ins, [g.to(DEVICE) for g in grads], allow_unused=True)
            delta = _fallback_delta()
            bwd.add_fallbacks(delta)
        except Exception as e:
            bwd.add_fallbacks(_fallback_delta())
            bwd.samples += 1
            bwd.fail("error", index, sample, _short_exc(e))
            continue
        bwd.samples += 1
        try:
            ok, a, r, msg = compare(list(dev_grads), list(cpu_grads), rtol, atol)
        except Exception as e:
            ok, a, r, msg = False, math.inf, math.inf, f"comparison failed: {_short_exc(e)}"
        bwd.max_abs, bwd.max_rel = max(bwd.max_abs, a), max(bwd.max_rel, r)
        if not ok:
            bwd.fail("fail", index, sample, msg)

    if fwd.samples == 0 and fwd.both_raised:
        fwd.reason = f"every sample ({fwd.both_raised}) raised on the CPU too"
    row.update(fwd.result(xfail))
    if xfail and row["status"] == "pass":
        row["reason"] = "passes although the OpInfo expects TestCommon.test_compare_cpu to fail"
    if want_bwd:
        row["backward"] = bwd.result(xfail)
    row["seconds"] = round(time.monotonic() - started, 3)
    return row


# --------------------------------------------------------------------------------------
# Worker process: reads tasks (JSON lines) on stdin, answers on the protocol fd.

def _setup_process(imports: List[str]):
    warnings.filterwarnings("ignore")
    import torch  # noqa: F401
    import torch_xxnpu  # noqa: F401

    for mod in imports:
        _import_plugin(mod)


def _import_plugin(spec: str):
    """--import: a module name or a .py file (registers kernels or sample generators)."""
    import importlib
    import importlib.util

    if spec.endswith(".py"):
        name = "opcheck_plugin_" + os.path.splitext(os.path.basename(spec))[0]
        s = importlib.util.spec_from_file_location(name, spec)
        mod = importlib.util.module_from_spec(s)
        sys.modules[name] = mod
        s.loader.exec_module(mod)
    else:
        importlib.import_module(spec)


def worker_main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--worker", action="store_true")
    p.add_argument("--import", dest="imports", action="append", default=[])
    p.add_argument("--namespaces", default="xxnpu")
    p.add_argument("--no-opinfo", action="store_true")
    a = p.parse_args(argv)
    # Protocol on the original stdout; anything the ops print goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _setup_process(a.imports)
    cases = load_cases(a.namespaces.split(","), with_opinfo=not a.no_opinfo)
    proto.write(json.dumps({"ready": True}) + "\n")
    import torch

    for line in sys.stdin:
        task = json.loads(line)
        case = cases.get(task["op"])
        dtype = getattr(torch, task["dtype"])
        if case is None:
            row = {"op": task["op"], "dtype": task["dtype"], "status": "error",
                   "reason": "op not found in the worker", "execution": "none"}
        else:
            try:
                row = run_task(case, dtype, task["opts"])
            except Exception as e:
                row = {"op": case.name, "kind": case.kind, "dtype": task["dtype"], "status": "error",
                       "execution": "none", "reason": "opcheck internal error: " + _short_exc(e),
                       "traceback": traceback.format_exc()[-3000:]}
        proto.write(json.dumps({"id": task["id"], "row": row}) + "\n")


# --------------------------------------------------------------------------------------
# Main process: schedules tasks on worker subprocesses, restarts crashed or hung ones.

class _Worker:
    def __init__(self, idx, cmd, env, start_timeout):
        self.idx = idx
        self.cmd = cmd
        self.env = env
        self.start_timeout = start_timeout
        self.log = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     env=env, text=True, bufsize=1)
        self.ready = False
        self.task = None
        self.deadline = time.monotonic() + start_timeout

    def send(self, task, timeout):
        self.task = task
        self.log.seek(0)
        self.log.truncate()
        self.deadline = time.monotonic() + timeout
        self.proc.stdin.write(json.dumps(task) + "\n")
        self.proc.stdin.flush()

    def log_tail(self, n=1500):
        try:
            self.log.seek(0)
            data = self.log.read().decode("utf-8", "replace")
        except Exception:
            return ""
        return data[-n:]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        try:
            self.proc.stdin.close()
            self.proc.stdout.close()
        except Exception:
            pass
        self.log.close()


class _Progress:
    """tqdm when installed, else a plain stderr line (rewritten on a terminal)."""

    def __init__(self, total, enabled):
        self.total, self.done, self.enabled = total, 0, enabled
        self.counts = {s: 0 for s in STATUSES}
        self.start = time.monotonic()
        self.last = 0.0
        self.bar = None
        self.tty = sys.stderr.isatty()
        if enabled:
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total, unit="op", file=sys.stderr, dynamic_ncols=True)
            except ImportError:
                self.bar = None

    def update(self, row):
        self.done += 1
        self.counts[row.get("status", "error")] = self.counts.get(row.get("status", "error"), 0) + 1
        if not self.enabled:
            return
        tail = f"{row['op']} {row['dtype']} {row.get('status')}"
        if self.bar is not None:
            self.bar.set_postfix_str(tail[:40], refresh=False)
            self.bar.update(1)
            return
        now = time.monotonic()
        if not self.tty and now - self.last < 10 and self.done != self.total:
            return
        self.last = now
        el = now - self.start
        eta = el / self.done * (self.total - self.done) if self.done else 0
        bad = sum(self.counts[s] for s in BAD)
        line = (f"[{self.done}/{self.total}] {100 * self.done // max(self.total, 1)}% "
                f"pass {self.counts['pass']} bad {bad} skip {self.counts['skipped']} "
                f"{el:.0f}s eta {eta:.0f}s  {tail}")
        if self.tty:
            sys.stderr.write("\r" + line[:120].ljust(120))
            if self.done == self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self):
        if self.bar is not None:
            self.bar.close()


class WorkerPool:
    """Worker subprocesses that run (op, dtype) tasks, replaced when they crash or hang.

    Started before the main process loads the OpInfo database, so that the workers'
    imports (the slow part of a small run) overlap with it.
    """

    def __init__(self, jobs: int, timeout: float, worker_args: List[str]):
        self.cmd = [sys.executable, "-m", "torch_xxnpu.testing.opcheck", "--worker", *worker_args]
        env = dict(os.environ)
        # Workers import the same torch_xxnpu as this process, wherever it came from.
        pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join([pkg_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
        self.env = env
        self.timeout = timeout
        self.start_timeout = max(300.0, timeout)
        self.sel = selectors.DefaultSelector()
        self.workers: List[_Worker] = [self._spawn(i) for i in range(max(1, jobs))]

    def _spawn(self, idx):
        w = _Worker(idx, self.cmd, self.env, self.start_timeout)
        self.sel.register(w.proc.stdout, selectors.EVENT_READ, w)
        return w

    def _replace(self, w):
        self.sel.unregister(w.proc.stdout)
        w.kill()
        self.workers[w.idx] = self._spawn(w.idx)

    def close(self):
        for w in self.workers:
            try:
                self.sel.unregister(w.proc.stdout)
            except Exception:
                pass
            w.kill()
        self.workers = []

    def run(self, tasks: List[Dict[str, Any]], progress: bool = True) -> List[Dict[str, Any]]:
        pending = list(reversed(tasks))
        results: Dict[int, Dict[str, Any]] = {}
        bar = _Progress(len(tasks), progress)

        def finish(w, row):
            task = w.task
            w.task = None
            results[task["id"]] = row
            bar.update(row)

        def dispatch(w):
            if pending and w.ready and w.task is None:
                w.send(pending.pop(), self.timeout)
            elif w.ready and w.task is None:
                w.deadline = math.inf  # idle: nothing left to give it

        for w in self.workers:
            dispatch(w)
        try:
            while len(results) < len(tasks):
                now = time.monotonic()
                wait = max(0.05, min(w.deadline for w in self.workers) - now)
                for key, _ in self.sel.select(timeout=min(wait, 1.0)):
                    w = key.data
                    line = w.proc.stdout.readline()
                    if not line:
                        # EOF: the worker died (segfault, abort, os._exit): the op it ran crashed.
                        code = w.proc.wait()
                        if w.task is not None:
                            sig = f"signal {-code}" if code < 0 else f"exit code {code}"
                            finish(w, {"op": w.task["op"], "dtype": w.task["dtype"], "status": "crashed",
                                       "execution": "unknown",
                                       "reason": f"worker died ({sig}) while running the op",
                                       "log_tail": w.log_tail()})
                        elif not w.ready:
                            raise RuntimeError(f"opcheck worker failed to start (exit {code}):\n{w.log_tail(4000)}")
                        self._replace(w)
                        continue
                    msg = json.loads(line)
                    if msg.get("ready"):
                        w.ready = True
                    else:
                        finish(w, msg["row"])
                    dispatch(w)
                now = time.monotonic()
                for w in list(self.workers):
                    if now <= w.deadline:
                        continue
                    if w.task is None:
                        raise RuntimeError(f"opcheck worker did not start within {self.start_timeout:.0f}s:\n"
                                           f"{w.log_tail(4000)}")
                    task = w.task
                    finish(w, {"op": task["op"], "dtype": task["dtype"], "status": "timeout",
                               "execution": "unknown",
                               "reason": f"no result within {self.timeout:g}s; the worker was killed",
                               "log_tail": w.log_tail()})
                    self._replace(w)
                for w in self.workers:
                    dispatch(w)
        finally:
            bar.close()
        return [results[t["id"]] for t in tasks]


# --------------------------------------------------------------------------------------
# CLI

def build_parser():
    p = argparse.ArgumentParser(
        prog="python -m torch_xxnpu.testing.opcheck",
        description="Checks xxnpu ops against the CPU with PyTorch's OpInfo database and the "
                    "torch.ops.xxnpu custom ops; reports per op and dtype.")
    p.add_argument("--ops", help="comma-separated op names (OpInfo names such as add, "
                                 "nn.functional.relu, div.floor_rounding; custom ops as xxnpu::add). "
                                 "Default: all")
    p.add_argument("--dtypes", help="comma-separated dtypes (float32,float16,bfloat16,int64,...). "
                                    "Default: every dtype the op supports on the CPU")
    p.add_argument("--native-only", action="store_true",
                   help="run only (op, dtype) pairs whose first sample runs without the CPU fallback")
    p.add_argument("--backward", action="store_true", help="also compare gradients where the op supports autograd")
    p.add_argument("--no-opinfo", action="store_true", help="only the custom ops")
    p.add_argument("--namespaces", default="xxnpu",
                   help="custom-op namespaces to include (comma-separated; default xxnpu)")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE_OR_FILE",
                   help="module or .py file every worker imports first (kernels registered from Python, "
                        "sample generators for custom ops); repeatable")
    p.add_argument("--max-samples", type=int, default=0, help="at most this many samples per op and dtype")
    p.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds one op may take for one dtype before its worker is killed (default 300)")
    p.add_argument("--json", metavar="FILE", help="write every row as JSON (usable as a --baseline)")
    p.add_argument("--markdown", metavar="FILE", help="write the coverage report as Markdown")
    p.add_argument("--html", metavar="FILE", help="write the report as a self-contained HTML page")
    p.add_argument("--baseline", metavar="FILE",
                   help="JSON of an earlier run: exit 1 only on regressions against it")
    p.add_argument("--no-progress", action="store_true", help="no progress output")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
    return p


def _command_line(argv):
    return "python -m torch_xxnpu.testing.opcheck " + " ".join(shlex.quote(a) for a in argv)


def _run_native_only(pool: "WorkerPool", tasks: List[Dict[str, Any]], progress: bool) -> List[Dict[str, Any]]:
    """--native-only in two passes: one probe dtype per op (float32 when it has it), then
    the op's other dtypes only if the probe did not fall back. Whether an op falls back
    is decided by the dispatcher per op, not per dtype, so most of op_db is settled by
    one sample each."""
    by_op: Dict[str, List[Dict[str, Any]]] = {}
    for t in tasks:
        by_op.setdefault(t["op"], []).append(t)
    probes = {op: next((t for t in ts if t["dtype"] == "float32"), ts[0]) for op, ts in by_op.items()}
    rows: Dict[int, Dict[str, Any]] = {}
    for t, row in zip(probes.values(), pool.run(list(probes.values()), progress)):
        rows[t["id"]] = row
    rest = []
    for op, ts in by_op.items():
        probe = rows[probes[op]["id"]]
        fell_back = probe.get("status") == "skipped" and probe.get("execution") == "fallback"
        # A probe that crashed or hung would most likely do so for every dtype, each time
        # costing a worker restart (or the whole timeout): report the op once.
        died = probe.get("status") in ("crashed", "timeout")
        for t in ts:
            if t["id"] in rows:
                continue
            if not fell_back and not died:
                rest.append(t)
                continue
            row = {"op": op, "kind": probe.get("kind"), "dtype": t["dtype"], "status": "skipped",
                   "execution": probe.get("execution"), "native_kernel": probe.get("native_kernel"),
                   "seconds": 0.0}
            if fell_back:
                row["fallback_ops"] = probe.get("fallback_ops", {})
                row["reason"] = (f"not native (--native-only): on {probe['dtype']} it falls back for "
                                 + ", ".join(sorted(probe.get("fallback_ops", {}))))
            else:
                row["reason"] = f"not run: the {probe['dtype']} probe {probe['status']} (--native-only)"
            rows[t["id"]] = row
    if rest:
        for t, row in zip(rest, pool.run(rest, progress)):
            rows[t["id"]] = row
    return [rows[t["id"]] for t in tasks]


def _only_custom_ops(ops: Optional[str]) -> bool:
    return bool(ops) and all("::" in o for o in ops.split(",") if o.strip())


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--worker" in argv:
        return worker_main(argv)
    args = build_parser().parse_args(argv)
    t0 = time.monotonic()
    want = parse_dtypes(args.dtypes)
    _setup_process(args.imports)
    import torch
    import torch_xxnpu
    from torch_xxnpu.testing import report

    namespaces = [n for n in args.namespaces.split(",") if n]
    with_opinfo = not args.no_opinfo and not _only_custom_ops(args.ops)
    worker_args = [a for m in args.imports for a in ("--import", os.path.abspath(m) if m.endswith(".py") else m)]
    worker_args += ["--namespaces", ",".join(namespaces)] + ([] if with_opinfo else ["--no-opinfo"])
    pool = WorkerPool(args.jobs, args.timeout, worker_args)
    try:
        cases = select_cases(load_cases(namespaces, with_opinfo=with_opinfo), args.ops)
        opts = {"backward": args.backward, "native_only": args.native_only, "max_samples": args.max_samples}
        tasks = []
        for case in cases:
            for d in case.dtypes():
                if want is None or d in want:
                    tasks.append({"id": len(tasks), "op": case.name, "dtype": dtype_name(d), "opts": opts})
        if not tasks:
            print("opcheck: nothing to run (no op supports the dtypes asked for)", file=sys.stderr)
            return 2
        if not args.quiet:
            print(f"opcheck: {len(cases)} ops, {len(tasks)} (op, dtype) pairs, {args.jobs} workers", file=sys.stderr)
        progress = not (args.no_progress or args.quiet)
        rows = _run_native_only(pool, tasks, progress) if args.native_only else pool.run(tasks, progress)
    finally:
        pool.close()
    elapsed = time.monotonic() - t0
    meta = {
        "command": _command_line(argv),
        "torch": torch.__version__,
        "torch_xxnpu": torch_xxnpu.__version__,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(elapsed, 1),
        "jobs": args.jobs,
        "native_only": args.native_only,
        "backward": args.backward,
        "native_ops": len(torch_xxnpu.ops.native_ops()),
    }
    doc = {"meta": meta, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report.markdown(doc))
    if args.html:
        with open(args.html, "w") as f:
            f.write(report.html(doc))
    print(report.summary(doc))
    if args.baseline:
        with open(args.baseline) as f:
            base = json.load(f)
        regressions, improvements = report.diff(base, doc)
        for r in improvements:
            print(f"improved: {r}")
        for r in regressions:
            print(f"REGRESSION: {r}")
        print(f"opcheck: {len(regressions)} regressions, {len(improvements)} improvements against {args.baseline}")
        return 1 if regressions else 0
    return 1 if any(report.is_bad(r) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
