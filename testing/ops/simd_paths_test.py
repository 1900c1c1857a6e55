"""The SIMD fast paths of the native kernels (ops/vec_kernels.h: dense float32/bfloat16
rows) and the general paths beside them, against the CPU backend: sizes that are no
multiple of any vector width and cross the launch's 16384-element blocks, strided and
broadcast operands, CPU scalars on either side, mixed dtypes, NaN, reductions and softmax
rows; and ATEN_CPU_CAPABILITY=default (the portable build of the same loops) giving the
same results as the host's own level."""
import math

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


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_comparison_into_float_out(dtype):
    a, b = _rand(100, dtype, 4), _rand(100, dtype, 5)
    out = torch.empty(100, dtype=torch.float32, device="xxnpu")
    torch.lt(a.to("xxnpu"), b.to("xxnpu"), out=out)
    _close(out, torch.lt(a, b).float())


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
