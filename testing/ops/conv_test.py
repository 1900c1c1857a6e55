"""Convolutions on xxnpu (ops/conv_ops.cc: convolution_overrideable and its backward) against
the CPU: conv1d/2d/3d and conv_transpose1d/2d/3d with strides, padding (also "same"),
dilation, groups and output padding; outputs and the gradients of input, weight and bias;
half/bfloat16 against a float64 reference (as accurate as the CPU, rounded once); nn.Conv2d
training steps; torch.compile; bad input; the kernels in the profiler. Nothing may fall
back to the CPU but integer GEMMs."""
import copy
import os
import tempfile

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="xxnpu_conv_test_"))

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from testlib import no_fallback  # noqa: E402

import torch_xxnpu  # noqa: E402,F401

DEV = "xxnpu"

# (name, function, input shape, weight shape, has bias, kwargs)
CASES = [
    ("conv1d", F.conv1d, (3, 4, 11), (8, 4, 3), True, dict(stride=2, padding=1)),
    ("conv1d_groups_dilation", F.conv1d, (2, 6, 13), (6, 2, 3), False, dict(groups=3, dilation=3)),
    ("conv2d", F.conv2d, (2, 3, 9, 8), (5, 3, 3, 3), True, dict(padding=1)),
    ("conv2d_mixed", F.conv2d, (2, 4, 9, 7), (6, 2, 3, 2), True,
     dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)),
    ("conv2d_same_even_kernel", F.conv2d, (1, 4, 7, 6), (5, 4, 4, 3), False, dict(padding="same")),
    ("conv2d_depthwise", F.conv2d, (2, 4, 6, 6), (8, 1, 3, 3), True, dict(groups=4, stride=2)),
    ("conv2d_1x1", F.conv2d, (2, 16, 5, 5), (8, 16, 1, 1), True, {}),
    ("conv3d", F.conv3d, (1, 2, 5, 6, 4), (3, 2, 2, 3, 2), True, dict(padding=1, dilation=(1, 2, 1))),
    ("conv_transpose1d", F.conv_transpose1d, (2, 3, 5), (3, 4, 3), True, dict(stride=3)),
    ("conv_transpose2d", F.conv_transpose2d, (2, 4, 5, 4), (4, 3, 3, 2), True,
     dict(stride=2, padding=1, output_padding=1, groups=2)),
    # output_padding >= stride, which torch allows below the dilation.
    ("conv_transpose2d_dilated", F.conv_transpose2d, (1, 2, 4, 5), (2, 3, 3, 3), False,
     dict(output_padding=1, dilation=2)),
    ("conv_transpose3d", F.conv_transpose3d, (1, 2, 3, 3, 2), (2, 2, 2, 2, 2), True, dict(stride=2, padding=1)),
]


LOW_CASES = [c for c in CASES if c[0] in ("conv1d", "conv2d_mixed", "conv_transpose2d", "conv_transpose3d")]


@pytest.fixture(autouse=True)
def _no_fallback():
    with no_fallback():
        yield


def _run(fn, dev, dtype, x, w, b, kwargs):
    """(output, gradients of the given tensors, whether all of them are contiguous)."""
    leaves = [t.detach().to(dev, dtype, copy=True).requires_grad_() for t in (x, w, b) if t is not None]
    y = fn(*leaves, **kwargs)
    torch.manual_seed(1)
    g = torch.randn(y.shape, dtype=torch.float64)
    y.backward(g.to(dev, dtype))
    contiguous = y.is_contiguous() and all(t.grad.is_contiguous() for t in leaves)
    return y.detach().cpu().double(), [t.grad.cpu().double() for t in leaves], contiguous


def _bias_size(fn, ws, kwargs):
    # An ordinary convolution's bias has O = weight.size(0) entries; a transposed one's
    # C_out = weight.size(1) * groups.
    return ws[1] * kwargs.get("groups", 1) if "transpose" in fn.__name__ else ws[0]


@pytest.mark.parametrize("name,fn,xs,ws,bias,kwargs", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_cpu_with_gradients(name, fn, xs, ws, bias, kwargs, dtype):
    torch.manual_seed(0)
    x, w = torch.randn(xs, dtype=torch.float64), torch.randn(ws, dtype=torch.float64)
    b = torch.randn(_bias_size(fn, ws, kwargs), dtype=torch.float64) if bias else None
    want_y, want_g, _ = _run(fn, "cpu", dtype, x, w, b, kwargs)
    got_y, got_g, contiguous = _run(fn, DEV, dtype, x, w, b, kwargs)
    # What torch's fake tensors promise for an overrideable convolution (torch.compile).
    assert contiguous, "the output and the gradients must be contiguous"
    tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got_y, want_y, **tol)
    assert len(got_g) == len(want_g)
    for got, want in zip(got_g, want_g):
        torch.testing.assert_close(got, want, **tol)


@pytest.mark.parametrize("name,fn,xs,ws,bias,kwargs", LOW_CASES, ids=[c[0] for c in LOW_CASES])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_is_as_accurate_as_the_cpu(name, fn, xs, ws, bias, kwargs, dtype):
    # Against float64 on the same rounded values: xxnpu's error may not exceed the CPU's
    # by more than one rounding of the result (the col2im of a transposed convolution sums
    # in float32; per-offset rounding in the low dtype was 8x worse than the CPU here).
    torch.manual_seed(0)
    x = torch.randn(xs, dtype=torch.float64).to(dtype).double()
    w = torch.randn(ws, dtype=torch.float64).to(dtype).double()
    b = torch.randn(_bias_size(fn, ws, kwargs), dtype=torch.float64).to(dtype).double() if bias else None
    ref_y, ref_g, _ = _run(fn, "cpu", torch.float64, x, w, b, kwargs)
    cpu_y, cpu_g, _ = _run(fn, "cpu", dtype, x, w, b, kwargs)
    dev_y, dev_g, _ = _run(fn, DEV, dtype, x, w, b, kwargs)
    eps = torch.finfo(dtype).eps
    for ref, cpu, dev in zip([ref_y] + ref_g, [cpu_y] + cpu_g, [dev_y] + dev_g):
        scale = ref.abs() + 1
        cpu_err = ((cpu - ref).abs() / scale).max().item()
        dev_err = ((dev - ref).abs() / scale).max().item()
        assert dev_err <= cpu_err + eps, (dev_err, cpu_err)


def test_integer_convolution_is_exact():
    # Integer GEMMs run on the CPU fallback (as xxnpu's mm does); the result is exact and
    # the fallback is counted.
    x = torch.randint(-5, 5, (2, 3, 6, 6))
    w = torch.randint(-3, 3, (4, 3, 3, 3))
    want = F.conv2d(x, w, stride=2, padding=1)
    got = F.conv2d(x.to(DEV), w.to(DEV), stride=2, padding=1)
    assert got.device.type == DEV and torch.equal(got.cpu(), want)
    assert set(torch_xxnpu.ops.fallback_counts()) == {"aten::bmm.out"}
    torch_xxnpu.ops.reset_fallback_counts()  # expected here, not a failure of the fixture


def test_conv_module_trains_like_the_cpu():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 3, stride=2, groups=2),
                        nn.ConvTranspose2d(4, 3, 2, stride=2))
    dev = copy.deepcopy(cpu).to(DEV)
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.05)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.05)
    x = torch.randn(4, 3, 10, 10)
    for _ in range(5):
        for model, opt, inp in ((cpu, opt_c, x), (dev, opt_d, x.to(DEV))):
            opt.zero_grad()
            loss = model(inp).square().mean()
            loss.backward()
            opt.step()
    for p, q in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5)


def test_compiled_convolution_matches_cpu():
    torch._dynamo.reset()
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.Conv2d(6, 2, 1)).eval()
    x = torch.randn(2, 3, 8, 8)
    want = m(x)
    got = torch.compile(m.to(DEV))(x.to(DEV))
    torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-4, atol=1e-5)


def test_bad_input_raises_naming_what_was_expected():
    x = torch.randn(1, 3, 5, 5, device=DEV)
    with pytest.raises(RuntimeError, match="channels"):
        F.conv2d(x, torch.randn(4, 2, 3, 3, device=DEV))
    with pytest.raises(RuntimeError, match="[Kk]ernel size"):
        F.conv2d(torch.randn(1, 3, 2, 2, device=DEV), torch.randn(4, 3, 3, 3, device=DEV))
    with pytest.raises(RuntimeError, match="device|xxnpu|cpu"):
        F.conv2d(x, torch.randn(4, 3, 3, 3))
    with pytest.raises(RuntimeError, match="dtype|type"):
        F.conv2d(x, torch.randn(4, 3, 3, 3, device=DEV, dtype=torch.float64))
    # The device is usable afterwards.
    assert F.conv2d(x, torch.ones(1, 3, 1, 1, device=DEV)).shape == (1, 1, 5, 5)


def test_profiler_shows_the_convolution_and_its_device_kernels():
    x = torch.randn(2, 3, 8, 8, device=DEV)
    w = torch.randn(4, 3, 3, 3, device=DEV)
    F.conv2d(x, w, padding=1)
    torch.xxnpu.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        F.conv2d(x, w, padding=1)
        torch.xxnpu.synchronize()
    rows = {e.key: e for e in prof.key_averages()}
    assert "aten::convolution" in rows
    # The GEMM is a device kernel whose time is attributed to the convolution.
    assert rows["aten::convolution"].device_time_total > 0
    assert any(k.startswith("xxnpu::") and "mm" in k for k in rows), sorted(rows)
