"""The native xxnpu kernels (unary, pointwise, reductions, matmul, nn) against the CPU:
dtypes, non-contiguous and broadcast operands, out=/in-place forms, gradients, and that
they really ran natively (no CPU fallback was counted)."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from testlib import no_fallback

import torch_xxnpu

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _tol(dtype):
    return {torch.float16: dict(rtol=2e-3, atol=2e-3), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}.get(
        dtype, dict(rtol=1.3e-6, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-7, atol=1e-7)
    )


@pytest.fixture(autouse=True)
def _no_fallback():
    """Every test here must run without a single CPU fallback."""
    with no_fallback():
        yield


def _rand(shape, dtype, gen, low=-2.0, high=2.0):
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    return torch.randint(-20, 20, shape, generator=gen, dtype=dtype)


def _x(t):
    return t.to("xxnpu")


def _close(got, expected, dtype=None, **kw):
    assert got.device.type == "xxnpu"
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    tol = _tol(dtype or expected.dtype) if expected.dtype.is_floating_point else dict(rtol=0, atol=0)
    tol.update(kw)
    torch.testing.assert_close(got.cpu(), expected, equal_nan=True, **tol)


UNARY = {
    "exp": (torch.exp, -3, 3), "exp2": (torch.exp2, -3, 3), "expm1": (torch.expm1, -3, 3),
    "log": (torch.log, 0.1, 5), "log2": (torch.log2, 0.1, 5), "log10": (torch.log10, 0.1, 5),
    "log1p": (torch.log1p, -0.5, 5), "sqrt": (torch.sqrt, 0, 5), "rsqrt": (torch.rsqrt, 0.1, 5),
    "reciprocal": (torch.reciprocal, 0.5, 5), "sin": (torch.sin, -4, 4), "cos": (torch.cos, -4, 4),
    "tan": (torch.tan, -1, 1), "asin": (torch.asin, -0.9, 0.9), "acos": (torch.acos, -0.9, 0.9),
    "atan": (torch.atan, -4, 4), "sinh": (torch.sinh, -3, 3), "cosh": (torch.cosh, -3, 3),
    "tanh": (torch.tanh, -4, 4), "asinh": (torch.asinh, -4, 4), "acosh": (torch.acosh, 1.1, 4),
    "atanh": (torch.atanh, -0.9, 0.9), "sigmoid": (torch.sigmoid, -6, 6), "erf": (torch.erf, -3, 3),
    "erfc": (torch.erfc, -3, 3), "neg": (torch.neg, -4, 4), "abs": (torch.abs, -4, 4),
    "sign": (torch.sign, -4, 4), "floor": (torch.floor, -4, 4), "ceil": (torch.ceil, -4, 4),
    "trunc": (torch.trunc, -4, 4), "round": (torch.round, -4, 4), "frac": (torch.frac, -4, 4),
    "relu": (torch.relu, -4, 4), "silu": (F.silu, -6, 6), "gelu": (F.gelu, -4, 4),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), -4, 4),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1), -4, 4), "square": (torch.square, -4, 4),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_matches_cpu_on_strided_input(name, dtype):
    fn, low, high = UNARY[name]
    gen = torch.Generator().manual_seed(1)
    base = _rand((7, 10), dtype, gen, low, high)
    x = base[:, ::2]  # non-contiguous
    got = fn(_x(base)[:, ::2])
    expected = fn(x)
    _close(got, expected, rtol=_tol(dtype)["rtol"] * 4, atol=_tol(dtype)["atol"] * 4)


@pytest.mark.parametrize("name", ["exp", "sin", "sigmoid", "relu", "neg", "abs"])
def test_unary_inplace_and_out(name):
    fn = UNARY[name][0]
    x = torch.randn(4, 5)
    if name != "relu":  # relu has no out= form
        out = torch.empty(0, device="xxnpu")  # resized by out=
        getattr(torch, name)(_x(x), out=out)
        _close(out, fn(x))
    y = _x(x)
    getattr(y, name + "_")()
    _close(y, fn(x))


def test_unary_integer_inputs_promote_or_keep_dtype():
    i = torch.arange(-5, 6)
    _close(torch.exp(_x(i)), torch.exp(i))  # float result
    _close(torch.abs(_x(i)), torch.abs(i))  # stays int64
    _close(torch.neg(_x(i.int())), torch.neg(i.int()))
    _close(~_x(i), ~i)
    _close(torch.logical_not(_x(i)), torch.logical_not(i))
    with pytest.raises(RuntimeError, match="Negation"):
        -_x(torch.tensor([True]))


def test_nan_and_inf_follow_cpu():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0])
    for fn in [torch.relu, torch.exp, torch.abs, torch.sigmoid, torch.tanh, torch.sign, lambda t: t.clamp(-1, 1)]:
        _close(fn(_x(x)), fn(x))
    assert torch.isnan(torch.maximum(_x(x), _x(torch.zeros(6)))[0].cpu())
    _close(torch.amax(_x(x)), torch.amax(x))
    _close(torch.max(_x(x), 0).indices, torch.max(x, 0).indices)


COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize("name", COMPARE)
def test_comparisons_broadcast_and_scalars(name, dtype):
    gen = torch.Generator().manual_seed(2)
    a, b = _rand((3, 1, 4), dtype, gen), _rand((5, 1), dtype, gen)
    fn = getattr(torch, name)
    _close(fn(_x(a), _x(b)), fn(a, b))
    _close(fn(_x(a), 1), fn(a, 1))
    _close(fn(_x(a), _x(a)), fn(a, a))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
def test_binary_pointwise_ops(dtype):
    gen = torch.Generator().manual_seed(3)
    a, b = _rand((6, 5), dtype, gen), _rand((5,), dtype, gen)
    if not dtype.is_floating_point:
        b = b.masked_fill(b == 0, 3)
    xa, xb = _x(a), _x(b)
    for fn in [torch.maximum, torch.minimum, torch.fmod, torch.remainder, torch.floor_divide]:
        _close(fn(xa, xb), fn(a, b))
    if dtype.is_floating_point:
        _close(torch.atan2(xa, xb), torch.atan2(a, b))
        _close(torch.logaddexp(xa, xb), torch.logaddexp(a, b))
        _close(torch.pow(xa.abs(), xb), torch.pow(a.abs(), b))
        _close(torch.lerp(xa, xb.expand(6, 5), 0.3), torch.lerp(a, b.expand(6, 5), 0.3))
    else:
        for fn in [torch.bitwise_and, torch.bitwise_or, torch.bitwise_xor]:
            _close(fn(xa, xb), fn(a, b))
        _close(torch.pow(xa, 3), torch.pow(a, 3))
    for fn in [torch.logical_and, torch.logical_or, torch.logical_xor]:
        _close(fn(xa, xb), fn(a, b))
    _close(xa ** 2, a ** 2)
    _close(torch.clamp(xa, -1, 1), torch.clamp(a, -1, 1))
    _close(torch.clamp(xa, min=0), torch.clamp(a, min=0))
    _close(2 ** xa if dtype.is_floating_point else xa, 2 ** a if dtype.is_floating_point else a)


def test_ternary_ops_where_masked_fill():
    gen = torch.Generator().manual_seed(4)
    s, t1, t2 = (_rand(sh, torch.float32, gen) for sh in [(4, 5), (5,), (4, 1)])
    _close(torch.addcmul(_x(s), _x(t1), _x(t2), value=0.5), torch.addcmul(s, t1, t2, value=0.5))
    _close(torch.addcdiv(_x(s), _x(t1), _x(t2), value=-2), torch.addcdiv(s, t1, t2, value=-2))
    w = torch.rand(4, 5)
    _close(torch.lerp(_x(s), _x(t1).expand(4, 5), _x(w)), torch.lerp(s, t1.expand(4, 5), w))
    cond = s > 0
    _close(torch.where(_x(cond), _x(s), _x(t1)), torch.where(cond, s, t1))
    _close(torch.where(_x(cond), _x(s), 0.0), torch.where(cond, s, 0.0))
    _close(torch.where(_x(cond), _x(s.half()), _x(t1)), torch.where(cond, s.half(), t1))  # promotes
    _close(_x(s).masked_fill(_x(cond), -1.5), s.masked_fill(cond, -1.5))
    _close(_x(s).masked_fill(_x(cond[0]), torch.tensor(7.0)), s.masked_fill(cond[0], torch.tensor(7.0)))
    # a CPU scalar tensor next to xxnpu tensors is accepted, as on CUDA
    _close(torch.addcmul(_x(s), _x(t1), torch.tensor(3.0)), torch.addcmul(s, t1, torch.tensor(3.0)))


def test_addr_is_one_kernel_rounding_as_the_cpu():
    gen = torch.Generator().manual_seed(5)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        m, v1, v2 = (_rand(sh, torch.float32, gen).to(dtype) * 8 for sh in [(5, 10), (5,), (10,)])
        for beta, alpha in ((0.6, 0.2), (1, 1), (0, -1.5)):
            # half and bfloat16 round after every operation on the CPU: equal bit for bit.
            # (float32 within tolerance: the CPU's compiler fuses its multiply-adds.)
            got, want = torch.addr(_x(m), _x(v1), _x(v2), beta=beta, alpha=alpha), torch.addr(m, v1, v2, beta=beta, alpha=alpha)
            assert dtype == torch.float32 or torch.equal(got.cpu(), want), (dtype, beta)
            _close(got, want)
        # self broadcast from a row or a 0-dim tensor; out=; in place.
        _close(torch.addr(_x(m[0]), _x(v1), _x(v2)), torch.addr(m[0], v1, v2))
        _close(torch.addr(_x(m[0, 0]), _x(v1), _x(v2), alpha=2), torch.addr(m[0, 0], v1, v2, alpha=2))
        out = torch.empty(0, dtype=dtype, device="xxnpu")
        torch.addr(_x(m), _x(v1), _x(v2), out=out)
        _close(out, torch.addr(m, v1, v2))
        mm = _x(m)
        mm.addr_(_x(v1), _x(v2), beta=2)
        _close(mm, m.clone().addr_(v1, v2, beta=2))
    # beta == 0 ignores self, NaN included; integers exactly.
    nan = torch.full((5, 10), float("nan"))
    assert not torch.addr(_x(nan), _x(v1.float()), _x(v2.float()), beta=0).isnan().any()
    i1, i2, im = torch.arange(5), torch.arange(10), torch.ones(5, 10, dtype=torch.int64)
    _close(torch.addr(_x(im), _x(i1), _x(i2), beta=3, alpha=2), torch.addr(im, i1, i2, beta=3, alpha=2))
    # bool (and complex) go through torch's composite on the xxnpu kernels.
    b1, b2, bm = i1 > 2, i2 % 2 == 0, torch.zeros(5, 10, dtype=torch.bool)
    _close(torch.addr(_x(bm), _x(b1), _x(b2)), torch.addr(bm, b1, b2))
    with pytest.raises(RuntimeError, match="Expected 1-D argument vec1"):
        torch.addr(_x(m), _x(m), _x(v2))
    with pytest.raises(RuntimeError, match="expanded size of the tensor"):  # the CPU's message
        torch.addr(_x(torch.ones(3, 3)), _x(v1.float()), _x(v2.float()))  # self does not expand


REDUCE_SHAPES = [(), (7,), (3, 4), (2, 3, 5), (4, 0), (70000,)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", REDUCE_SHAPES, ids=str)
def test_reductions_match_cpu(shape, dtype):
    gen = torch.Generator().manual_seed(5)
    x = _rand(shape, dtype, gen)
    xx = _x(x)
    big = dict(rtol=1e-4, atol=1e-3) if dtype in (torch.float32, torch.float64) else {}
    _close(xx.sum(), x.sum(), dtype, **big)
    _close(xx.mean(), x.mean(), dtype, **big)
    if x.numel():
        _close(xx.amax(), x.amax())
        _close(xx.amin(), x.amin())
        _close(xx.max(), x.max())
        _close(xx.min(), x.min())
        _close(xx.argmax(), x.argmax())
        _close(xx.argmin(), x.argmin())
    _close(torch.linalg.vector_norm(xx), torch.linalg.vector_norm(x), dtype, **big)
    _close(xx.all(), x.all())
    _close(xx.any(), x.any())
    if len(shape) >= 2:
        for dim in [0, -1, (0, -1)]:
            for keepdim in [False, True]:
                _close(xx.sum(dim, keepdim=keepdim), x.sum(dim, keepdim=keepdim), dtype)
                _close(xx.mean(dim, keepdim=keepdim), x.mean(dim, keepdim=keepdim), dtype)
                if x.numel():
                    _close(xx.amax(dim, keepdim=keepdim), x.amax(dim, keepdim=keepdim))
                    _close(xx.var(dim, keepdim=keepdim), x.var(dim, keepdim=keepdim), dtype, rtol=1e-3, atol=1e-3)
                    _close(xx.std(dim, correction=0), x.std(dim, correction=0), dtype, rtol=1e-3, atol=1e-3)
                _close(torch.linalg.vector_norm(xx, 1, dim), torch.linalg.vector_norm(x, 1, dim), dtype)
        if x.numel():
            got, exp = xx.max(1, keepdim=True), x.max(1, keepdim=True)
            _close(got.values, exp.values)
            _close(got.indices, exp.indices)
            _close(xx.transpose(0, 1).argmin(0), x.transpose(0, 1).argmin(0))  # non-contiguous input


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_argmax_picks_the_cpus_element_ties_nan_and_infinities(dtype):
    # float32/bfloat16 rows take the SIMD max and then its first occurrence: the index must
    # be the CPU's in every case the scalar fold decides (float16 keeps the scalar fold).
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(6, 2051, generator=gen).to(dtype)
    x[0, 100] = x[0, 1700] = 50.0  # a tie: the first wins
    x[1, 900] = float("nan")  # NaN wins over any number
    x[1, 1900] = float("nan")  # ...the first NaN
    x[2] = float("-inf")  # all -inf: index 0
    x[3] = -x[3].abs() - 1  # zeros of both signs as the maximum: the first
    x[3, 7] = -0.0
    x[3, 5] = 0.0
    x[4, 2050] = 9.0  # the last element (past every whole vector)
    x[5, :] = 1.0  # every element the maximum
    xx = _x(x)
    for dim in (1, -1):
        _close(xx.argmax(dim), x.argmax(dim))
        got, want = xx.max(dim), x.max(dim)
        _close(got.indices, want.indices)
        _close(got.values, want.values)
    _close(xx.argmax(1, keepdim=True), x.argmax(1, keepdim=True))
    # Rows that are strided views (a transposed matrix, every other column) and the whole tensor.
    _close(xx.t().argmax(0), x.t().argmax(0))
    _close(xx[:, ::2].argmax(1), x[:, ::2].argmax(1))
    _close(xx[:, 3:].argmax(1), x[:, 3:].argmax(1))
    _close(xx.argmax(), x.argmax())
    # Reductions over several dims, where a row is several runs of the reduced range.
    y = torch.randn(3, 4, 37, generator=gen).to(dtype)
    y[1, 2, 30] = y[1, 3, 1] = 60.0
    _close(_x(y).flatten(1).argmax(1), y.flatten(1).argmax(1))
    _close(_x(y).permute(1, 0, 2).reshape(4, -1).argmax(1), y.permute(1, 0, 2).reshape(4, -1).argmax(1))


def test_copy_broadcasts_as_the_cpu_and_refuses_what_it_refuses():
    # ATen hands xxnpu copies to _copy_from before broadcasting: a row or a 0-dim source
    # fills the destination (device to device, host to device, device to host, with a
    # cast), and a source of another shape with the same element count is an error, as on
    # the CPU (it was reshaped silently).
    row, scalar = torch.arange(3.0), torch.tensor(7, dtype=torch.int64)
    for src in (row, scalar, row[:1]):
        want = torch.zeros(2, 3).copy_(src)
        for s, d in ((_x(src), "xxnpu"), (src, "xxnpu"), (_x(src), "cpu")):
            dst = torch.zeros(2, 3, device=d)
            dst.copy_(s)
            assert dst.device.type == d
            assert torch.equal(dst.cpu(), want), (src, d)
    col = torch.zeros(4, 2, dtype=torch.float16, device="xxnpu")[:, :1]  # a strided destination
    col.copy_(_x(torch.tensor([1.5])))
    assert torch.equal(col.cpu(), torch.full((4, 1), 1.5, dtype=torch.float16))
    for dst_shape, src_shape in (((2, 3), (6,)), ((3,), (2, 3)), ((2, 3), (2,))):
        with pytest.raises(RuntimeError) as cpu_err:
            torch.zeros(dst_shape).copy_(torch.zeros(src_shape))
        for s, d in ((_x(torch.zeros(src_shape)), "xxnpu"), (torch.zeros(src_shape), "xxnpu"),
                     (_x(torch.zeros(src_shape)), "cpu")):
            with pytest.raises(RuntimeError) as err:
                torch.zeros(dst_shape, device=d).copy_(s)
            assert str(err.value) == str(cpu_err.value), (dst_shape, src_shape, d)
    assert torch.equal(torch.zeros(2, 0, device="xxnpu").copy_(_x(torch.zeros(0))).cpu(), torch.zeros(2, 0))
    # Overlaps: the CPU's errors, not a copy whose result depends on its order.
    for base in (torch.arange(10.0), _x(torch.arange(10.0))):
        with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
            base[1:6].copy_(base[0:5])
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            base[:1].expand(3).copy_(base[2:5])
        base[2:5].copy_(base[2:5])  # the same view: nothing to do


def test_reduction_dtypes_and_out():
    i = torch.arange(12, dtype=torch.int32).view(3, 4)
    _close(_x(i).sum(), i.sum())  # int64
    _close(_x(i).sum(1, dtype=torch.float64), i.sum(1, dtype=torch.float64))
    _close(_x(i).prod(1), i.prod(1))
    _close(_x(torch.tensor([1.5, 2.0, -3.0])).prod(), torch.tensor([1.5, 2.0, -3.0]).prod())
    h = torch.randn(64, 32).half()
    _close(_x(h).sum(0), h.sum(0))
    out = torch.empty(0, device="xxnpu")
    torch.sum(_x(h.float()), 1, out=out)
    _close(out, h.float().sum(1))
    var, mean = torch.var_mean(_x(h.float()), 0)
    evar, emean = torch.var_mean(h.float(), 0)
    _close(var, evar, rtol=1e-4, atol=1e-5)
    _close(mean, emean)
    with pytest.raises((RuntimeError, IndexError), match="non-zero size|numel"):
        _x(torch.empty(0, 3)).amax(0)
    with pytest.raises(RuntimeError, match="floating point"):
        _x(i).mean()


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_family(dtype):
    gen = torch.Generator().manual_seed(6)
    a, b = _rand((17, 9), dtype, gen), _rand((9, 13), dtype, gen)
    tol = dict(rtol=1e-2, atol=2e-2) if dtype in (torch.float16, torch.bfloat16) else dict(rtol=1e-5, atol=1e-5)
    _close(_x(a) @ _x(b), a @ b, **tol)
    _close(_x(b).t() @ _x(a).t(), b.t() @ a.t(), **tol)  # transposed (column-major) operands
    _close(_x(a)[:, ::2] @ _x(b)[::2], a[:, ::2] @ b[::2], **tol)  # strided: copied to dense first
    bias = _rand((13,), dtype, gen)
    _close(torch.addmm(_x(bias), _x(a), _x(b), beta=0.5, alpha=2), torch.addmm(bias, a, b, beta=0.5, alpha=2), **tol)
    _close(F.linear(_x(a), _x(b.t()), _x(bias)), F.linear(a, b.t(), bias), **tol)
    ba, bb = _rand((3, 5, 4), dtype, gen), _rand((3, 4, 6), dtype, gen)
    _close(torch.bmm(_x(ba), _x(bb)), torch.bmm(ba, bb), **tol)
    c = _rand((3, 5, 6), dtype, gen)
    _close(torch.baddbmm(_x(c), _x(ba), _x(bb), alpha=0.5), torch.baddbmm(c, ba, bb, alpha=0.5), **tol)
    _close(_x(ba) @ _x(bb[0]), ba @ bb[0], **tol)  # matmul broadcasting
    v = _rand((9,), dtype, gen)
    _close(_x(a) @ _x(v), a @ v, **tol)
    _close(torch.dot(_x(v), _x(v)), torch.dot(v, v), **tol)
    _close(_x(a[:0]) @ _x(b), a[:0] @ b)  # empty
    _close(torch.mm(_x(a[:, :0]), _x(b[:0])), torch.mm(a[:, :0], b[:0]))  # k == 0: zeros


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_tiles_and_small_m(dtype):
    """Products big enough to be cut into tiles of rows or of columns (ops/matmul.cc,
    TileGemm), in batches, and the small-M path of linear layers (x @ W^T with <= 8 rows of x:
    VecKernels::dot_rows for float32/bfloat16) with odd sizes, strided W and a bias."""
    gen = torch.Generator().manual_seed(16)
    low = dtype in (torch.float16, torch.bfloat16)

    def check(got, a, b, bias=None, beta=1.0, alpha=1.0):
        ref = a.double() @ b.double() * alpha
        if bias is not None:
            ref = ref + beta * bias.double()
        scale = (a.double().abs() @ b.double().abs()).max().item() * abs(alpha) + 1
        tol = (2e-2 if low else 1e-5) * scale
        torch.testing.assert_close(got.cpu().double(), ref, rtol=0, atol=tol)

    for m, k, n in [(300, 64, 700), (700, 64, 300), (129, 33, 257)]:  # column tiles, row tiles, odd tails
        a, b = _rand((m, k), dtype, gen), _rand((k, n), dtype, gen)
        check(_x(a) @ _x(b), a, b)
        check(_x(b).t() @ _x(a).t(), b.t(), a.t())  # transposed operands
    ba, bb = _rand((3, 200, 40), dtype, gen), _rand((3, 40, 500), dtype, gen)
    torch.testing.assert_close(torch.bmm(_x(ba), _x(bb)).cpu().double(), torch.bmm(ba.double(), bb.double()),
                               rtol=0, atol=(2e-2 if low else 1e-5) * 40 * 4 + 1e-3)
    for m in [1, 3, 8, 9]:  # 9: past the small-M path
        for k, n in [(256, 1408), (37, 5), (1000, 33)]:
            x, w, bias = _rand((m, k), dtype, gen), _rand((n, k), dtype, gen), _rand((n,), dtype, gen)
            check(F.linear(_x(x), _x(w)), x, w.t())
            check(F.linear(_x(x), _x(w), _x(bias)), x, w.t(), bias)
            check(torch.addmm(_x(bias), _x(x), _x(w).t(), beta=0.5, alpha=-2), x, w.t(), bias, 0.5, -2)
            wide = _rand((n, k + 7), dtype, gen)  # W's rows strided (a slice of a wider weight)
            check(F.linear(_x(x), _x(wide)[:, :k]), x, wide[:, :k].t())
            out = _x(torch.full((m, n), float("nan"), dtype=dtype))  # beta = 0 ignores what out held
            torch.mm(_x(x), _x(w).t(), out=out)
            check(out, x, w.t())


def test_matmul_errors_are_clear():
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        _x(torch.randn(2, 3)) @ _x(torch.randn(4, 2))
    with pytest.raises(RuntimeError, match="same dtype|dtype"):
        torch.mm(_x(torch.randn(2, 3)), _x(torch.randn(3, 2).double()))


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_layer_norm_and_their_gradients(dtype):
    gen = torch.Generator().manual_seed(7)
    x = _rand((4, 6, 5), dtype, gen)
    for dim in [0, 1, -1]:
        _close(torch.softmax(_x(x), dim), torch.softmax(x, dim))
        _close(torch.log_softmax(_x(x), dim), torch.log_softmax(x, dim))
    if dtype == torch.float16:
        _close(torch.softmax(_x(x), -1, dtype=torch.float32), torch.softmax(x, -1, dtype=torch.float32))
    w, b = _rand((5,), dtype, gen), _rand((5,), dtype, gen)
    ref = torch.float64 if dtype == torch.float64 else torch.float32  # what the device accumulates in
    xr, wr, br = x.to(ref), w.to(ref), b.to(ref)
    _close(F.layer_norm(_x(x), (5,), _x(w), _x(b)), F.layer_norm(xr, (5,), wr, br).to(dtype))
    _close(F.rms_norm(_x(x), (5,), _x(w)), F.rms_norm(xr, (5,), wr).to(dtype),
           rtol=_tol(dtype)["rtol"] * 2, atol=_tol(dtype)["atol"] * 2)
    if dtype in (torch.float32, torch.float64):
        for fn in [lambda t, *p: torch.softmax(t, -1), lambda t, *p: torch.log_softmax(t, 1),
                   lambda t, w, b: F.layer_norm(t, (6, 5), w.expand(6, 5), b.expand(6, 5)),
                   lambda t, w, b: F.rms_norm(t, (5,), w)]:
            ins = [x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()]
            xins = [_x(t).detach().requires_grad_() for t in ins]
            g = _rand((4, 6, 5), dtype, gen)
            (fn(*ins) * g).sum().backward()
            (fn(*xins) * _x(g)).sum().backward()
            for cpu_t, x_t in zip(ins, xins):
                if cpu_t.grad is None:
                    assert x_t.grad is None
                else:
                    _close(x_t.grad, cpu_t.grad, rtol=1e-4, atol=1e-5)


def test_activation_gradients_match_cpu():
    gen = torch.Generator().manual_seed(8)
    x = _rand((5, 7), torch.float64, gen, -3, 3)
    for fn in [torch.relu, torch.sigmoid, torch.tanh, F.silu, F.gelu, lambda t: F.gelu(t, approximate="tanh"),
               torch.exp, lambda t: t.pow(3), lambda t: t.clamp(-1, 1), torch.abs]:
        a = x.clone().requires_grad_()
        b = _x(x).requires_grad_()
        fn(a).sum().backward()
        fn(b).sum().backward()
        _close(b.grad, a.grad, rtol=1e-7, atol=1e-7)


def test_nll_loss_cross_entropy_dropout_embedding():
    gen = torch.Generator().manual_seed(9)
    logits = _rand((6, 5), torch.float32, gen)
    target = torch.tensor([0, 4, 2, 2, 1, 3])
    weight = torch.rand(5, generator=gen)
    for kw in [{}, {"reduction": "sum"}, {"reduction": "none"}, {"weight": weight}, {"ignore_index": 2}]:
        xkw = {k: (_x(v) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
        a = logits.clone().requires_grad_()
        b = _x(logits).requires_grad_()
        la, lb = F.cross_entropy(a, target, **kw), F.cross_entropy(b, _x(target), **xkw)
        _close(lb, la)
        la.sum().backward()
        lb.sum().backward()
        _close(b.grad, a.grad)
    emb = _rand((10, 4), torch.float32, gen)
    idx = torch.tensor([[1, 3, 3], [0, 9, 1]])
    a, b = emb.clone().requires_grad_(), _x(emb).requires_grad_()
    F.embedding(idx, a, padding_idx=0).pow(2).sum().backward()
    F.embedding(_x(idx), b, padding_idx=0).pow(2).sum().backward()
    _close(b.grad, a.grad)
    x = _x(torch.ones(1000, 100))
    y = F.dropout(x, 0.3, training=True)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.7) < 0.01, kept
    yc = y.cpu()
    assert torch.allclose(yc[yc != 0], torch.tensor(1 / 0.7))
    _close(F.dropout(x, 0.3, training=False), torch.ones(1000, 100))


def test_bad_target_faults_the_kernel_not_the_process():
    logits = _x(torch.randn(2, 3))
    with pytest.raises((RuntimeError, ValueError, IndexError), match="out of bounds"):
        F.nll_loss(logits, _x(torch.tensor([0, 7]))).item()
    torch.xxnpu.synchronize()  # the sticky error was reported; the device is usable again
    _close(_x(torch.ones(2)) + 1, torch.full((2,), 2.0))


def test_sdpa_forward_and_backward_native():
    gen = torch.Generator().manual_seed(10)
    q, k, v = (_rand((2, 3, 5, 8), torch.float32, gen) for _ in range(3))
    for kw in [{}, {"is_causal": True}]:
        ins = [t.clone().requires_grad_() for t in (q, k, v)]
        xins = [_x(t).requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*ins, **kw)
        xout = F.scaled_dot_product_attention(*xins, **kw)
        _close(xout, out, rtol=1e-5, atol=1e-5)
        out.sum().backward()
        xout.sum().backward()
        for a, b in zip(ins, xins):
            _close(b.grad, a.grad, rtol=1e-4, atol=1e-5)


def test_mlp_trains_like_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 3))
    xmodel = torch.nn.Sequential(*[m for m in __import__("copy").deepcopy(model)]).to("xxnpu")
    data, labels = torch.randn(32, 8), torch.randint(0, 3, (32,))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xopt = torch.optim.SGD(xmodel.parameters(), lr=0.1, momentum=0.9, foreach=False)
    for _ in range(5):
        for m, o, d, l in [(model, opt, data, labels), (xmodel, xopt, _x(data), _x(labels))]:
            o.zero_grad()
            F.cross_entropy(m(d), l).backward()
            o.step()
    for p, xp in zip(model.parameters(), xmodel.parameters()):
        _close(xp.detach(), p.detach(), rtol=1e-4, atol=1e-5)


def test_indexing_and_data_movement_ops():
    gen = torch.Generator().manual_seed(11)
    x = _rand((5, 6, 4), torch.float32, gen)
    xx = _x(x)
    idx = torch.tensor([4, 0, 0, -1])
    _close(torch.index_select(xx, 1, _x(idx.abs())), torch.index_select(x, 1, idx.abs()))
    _close(xx[_x(idx)], x[idx])  # advanced indexing, negative index
    _close(xx[:, _x(idx), 1:3], x[:, idx, 1:3])
    _close(xx[_x(idx[:2]), :, _x(idx[2:])], x[idx[:2], :, idx[2:]])  # non-adjacent: B goes first
    mask = x > 0
    _close(xx[_x(mask)], x[mask])
    _close(torch.masked_select(xx, _x(mask[0])), torch.masked_select(x, mask[0]))
    _close(torch.nonzero(_x(mask)), torch.nonzero(mask))
    g = torch.randint(0, 6, (5, 3, 4), generator=gen)
    _close(torch.gather(xx, 1, _x(g)), torch.gather(x, 1, g))
    src = _rand((5, 3, 4), torch.float32, gen)
    _close(torch.scatter(xx, 1, _x(g), _x(src)), torch.scatter(x, 1, g, src))
    _close(torch.scatter_add(xx, 1, _x(g), _x(src)), torch.scatter_add(x, 1, g, src), rtol=1e-6, atol=1e-6)
    _close(torch.scatter(xx, 1, _x(g), 2.5), torch.scatter(x, 1, g, 2.5))
    y, xy = x.clone(), xx.clone()
    y[idx] = 1.0
    xy[_x(idx)] = 1.0
    _close(xy, y)
    y.index_put_((idx,), torch.ones(6, 4), accumulate=True)
    xy.index_put_((_x(idx),), _x(torch.ones(6, 4)), accumulate=True)
    _close(xy, y)
    _close(torch.cat([xx, xx[:2]], 0), torch.cat([x, x[:2]], 0))
    _close(torch.cat([xx.half(), xx], -1), torch.cat([x.half(), x], -1))  # promotes
    _close(torch.stack([xx, xx], 1), torch.stack([x, x], 1))
    _close(torch.tril(xx, -1), torch.tril(x, -1))
    _close(torch.triu(xx, 2), torch.triu(x, 2))
    _close(torch.arange(3, 17, 2, device="xxnpu"), torch.arange(3, 17, 2))
    _close(torch.arange(0.5, 3.0, 0.25, device="xxnpu"), torch.arange(0.5, 3.0, 0.25))
    _close(torch.cumsum(xx, 1), torch.cumsum(x, 1), rtol=1e-5, atol=1e-5)
    _close(torch.cumsum(_x(g), 0), torch.cumsum(g, 0))
    v, i = torch.sort(xx, dim=1, descending=True, stable=True)
    ev, ei = torch.sort(x, dim=1, descending=True, stable=True)
    _close(v, ev)
    _close(i, ei)
    v, i = torch.topk(xx, 3, dim=-1)
    ev, ei = torch.topk(x, 3, dim=-1)
    _close(v, ev)
    _close(i, ei)
    _close(torch.argsort(xx, 0), torch.argsort(x, 0))
    with pytest.raises(Exception, match="out of bounds"):
        torch.index_select(xx, 0, _x(torch.tensor([9]))).cpu()
    torch.xxnpu.synchronize()


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
def test_index_add_matches_cpu(dtype):
    """index_add (index_select's backward): repeated indices, every dim, alpha, in place,
    out=, a non-contiguous self; the sum does not depend on the compute threads."""
    gen = torch.Generator().manual_seed(12)
    x = _rand((5, 6, 300), dtype, gen)
    for dim in range(3):
        idx = torch.tensor([4, 0, 0, 2, 4, 4])[: x.size(dim)] % x.size(dim)
        shape = list(x.shape)
        shape[dim] = idx.numel()
        src = _rand(shape, dtype, gen)
        alpha = 2 if dtype in (torch.int64, torch.int32) else 0.5
        tol = dict(rtol=1e-2, atol=3e-2) if dtype in (torch.float16, torch.bfloat16) else {}
        _close(torch.index_add(_x(x), dim, _x(idx), _x(src), alpha=alpha),
               torch.index_add(x, dim, idx, src, alpha=alpha), dtype, **tol)
        y, xy = x.clone(), _x(x)
        y.index_add_(dim, idx.int(), src)
        xy.index_add_(dim, _x(idx.int()), _x(src))
        _close(xy, y, dtype, **tol)
    out = _x(torch.zeros(6, 5, dtype=dtype)).t()  # non-contiguous out
    torch.index_add(_x(x[:, :, 0]), 0, _x(torch.tensor([1, 1])), _x(x[:2, :, 1]), out=out)
    _close(out, torch.index_add(x[:, :, 0], 0, torch.tensor([1, 1]), x[:2, :, 1]), dtype, **tol)


def test_hand_written_kernels_check_devices_with_one_message():
    """Every hand-written kernel checks devices through one function with CUDA's message,
    naming the argument and the op (reductions' out= included)."""
    x = _x(torch.ones(4, 3))
    same = r"Expected all tensors to be on the same device, but found at least two devices, xxnpu:0 and cpu! "
    with pytest.raises(RuntimeError, match=same + r"\(when checking argument for argument out in method xxnpu::sum\)"):
        torch.sum(x, 0, out=torch.empty(3))
    with pytest.raises(RuntimeError, match=same + r"\(when checking argument for argument out in method index_add\)"):
        torch.index_add(x, 0, _x(torch.tensor([0])), _x(torch.ones(1, 3)), out=torch.empty(4, 3))
    out = _x(torch.empty(3))
    torch.sum(x, 0, out=out)  # the same call on one device works
    torch.testing.assert_close(out.cpu(), torch.full((3,), 4.0))


def test_index_add_bad_input():
    x = torch.zeros(4, 3, device="xxnpu")
    with pytest.raises(RuntimeError, match=r"Number of indices \(2\) should be equal to source.size\(dim\)"):
        x.index_add_(0, torch.tensor([0, 1], device="xxnpu"), torch.ones(3, 3, device="xxnpu"))
    with pytest.raises(RuntimeError, match=r"self \(Float\) and source \(Double\) must have the same scalar type"):
        x.index_add_(0, torch.tensor([0], device="xxnpu"), torch.ones(1, 3, device="xxnpu", dtype=torch.float64))
    with pytest.raises(RuntimeError, match=r"same device, but got \(self\) xxnpu:0, \(index\) cpu"):
        x.index_add_(0, torch.tensor([0]), torch.ones(1, 3, device="xxnpu"))
    with pytest.raises(RuntimeError, match="xxnpu:0 and cpu"):  # out= reaches our kernel's own check
        torch.index_add(x, 0, torch.tensor([0], device="xxnpu"), torch.ones(1, 3, device="xxnpu"), out=torch.empty(4, 3))
    # An index outside the dimension fails the kernel; the error surfaces at the next sync.
    with pytest.raises(Exception, match="index 4 is out of range for dimension size 4"):
        x.index_add_(0, torch.tensor([4], device="xxnpu"), torch.ones(1, 3, device="xxnpu")).cpu()
        torch.xxnpu.synchronize()
    torch.xxnpu.synchronize()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_uses_cuda_op_lists(dtype):
    a, b = _x(torch.randn(8, 8)), _x(torch.randn(8, 8))
    with torch.autocast("xxnpu", dtype=dtype):
        mm = a @ b
        lin = F.linear(a, b)
        soft = torch.softmax(mm, -1)  # fp32 list
        s = mm.sum()  # fp32_set_opt_dtype
        added = torch.addcmul(a, mm, b)  # promote: widest input
    assert mm.dtype == dtype and lin.dtype == dtype
    assert soft.dtype == torch.float32
    assert s.dtype == torch.float32
    assert added.dtype == torch.float32
    _close(mm.float(), (a.cpu() @ b.cpu()).to(dtype).float(), rtol=2e-2, atol=5e-2)
    assert (a @ b).dtype == torch.float32  # outside the region


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW"])
def test_optimizers_foreach_path_runs_natively(opt_name):
    """Adam/AdamW/SGD take their foreach path on xxnpu (as on CUDA); each _foreach_* op is
    a native multi-tensor kernel (testing/ops/multi_tensor_test.py), with no CPU fallback."""
    torch.manual_seed(1)
    params = [torch.randn(7, 3), torch.randn(3)]
    grads = [torch.randn(7, 3), torch.randn(3)]
    kwargs = {"lr": 0.05, "momentum": 0.9} if opt_name == "SGD" else {"lr": 0.05, "weight_decay": 0.01}
    results = []
    for device, foreach in [("cpu", False), ("xxnpu", True)]:
        ps = [p.clone().to(device).requires_grad_() for p in params]
        opt = getattr(torch.optim, opt_name)(ps, foreach=foreach, **kwargs)
        for _ in range(3):
            for p, g in zip(ps, grads):
                p.grad = g.to(device)
            opt.step()
        results.append(ps)
    for cpu_p, x_p in zip(*results):
        _close(x_p.detach(), cpu_p.detach(), rtol=1e-5, atol=1e-6)


def test_random_ops_and_sequences_run_on_the_device():
    torch.xxnpu.manual_seed(3)
    r = torch.randint(3, 9, (20000,), device="xxnpu")
    rc = r.cpu()
    assert r.dtype == torch.int64 and rc.min() == 3 and rc.max() == 8
    counts = torch.bincount(rc - 3)
    assert counts.min() > 20000 / 6 * 0.85, counts  # roughly uniform
    b = torch.empty(20000, device="xxnpu").bernoulli_(0.25)
    assert abs(b.mean().item() - 0.25) < 0.02
    torch.xxnpu.manual_seed(3)
    again = torch.randint(3, 9, (20000,), device="xxnpu")
    assert torch.equal(again.cpu(), rc)  # seeded: reproducible
    _close(torch.linspace(-1, 2, 7, device="xxnpu"), torch.linspace(-1, 2, 7))
    _close(torch.linspace(-3, 1, 1, device="xxnpu"), torch.linspace(-3, 1, 1))  # one step: the start
    _close(torch.linspace(0, 10, 5, device="xxnpu", dtype=torch.int64), torch.linspace(0, 10, 5, dtype=torch.int64))
    # The CPU's arithmetic exactly: the ends converted to the dtype first (4.3 is 4 for
    # integers), the step in double for integers and in half/bfloat16 itself for those.
    for dtype in (torch.int64, torch.int8, torch.uint8, torch.float16, torch.bfloat16):
        for start, end in ((4.3, -3), (4.3, 0), (-2.0, 1)):
            if dtype == torch.uint8 and min(start, end) < 0:
                continue
            want = torch.linspace(start, end, 50, dtype=dtype)
            assert torch.equal(torch.linspace(start, end, 50, dtype=dtype, device="xxnpu").cpu(), want), (dtype, start)
    reps = torch.tensor([2, 0, 3])
    _close(torch.repeat_interleave(_x(reps)), torch.repeat_interleave(reps))
    x = torch.arange(6.0).view(3, 2)
    _close(torch.repeat_interleave(_x(x), _x(reps), dim=0), torch.repeat_interleave(x, reps, dim=0))
