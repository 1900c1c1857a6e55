"""Control flow under torch.compile on xxnpu (docs/compile.md, "Control flow"): torch.cond,
while_loop and nested_compile_region (invoke_subgraph) compiled by Inductor, their
subgraphs' kernels launched as xxnpu device kernels, against CPU eager, in the Python
wrapper and under cpp_wrapper=True, forward and backward.

Inductor writes each subgraph with a wrapper of its own; before torch_xxnpu gave the
subgraphs its wrapper class, every one of these failed to compile ("device xxnpu nyi").
Runs with XXNPU_STRICT_MEMORY=1 (BUILD): a kernel that touched device memory from the host
thread would fault.
"""
import os
import tempfile

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="xxnpu_control_flow_test_")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch_xxnpu  # noqa: E402
from torch._higher_order_ops.while_loop import while_loop  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import torch._dynamo  # noqa: E402

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
WRAPPERS = [pytest.param({}, id="python_wrapper"), pytest.param({"cpp_wrapper": True}, id="cpp_wrapper")]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    torch_xxnpu.ops.reset_fallback_counts()
    yield
    torch.xxnpu.synchronize()


def _kernels(prof):
    """Names of the device kernels of a capture, in order (copies left out)."""
    return [
        e.name for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.PrivateUse1 and not e.name.startswith(("Memcpy", "Memset"))
    ]


def _profiled(fn, *args):
    with profile(activities=ACTIVITIES) as prof:
        out = fn(*args)
        torch.xxnpu.synchronize()
    return out, _kernels(prof)


def _branchy(p, x):
    # The predicate is a device tensor: the wrapper reads it back (one copy to the host) to
    # choose the branch, as on CUDA.
    return torch.cond(p.sum() > 0, lambda x: x.sin() + 1, lambda x: x.cos() * 2, (x,))


@pytest.mark.parametrize("options", WRAPPERS)
def test_cond_runs_only_the_taken_branch_as_device_kernels(options):
    compiled = torch.compile(_branchy, options=options)
    x = torch.randn(8, 8)
    compiled(torch.ones(4, device="xxnpu"), x.to("xxnpu"))  # compiles both branches
    for sign, taken, skipped in ((1.0, "sin", "cos"), (-1.0, "cos", "sin")):
        p = torch.full((4,), sign)
        out, kernels = _profiled(compiled, p.to("xxnpu"), x.to("xxnpu"))
        assert out.device.type == "xxnpu"
        torch.testing.assert_close(out.cpu(), _branchy(p, x), rtol=1e-5, atol=1e-6)
        # The predicate's kernel, then the taken branch's generated kernel, on the device.
        assert any(taken in k for k in kernels), kernels
        assert not any(skipped in k for k in kernels), kernels
        assert all(k.startswith("cpp_fused_") for k in kernels), kernels
    assert torch_xxnpu.ops.fallback_counts() == {}


def _doubling_loop(n, x):
    def cond_fn(i, x):
        return i < n

    def body_fn(i, x):
        return i + 1, x * 2 + 1

    return while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64, device=x.device), x))


@pytest.mark.parametrize("options", WRAPPERS)
def test_while_loop_runs_its_body_once_per_iteration_on_the_device(options):
    compiled = torch.compile(_doubling_loop, options=options)
    x = torch.randn(16)
    compiled(torch.tensor(1, device="xxnpu"), x.to("xxnpu"))
    for n in (0, 3, 5):
        (count, out), kernels = _profiled(compiled, torch.tensor(n, device="xxnpu"), x.to("xxnpu"))
        want_count, want = _doubling_loop(torch.tensor(n), x)
        assert out.device.type == "xxnpu" and int(count) == n
        torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-5)
        # The body's kernel (x * 2 + 1 and i + 1, fused) once per iteration.
        body = [k for k in kernels if "mul" in k]
        assert len(body) == n, kernels
    assert torch_xxnpu.ops.fallback_counts() == {}


def _branchy_loss(p, x, w):
    return torch.cond(p.sum() > 0, lambda x, w: (x @ w).relu(), lambda x, w: (x @ w).sin(), (x, w)).sum()


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_backward_matches_cpu(sign):
    p, x, w = torch.full((3,), sign), torch.randn(4, 8), torch.randn(8, 8)
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    _branchy_loss(p, xc, wc).backward()
    xd, wd = x.to("xxnpu").requires_grad_(), w.to("xxnpu").requires_grad_()
    loss = torch.compile(_branchy_loss)(p.to("xxnpu"), xd, wd)
    loss.backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-5)


@torch.compiler.nested_compile_region
def _block(x, w):
    return (x @ w).relu() + 1


def _two_blocks(x, w):
    return _block(_block(x, w), w).sum()


def test_nested_compile_region_forward_and_backward_match_cpu():
    # The region is compiled once as a subgraph (invoke_subgraph) and called twice.
    x, w = torch.randn(4, 8), torch.randn(8, 8) / 3
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    want = _two_blocks(xc, wc)
    want.backward()
    xd, wd = x.to("xxnpu").requires_grad_(), w.to("xxnpu").requires_grad_()
    got, kernels = _profiled(torch.compile(_two_blocks), xd, wd)
    torch.testing.assert_close(got.cpu(), want.detach(), rtol=1e-4, atol=1e-4)
    assert kernels.count("xxnpu::mm") == 2, kernels  # the region's matmul, once per call
    got.backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, rtol=1e-4, atol=1e-4)
