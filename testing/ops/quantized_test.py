"""Quantized tensors on xxnpu (ops/quantized_ops.cc) against the CPU backend: per-tensor and
per-channel quantize (int_repr bit for bit), dequantize, the q_* accessors, empties, views,
clone, copies both ways, _make_per_*_quantized_tensor, fake_quantize_* forward and backward,
the int8 weight-only matmul (_weight_int8pack_mm), bad input raising as on the CPU, and no
CPU fallback on the way."""
import warnings

import pytest
import torch

from testlib import no_fallback

import torch_xxnpu  # noqa: F401  (registers the device)

QDTYPES = [torch.qint8, torch.quint8, torch.qint32]
warnings.filterwarnings("ignore", message=".*quantized tensor creation functions.*deprecated.*")


@pytest.fixture(autouse=True)
def _no_fallback():
    """Quantization is native: nothing here may run on the CPU fallback."""
    with no_fallback():
        yield


def _data(shape, seed, spread=3.0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(shape, generator=g) * 2 - 1) * spread
    # Exact half-way points, where round-half-even and round-half-away differ.
    x.view(-1)[: min(8, x.numel())] = torch.tensor([0.25, -0.25, 0.75, -0.75, 1.25, 0.05, -0.15, 2.55])[
        : min(8, x.numel())
    ]
    return x


def _same_q(qx, qc):
    assert qx.device.type == "xxnpu" and qc.device.type == "cpu"
    assert qx.dtype == qc.dtype and qx.shape == qc.shape and qx.qscheme() == qc.qscheme()
    assert torch.equal(qx.int_repr().cpu(), qc.int_repr()), "int_repr differs from the CPU"
    torch.testing.assert_close(qx.dequantize().cpu(), qc.dequantize(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", QDTYPES)
@pytest.mark.parametrize("scale,zero_point", [(0.1, 0), (0.05, 3), (0.5, -2), (0.02, 10), (1e-3, 0)])
def test_per_tensor_round_trip(dtype, scale, zero_point):
    if dtype == torch.quint8:
        zero_point = abs(zero_point) + 100
    x = _data((4, 33), seed=hash((str(dtype), scale)) % 1000)
    qc = torch.quantize_per_tensor(x, scale, zero_point, dtype)
    qx = torch.quantize_per_tensor(x.to("xxnpu"), scale, zero_point, dtype)
    _same_q(qx, qc)
    assert qx.q_scale() == qc.q_scale() and qx.q_zero_point() == qc.q_zero_point()
    assert qx.qscheme() == torch.per_tensor_affine
    assert qx.int_repr().dtype == qc.int_repr().dtype
    # Saturation at both ends.
    assert torch.equal(qx.int_repr().cpu(), qc.int_repr())


@pytest.mark.parametrize("dtype", QDTYPES)
def test_rounding_bit_for_bit_at_scale(dtype):
    """200k values per case, a fifth of them exactly half-way between two steps, odd and
    even zero points: the CPU rounds x / scale + zero_point half to even after adding the
    zero point (one FMA on its 8-bit per-tensor path); every int must match."""
    g = torch.Generator().manual_seed(7)
    cases = [(0.1, 3), (1.7, 5), (0.0213, -7), (3e-5, 4), (0.5, 1)]
    for scale, zp in cases:
        zp = zp + 120 if dtype == torch.quint8 else zp
        x = torch.randn(200_003, generator=g) * (50 if dtype == torch.qint32 else 10)
        x[:40_000] = (torch.randint(-300, 300, (40_000,), generator=g) + 0.5) * scale
        want = torch.quantize_per_tensor(x, scale, zp, dtype).int_repr()
        got = torch.quantize_per_tensor(x.to("xxnpu"), scale, zp, dtype).int_repr().cpu()
        assert torch.equal(got, want), (scale, zp, (got != want).sum().item())
    scales = torch.tensor([c[0] for c in cases], dtype=torch.float64)
    zps = torch.tensor([c[1] + (120 if dtype == torch.quint8 else 0) for c in cases])
    x = torch.randn(len(cases), 40_000, generator=g) * 10
    x[:, :8_000] = (torch.randint(-300, 300, (len(cases), 8_000), generator=g) + 0.5) * scales.float()[:, None]
    for axis, xa in ((0, x), (1, x.t())):
        want = torch.quantize_per_channel(xa, scales, zps, axis, dtype).int_repr()
        got = torch.quantize_per_channel(xa.to("xxnpu"), scales.to("xxnpu"), zps.to("xxnpu"), axis, dtype)
        assert torch.equal(got.int_repr().cpu(), want)


@pytest.mark.parametrize("dtype", QDTYPES)
def test_per_tensor_non_contiguous_and_tensor_qparams(dtype):
    x = _data((6, 10, 4), seed=3)
    xt = x.transpose(0, 2)[:, ::2]
    qc = torch.quantize_per_tensor(xt, 0.03, 1, dtype)
    qx = torch.quantize_per_tensor(xt.to("xxnpu"), 0.03, 1, dtype)
    _same_q(qx, qc)
    s, z = torch.tensor(0.07), torch.tensor(2)
    _same_q(torch.quantize_per_tensor(x.to("xxnpu"), s.to("xxnpu"), z.to("xxnpu"), dtype),
            torch.quantize_per_tensor(x, s, z, dtype))


@pytest.mark.parametrize("dtype", QDTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_per_channel_round_trip(dtype, axis):
    x = _data((3, 5, 7), seed=axis)
    c = x.shape[axis]
    scales = torch.linspace(0.01, 0.2, c, dtype=torch.float64)
    zps = torch.arange(c, dtype=torch.int64) - (0 if dtype == torch.quint8 else 2)
    if dtype == torch.quint8:
        zps = zps + 120
    qc = torch.quantize_per_channel(x, scales, zps, axis, dtype)
    qx = torch.quantize_per_channel(x.to("xxnpu"), scales.to("xxnpu"), zps.to("xxnpu"), axis, dtype)
    _same_q(qx, qc)
    assert qx.qscheme() == torch.per_channel_affine and qx.q_per_channel_axis() == axis
    assert torch.equal(qx.q_per_channel_scales().cpu(), qc.q_per_channel_scales())
    assert torch.equal(qx.q_per_channel_zero_points().cpu(), qc.q_per_channel_zero_points())
    assert qx.q_per_channel_scales().device.type == "xxnpu"
    # Non-contiguous input.
    xt = x.transpose(0, 2)
    qc = torch.quantize_per_channel(xt, scales, zps, 2 - axis, dtype)
    qx = torch.quantize_per_channel(xt.to("xxnpu"), scales.to("xxnpu"), zps.to("xxnpu"), 2 - axis, dtype)
    _same_q(qx, qc)


def test_per_channel_float_qparams():
    x = _data((4, 6), seed=9)
    scales = torch.tensor([0.1, 0.05, 0.2, 0.01])
    zps = torch.tensor([0.5, -1.25, 3.0, 0.0])
    qc = torch.quantize_per_channel(x, scales, zps, 0, torch.quint8)
    qx = torch.quantize_per_channel(x.to("xxnpu"), scales.to("xxnpu"), zps.to("xxnpu"), 0, torch.quint8)
    assert qx.qscheme() == torch.per_channel_affine_float_qparams
    _same_q(qx, qc)


@pytest.mark.parametrize("dtype", QDTYPES)
def test_cpu_and_to_device(dtype):
    x = _data((5, 8), seed=11)
    qx = torch.quantize_per_tensor(x.to("xxnpu"), 0.04, 2, dtype)
    back = qx.cpu()
    assert back.device.type == "cpu" and back.q_scale() == 0.04 and back.q_zero_point() == 2
    assert torch.equal(back.int_repr(), torch.quantize_per_tensor(x, 0.04, 2, dtype).int_repr())
    again = back.to("xxnpu")
    assert again.device.type == "xxnpu" and again.is_quantized
    _same_q(again, back)
    # Per channel: the parameters follow the tensor's device.
    scales, zps = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5], dtype=torch.float64), torch.tensor([0, 1, 2, 3, 4])
    qc = torch.quantize_per_channel(x, scales, zps, 0, dtype)
    qd = qc.to("xxnpu")
    assert qd.q_per_channel_scales().device.type == "xxnpu"
    _same_q(qd, qc)
    qb = qd.cpu()
    assert qb.q_per_channel_scales().device.type == "cpu"
    assert torch.equal(qb.int_repr(), qc.int_repr())
    torch.testing.assert_close(qb.dequantize(), qc.dequantize())


def test_clone_copy_and_views():
    x = _data((4, 6), seed=5)
    qc = torch.quantize_per_tensor(x, 0.05, 1, torch.qint8)
    qx = torch.quantize_per_tensor(x.to("xxnpu"), 0.05, 1, torch.qint8)
    _same_q(qx.clone(), qc.clone())
    _same_q(qx.t(), qc.t())
    _same_q(qx.t().contiguous(), qc.t().contiguous())
    _same_q(qx[1:3, ::2], qc[1:3, ::2])
    _same_q(qx.view(2, 12), qc.view(2, 12))
    _same_q(qx.unsqueeze(0).squeeze(0), qc)
    # copy_ quantized -> quantized takes the source's quantizer.
    dst = torch._empty_affine_quantized((4, 6), scale=0.5, zero_point=0, dtype=torch.qint8, device="xxnpu")
    dst.copy_(qx)
    assert dst.q_scale() == 0.05 and dst.q_zero_point() == 1
    _same_q(dst, qc)
    # copy_ float -> quantized quantizes with the destination's parameters.
    dst2 = torch._empty_affine_quantized((4, 6), scale=0.05, zero_point=1, dtype=torch.qint8, device="xxnpu")
    dst2.copy_(x.to("xxnpu"))
    _same_q(dst2, qc)
    # max/min over a dim (CUDA's qmax/qmin).
    vx, ix = torch.max(qx, 1)
    vc, ic = torch.max(qc, 1)
    _same_q(vx, vc)
    assert torch.equal(ix.cpu(), ic)


def test_empty_factories():
    e = torch._empty_affine_quantized((2, 3), scale=0.2, zero_point=4, dtype=torch.quint8, device="xxnpu")
    assert e.device.type == "xxnpu" and e.is_quantized and e.q_scale() == 0.2 and e.q_zero_point() == 4
    s, z = torch.tensor([0.1, 0.2]), torch.tensor([1, 2])
    p = torch._empty_per_channel_affine_quantized((2, 3), scales=s, zero_points=z, axis=0, dtype=torch.qint8,
                                                  device="xxnpu")
    assert p.device.type == "xxnpu" and p.q_per_channel_axis() == 0
    assert p.q_per_channel_scales().device.type == "xxnpu"
    # The Python binding fills `device` with the default device, on CUDA too: name it.
    q = torch.empty_quantized((5,), e, device="xxnpu")
    assert q.device.type == "xxnpu" and q.q_scale() == 0.2 and q.dtype == torch.quint8
    assert torch.empty_like(e).is_quantized
    if torch.xxnpu.device_count() > 1:
        d1 = torch._empty_affine_quantized((3,), scale=1.0, zero_point=0, dtype=torch.qint8, device="xxnpu:1")
        assert d1.device == torch.device("xxnpu:1")
        q1 = torch.quantize_per_tensor(torch.ones(3, device="xxnpu:1"), 0.5, 0, torch.qint8)
        assert q1.device == torch.device("xxnpu:1") and q1.int_repr().cpu().tolist() == [2, 2, 2]


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32])
def test_make_quantized_tensor(dtype):
    ints = torch.randint(0 if dtype == torch.uint8 else -100, 100, (3, 4), dtype=dtype)
    qc = torch._make_per_tensor_quantized_tensor(ints, 0.5, 3)
    qx = torch._make_per_tensor_quantized_tensor(ints.to("xxnpu"), 0.5, 3)
    _same_q(qx, qc)
    s, z = torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0, 1, 2])
    pc = torch._make_per_channel_quantized_tensor(ints, s, z, 0)
    px = torch._make_per_channel_quantized_tensor(ints.to("xxnpu"), s.to("xxnpu"), z.to("xxnpu"), 0)
    _same_q(px, pc)


def test_native_kernels_on_the_device_timeline():
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, device="xxnpu")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        q = torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)
        q.int_repr()
        q.dequantize()
        torch.xxnpu.synchronize()
    names = {e.name for e in prof.events()}
    for kernel in ("xxnpu::quantize_per_tensor", "xxnpu::int_repr", "xxnpu::dequantize_per_tensor"):
        assert kernel in names, (kernel, sorted(names))


# ---------------------------------------------------------------------------------------
# fake_quantize_*


FQ_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", FQ_DTYPES)
def test_fake_quantize_per_tensor(dtype):
    x = _data((7, 9), seed=2).to(dtype)
    xc = x.clone().requires_grad_()
    xx = x.to("xxnpu").requires_grad_()
    yc = torch.fake_quantize_per_tensor_affine(xc, 0.1, 3, -128, 127)
    yx = torch.fake_quantize_per_tensor_affine(xx, 0.1, 3, -128, 127)
    assert torch.equal(yx.detach().cpu(), yc.detach())
    g = torch.randn(7, 9).to(dtype)
    yc.backward(g)
    yx.backward(g.to("xxnpu"))
    assert torch.equal(xx.grad.cpu(), xc.grad)
    # Tensor qparams (read on the device).
    s, z = torch.tensor([0.05]), torch.tensor([2], dtype=torch.int32)
    assert torch.equal(
        torch.fake_quantize_per_tensor_affine(x.to("xxnpu"), s.to("xxnpu"), z.to("xxnpu"), 0, 15).cpu(),
        torch.fake_quantize_per_tensor_affine(x, s, z, 0, 15),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("zp_dtype", [torch.int32, torch.float32])
def test_fake_quantize_per_channel(dtype, zp_dtype):
    x = _data((4, 5, 6), seed=4).to(dtype)
    scale = torch.tensor([0.1, 0.05, 0.2, 0.3, 0.02])
    zp = torch.tensor([0, 3, -2, 5, 1]).to(zp_dtype)
    xc = x.clone().requires_grad_()
    xx = x.to("xxnpu").requires_grad_()
    yc = torch.fake_quantize_per_channel_affine(xc, scale, zp, 1, -128, 127)
    yx = torch.fake_quantize_per_channel_affine(xx, scale.to("xxnpu"), zp.to("xxnpu"), 1, -128, 127)
    assert torch.equal(yx.detach().cpu(), yc.detach())
    g = torch.randn(4, 5, 6).to(dtype)
    yc.backward(g)
    yx.backward(g.to("xxnpu"))
    assert torch.equal(xx.grad.cpu(), xc.grad)


def test_fake_quantize_learnable():
    x = _data((6, 4), seed=8)
    g = torch.randn(6, 4)
    outs = {}
    for dev in ("cpu", "xxnpu"):
        xv = x.to(dev, copy=True).requires_grad_()
        s = torch.tensor([0.1], device=dev, requires_grad=True)
        z = torch.tensor([2.0], device=dev, requires_grad=True)
        y = torch._fake_quantize_learnable_per_tensor_affine(xv, s, z, -8, 7, 1.0)
        y.backward(g.to(dev))
        sc = torch.tensor([0.1, 0.2, 0.05, 0.3], device=dev, requires_grad=True)
        zc = torch.tensor([0.0, 1.0, -1.0, 2.0], device=dev, requires_grad=True)
        xc = x.to(dev, copy=True).requires_grad_()
        yc = torch._fake_quantize_learnable_per_channel_affine(xc, sc, zc, 1, -8, 7, 1.0)
        yc.backward(g.to(dev))
        outs[dev] = [t.detach().cpu() for t in (y, xv.grad, s.grad, z.grad, yc, xc.grad, sc.grad, zc.grad)]
    for got, want in zip(outs["xxnpu"], outs["cpu"]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# Bad input raises as on the CPU.


def _raises_like_cpu(fn, x, *args):
    with pytest.raises(Exception) as cpu_err:
        fn(x, *args)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn(x.to("xxnpu"), *[a.to("xxnpu") if isinstance(a, torch.Tensor) else a for a in args])
    return str(cpu_err.value), str(dev_err.value)


def test_bad_input():
    x = torch.randn(3, 4)
    # A float zero point for a per-tensor quantization (the Python binding wants an int).
    _raises_like_cpu(torch.quantize_per_tensor, x, 0.1, 0.5, torch.qint8)
    # A non-quantized dtype.
    c, d = _raises_like_cpu(torch.quantize_per_tensor, x, 0.1, 0, torch.float32)
    assert "float" in c.lower() and "float" in d.lower()
    # Non-float input.
    c, d = _raises_like_cpu(torch.quantize_per_tensor, x.to(torch.int32), 0.1, 0, torch.qint8)
    assert c == d
    # Zero point out of range.
    c, d = _raises_like_cpu(torch.quantize_per_tensor, x, 0.1, 300, torch.qint8)
    assert c == d
    # Per channel: axis out of range, wrong number of scales, zero point out of range.
    s, z = torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0, 0, 0])
    c, d = _raises_like_cpu(torch.quantize_per_channel, x, s, z, 2, torch.qint8)
    assert c == d and "axis" in c
    c, d = _raises_like_cpu(torch.quantize_per_channel, x, s, z, 1, torch.qint8)
    assert c == d
    c, d = _raises_like_cpu(torch.quantize_per_channel, x, s, torch.tensor([0, 300, 0]), 0, torch.qint8)
    assert "above upper bound" in c and "above upper bound" in d
    # Sub-byte dtypes: CUDA does not have them either.
    with pytest.raises(RuntimeError, match="supports torch.qint8, torch.quint8 and torch.qint32"):
        torch.quantize_per_tensor(x.to("xxnpu"), 0.1, 0, torch.quint4x2)
    # Copying a quantized tensor into a float one.
    q = torch.quantize_per_tensor(x.to("xxnpu"), 0.1, 0, torch.qint8)
    with pytest.raises(RuntimeError, match="Copying from quantized Tensor to non-quantized"):
        torch.empty(3, 4, device="xxnpu").copy_(q)
    # fake_quantize: zero point outside [quant_min, quant_max].
    c, d = _raises_like_cpu(torch.fake_quantize_per_tensor_affine, x, 0.1, 200, -128, 127)
    assert c == d
    # _make_per_tensor_quantized_tensor of a float tensor.
    _raises_like_cpu(torch._make_per_tensor_quantized_tensor, x, 0.1, 0)


# ---------------------------------------------------------------- _weight_int8pack_mm


def _int8_weight_case(dtype, m, k, n, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(dtype)
    b = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=g)
    scales = (torch.rand(n, generator=g) / 16 + 1e-3).to(dtype)
    # The exact product in float, rounded once. Not the CPU kernel: in torch 2.13 its
    # bfloat16 path reads past rows whose K is not a multiple of its vector (K = 63: wrong
    # values at N = 48, a segfault at M = 4, N = 200).
    exact = ((a.float() @ b.float().t()) * scales.float()).to(dtype)
    return a, b, scales, exact


INT8_TOL = {torch.float32: (1e-5, 1e-4), torch.bfloat16: (1.6e-2, 1e-1), torch.float16: (1e-3, 1e-2)}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m", [1, 4, 8, 9, 37])  # 8 rows and below: the dot-rows path; above: the BLAS
@pytest.mark.parametrize("k,n", [(63, 200), (256, 48), (64, 1)])
def test_weight_int8pack_mm_matches_the_exact_product(dtype, m, k, n):
    a, b, scales, exact = _int8_weight_case(dtype, m, k, n, seed=m * 1000 + k + n)
    got = torch._weight_int8pack_mm(a.to("xxnpu"), b.to("xxnpu"), scales.to("xxnpu"))
    assert got.device.type == "xxnpu" and got.dtype == dtype and got.shape == (m, n)
    rtol, atol = INT8_TOL[dtype]
    torch.testing.assert_close(got.cpu(), exact, rtol=rtol, atol=atol)
    if dtype == torch.float32:  # where the CPU kernel is sound, it agrees too
        torch.testing.assert_close(got.cpu(), torch._weight_int8pack_mm(a, b, scales), rtol=1e-5, atol=1e-4)


def test_weight_int8pack_mm_strided_rows_empty_and_zero_k():
    # A's rows may be strided (a slice of a wider activation); M = 0, N = 0 and K = 0 work.
    g = torch.Generator().manual_seed(3)
    wide = torch.randn(6, 100, generator=g)
    b = torch.randint(-8, 8, (32, 64), dtype=torch.int8, generator=g)
    s = torch.rand(32, generator=g)
    got = torch._weight_int8pack_mm(wide.to("xxnpu")[:, :64], b.to("xxnpu"), s.to("xxnpu"))
    # float sums in another order than the CPU kernel's: float32 rounding apart
    torch.testing.assert_close(got.cpu(), torch._weight_int8pack_mm(wide[:, :64], b, s), rtol=1e-5, atol=1e-4)
    assert torch._weight_int8pack_mm(torch.randn(0, 64, device="xxnpu"), b.to("xxnpu"), s.to("xxnpu")).shape == (0, 32)
    z = torch._weight_int8pack_mm(torch.randn(3, 0, device="xxnpu"), torch.zeros(5, 0, dtype=torch.int8, device="xxnpu"),
                                  torch.rand(5, device="xxnpu"))
    assert torch.equal(z.cpu(), torch.zeros(3, 5))


def test_weight_int8pack_mm_is_one_device_kernel():
    from torch.profiler import ProfilerActivity, profile

    a, b, s, _ = _int8_weight_case(torch.float32, 4, 256, 96, seed=5)
    a, b, s = a.to("xxnpu"), b.to("xxnpu"), s.to("xxnpu")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch._weight_int8pack_mm(a, b, s)
        torch.xxnpu.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert kernels == ["xxnpu::weight_int8pack_mm"], kernels


@pytest.mark.parametrize("case,expect", [
    ("a_int", "expect A to be either 32-bit or 16-bit float tensor"),
    ("a_3d", "expect A to be 2D tensor"),
    ("a_cols_strided", "A must be contiguous on the last dimension"),
    ("b_float", "expect B to be int8 tensor"),
    ("b_strided", "expect B to be contiguous"),
    ("k_mismatch", r"expect B.size\(1\) == 32"),
    ("scales_len", "expect scales to be 1d tensor with size 48"),
    ("scales_dtype", "expected scalar type Float but found Double"),
])
def test_weight_int8pack_mm_refuses_what_the_cpu_refuses(case, expect):
    a = torch.randn(4, 64)
    b = torch.randint(-8, 8, (48, 64), dtype=torch.int8)
    s = torch.rand(48)
    args = {
        "a_int": (a.int(), b, s), "a_3d": (a[None], b, s), "a_cols_strided": (torch.randn(64, 4).t(), b, s),
        "b_float": (a, b.float(), s), "b_strided": (a, torch.randint(-8, 8, (64, 48), dtype=torch.int8).t(), s),
        "k_mismatch": (a[:, :32], b, s), "scales_len": (a, b, s[:16]), "scales_dtype": (a, b, s.double()),
    }[case]
    with pytest.raises(RuntimeError, match=expect):
        torch._weight_int8pack_mm(*args)  # the CPU's message...
    with pytest.raises(RuntimeError, match=expect):
        torch._weight_int8pack_mm(*(t.to("xxnpu") for t in args))  # ...is xxnpu's


def test_weight_int8pack_mm_refuses_operands_on_two_devices():
    b = torch.randint(-8, 8, (48, 64), dtype=torch.int8)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch._weight_int8pack_mm(torch.randn(4, 64, device="xxnpu"), b, torch.rand(48, device="xxnpu"))


def test_weight_int8pack_mm_passes_opcheck():
    # Schema, fake-tensor (meta) agreement and AOT dispatch, as torch.compile relies on.
    from torch.library import opcheck

    a = torch.randn(4, 64, device="xxnpu")
    w = torch.randint(-8, 8, (32, 64), dtype=torch.int8, device="xxnpu")
    results = opcheck(torch.ops.aten._weight_int8pack_mm.default, (a, w, torch.rand(32, device="xxnpu")))
    assert set(results.values()) == {"SUCCESS"}, results
