"""Inside a worker: a case spec made into tensors (the same values on the CPU and on
xxnpu, strides and all), the op run on both, and the outcome classified."""
import math
from typing import Any, Callable, Dict, List, Tuple

from torch_xxnpu.testing.opcheck.compare import compare
from torch_xxnpu.testing.opcheck.runner import _upcast_match, short_exc
from torch_xxnpu.testing.opcheck.samples import DEVICE, copy_to, describe_sample, flatten, move_sample
from torch_xxnpu.testing.opcheck.ties import tie_order_match

MAX_SAMPLES = 64  # samples kept per (op, dtype): the strategies draw an index modulo this


class NotApplicable(Exception):
    """The probe has nothing to act on in this sample (no integer tensor to index with...)."""


def _dtype(name):
    import torch

    return getattr(torch, name)


# ---------------------------------------------------------------- building a case's inputs

class _Leaves:
    """Applies fn(k, tensor) to the sample's tensors in a fixed order (input, args, kwargs),
    k counting tensors only: a spec names a tensor by that index."""

    def __init__(self):
        self.k = -1

    def __call__(self, fn):
        import torch

        def f(t):
            if not isinstance(t, torch.Tensor):
                return t
            self.k += 1
            return fn(self.k, t)
        return f


def _tensors(sample) -> List:
    import torch

    return [t for t in flatten([sample.input, list(sample.args), dict(sample.kwargs)]) if isinstance(t, torch.Tensor)]


def _map_leaves(sample, fn):
    return sample.transform(_Leaves()(fn))


def relayout(t, code: str):
    """t's values (or, for expand/overlap, values drawn from t) with other strides."""
    import torch

    if code == "keep" or t.dim() == 0 or t.numel() == 0:
        return t
    if code == "transpose":
        if t.dim() < 2:
            return relayout(t, "slice")
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if code == "slice":  # every other element of a wider buffer, at an offset
        buf = torch.zeros(*t.shape[:-1], 2 * t.shape[-1] + 1, dtype=t.dtype)
        v = buf[..., 1::2]
        v.copy_(t)
        return v
    if code == "offset":
        buf = torch.zeros(t.numel() + 3, dtype=t.dtype)
        v = buf[3:].view(t.shape)
        v.copy_(t)
        return v
    if code == "expand":  # stride 0 along the first dimension longer than 1
        dims = [d for d in range(t.dim()) if t.shape[d] > 1]
        if not dims:
            return t
        d = dims[0]
        return t.narrow(d, 0, 1).contiguous().expand(t.shape)
    if code == "overlap":  # every stride 1: neighbouring rows share elements
        n = sum(s - 1 for s in t.shape) + 1
        base = t.contiguous().flatten()[:n].clone()
        return base.as_strided(t.shape, (1,) * t.dim())
    raise ValueError(f"unknown layout {code!r}")


def extreme_values(dtype, kinds: List[str]):
    import torch

    if dtype == torch.bool:
        return [True, False]
    if dtype.is_floating_point:
        fi = torch.finfo(dtype)
        table = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0": -0.0, "huge": fi.max, "-huge": -fi.max,
                 "tiny": fi.tiny, "denormal": fi.smallest_normal / 4 if dtype != torch.bfloat16 else fi.tiny / 4,
                 "one": 1.0}
    else:
        ii = torch.iinfo(dtype)
        table = {"nan": 0, "inf": ii.max, "-inf": ii.min, "-0": 0, "huge": ii.max, "-huge": ii.min, "tiny": 1,
                 "denormal": -1, "one": 1}
    return [table[k] for k in kinds]


def _with_extremes(t, kinds, every, seed):
    import torch

    if t.numel() == 0 or t.dtype.is_complex:
        return t
    out = t.contiguous().clone()
    flat = out.view(-1)
    g = torch.Generator().manual_seed(seed)
    pos = torch.randperm(flat.numel(), generator=g)[: max(1, flat.numel() // max(every, 1))]
    vals = extreme_values(t.dtype, kinds)
    for i, p in enumerate(pos.tolist()):
        flat[p] = vals[i % len(vals)]
    return out


def _index_value(kind, n, dtype):
    import torch

    ii = torch.iinfo(dtype)
    return {"-1": -1, "-n-1": -n - 1, "n": n, "n+7": n + 7, "max": ii.max, "min": ii.min}[kind]


class Built:
    """Both sides of a case, ready to call."""

    def __init__(self, cpu, dev, call: Callable, outs: Callable, process, note: str):
        self.cpu, self.dev, self.call, self.outs, self.process, self.note = cpu, dev, call, outs, process, note


class Executor:
    def __init__(self, cases: Dict[str, Any]):
        self.cases = cases
        self._samples: Dict[Tuple[str, str], List] = {}

    # The OpInfo's (or registered custom op's) samples for (op, dtype), made on the CPU
    # (seeded; making them on xxnpu as opcheck does costs a device round trip per tensor,
    # which here would cost more than the cases themselves) and made only as far as a case
    # asks: index i is the i-th sample, or i modulo their number when there are fewer.
    def sample(self, case, dtype, index):
        import torch

        key = (case.name, str(dtype))
        if key not in self._samples:
            torch.manual_seed(0)
            if case.kind == "opinfo":
                gen = case.op.sample_inputs("cpu", dtype, requires_grad=False)
            else:
                gen = (case.registered[0] if case.registered else case._generic_samples)(dtype, False)
            self._samples[key] = ([], iter(gen))
        made, gen = self._samples[key]
        while gen is not None and len(made) <= index and len(made) < MAX_SAMPLES:
            try:
                made.append(next(gen))
            except StopIteration:
                gen = None
                self._samples[key] = (made, None)
        if not made:
            raise NotApplicable("the op has no sample for this dtype")
        return made[index] if index < len(made) else made[index % len(made)]

    def _shapes_sample(self, case, spec, dtype, base):
        """A unary/binary ufunc's sample with the drawn (broadcastable) shapes."""
        import torch
        from torch.testing import make_tensor

        torch.manual_seed(spec["seed"])
        s0, s1 = spec["shapes"]
        inp = make_tensor(tuple(s0), dtype=dtype, device="cpu", low=-9, high=9)
        args = list(base.args)
        if args and isinstance(args[0], torch.Tensor):
            args[0] = make_tensor(tuple(s1), dtype=args[0].dtype, device="cpu", low=-9, high=9)
        elif len(spec.get("shapes", [])) > 1 and case.op.__class__.__name__ == "BinaryUfuncInfo":
            args = [make_tensor(tuple(s1), dtype=dtype, device="cpu", low=-9, high=9)] + args[1:]
        return base.__class__(inp, args=tuple(args), kwargs=dict(base.kwargs),
                              output_process_fn_grad=base.output_process_fn_grad)

    def build(self, spec) -> Built:
        import torch

        case = self.cases.get(spec["op"])
        if case is None:
            raise NotApplicable(f"no op {spec['op']!r} in this worker")
        dtype = _dtype(spec["dtype"])
        base = self.sample(case, dtype, spec["sample"])
        probe = spec["probe"]
        fresh = base.transform(lambda t: copy_to(t, "cpu"))  # never mutate the cached sample
        if probe == "shapes":
            fresh = self._shapes_sample(case, spec, dtype, fresh)
        leaves = _tensors(fresh)
        nleaves = len(leaves)
        note = ""

        layouts = spec.get("layouts") or []
        if layouts:
            fresh = _map_leaves(fresh, lambda k, t: relayout(t, layouts[k % len(layouts)]))

        if probe == "extremes":
            cand = [k for k, t in enumerate(leaves) if t.numel() and not t.dtype.is_complex and t.dtype != torch.bool]
            if not cand:
                raise NotApplicable("no tensor to put extreme values in")
            k = cand[spec["leaf"] % len(cand)]
            fresh = _map_leaves(fresh, lambda i, t: _with_extremes(t, spec["extremes"], spec["every"], spec["seed"])
                                if i == k else t)
            note = f"extreme values {spec['extremes']} in tensor {k}"
        elif probe == "mixed_dtype":
            k = spec["leaf"] % max(nleaves, 1)
            if not nleaves:
                raise NotApplicable("no tensor argument")
            other = _dtype(spec["other_dtype"])
            if leaves[k].dtype == other:
                raise NotApplicable("that tensor already has the other dtype")
            fresh = _map_leaves(fresh, lambda i, t: t.to(other) if i == k else t)
            note = f"tensor {k} cast to {spec['other_dtype']}"
        elif probe == "index_range":
            first = 0 if case.kind == "custom" else 1  # an OpInfo's input is the indexed tensor
            cand = [k for k, t in enumerate(leaves) if k >= first and t.numel()
                    and t.dtype in (torch.int32, torch.int64)]
            if not cand:
                raise NotApplicable("no integer (index) tensor among the arguments")
            k = cand[spec["leaf"] % len(cand)]
            n = max(leaves[0].shape) if leaves[0].dim() else 1

            def bad_index(i, t):
                if i != k:
                    return t
                out = t.contiguous().clone()
                flat = out.view(-1)
                flat[spec["seed"] % flat.numel()] = _index_value(spec["index"], n, t.dtype)
                return out
            fresh = _map_leaves(fresh, bad_index)
            note = f"tensor {k} holds index value {spec['index']} (n={n})"

        cpu = fresh
        dev = move_sample(cpu, DEVICE)
        if probe == "mixed_device":
            if not nleaves:
                raise NotApplicable("no tensor argument")
            k = spec["leaf"] % nleaves
            where = spec["device"]
            dev = _map_leaves(dev, lambda i, t: copy_to(t, where) if i == k else t)
            note = f"tensor {k} ({'0-d' if leaves[k].dim() == 0 else tuple(leaves[k].shape)}) on {where}"

        call, outs = self._caller(case, spec, cpu, dev)
        built = Built(cpu, dev, call, outs, base.output_process_fn_grad, note)
        built.orig = cpu.transform(lambda t: copy_to(t, "cpu"))  # before any in-place write
        return built

    def _caller(self, case, spec, cpu, dev):
        """(call(sample) -> result, outs(sample, result) -> what to compare)."""
        import torch

        probe = spec["probe"]
        if probe == "inplace":
            fn = case.op.inplace_variant
            if fn is None:
                raise NotApplicable("no in-place variant")

            def call(s):
                return fn(s.input, *s.args, **s.kwargs)
            return call, lambda s, r: [r, s.input]
        if not probe.startswith("out_"):
            return case.call, lambda s, r: r
        if not getattr(case.op, "supports_out", False):
            raise NotApplicable("no out= variant")
        # What the functional call returns on the CPU decides the right out= tensors.
        try:
            ref = case.call(cpu.transform(lambda t: copy_to(t, "cpu")))
        except Exception as e:  # noqa: BLE001
            raise NotApplicable(f"the functional call raises on the CPU: {short_exc(e)}") from e
        refs = [ref] if isinstance(ref, torch.Tensor) else list(ref) if isinstance(ref, (tuple, list)) else None
        if not refs or not all(isinstance(r, torch.Tensor) for r in refs):
            raise NotApplicable("the result is not a tensor or a tuple of tensors")

        def make_out(side_sample, on):
            outs = [torch.empty_like(r, device=on) for r in refs]
            r = refs[0]
            if probe == "out_dtype":
                outs[0] = torch.empty(r.shape, dtype=_dtype(spec["other_dtype"]), device=on)
            elif probe == "out_shape":
                how = spec["how"]
                shape = {"empty": (0,), "scalar": (), "flat": (r.numel(),), "bigger": tuple(r.shape[:-1]) + (
                    (r.shape[-1] + 3,) if r.dim() else (2,)), "smaller": (max(r.numel() - 1, 0),)}.get(how)
                if how == "noncontig":
                    outs[0] = relayout(torch.zeros(r.shape, dtype=r.dtype), "slice").to(on) if on == "cpu" else \
                        copy_to(relayout(torch.zeros(r.shape, dtype=r.dtype), "slice"), on)
                else:
                    outs[0] = torch.zeros(shape, dtype=r.dtype, device=on)
            elif probe == "out_device":
                if not _tensors(dev):
                    raise NotApplicable("no tensor input: out= on any device is right")
                outs[0] = torch.zeros(r.shape, dtype=r.dtype, device=spec["device"] if on != "cpu" else "cpu")
            elif probe == "out_alias":
                ts = _tensors(side_sample)
                if not ts:
                    raise NotApplicable("no tensor to alias")
                outs[0] = ts[spec["leaf"] % len(ts)]
            elif probe == "out_overlap":
                if r.numel() < 2:
                    raise NotApplicable("a result of fewer than 2 elements cannot overlap")
                outs[0] = torch.zeros((1,) * max(r.dim(), 1), dtype=r.dtype, device=on).expand(
                    r.shape if r.dim() else (1,))
            return tuple(outs) if len(outs) > 1 or not isinstance(ref, torch.Tensor) else outs[0]

        cpu_out = make_out(cpu, "cpu")
        dev_out = make_out(dev, DEVICE)
        sides = {id(cpu): cpu_out, id(dev): dev_out}

        def call(s):
            return case.op(s.input, *s.args, out=sides[id(s)], **s.kwargs)
        return call, lambda s, r: [r, sides[id(s)]]


# ---------------------------------------------------------------- running and classifying

REJECT_PROBES = ("mixed_device", "out_device")  # what CUDA rejects: a RuntimeError is right


def _sync(result):
    """Brings the device's results to the host, so an asynchronous kernel fault raises here."""
    import torch

    for t in flatten(result):
        if isinstance(t, torch.Tensor) and t.device.type == DEVICE:
            t.cpu()
    torch.xxnpu.synchronize()


def _exc(e) -> Dict[str, str]:
    return {"type": type(e).__name__, "message": short_exc(e)[:600]}


def run_case(executor: Executor, spec: Dict[str, Any], phase: Callable[[str], None]) -> Dict[str, Any]:
    """Runs one case; returns {"kind", "detail", "cpu", "xxnpu", ...} (spec.FINDING_KINDS /
    OK_KINDS). `phase` is told "cpu" and "xxnpu" before each side runs, so that the main
    process knows which side a crash belongs to."""
    import torch

    try:
        b = executor.build(spec)
    except NotApplicable as e:
        return {"kind": "n/a", "detail": str(e)}
    desc = describe_sample(b.cpu)
    torch.manual_seed(1000)
    phase("cpu")
    cpu_res = cpu_exc = dev_res = dev_exc = None
    try:
        cpu_res = b.call(b.cpu)
        cpu_cmp = b.outs(b.cpu, cpu_res)
    except Exception as e:  # noqa: BLE001
        cpu_exc = e
    phase("xxnpu")
    torch.manual_seed(1000)
    try:
        dev_res = b.call(b.dev)
        dev_cmp = b.outs(b.dev, dev_res)
        _sync(dev_cmp)
    except Exception as e:  # noqa: BLE001
        dev_exc = e
        try:
            torch.xxnpu.synchronize()  # a sticky stream error is reported (and cleared) once
        except Exception:  # noqa: BLE001
            pass
    row: Dict[str, Any] = {"sample": desc, "note": b.note}
    row["cpu"] = _exc(cpu_exc) if cpu_exc is not None else "ok"
    row["xxnpu"] = _exc(dev_exc) if dev_exc is not None else "ok"
    probe = spec["probe"]

    if probe in REJECT_PROBES:
        # CUDA's rule: every tensor on the op's device, except a 0-d CPU tensor operand.
        if dev_exc is not None and cpu_exc is not None and type(dev_exc) is type(cpu_exc):
            row.update(kind="both-raise", detail="")
            return row
        if dev_exc is not None:
            row["kind"] = "rejected" if isinstance(dev_exc, RuntimeError) else "exception-class"
            row["detail"] = "" if row["kind"] == "rejected" else f"expected a RuntimeError, got {type(dev_exc).__name__}"
            return row
        if cpu_exc is not None:
            row.update(kind="xxnpu-accepts", detail=f"the CPU raised {type(cpu_exc).__name__}; xxnpu returned")
            return row
        ok, _, _, msg = _compare(b, dev_cmp, cpu_cmp, executor, spec, expect_device=False)
        if not ok and not _tie_indices_ok(b, dev_cmp, cpu_cmp, executor, spec):
            row.update(kind="wrong-values", detail=msg)
        elif probe == "out_device":
            row.update(kind="xxnpu-accepts", detail=f"out= on {spec['device']} with inputs on {DEVICE}:0 was accepted "
                       "(CUDA raises 'Expected out tensor to have device ...')")
        else:
            row.update(kind="lenient", detail="a tensor on another device was accepted (values right)")
        return row

    if cpu_exc is not None and dev_exc is not None:
        same = type(cpu_exc) is type(dev_exc)
        # Bad index values are seen by the device kernel only: it fails the way CUDA's
        # device-side assert does (AcceleratorError), where the CPU raises IndexError.
        device_assert = (probe in ("index_range", "extremes") and isinstance(dev_exc, torch.AcceleratorError)
                         and isinstance(cpu_exc, (IndexError, RuntimeError)))
        row["kind"] = "both-raise" if same or device_assert else "exception-class"
        row["detail"] = "" if row["kind"] == "both-raise" else (
            f"CPU raised {type(cpu_exc).__name__}, xxnpu {type(dev_exc).__name__}")
        return row
    if cpu_exc is not None:
        row.update(kind="xxnpu-accepts", detail=f"the CPU raised {type(cpu_exc).__name__}; xxnpu returned")
        return row
    if dev_exc is not None:
        row.update(kind="xxnpu-raises", detail=f"xxnpu raised {type(dev_exc).__name__}; the CPU returned")
        return row
    ok, a, r, msg = _compare(b, dev_cmp, cpu_cmp, executor, spec, expect_device=True)
    if not ok and probe == "out_overlap":
        # The CPU wrote into an output whose elements overlap without complaint: the values
        # depend on the order of the writes, nothing to compare.
        ok = True
    if not ok and probe == "out_alias" and _matches_unaliased(b, dev_cmp, cpu_cmp, executor, spec):
        ok = True
    if not ok and _tie_indices_ok(b, dev_cmp, cpu_cmp, executor, spec):
        ok = True
    if ok:
        row.update(kind="pass", detail="")
    else:
        meta = msg.split(": ", 1)[-1].startswith(("dtype", "shape", "result is on")) or "returned" in msg
        row.update(kind="wrong-meta" if meta else "wrong-values", detail=msg)
    return row


def _matches_unaliased(b: Built, dev_cmp, cpu_cmp, executor, spec) -> bool:
    """out= aliasing an input is defined for elementwise ops only; matmuls and reductions
    read the input while writing it, and the CPU's own result is then an accident of its
    loop order. xxnpu is right if it matches the op computed without aliasing, or if the
    CPU's aliased result is such an accident itself (it differs from that)."""
    case = executor.cases[spec["op"]]
    rtol, atol = case.tolerance(_dtype(spec["dtype"]))[:2]
    try:
        ref = flatten(case.call(b.orig))[:1]
        if compare(flatten(dev_cmp)[:1], ref, rtol, atol, expect_device=False)[0]:
            return True
        return not compare(flatten(cpu_cmp)[:1], ref, rtol, atol, expect_device=False)[0]
    except Exception:  # noqa: BLE001
        return False


def _tie_indices_ok(b: Built, dev_cmp, cpu_cmp, executor, spec) -> bool:
    """sort/argsort/topk/kthvalue/mode: indices among equal values are unspecified, so they
    may differ from the CPU's (opcheck.ties decides, as in the sweep)."""
    rtol, atol, _ = executor.cases[spec["op"]].tolerance(_dtype(spec["dtype"]))
    return tie_order_match(spec["op"], b.orig, dev_cmp, cpu_cmp, rtol, atol) is not None


def _compare(b: Built, dev_cmp, cpu_cmp, executor, spec, expect_device):
    import torch

    case = executor.cases[spec["op"]]
    dtype = _dtype(spec["dtype"])
    rtol, atol, _ = case.tolerance(dtype)
    # Results, out= tensors and in-place inputs keep the CPU's order on both sides.
    try:
        dev_p = b.process(dev_cmp) if spec["probe"] in ("values", "layout", "shapes", "extremes") else dev_cmp
        cpu_p = b.process(cpu_cmp) if spec["probe"] in ("values", "layout", "shapes", "extremes") else cpu_cmp
        ok, a, r, msg = compare(dev_p, cpu_p, rtol, atol, expect_device)
    except Exception as e:  # noqa: BLE001
        return False, math.inf, math.inf, f"comparison failed: {short_exc(e)}"
    if not ok and dtype in (torch.float16, torch.bfloat16) and spec["probe"] in ("values", "layout", "shapes"):
        # As opcheck: the CPU's own half-precision kernels round intermediates; the op
        # computed in float32 and rounded once is also a right answer.
        up = _upcast_match(case, b.cpu, dtype, dev_p, cpu_p, rtol, atol)
        if up is not None:
            return True, up[0], up[1], ""
    return ok, a, r, msg
