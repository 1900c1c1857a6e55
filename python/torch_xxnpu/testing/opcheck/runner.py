"""Running one (op, dtype) inside a worker: every sample on xxnpu and on the CPU, compared
(forward, and gradients with --backward), with the fallback counters around each call.
With --compile the xxnpu side runs through torch.compile (Inductor) instead of eager."""
import math
import time
from typing import Any, Dict

from torch_xxnpu.testing.opcheck.cases import Case, SampleError
from torch_xxnpu.testing.opcheck.compare import compare
from torch_xxnpu.testing.opcheck.dtypes import dtype_name
from torch_xxnpu.testing.opcheck.samples import (DEVICE, copy_to, describe_sample, flatten, move_sample,
                                                 touches_device)
from torch_xxnpu.testing.opcheck.ties import tie_order_match


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
        self.tie_order_matches = 0
        self.eager = 0  # --compile: samples Dynamo compiled no op of (it ran them eagerly)

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
        if status == "pass" and self.samples and self.eager == self.samples:
            # Nothing compiled was checked: not a pass of the compiled op.
            status = "skipped"
            self.reason = "Dynamo compiled no graph with the op (a graph break): it ran eagerly"
        elif self.eager and not self.reason:
            self.reason = f"{self.eager} of {self.samples} sample(s) ran eagerly (Dynamo compiled no graph with the op)"
        if self.tie_order_matches and not self.reason:
            self.reason = (f"{self.tie_order_matches} sample(s) order equal elements differently from the CPU "
                           "(unspecified for this op) and match it otherwise")
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


def _compiled_call(case: Case, sample):
    """--compile: the op on one sample through torch.compile with Inductor, returning
    (output, whether a compiled graph ran the op). A fresh graph per sample (Dynamo's
    caches reset): past its recompile limit Dynamo would run later samples eagerly, and
    they would pass without being compiled. Static shapes, as each sample is compiled once."""
    import torch
    import torch._dynamo.testing

    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    out = torch.compile(case.call, backend=counter, dynamic=False)(sample)
    return out, counter.op_count > 0


def _fallback_delta():
    import torch_xxnpu

    d = torch_xxnpu.ops.fallback_counts()
    torch_xxnpu.ops.reset_fallback_counts()
    return d


def short_exc(e: BaseException) -> str:
    msg = f"{type(e).__name__}: {e}".strip()
    lines = [ln for ln in msg.splitlines() if ln.strip()]
    return "\n".join(lines[:6])[:1500]


def _grad_inputs(sample):
    import torch

    return [t for t in flatten([sample.input, list(sample.args), dict(sample.kwargs)])
            if isinstance(t, torch.Tensor) and t.requires_grad]


def _grad_outputs(out):
    import torch

    return [t for t in flatten(out) if isinstance(t, torch.Tensor) and t.requires_grad
            and (t.dtype.is_floating_point or t.dtype.is_complex)]


def _upcast_match(case, sample, dtype, dev_p, cpu_p, rtol, atol):
    """(max abs, max rel) of xxnpu against the op computed in float32 on the CPU and
    rounded to each CPU output's dtype, if they match; else None."""
    import torch

    def up(t):
        if isinstance(t, torch.Tensor) and t.dtype == dtype:
            return copy_to(t, "cpu").detach().to(torch.float32).requires_grad_(False)
        return t if not isinstance(t, torch.Tensor) else copy_to(t, "cpu").detach()

    try:
        ref = sample.output_process_fn_grad(case.call(move_sample(sample, "cpu").transform(up)))
        ref_leaves, cpu_leaves = flatten(ref), flatten(cpu_p)
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
    compiled = bool(opts.get("compile"))

    torch.manual_seed(0)

    def sample_failure(e, index):
        # A custom op's generic sample that cannot be built is a skip; a sample function
        # that fails on xxnpu (it makes tensors with xxnpu ops) is the device's error.
        status = "skipped" if isinstance(e, SampleError) else "error"
        row.update({"status": status, "execution": "none",
                    "reason": f"making sample {index} on xxnpu failed: {short_exc(e)}",
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
            fwd.fail("error", index, None, f"making sample {index} on xxnpu failed: {short_exc(e)}")
            break
        # The CPU copy first: an op that writes into its input must not change the other side's.
        dev_sample = sample
        try:
            cpu_sample = move_sample(sample, "cpu")
        except Exception as e:  # e.g. a sparse xxnpu tensor that cannot be copied back
            fwd.samples += 1
            fwd.fail("error", index, sample, f"copying the sample from xxnpu to the CPU failed: {short_exc(e)}")
            continue

        cpu_exc = dev_exc = None
        torch.manual_seed(1000 + index)
        try:
            cpu_out = case.call(cpu_sample)
        except Exception as e:
            cpu_exc = e
        _fallback_delta()
        try:
            if compiled:
                dev_out, ran_compiled = _compiled_call(case, dev_sample)
                fwd.eager += not ran_compiled
            else:
                dev_out = case.call(dev_sample)
            delta = _fallback_delta()
            dev_cpu = [t.detach().cpu() if isinstance(t, torch.Tensor) else t for t in flatten(dev_out)]
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
            fwd.fail("fail", index, sample, f"CPU raised but xxnpu did not: {short_exc(cpu_exc)}")
            continue
        if dev_exc is not None:
            fwd.fail("error", index, sample, short_exc(dev_exc))
            continue
        try:
            dev_p = sample.output_process_fn_grad(dev_out)
            cpu_p = sample.output_process_fn_grad(cpu_out)
            ok, a, r, msg = compare(dev_p, cpu_p, rtol, atol, touches_device(dev_sample))
        except Exception as e:
            ok, a, r, msg = False, math.inf, math.inf, f"comparison failed: {short_exc(e)}"
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
        if not ok:
            tie = tie_order_match(case.name, cpu_sample, dev_p, cpu_p, rtol, atol)
            if tie is not None:
                ok, a, r = True, tie[0], tie[1]
                fwd.tie_order_matches += 1
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
            bwd.fail("error", index, sample, short_exc(e))
            continue
        bwd.samples += 1
        try:
            ok, a, r, msg = compare(list(dev_grads), list(cpu_grads), rtol, atol)
        except Exception as e:
            ok, a, r, msg = False, math.inf, math.inf, f"comparison failed: {short_exc(e)}"
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
