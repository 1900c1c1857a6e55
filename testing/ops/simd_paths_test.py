"""The SIMD fast paths of the native kernels (ops/vec_kernels.h: dense float32/bfloat16
rows) and the general paths beside them, against the CPU backend: sizes that are no
multiple of any vector width and cross the launch's 16384-element blocks, strided and
broadcast operands, CPU scalars on either side, mixed dtypes, NaN, reductions, softmax,
layer_norm and rms_norm rows (forward and backward), where; and ATEN_CPU_CAPABILITY=default (the portable build of the same loops) giving the
same results as the host's own level."""
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import testlib
import torch_xxnpu  # noqa: F401

DTYPES = [torch.float32, torch.bfloat16]
# 1 and 17: a lone tail; 16384 + 37: a full launch block, vector body and tail after it.
SIZES = [1, 17, 255, 16384 + 37]


@pytest.fixture(autouse=True)
def _no_fallback():
    with testlib.no_fallback():
        yield


def _tol(dtype):
    return dict(rtol=1.6e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1.3e-6, atol=1e-5)


def _close(got, want):
    assert got.device.type == "xxnpu"
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    tol = _tol(want.dtype) if want.dtype.is_floating_point else dict(rtol=0, atol=0)
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)


def _rand(shape, dtype, seed, low=-3.0, high=3.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)


UNARY = {
    "exp": (torch.exp, -10, 10), "exp2": (torch.exp2, -10, 10), "expm1": (torch.expm1, -3, 3),
    "log": (torch.log, 0.01, 50), "log2": (torch.log2, 0.01, 50), "log10": (torch.log10, 0.01, 50),
    "log1p": (torch.log1p, -0.5, 5), "sqrt": (torch.sqrt, 0, 50), "rsqrt": (torch.rsqrt, 0.1, 50),
    "reciprocal": (torch.reciprocal, 0.5, 5), "sin": (torch.sin, -4, 4), "cos": (torch.cos, -4, 4),
    "tan": (torch.tan, -1, 1), "tanh": (torch.tanh, -5, 5), "sigmoid": (torch.sigmoid, -10, 10),
    "erf": (torch.erf, -3, 3), "erfc": (torch.erfc, -3, 3), "silu": (F.silu, -8, 8),
    "gelu": (F.gelu, -5, 5), "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), -5, 5),
    "abs": (torch.abs, -5, 5), "neg": (torch.neg, -5, 5), "relu": (torch.relu, -5, 5),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_dense_strided_and_tails(name, dtype):
    fn, low, high = UNARY[name]
    for n in SIZES:
        x = _rand(n, dtype, n, low, high)
        _close(fn(x.to("xxnpu")), fn(x))
    # Strided (the general path) and a transposed 2-D view.
    x = _rand((67, 40), dtype, 1, low, high)
    _close(fn(x.to("xxnpu")[:, ::3]), fn(x[:, ::3]))
    _close(fn(x.to("xxnpu").t()), fn(x.t()))
    # out= of another dtype: dynamic casting, not the vector path.
    if dtype == torch.float32 and name not in ("silu", "gelu", "gelu_tanh", "abs", "neg", "relu"):
        out = torch.empty(17, dtype=torch.float64, device="xxnpu")
        _close(fn(x.flatten()[:17].to("xxnpu"), out=out), fn(x.flatten()[:17]).double())


def test_unary_special_values():
    x = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-30, -100.0, 100.0] * 5)
    for name, (fn, _, _) in UNARY.items():
        # The CPU's gelu (erf form) gives NaN at +inf; ours gives +inf, the limit.
        v = x[x != math.inf] if name == "gelu" else x
        for dtype in DTYPES:
            _close(fn(v.to(dtype).to("xxnpu")), fn(v.to(dtype)))
    # The sign of zero, which assert_close does not see: on the CPU abs(-0.0) is +0.0, relu
    # (clamp_min) keeps -0.0, neg(0.0) is -0.0; dense (the vector path) and strided (the scalar loop).
    for fn in (torch.abs, torch.relu, torch.neg):
        for dtype in DTYPES:
            v, xv = x.to(dtype), x.to(dtype).to("xxnpu")
            for got, want in ((fn(xv), fn(v)), (fn(xv[::2]), fn(v[::2]))):
                real = ~want.isnan()  # a NaN's sign bit is not specified (the CPU's differs by path)
                assert torch.equal(torch.signbit(got.cpu())[real], torch.signbit(want)[real]), (fn, dtype)


BINARY = {
    "add": torch.add, "add_alpha": lambda a, b: torch.add(a, b, alpha=-2.5), "sub": torch.sub,
    "mul": torch.mul, "div": torch.div, "maximum": torch.maximum, "minimum": torch.minimum,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
}


def _with_nans_and_ties(a, b):
    a, b = a.clone(), b.clone()
    b.view(-1)[::5] = a.view(-1)[::5]  # equal pairs for the comparisons
    a.view(-1)[1::7] = math.nan
    return a, b


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_dense_broadcast_scalar_and_mixed(name, dtype):
    fn = BINARY[name]
    for n in SIZES:
        a, b = _with_nans_and_ties(_rand(n, dtype, n), _rand(n, dtype, n + 1, 0.5, 3))
        _close(fn(a.to("xxnpu"), b.to("xxnpu")), fn(a, b))
    a, b = _with_nans_and_ties(_rand((33, 70), dtype, 2), _rand((33, 70), dtype, 3, 0.5, 3))
    xa, xb = a.to("xxnpu"), b.to("xxnpu")
    col, row = b[:, :1].contiguous(), b[:1, :].contiguous()
    _close(fn(xa, col.to("xxnpu")), fn(a, col))  # stride 0 along the rows
    _close(fn(col.to("xxnpu"), xa), fn(col, a))
    _close(fn(xa, row.to("xxnpu")), fn(a, row))  # dense rows, repeated
    _close(fn(xa[:, ::2], xb[:, 1::2]), fn(a[:, ::2], b[:, 1::2]))  # strided: the general path
    _close(fn(xa.t(), xb.t()), fn(a.t(), b.t()))
    # CPU scalars on either side, baked into the kernel (a double that float rounds).
    for s in (0.1, 2.5, -3):
        _close(fn(xa, torch.tensor(s)), fn(a, torch.tensor(s)))
        _close(fn(torch.tensor(s), xa), fn(torch.tensor(s), a))
    # Mixed dtypes: promoted through dynamic casts, not the vector path.
    other = torch.float64 if dtype == torch.float32 else torch.float32
    _close(fn(xa, xb.to(other)), fn(a, b.to(other)))


# Rows shorter than 64 elements (ops/elementwise.h, kShortRow) are gathered into staging
# buffers, run through the vector kernel in batches of up to 2048 elements and scattered
# back: slices of wider tensors, and an operand broadcast along the rows. The element
# results must be the dense path's exactly (the same kernel), whatever the batching.
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_short_rows_are_staged_exactly_as_dense_rows(dtype):
    rows = 1500  # more than one staging batch for every width below
    for k in (1, 3, 4, 17, 63):
        x = _rand((rows, 80), dtype, k, 0.05, 3).to("xxnpu")
        sliced = x[:, 2:2 + k]
        for name in ("exp", "tanh", "sqrt", "sigmoid", "gelu", "abs"):
            fn = UNARY[name][0]
            got = fn(sliced)
            assert torch.equal(got.cpu(), fn(sliced.contiguous()).cpu()), (name, k)
            _close(got, fn(sliced.cpu()))
        # A strided output as well.
        out = torch.zeros(rows, 80, dtype=dtype, device="xxnpu")
        torch.exp(sliced, out=out[:, 5:5 + k])
        assert torch.equal(out[:, 5:5 + k].cpu(), torch.exp(sliced.contiguous()).cpu())
        assert not out[:, :5].cpu().any() and not out[:, 5 + k:].cpu().any()
        y = _rand((rows, 80), dtype, k + 100, 0.5, 3).to("xxnpu")[:, 9:9 + k]
        y_dense = y.contiguous()
        bias = _rand(k, dtype, 7, 0.5, 3).to("xxnpu")  # stride 0 from row to row
        column = _rand((rows, 1), dtype, 8, 0.5, 3).to("xxnpu")  # stride 0 along each row
        for name in ("add_alpha", "mul", "div", "maximum", "ge"):
            fn = BINARY[name]
            dense = sliced.contiguous()
            for a, b, a_ref, b_ref in ((sliced, y, dense, y_dense),
                                       (dense, bias, dense, bias.expand(rows, k).contiguous()),
                                       (column, sliced, column.expand(rows, k).contiguous(), dense)):
                got = fn(a, b)
                assert torch.equal(got.cpu(), fn(a_ref, b_ref).cpu()), (name, k)
                _close(got, fn(a.cpu(), b.cpu()))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_comparison_into_float_out(dtype):
    a, b = _rand(100, dtype, 4), _rand(100, dtype, 5)
    out = torch.empty(100, dtype=torch.float32, device="xxnpu")
    torch.lt(a.to("xxnpu"), b.to("xxnpu"), out=out)
    _close(out, torch.lt(a, b).float())


# pow with a constant exponent: the CPU backend's shortcuts (a fill, a copy, products,
# sqrt, rsqrt, reciprocal) and Sleef's pow for the rest (ops/binary_math_ops.cc). Products
# are exact in IEEE arithmetic, so they must equal the CPU's bit for bit, bfloat16's
# rounding after each multiplication included; the rest within the dtype's tolerance.
POW_EXACT = (0, 1, 2, 3, -2)
POW_OTHER = (0.5, -0.5, -1, 1.5, -2.7, 7)


def _pow_input(n, dtype, seed):
    x = _rand(n, dtype, seed)
    x.view(-1)[::7] = x.view(-1)[::7].abs()  # positive bases for the fractional exponents
    specials = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1.0], dtype=dtype)
    x.view(-1)[: min(7, x.numel())] = specials[: x.numel()]
    return x


@pytest.mark.parametrize("dtype", DTYPES + [torch.float64, torch.float16], ids=str)
def test_pow_constant_exponents(dtype):
    for e in POW_EXACT + POW_OTHER:
        for n in SIZES:
            x = _pow_input(n, dtype, n)
            got, want = torch.pow(x.to("xxnpu"), e), torch.pow(x, e)
            if e in POW_EXACT:
                assert torch.equal(torch.nan_to_num(got.cpu()), torch.nan_to_num(want)), (e, n)
                assert torch.equal(got.cpu().isnan(), want.isnan()), (e, n)
            _close(got, want)
        x = _pow_input((67, 40), dtype, 1)
        _close(torch.pow(x.to("xxnpu")[:, ::3], e), torch.pow(x[:, ::3], e))  # strided: staged
        _close(torch.pow(x.to("xxnpu").t(), e), torch.pow(x.t(), e))
        xi = x.to("xxnpu")  # in place
        xi.pow_(e)
        _close(xi, x.pow(e))


def test_pow_forms_dtypes_and_out():
    x = _pow_input(1000, torch.float32, 3)
    y = _rand(1000, torch.float32, 4, 0, 3)
    xx, xy = x.to("xxnpu"), y.to("xxnpu")
    _close(torch.pow(xx, xy), torch.pow(x, y))  # tensor ** tensor
    _close(torch.pow(2.5, xy), torch.pow(2.5, y))  # scalar ** tensor
    _close(torch.pow(xx, torch.tensor(3.0)), torch.pow(x, torch.tensor(3.0)))  # a CPU scalar tensor
    # out= of a wider dtype: computed in float32, cast on store, for shortcuts and pow alike.
    for e in (2, 1, 0, 1.5):
        out = torch.empty(1000, dtype=torch.float64, device="xxnpu")
        torch.pow(xx, e, out=out)
        _close(out, torch.pow(x, e).double())
    # bfloat16 and half raise to the exponent rounded to their dtype, as the CPU does.
    for dtype in (torch.bfloat16, torch.float16):
        xb = x.abs().to(dtype)
        _close(torch.pow(xb.to("xxnpu"), 1.1), torch.pow(xb, 1.1))
    # Integers: exact, 0 and 1 included; a float exponent promotes to the default dtype.
    i = torch.arange(-20, 20, dtype=torch.int64)
    for e in (0, 1, 2, 3):
        _close(torch.pow(i.to("xxnpu"), e), torch.pow(i, e))
    _close(torch.pow(i.to("xxnpu"), 2.0), torch.pow(i, 2.0))
    _close(torch.pow(i.bool().to("xxnpu"), 0), torch.pow(i.bool(), 0))
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        torch.pow(i.to("xxnpu"), -1)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        torch.pow(xx, 2, out=torch.empty(1000, dtype=torch.int64, device="xxnpu"))


ACTIVATIONS = {
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu,
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_backward(name, dtype):
    fn = ACTIVATIONS[name]
    for n in [17, 16384 + 37]:
        x = _rand(n, dtype, n, -4, 4)
        g = _rand(n, dtype, n + 7)
        xc = x.clone().requires_grad_()
        fn(xc).backward(g)
        xx = x.to("xxnpu").requires_grad_()
        fn(xx).backward(g.to("xxnpu"))
        _close(xx.grad, xc.grad)


REDUCTIONS = {"sum": lambda x, d: x.sum(d), "mean": lambda x, d: x.mean(d), "amax": lambda x, d: x.amax(d)}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_inner_reductions(name, dtype):
    fn = REDUCTIONS[name]
    for shape in [(3, 1), (5, 17), (4, 4097), (2, 70001)]:
        x = _rand(shape, dtype, shape[1], -3, -1)  # all negative: a max padded with 0 would show
        _close(fn(x.to("xxnpu"), -1), fn(x, -1))
        _close(fn(x.to("xxnpu"), 0), fn(x, 0))  # outer dim: the strided path
        xt = x.t().contiguous().t()  # the same values, reduced along a non-unit stride
        _close(fn(xt.to("xxnpu"), -1), fn(x, -1))
    x = _rand((3, 1000), dtype, 9)
    x[1, 999] = math.nan
    _close(fn(x.to("xxnpu"), -1), fn(x, -1))
    full = _rand(300001, dtype, 11)  # a full reduction, split across blocks
    _close(fn(full.to("xxnpu"), 0), fn(full, 0))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_rows(log, dtype):
    fn = torch.log_softmax if log else torch.softmax
    for shape in [(1, 1), (3, 17), (5, 1000), (2, 16384 + 5)]:
        x = _rand(shape, dtype, shape[1], -20, 20)
        if shape[1] > 3:
            x[:, 2] = -math.inf  # masked positions
        _close(fn(x.to("xxnpu"), -1), fn(x, -1))
        _close(fn(x.to("xxnpu"), 0), fn(x, 0))  # along a strided dim: the general path
    x = _rand((4, 33), dtype, 3)
    _close(fn(x.to("xxnpu"), -1, dtype=torch.float32), fn(x, -1, dtype=torch.float32))


@pytest.mark.parametrize("dtype", DTYPES + [torch.float64], ids=str)
def test_log_softmax_of_large_values_keeps_log_sum(dtype):
    # Rows of equal large values: log_softmax is -log(n) whatever their size. Folding
    # max + log(sum) into one shift before subtracting lost log(sum) (it gave 0), in the
    # row kernel (last dim) and the general path (dim 0) alike.
    for big in (-1e8, 3e5, -9.6e33):
        x = torch.full((5, 7), big, dtype=dtype)
        x[1, 3] = big + abs(big) * 0.5  # one row (and one column) with a clear maximum
        for dim in (-1, 0):
            got, want = torch.log_softmax(x.to("xxnpu"), dim), torch.log_softmax(x, dim)
            _close(got, want)
            assert torch.equal(got.cpu()[0], want[0]), (big, dim)  # -log(n), exactly


def _kernel_names(fn, tmp_path):
    """The device kernels fn runs (names from the profiler's chrome trace)."""
    import json

    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.xxnpu.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        fn()
        torch.xxnpu.synchronize()
    path = str(tmp_path / "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        trace = json.load(f)
    return sorted(e["name"] for e in trace["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X")


# Row lengths: a lone element, tails shorter than any vector, a typical hidden size, one
# past a sum block (4096), and a row longer than a launch block (16384). (0 rows too.)
NORM_SHAPES = [(3, 1), (5, 7), (4, 17), (0, 33), (64, 1024), (3, 4099), (2, 16384 + 7)]


def _norm_inputs(shape, dtype, seed, affine):
    x = _rand(shape, dtype, seed, -2, 4)  # a non-zero mean: centring matters
    g = _rand(shape, dtype, seed + 1)
    n = shape[-1]
    w = _rand(n, dtype, seed + 2, 0.5, 1.5) if affine else None
    w = None if affine == "bias_only" else w
    b = _rand(n, dtype, seed + 3) if affine in ("bias", "bias_only") else None
    return x, g, w, b


def _run_norm(fn, x, g, w, b, device):
    """fn's output and the gradients of x, w, b (those that exist) on `device`."""
    leaves = [t.to(device).requires_grad_() if t is not None else None for t in (x, w, b)]
    y = fn(*leaves)
    grads = torch.autograd.grad(y, [t for t in leaves if t is not None], g.to(device))
    return [y.detach()] + list(grads)


def _norm_tol(dtype):
    if dtype == torch.bfloat16:
        return dict(rtol=1.6e-2, atol=1e-2)
    if dtype == torch.float16:
        return dict(rtol=1e-2, atol=1e-2)
    return dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-9)


def _check_norm(fn, x, g, w, b, what):
    """fn's output and gradients on xxnpu against the CPU's. For bfloat16/float16 the
    statistics handed to backward are rounded to the input's dtype (as the CPU's are), so a
    weight gradient summed over many rows drifts from the exact value: there the gradients'
    largest error against the exact result (float64 from the same inputs) must be no larger
    than the CPU's, within the dtype's tolerance."""
    got, want = _run_norm(fn, x, g, w, b, "xxnpu"), _run_norm(fn, x, g, w, b, "cpu")
    assert len(got) == len(want)
    tol = _norm_tol(x.dtype)
    if x.dtype not in (torch.bfloat16, torch.float16):
        for k, (a, e) in enumerate(zip(got, want)):
            torch.testing.assert_close(a.cpu(), e, msg=f"{what} output {k}", **tol)
        return
    exact = _run_norm(fn, *[t.double() if t is not None else None for t in (x, g, w, b)], "cpu")
    for k, (a, c, e) in enumerate(zip(got, want, exact)):
        assert a.dtype == c.dtype and a.shape == c.shape, (what, k)
        if k == 0:  # the output: from exact statistics on both backends
            torch.testing.assert_close(a.cpu(), c, msg=f"{what} output", **tol)
            continue
        err, cpu_err = (a.cpu().double() - e).abs(), (c.double() - e).abs()
        if e.numel():
            bound = float(cpu_err.max()) + tol["atol"] + tol["rtol"] * float(e.abs().max())
            assert float(err.max()) <= bound, (what, k, float(err.max()), bound)


NORM_DTYPES = DTYPES + [torch.float16, torch.float64]  # the last two: the scalar loops


@pytest.mark.parametrize("dtype", NORM_DTYPES, ids=str)
@pytest.mark.parametrize("affine", [None, "weight", "bias", "bias_only"])
def test_layer_norm_rows_and_backward(affine, dtype):
    for shape in NORM_SHAPES:
        x, g, w, b = _norm_inputs(shape, dtype, shape[-1], affine)
        for eps in (1e-5, 0.5):
            fn = lambda x, w=None, b=None: F.layer_norm(x, x.shape[-1:], w, b, eps)  # noqa: E731
            _check_norm(fn, x, g, w, b, f"{shape} eps={eps}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_layer_norm_statistics_and_layouts(dtype):
    x = _rand((6, 2, 37), dtype, 5, -3, 5)
    w, b = _rand((2, 37), dtype, 6), _rand((2, 37), dtype, 7)
    got = torch.native_layer_norm(x.to("xxnpu"), [2, 37], w.to("xxnpu"), b.to("xxnpu"), 1e-5)
    want = torch.native_layer_norm(x, [2, 37], w, b, 1e-5)
    for a, e in zip(got, want):  # y, mean, rstd (shape [6, 1, 1], the input's dtype)
        _close(a, e)
    # A transposed (non-contiguous) input and a constant row (variance 0: rstd = 1/sqrt(eps)).
    xt = _rand((40, 9), dtype, 8).t()
    _close(F.layer_norm(xt.to("xxnpu"), (40,)), F.layer_norm(xt, (40,)))
    # One element per row: x - mean is exactly 0 and y exactly the bias.
    x1, w1, b1 = _rand((5, 1), dtype, 9), _rand(1, dtype, 10), _rand(1, dtype, 11)
    _close(F.layer_norm(x1.to("xxnpu"), (1,), w1.to("xxnpu"), b1.to("xxnpu")), F.layer_norm(x1, (1,), w1, b1))
    const = torch.full((2, 300), 3.0, dtype=dtype)
    _close(torch.native_layer_norm(const.to("xxnpu"), [300], None, None, 1e-5)[2],
           torch.native_layer_norm(const, [300], None, None, 1e-5)[2])


@pytest.mark.parametrize("dtype", NORM_DTYPES, ids=str)
@pytest.mark.parametrize("affine", [None, "weight"])
def test_rms_norm_rows_and_backward(affine, dtype):
    for shape in NORM_SHAPES:
        x, g, w, _ = _norm_inputs(shape, dtype, shape[-1], affine)
        for eps in (None, 1e-6, 0.5):
            fn = lambda x, w=None, b=None: F.rms_norm(x, x.shape[-1:], w, eps)  # noqa: E731
            _check_norm(fn, x, g, w, None, f"{shape} eps={eps}")


def test_rms_norm_statistics_mixed_dtypes_and_layouts():
    x = _rand((4, 3, 10), torch.bfloat16, 1)
    y, rstd = torch.ops.aten._fused_rms_norm(x.to("xxnpu"), [3, 10], None, 1e-6)
    want_y, want_rstd = torch.ops.aten._fused_rms_norm(x, [3, 10], None, 1e-6)
    _close(y, want_y)
    _close(rstd, want_rstd)  # float32 [4, 1, 1] for a bfloat16 input
    # A float32 weight on a bfloat16 input: the composite's promotions, op by op.
    w = _rand(10, torch.float32, 2)
    g = _rand((4, 3, 10), torch.bfloat16, 3)
    fn = lambda x, w, b=None: F.rms_norm(x, (10,), w)  # noqa: E731
    _check_norm(fn, x, g, w, None, "float32 weight")
    xt = _rand((50, 6), torch.float32, 4).t()
    _close(F.rms_norm(xt.to("xxnpu"), (50,)), F.rms_norm(xt, (50,)))
    with pytest.raises(ValueError, match=r"expected input with shape \[\*, 5\], but got input of size\[3, 4\]"):
        torch.ops.aten._fused_rms_norm(torch.ones(3, 4, device="xxnpu"), [5], None, None)
    with pytest.raises(RuntimeError, match="weight of shape"):
        torch.ops.aten._fused_rms_norm(torch.ones(3, 4, device="xxnpu"), [4], torch.ones(3, device="xxnpu"), None)


def test_norms_run_one_kernel_each_way(tmp_path):
    x = torch.randn(64, 1024, device="xxnpu", requires_grad=True)
    w = torch.ones(1024, device="xxnpu", requires_grad=True)
    g = torch.randn(64, 1024, device="xxnpu")
    assert _kernel_names(lambda: F.rms_norm(x, (1024,), w), tmp_path) == ["xxnpu::rms_norm"]
    y = F.rms_norm(x, (1024,), w)
    assert _kernel_names(lambda: torch.autograd.grad(y, (x, w), g, retain_graph=True), tmp_path) == [
        "xxnpu::rms_norm_backward", "xxnpu::rms_norm_backward_weight"]
    b = torch.zeros(1024, device="xxnpu", requires_grad=True)
    y = F.layer_norm(x, (1024,), w, b)
    assert _kernel_names(lambda: torch.autograd.grad(y, (x, w, b), g, retain_graph=True), tmp_path) == [
        "xxnpu::layer_norm_backward", "xxnpu::layer_norm_backward_params"]
    # silu's backward: its own kernel, not the composite's sigmoid/mul/sub/add.
    y = F.silu(x)
    assert _kernel_names(lambda: torch.autograd.grad(y, (x,), g, retain_graph=True), tmp_path) == [
        "xxnpu::silu_backward"]


WHERE_DTYPES = DTYPES + [torch.float16, torch.float64, torch.int32, torch.int64, torch.uint8, torch.bool]


@pytest.mark.parametrize("dtype", WHERE_DTYPES, ids=str)
def test_where_dense_broadcast_and_strided(dtype):
    for n in SIZES:
        a = _rand(n, torch.float32, n).to(dtype)
        b = _rand(n, torch.float32, n + 1).to(dtype)
        c = _rand(n, torch.float32, n + 2) > 0
        if dtype.is_floating_point and n > 1:
            a[0], b[-1] = math.nan, math.nan  # NaN values are selected, never compared
        ad, bd, cd = a.to("xxnpu"), b.to("xxnpu"), c.to("xxnpu")
        _close(torch.where(cd, ad, bd), torch.where(c, a, b))
        # A scalar on either side or both (broadcast, stride 0), and a 0-dim device tensor.
        _close(torch.where(cd, ad, 0), torch.where(c, a, 0))
        _close(torch.where(cd, 1, bd), torch.where(c, 1, b))
        _close(torch.where(cd, ad[:1].reshape(()), bd), torch.where(c, a[:1].reshape(()), b))
        _close(torch.where(cd, 1, 0), torch.where(c, 1, 0))
    # Strided operands and a broadcast condition: the general loop.
    a = _rand((33, 20), torch.float32, 1).to(dtype)
    b = _rand((33, 20), torch.float32, 2).to(dtype)
    c = _rand((33, 20), torch.float32, 3) > 0
    ad, bd, cd = a.to("xxnpu"), b.to("xxnpu"), c.to("xxnpu")
    _close(torch.where(cd.t(), ad.t(), bd.t()), torch.where(c.t(), a.t(), b.t()))
    _close(torch.where(cd[:, ::2], ad[:, ::2], bd[:, 1::2]), torch.where(c[:, ::2], a[:, ::2], b[:, 1::2]))
    _close(torch.where(cd[:1], ad, bd), torch.where(c[:1], a, b))
    _close(torch.where(cd[:, :1], ad, bd), torch.where(c[:, :1], a, b))


def test_where_mixed_dtypes_and_out():
    a = _rand(100, torch.float32, 1)
    b = _rand(100, torch.float64, 2)
    c = a > 0
    _close(torch.where(c.to("xxnpu"), a.to("xxnpu"), b.to("xxnpu")), torch.where(c, a, b))  # promoted to float64
    ai = torch.arange(100, dtype=torch.int32)
    _close(torch.where(c.to("xxnpu"), ai.to("xxnpu"), 0.5), torch.where(c, ai, 0.5))
    out = torch.empty(100, device="xxnpu")
    torch.where(c.to("xxnpu"), a.to("xxnpu"), torch.full((), 2.0, device="xxnpu"), out=out)
    _close(out, torch.where(c, a, 2.0))


# The ops run under both capabilities; each result is saved for comparison.
_CAPABILITY_SCRIPT = """
import torch, torch.nn.functional as F
import torch_xxnpu
g = torch.Generator().manual_seed(0)
results = {"capability": torch.backends.cpu.get_cpu_capability()}
for dtype in (torch.float32, torch.bfloat16):
    x = (torch.rand(3, 1037, generator=g) * 8 - 4).to(dtype).to("xxnpu")
    y = (torch.rand(3, 1037, generator=g) * 3 + 0.5).to(dtype).to("xxnpu")
    for name, v in {
        "exp": x.exp(), "log": y.log(), "tanh": x.tanh(), "erf": x.erf(), "sigmoid": x.sigmoid(),
        "gelu": F.gelu(x), "gelu_tanh": F.gelu(x, approximate="tanh"), "silu": F.silu(x),
        "add": x + y, "mul": x * y, "div": x / y, "lt": x < y, "scalar": x * 2.5,
        "sum": x.sum(-1), "mean": x.mean(-1), "amax": x.amax(-1),
        "softmax": x.softmax(-1), "log_softmax": x.log_softmax(-1),
        "layer_norm": F.layer_norm(x, (1037,), y[0], y[1]), "rms_norm": F.rms_norm(x, (1037,), y[0]),
    }.items():
        results[f"{name}_{dtype}"] = v.cpu()
torch.save(results, OUT)
"""


def test_default_capability_matches_native(tmp_path):
    native_path, default_path = tmp_path / "native.pt", tmp_path / "default.pt"
    for path, env in [(native_path, {}), (default_path, {"ATEN_CPU_CAPABILITY": "default"})]:
        proc = testlib.run_python(f"OUT = {str(path)!r}\n" + _CAPABILITY_SCRIPT, **env)
        assert proc.returncode == 0, proc.stderr
    native, default = torch.load(native_path), torch.load(default_path)
    assert default.pop("capability") == "DEFAULT"
    native.pop("capability")
    assert native.keys() == default.keys()
    for key in native:
        tol = _tol(native[key].dtype) if native[key].dtype.is_floating_point else dict(rtol=0, atol=0)
        torch.testing.assert_close(default[key], native[key], equal_nan=True, msg=key, **tol)


_FIRST_CALLS = """
import torch, torch_xxnpu
bad = []
for name in ("cos", "tanh", "exp"):
    op = getattr(torch, name)
    x = torch.rand(1) * 4 - 2
    xd = x.to("xxnpu")
    torch.xxnpu.synchronize()
    d = op(xd)  # the device's first call of this VML function, queued ...
    op(x)       # ... while the host makes the CPU's first call of it
    want = op(x.double())
    err = ((d.cpu().double() - want).abs() / want.abs().clamp_min(1e-3)).max().item()
    if err > 1e-6:
        bad.append(f"{name}: relative error {err:.1g}")
print(bad or "ok")
"""


def test_vml_first_calls_racing_the_cpu_stay_accurate():
    # MKL sets each VML function up on its first call; a device kernel's first call racing
    # the host's first call on the CPU ran at ~1e-4 relative error in about one fresh
    # process of five, until the library made one call of each while loading (cpu_vml.cc).
    for _ in range(6):
        out = subprocess.run([sys.executable, "-c", _FIRST_CALLS], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip().splitlines()[-1] == "ok", out.stdout
