"""Multi-tensor kernels (ops/foreach_ops.cc, ops/fused_optimizer_ops.cc) against the CPU:
every _foreach_* overload torch.optim and clip_grad_norm_ call, functional and in-place,
float32/bfloat16, mixed shapes (empty, one element, odd sizes, several chunks, dense
non-contiguous); SGD/Adam/AdamW steps on their foreach and fused paths over several steps
with every option that changes the math; one device kernel per call; errors as the CPU's."""
import json
import math

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from testlib import no_fallback

import torch_xxnpu  # noqa: F401

# Several chunks (the kernel's is 32K elements), odd sizes, an empty and a 1-element tensor,
# and a dense but transposed one (the fast route keeps its storage order).
SHAPES = [(3, 4), (0,), (1,), (33,), (70001,), (2, 3, 5)]
TRANSPOSED = (5, 7)  # allocated (7, 5) and transposed


@pytest.fixture(autouse=True)
def _no_fallback():
    with no_fallback():
        yield


def _tol(dtype):
    return dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-6)


def _lists(n, dtype, seed, positive=False):
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in range(n):
        lst = []
        for shape in SHAPES:
            t = torch.randn(shape, generator=g, dtype=torch.float64)
            lst.append(t)
        lst.append(torch.randn(tuple(reversed(TRANSPOSED)), generator=g, dtype=torch.float64).t())
        if positive:
            lst = [t.abs() + 0.5 for t in lst]
        out.append([t.to(dtype) for t in lst])
    return out


def _to(lists, device):
    # .to() keeps the transposed tensor's strides (preserve_format).
    return [[t.to(device) for t in lst] for lst in lists]


def _clone(lists):
    return [[t.clone() for t in lst] for lst in lists]


def _close(x, ref, dtype):
    assert len(x) == len(ref)
    for a, b in zip(x, ref):
        assert a.device.type == "xxnpu" and a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype)
        torch.testing.assert_close(a.cpu(), b, **_tol(dtype), equal_nan=True)


# (name, number of lists, positive inputs, call). `call(lists)` returns the functional
# result; for in-place forms it returns None and the first list is compared.
S = [0.5, -1.5, 2.0, 0.25, 3.0, 1.0, -0.75]  # one scalar per tensor (len(SHAPES) + 1)
CASES = [
    ("add.Scalar", 1, False, lambda l: torch._foreach_add(l[0], 2.5)),
    ("add_.Scalar", 1, False, lambda l: torch._foreach_add_(l[0], 2.5)),
    ("add.ScalarList", 1, False, lambda l: torch._foreach_add(l[0], S)),
    ("add_.ScalarList", 1, False, lambda l: torch._foreach_add_(l[0], S)),
    ("add.List", 2, False, lambda l: torch._foreach_add(l[0], l[1], alpha=-0.3)),
    ("add_.List", 2, False, lambda l: torch._foreach_add_(l[0], l[1], alpha=0.7)),
    ("add.Tensor", 1, False, lambda l: torch._foreach_add(l[0], torch.tensor(1.25, device=l[0][0].device), alpha=2)),
    ("add_.Tensor", 1, False, lambda l: torch._foreach_add_(l[0], torch.tensor(-0.5, device=l[0][0].device))),
    ("add_.Tensor(cpu)", 1, False, lambda l: torch._foreach_add_(l[0], torch.tensor(-0.5), alpha=3)),
    ("sub.Scalar", 1, False, lambda l: torch._foreach_sub(l[0], 1.5)),
    ("sub_.Scalar", 1, False, lambda l: torch._foreach_sub_(l[0], 1)),
    ("sub.ScalarList", 1, False, lambda l: torch._foreach_sub(l[0], S)),
    ("sub_.List", 2, False, lambda l: torch._foreach_sub_(l[0], l[1], alpha=0.5)),
    ("sub.List", 2, False, lambda l: torch._foreach_sub(l[0], l[1])),
    ("mul.Scalar", 1, False, lambda l: torch._foreach_mul(l[0], 0.9)),
    ("mul_.Scalar", 1, False, lambda l: torch._foreach_mul_(l[0], 0.999)),
    ("mul_.ScalarList", 1, False, lambda l: torch._foreach_mul_(l[0], S)),
    ("mul.List", 2, False, lambda l: torch._foreach_mul(l[0], l[1])),
    ("mul_.List", 2, False, lambda l: torch._foreach_mul_(l[0], l[1])),
    ("mul.Tensor", 1, False, lambda l: torch._foreach_mul(l[0], torch.tensor(0.3, device=l[0][0].device))),
    ("mul_.Tensor", 1, False, lambda l: torch._foreach_mul_(l[0], torch.tensor(0.3, device=l[0][0].device))),
    ("div.Scalar", 1, False, lambda l: torch._foreach_div(l[0], 3.0)),
    ("div_.ScalarList", 1, False, lambda l: torch._foreach_div_(l[0], S)),
    ("div.List", 2, True, lambda l: torch._foreach_div(l[0], l[1])),
    ("div_.List", 2, True, lambda l: torch._foreach_div_(l[0], l[1])),
    ("div_.Tensor", 1, False, lambda l: torch._foreach_div_(l[0], torch.tensor(4.0, device=l[0][0].device))),
    ("maximum.Scalar", 1, False, lambda l: torch._foreach_maximum(l[0], 0.1)),
    ("maximum_.List", 2, False, lambda l: torch._foreach_maximum_(l[0], l[1])),
    ("minimum.List", 2, False, lambda l: torch._foreach_minimum(l[0], l[1])),
    ("minimum_.ScalarList", 1, False, lambda l: torch._foreach_minimum_(l[0], S)),
    ("clamp_min_.Scalar", 1, False, lambda l: torch._foreach_clamp_min_(l[0], -0.5)),
    ("clamp_max_.Scalar", 1, False, lambda l: torch._foreach_clamp_max_(l[0], 0.5)),
    ("pow.Scalar", 1, True, lambda l: torch._foreach_pow(l[0], 1.5)),
    ("pow_.List", 2, True, lambda l: torch._foreach_pow_(l[0], l[1])),
    ("pow.ScalarAndTensor", 1, False, lambda l: torch._foreach_pow(0.9, l[0])),
    ("neg", 1, False, lambda l: torch._foreach_neg(l[0])),
    ("neg_", 1, False, lambda l: torch._foreach_neg_(l[0])),
    ("sqrt", 1, True, lambda l: torch._foreach_sqrt(l[0])),
    ("sqrt_", 1, True, lambda l: torch._foreach_sqrt_(l[0])),
    ("rsqrt", 1, True, lambda l: torch._foreach_rsqrt(l[0])),
    ("reciprocal_", 1, True, lambda l: torch._foreach_reciprocal_(l[0])),
    ("abs", 1, False, lambda l: torch._foreach_abs(l[0])),
    ("exp_", 1, False, lambda l: torch._foreach_exp_(l[0])),
    ("log", 1, True, lambda l: torch._foreach_log(l[0])),
    ("zero_", 1, False, lambda l: torch._foreach_zero_(l[0])),
    ("addcmul.Scalar", 3, False, lambda l: torch._foreach_addcmul(l[0], l[1], l[2], 0.3)),
    ("addcmul_.Scalar", 3, False, lambda l: torch._foreach_addcmul_(l[0], l[1], l[2], value=0.001)),
    ("addcmul_.ScalarList", 3, False, lambda l: torch._foreach_addcmul_(l[0], l[1], l[2], S)),
    ("addcmul.Tensor", 3, False, lambda l: torch._foreach_addcmul(l[0], l[1], l[2], torch.tensor(S))),
    ("addcdiv_.Scalar", 3, True, lambda l: torch._foreach_addcdiv_(l[0], l[1], l[2], value=-0.01)),
    ("addcdiv.ScalarList", 3, True, lambda l: torch._foreach_addcdiv(l[0], l[1], l[2], S)),
    ("addcdiv_.ScalarList", 3, True, lambda l: torch._foreach_addcdiv_(l[0], l[1], l[2], S)),
    ("addcdiv_.Tensor", 3, True, lambda l: torch._foreach_addcdiv_(l[0], l[1], l[2], torch.tensor(S))),
    ("lerp_.Scalar", 2, False, lambda l: torch._foreach_lerp_(l[0], l[1], 0.1)),
    ("lerp.Scalar", 2, False, lambda l: torch._foreach_lerp(l[0], l[1], 0.8)),
    ("lerp_.ScalarList", 2, False, lambda l: torch._foreach_lerp_(l[0], l[1], S)),
    ("lerp.List", 3, False, lambda l: torch._foreach_lerp(l[0], l[1], l[2])),
    ("lerp_.List", 3, False, lambda l: torch._foreach_lerp_(l[0], l[1], l[2])),
    ("norm(2)", 1, False, lambda l: torch._foreach_norm(l[0])),
    ("norm(1)", 1, False, lambda l: torch._foreach_norm(l[0], 1)),
    ("norm(2, float32)", 1, False, lambda l: torch._foreach_norm(l[0], 2, dtype=torch.float32)),
]


def _kernel_events(fn, tmp_path):
    """Runs fn under the profiler; the device kernels of the trace (chrome trace events)."""
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        fn()
        torch.xxnpu.synchronize()
    path = str(tmp_path / "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_foreach_op_matches_cpu(case, dtype):
    name, n, positive, call = case
    cpu = _lists(n, dtype, seed=len(name), positive=positive)
    dev = _to(cpu, "xxnpu")
    cpu_out, dev_out = call(cpu), call(dev)
    if cpu_out is None:
        assert dev_out is None
        _close(dev[0], cpu[0], dtype)
    else:
        _close(list(dev_out), list(cpu_out), dtype)
    # Inputs of the functional forms are untouched.
    if cpu_out is not None:
        _close(dev[0], cpu[0], dtype)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in
                                  ("add_.List", "addcdiv_.Scalar", "lerp_.Scalar", "mul_.Tensor", "norm(2)",
                                   "sqrt", "add.ScalarList")], ids=lambda c: c[0])
def test_one_kernel_per_foreach_call(case, tmp_path):
    """A foreach call over 7 tensors (one of them 3 chunks long) is one device kernel named
    xxnpu::foreach_<op> with its bytes and flops, not a launch per tensor."""
    name, n, positive, call = case
    dev = _to(_lists(n, torch.float32, seed=3, positive=positive), "xxnpu")
    torch.xxnpu.synchronize()
    kernels = _kernel_events(lambda: call(dev), tmp_path)
    op = name.split(".")[0].split("(")[0].rstrip("_")
    assert [k["name"] for k in kernels] == [f"xxnpu::foreach_{op}"], [k["name"] for k in kernels]
    numel = sum(t.numel() for t in dev[0])
    lists = 1 if op == "norm" else n + 1  # inputs + the output (the same memory when in place)
    assert kernels[0]["args"]["bytes"] >= numel * 4 * lists
    assert kernels[0]["args"]["flops"] > 0


def test_slow_route_for_strided_and_mixed_lists():
    """What the fast route refuses (as on CUDA) still computes correctly, tensor by tensor:
    a non-dense view, list-mates of different strides, a list spread over CPU and xxnpu."""
    g = torch.Generator().manual_seed(0)
    full = torch.randn(6, 8, generator=g)
    a = [full[:, ::2], torch.randn(5, generator=g)]
    b = [torch.randn(6, 4, generator=g), torch.randn(5, generator=g)]
    da = [full.to("xxnpu")[:, ::2], a[1].to("xxnpu")]  # the view made on the device
    db = [t.to("xxnpu") for t in b]
    torch._foreach_addcmul_(da, db, db, value=0.5)
    torch._foreach_addcmul_(a, b, b, value=0.5)
    _close(da, a, torch.float32)
    # Different strides per pair: a transposed partner.
    c = [torch.randn(4, 3, generator=g).t()]
    d = [torch.randn(3, 4, generator=g)]
    dc, dd = _to([c, d], "xxnpu")
    _close(torch._foreach_mul(dc, dd), torch._foreach_mul(c, d), torch.float32)
    # A list spread over devices: each tensor on its own device, as CUDA's slow path does.
    mixed = [torch.randn(3, generator=g).to("xxnpu"), torch.randn(3, generator=g)]
    ref = [t.cpu() * 2 for t in mixed]
    torch._foreach_mul_(mixed, 2.0)
    assert mixed[0].device.type == "xxnpu" and mixed[1].device.type == "cpu"
    for t, r in zip(mixed, ref):
        torch.testing.assert_close(t.cpu(), r)
    # An integer list (no integer kernels): the slow path's exact integer results.
    ints = [torch.arange(5), torch.arange(3)]
    dints = [t.to("xxnpu") for t in ints]
    torch._foreach_add_(dints, 2)
    assert all(torch.equal(x.cpu(), y + 2) for x, y in zip(dints, ints))


def test_foreach_copy_is_one_kernel_over_mixed_dtypes_and_keeps_copy_semantics(tmp_path):
    """_foreach_copy_ (reduce-overhead's copy of a step's inputs into its graph): pairs of
    one device, dtype (per pair: int32, int64, float32, bfloat16, bool here), sizes and
    strides, dense, are one xxnpu::foreach_copy kernel with their bytes; anything else is
    torch's copy_, pair by pair, with its conversions and errors."""
    g = torch.Generator().manual_seed(4)
    src = [torch.randint(-9, 9, (4,), generator=g, dtype=torch.int32), torch.randint(0, 99, (3, 5), generator=g),
           torch.randn(70001, generator=g), torch.randn(6, 7, generator=g).t(),
           torch.randn(5, generator=g).bfloat16(), torch.rand(8, generator=g) > 0.5, torch.empty(0)]
    dsrc = [t.to("xxnpu") for t in src]
    dst = [torch.empty_like(t) for t in dsrc]  # keeps the transposed one's strides
    torch.xxnpu.synchronize()
    kernels = _kernel_events(lambda: torch._foreach_copy_(dst, dsrc), tmp_path)
    assert [k["name"] for k in kernels] == ["xxnpu::foreach_copy"], [k["name"] for k in kernels]
    assert kernels[0]["args"]["bytes"] == 2 * sum(t.numel() * t.element_size() for t in src)
    for d, s in zip(dst, src):
        assert d.dtype == s.dtype and d.stride() == s.stride()
        assert torch.equal(d.cpu(), s)
    # Self-copies and a list whose dst is its src: nothing changes.
    torch._foreach_copy_(dst, dst)
    assert all(torch.equal(d.cpu(), s) for d, s in zip(dst, src))
    # The slow route: a dtype conversion, a broadcast, a CPU source, different strides.
    a = [torch.zeros(3, 4, device="xxnpu"), torch.zeros(2, 3, device="xxnpu"), torch.zeros(5, device="xxnpu"),
         torch.zeros(4, 3, device="xxnpu").t()]
    b = [torch.arange(12, dtype=torch.int64).view(3, 4).to("xxnpu"), torch.arange(3.0).to("xxnpu"),
         torch.arange(5.0), torch.arange(12.0).view(3, 4).to("xxnpu")]
    torch._foreach_copy_(a, b)
    want = [torch.arange(12.0).view(3, 4), torch.arange(3.0).expand(2, 3), torch.arange(5.0),
            torch.arange(12.0).view(3, 4)]
    for x, w in zip(a, want):
        assert torch.equal(x.cpu(), w)
    # copy_'s errors: a source that does not broadcast; a destination partly overlapping its source.
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        torch._foreach_copy_([torch.zeros(3, device="xxnpu")], [torch.zeros(4, device="xxnpu")])
    base = torch.arange(10.0).to("xxnpu")
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch._foreach_copy_([base[1:6]], [base[0:5]])
    with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors"):
        torch._foreach_copy_(dst, dsrc[:2])


def test_foreach_errors_match_cpu():
    x = [torch.randn(3).to("xxnpu"), torch.randn(2).to("xxnpu")]
    c = [torch.randn(3), torch.randn(2)]
    for lists in (x, c):
        with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors, got 2 and 1"):
            torch._foreach_add_(lists, lists[:1])
        with pytest.raises(RuntimeError, match="Tensor list must have same number of elements as scalar list"):
            torch._foreach_mul_(lists, [1.0, 2.0, 3.0])
        with pytest.raises(RuntimeError, match="Tensor list must have at least one tensor"):
            torch._foreach_sqrt([t[:0] for t in lists][:0])
        with pytest.raises(RuntimeError, match="Tensor lists must have the same number of tensors"):
            torch._foreach_addcdiv_(lists, lists, lists[:1], value=1.0)
    # Mixed devices between the lists: the per-tensor op's own device error, as on CUDA.
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch._foreach_add_(x, [t.cpu() for t in x])
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch._foreach_addcmul_(x, x, [t.cpu() for t in x])


# ---------------------------------------------------------------- optimizers

OPT_CONFIGS = [
    ("SGD", dict(lr=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, dampening=0.3, maximize=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.02)),
    ("Adam", dict(lr=0.02, weight_decay=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.02, maximize=True, betas=(0.8, 0.95))),
    ("AdamW", dict(lr=0.02)),
    ("AdamW", dict(lr=0.02, weight_decay=0.1, amsgrad=True, maximize=True)),
    ("AdamW", dict(lr=torch.tensor(0.01), weight_decay=0.1)),
]


def _params(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(7, 3), (3,), (0,), (1,), (33,), (40000,)]
    ps = [torch.randn(s, generator=g).to(dtype) for s in shapes]
    ps.append(torch.randn(7, 5, generator=g).to(dtype).t())  # a dense, transposed parameter
    grads = [[torch.randn(p.shape, generator=g).to(dtype) for p in ps] for _ in range(4)]
    # Gradients with their parameter's strides, as autograd leaves them.
    grads = [[gr if p.is_contiguous() else gr.t().contiguous().t() for gr, p in zip(step, ps)] for step in grads]
    return ps, grads


def _run(device, name, kw, impl, dtype, compute_dtype=None):
    """Four steps; `compute_dtype` runs the same (dtype-rounded) values in another dtype."""
    ps, grads = _params(dtype)
    if compute_dtype is not None:
        ps, grads = [p.to(compute_dtype) for p in ps], [[g.to(compute_dtype) for g in s] for s in grads]
    ps = [p.to(device).requires_grad_() for p in ps]
    kw = dict(kw)
    if isinstance(kw["lr"], torch.Tensor) and impl != "fused":
        kw["lr"] = kw["lr"].item()  # a tensor lr needs capturable on the foreach path
    opt = getattr(torch.optim, name)(ps, **kw, **({impl: True} if impl else {"foreach": False}))
    for step in grads:
        for p, g in zip(ps, step):
            p.grad = g.to(device)
        opt.step()
    return [p.detach() for p in ps], opt


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("impl", ["foreach", "fused"])
@pytest.mark.parametrize("config", OPT_CONFIGS, ids=lambda c: c[0] + "-" + "-".join(
    f"{k}" for k in c[1] if k != "lr") if isinstance(c, tuple) else str(c))
def test_optimizer_step_matches_cpu(config, impl, dtype):
    """Four steps on xxnpu against the CPU. float32: the same implementation on the CPU
    (torch's own foreach and fused CPU paths), equal to rounding. bfloat16 fused (math in
    float32, states stored in bf16): the CPU's per-tensor loop in float32 from the same bf16
    values, within bf16 rounding of four steps (the CPU's own fused bf16 SGD is no
    reference: it strays 0.2-0.5 from that). bfloat16 foreach (every intermediate rounded
    to bf16, as on the CPU): the CPU's foreach path in bf16, within a few bf16 ulps (an ulp
    of a state amplified through sqrt and division over four steps)."""
    name, kw = config
    if dtype == torch.bfloat16 and impl == "fused":
        ref, _ = _run("cpu", name, kw, None, dtype, compute_dtype=torch.float32)
        tol = dict(rtol=2e-2, atol=2e-2)
    elif dtype == torch.bfloat16:
        ref, _ = _run("cpu", name, kw, impl, dtype)
        tol = dict(rtol=4e-2, atol=4e-2)
    else:
        ref, _ = _run("cpu", name, kw, impl, dtype)
        tol = dict(rtol=1e-5, atol=2e-6)
    out, opt = _run("xxnpu", name, kw, impl, dtype)
    for a, b in zip(out, ref):
        assert a.device.type == "xxnpu" and a.dtype == dtype and a.stride() == b.stride()
        torch.testing.assert_close(a.cpu().to(b.dtype), b, **tol)
    for state in opt.state.values():
        for k, v in state.items():
            if isinstance(v, torch.Tensor) and k != "step":
                assert v.device.type == "xxnpu", k


def test_adam_capturable_foreach_matches_cpu():
    """capturable=True keeps steps (and the bias corrections) on the device: the foreach
    path's pow/sub/div/reciprocal/sqrt/maximum kernels."""
    outs = []
    for device in ("cpu", "xxnpu"):
        ps, grads = _params(torch.float32, seed=5)
        ps = [p.to(device).requires_grad_() for p in ps]
        if device == "cpu":
            opt = torch.optim.Adam(ps, lr=0.02, amsgrad=True, foreach=False)
        else:
            opt = torch.optim.Adam(ps, lr=0.02, amsgrad=True, foreach=True, capturable=True)
        for step in grads:
            for p, g in zip(ps, step):
                p.grad = g.to(device)
            opt.step()
        outs.append(ps)
    for a, b in zip(outs[1], outs[0]):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("name", ["Adam", "SGD"])
def test_fused_step_without_weight_decay_leaves_inf_parameters_alone(name):
    """Weight decay 0 is skipped, not added as 0 * param: an inf parameter stays inf (and
    its neighbours finite) as in the CPU's fused step, instead of turning its gradient and
    moments into NaN."""
    outs = []
    for device in ("cpu", "xxnpu"):
        p = torch.tensor([1.0, float("inf"), -2.0], device=device, requires_grad=True)
        kw = dict(lr=0.1, momentum=0.9) if name == "SGD" else dict(lr=0.1)
        opt = getattr(torch.optim, name)([p], fused=True, weight_decay=0, **kw)
        for _ in range(2):
            p.grad = torch.tensor([0.5, 0.25, -1.0], device=device)
            opt.step()
        outs.append(p.detach().cpu())
    assert not outs[0].isnan().any(), outs[0]
    torch.testing.assert_close(outs[1], outs[0], equal_nan=False)


def test_fused_step_is_one_kernel_and_respects_grad_scaler(tmp_path):
    """AdamW(fused=True).step on 7 parameters is one xxnpu::fused_adamw kernel (plus the
    steps' foreach add); with grad_scale the grads are unscaled in place, with found_inf set
    nothing moves; all read on the device."""
    ps, grads = _params(torch.float32, seed=2)
    ps = [p.to("xxnpu").requires_grad_() for p in ps]
    opt = torch.optim.AdamW(ps, lr=0.01, fused=True)
    for p, g in zip(ps, grads[0]):
        p.grad = g.to("xxnpu")
    opt.step()
    torch.xxnpu.synchronize()
    names = [k["name"] for k in _kernel_events(opt.step, tmp_path)]
    assert names == ["xxnpu::foreach_add", "xxnpu::fused_adamw"], names

    torch.xxnpu.synchronize()
    before = [p.detach().cpu() for p in ps]
    group = opt.param_groups[0]
    state = [opt.state[p] for p in ps]
    scale = torch.tensor(4.0, device="xxnpu")
    skip = torch.tensor(1.0, device="xxnpu")
    with torch.no_grad():
        torch._fused_adamw_(ps, [p.grad for p in ps], [s["exp_avg"] for s in state], [s["exp_avg_sq"] for s in state],
                            [], [s["step"] for s in state], lr=group["lr"], beta1=0.9, beta2=0.999, weight_decay=0.01,
                            eps=1e-8, amsgrad=False, maximize=False, grad_scale=scale, found_inf=skip)
    for p, b in zip(ps, before):
        assert torch.equal(p.detach().cpu(), b)
    grads_before = [p.grad.cpu() for p in ps]
    with torch.no_grad():
        torch._fused_adamw_(ps, [p.grad for p in ps], [s["exp_avg"] for s in state], [s["exp_avg_sq"] for s in state],
                            [], [s["step"] for s in state], lr=group["lr"], beta1=0.9, beta2=0.999, weight_decay=0.01,
                            eps=1e-8, amsgrad=False, maximize=False, grad_scale=scale,
                            found_inf=torch.tensor(0.0, device="xxnpu"))
    for p, g in zip(ps, grads_before):
        torch.testing.assert_close(p.grad.cpu(), g / 4)
    assert any(not torch.equal(p.detach().cpu(), b) for p, b in zip(ps, before) if b.numel())


def test_fused_errors():
    ps = [torch.randn(3).to("xxnpu")]
    step = [torch.tensor(1.0, device="xxnpu")]
    kw = dict(lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
    with pytest.raises(RuntimeError, match="expected grads to hold 1 tensors"):
        torch._fused_adam_(ps, [], ps, ps, [], step, **kw)
    with pytest.raises(RuntimeError, match="must have the same dtype, device and layout"):
        torch._fused_adam_(ps, [ps[0].double()], ps, ps, [], step, **kw)
    with pytest.raises(RuntimeError, match="must have the same dtype, device and layout"):
        torch._fused_adam_(ps, [torch.randn(3)], ps, ps, [], step, **kw)
    with pytest.raises(RuntimeError, match="state_step on xxnpu:0"):
        torch._fused_adam_(ps, ps, ps, ps, [], [torch.tensor(1.0)], **kw)
    with pytest.raises(RuntimeError, match="expected momentum_buffer_list to hold 0 tensors"):
        torch._fused_sgd_(ps, ps, ps, weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0, nesterov=False,
                          maximize=False, is_first_step=False)
    # The CPU raises for the same mistakes.
    cps = [torch.randn(3)]
    with pytest.raises(RuntimeError):
        torch._fused_adam_(cps, [], cps, cps, [], [torch.tensor(1.0)], **kw)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm_matches_cpu(norm_type, tmp_path):
    """clip_grad_norm_ (foreach): one norm kernel and one scaling kernel, no host sync in
    between, the CPU's total norm and clipped gradients."""
    results = []
    for device in ("cpu", "xxnpu"):
        ps, grads = _params(torch.float32, seed=7)
        # Without the empty parameter: the CPU refuses the inf-norm of an empty tensor.
        ps, grads[0] = [p for p in ps if p.numel()], [g for g in grads[0] if g.numel()]
        ps = [p.to(device).requires_grad_() for p in ps]
        for p, g in zip(ps, grads[0]):
            p.grad = (g * 3).to(device)
        total = torch.nn.utils.clip_grad_norm_(ps, max_norm=1.0, norm_type=norm_type, foreach=True)
        results.append((total, [p.grad for p in ps]))
    (ct, cg), (xt, xg) = results
    torch.testing.assert_close(xt.cpu(), ct, rtol=1e-5, atol=1e-6)
    for a, b in zip(xg, cg):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-6)
    names = [k["name"] for k in _kernel_events(
        lambda: torch.nn.utils.clip_grad_norm_(ps, 1.0, norm_type=norm_type, foreach=True), tmp_path)]
    assert names.count("xxnpu::foreach_norm") == 1 and names.count("xxnpu::foreach_mul") == 1, names


# ---------------------------------------------------------------- PyTorch's foreach samples

def _foreach_opinfos():
    from torch.testing._internal import common_methods_invocations as cmi

    ours = {"add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max", "pow", "neg", "sqrt", "rsqrt",
            "reciprocal", "abs", "exp", "log", "zero", "addcmul", "addcdiv", "lerp", "norm"}
    dbs = [cmi.foreach_unary_op_db, cmi.foreach_binary_op_db, cmi.foreach_pointwise_op_db, cmi.foreach_reduce_op_db,
           cmi.foreach_other_op_db]
    return [op for db in dbs for op in db if op.name.removeprefix("_foreach_") in ours]


def _move(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_move(v, device) for v in x)
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("opinfo", _foreach_opinfos(), ids=lambda o: o.name)
def test_pytorch_foreach_samples_match_cpu(opinfo, dtype):
    """PyTorch's own foreach OpInfo samples (every overload's argument shapes: scalars of each
    Python type, scalar lists, lists, 0-dim tensors, alpha), functional and in-place."""
    samples = list(opinfo.sample_inputs("cpu", dtype))
    assert samples
    for sample in samples:
        for variant in (opinfo.op, opinfo.inplace_variant):
            if variant is None:
                continue
            cpu_in, dev_in = _move(sample.input, "cpu"), _move(sample.input, "xxnpu")
            cpu_in = [t.clone() for t in cpu_in]
            try:
                ref = variant(cpu_in, *sample.args, **sample.kwargs)
            except Exception as e:  # the CPU refuses it: so must xxnpu
                with pytest.raises(type(e)):
                    variant(dev_in, *_move(sample.args, "xxnpu"), **sample.kwargs)
                continue
            out = variant(dev_in, *_move(sample.args, "xxnpu"), **sample.kwargs)
            got, want = (dev_in, cpu_in) if variant is opinfo.inplace_variant else (out, ref)
            # bf16: the CPU rounds some intermediates (alpha * other) to bf16 where xxnpu keeps
            # float32, an ulp at the operands' magnitude (up to 8 here).
            tol = dict(rtol=1.6e-2, atol=3.2e-2) if dtype == torch.bfloat16 else _tol(dtype)
            for a, b in zip(got, want):
                torch.testing.assert_close(a.cpu(), b, **tol, equal_nan=True, check_dtype=True)
