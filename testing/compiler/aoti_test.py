"""AOTInductor on xxnpu (docs/compile.md, "AOTInductor"): a package compiled with
torch._inductor.aoti_compile_and_package on xxnpu, loaded and run in Python
(aoti_load_package) and from C++ (//examples:aoti_run_package), against CPU eager, its
generated kernels running as xxnpu device kernels.

One package is compiled for the whole file (an AOTI compile is ~30 s here: the wrapper
includes torch's headers). Strict memory is on (BUILD): AOTI's own constant-copying path
would memcpy device memory on the host and fault, which is why the weights are user-managed.
"""
import os
import re
import subprocess
import tempfile

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="xxnpu_aoti_test_")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch_xxnpu  # noqa: E402,F401
from torch import nn  # noqa: E402
from torch._higher_order_ops.while_loop import while_loop  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

GENERATED = re.compile(r"cpp_fused_\w+$")
# An xxnpu package carries no weights (docs/compile.md says why).
NO_CONSTANTS_IN_SO = {"aot_inductor.package_constants_in_so": False}


class TinyMlp(nn.Module):
    """Weights and input from formulas that examples/aoti_run_package.cc repeats."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 8)
        with torch.no_grad():
            self.lin.weight.copy_(torch.arange(8 * 16, dtype=torch.float32).reshape(8, 16) * 0.01 - 0.5)
            self.lin.bias.copy_(torch.arange(8, dtype=torch.float32) * 0.1 - 0.3)

    def forward(self, x):
        # sort: an ATen fallback without a C shim, run by the package through torch's proxy
        # executor (the op by name), on xxnpu.
        return (self.lin(x).relu() * 2).sum(-1) + torch.sort(x, -1).values.amax(-1)


def _input():
    return (torch.arange(4 * 16, dtype=torch.float32).reshape(4, 16) * 0.05).sin()


@pytest.fixture(scope="module")
def package():
    model = TinyMlp().to("xxnpu")
    ep = torch.export.export(model, (_input().to("xxnpu"),))
    path = os.path.join(tempfile.mkdtemp(prefix="xxnpu_aoti_pkg_"), "tiny_mlp.pt2")
    return torch._inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=NO_CONSTANTS_IN_SO)


def _load(path):
    compiled = torch._inductor.aoti_load_package(path)
    weights = {k: v for k, v in TinyMlp().to("xxnpu").state_dict().items()}
    fqns = compiled.get_constant_fqns()
    assert fqns and set(fqns) <= set(weights), fqns
    compiled.load_constants({k: weights[k] for k in fqns}, check_full_update=True, user_managed=True)
    return compiled


def test_strict_memory_is_on():
    assert os.environ.get("XXNPU_STRICT_MEMORY") == "1"


def test_package_runs_on_xxnpu_and_matches_cpu(package):
    compiled = _load(package)
    out = compiled(_input().to("xxnpu"))
    assert out.device == torch.device("xxnpu", 0)
    torch.testing.assert_close(out.cpu(), TinyMlp()(_input()), rtol=1e-5, atol=1e-5)


def test_package_kernels_are_xxnpu_device_kernels(package):
    compiled = _load(package)
    x = _input().to("xxnpu")
    compiled(x)
    torch.xxnpu.synchronize()
    torch_xxnpu.ops.reset_fallback_counts()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        compiled(x)
        torch.xxnpu.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    # The epilogue (relu, * 2, sum) is a generated kernel, launched on the device under its
    # Inductor name; the matmul is the xxnpu addmm kernel and the sort xxnpu's, not the CPU
    # fallback.
    assert any(GENERATED.match(n) and "relu" in n for n in names), names
    assert any(n.startswith("xxnpu::") and "mm" in n for n in names), names
    assert any(n.startswith("xxnpu::") and "sort" in n for n in names), names
    assert torch_xxnpu.ops.fallback_counts() == {}


def test_package_runs_from_cpp(package):
    runner = os.environ["XXNPU_AOTI_RUN_PACKAGE"]
    result = subprocess.run([runner, package], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "package device: xxnpu" in result.stdout, result.stdout
    assert "output on xxnpu:0: matches the CPU" in result.stdout, result.stdout


def test_weights_in_the_so_are_refused_clearly():
    # AOTI keeps a .so's constant blob in host memory on any device but CUDA/XPU/MPS: refused
    # at code generation, saying what to do instead.
    ep = torch.export.export(TinyMlp().to("xxnpu"), (_input().to("xxnpu"),))
    with pytest.raises(Exception, match=r"package_constants_in_so': False"):
        torch._inductor.aoti_compile_and_package(ep, package_path=os.path.join(tempfile.mkdtemp(), "x.pt2"))


def _package_and_load(model, x, dynamic_shapes=None, device_index=-1):
    """`model` (moved to xxnpu) exported on x, packaged, loaded (for xxnpu:`device_index`,
    or the current device), its weights loaded as xxnpu tensors on that device."""
    ep = torch.export.export(model.to("xxnpu"), (x.to("xxnpu"),), dynamic_shapes=dynamic_shapes)
    path = os.path.join(tempfile.mkdtemp(prefix="xxnpu_aoti_"), f"{type(model).__name__}.pt2")
    torch._inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=NO_CONSTANTS_IN_SO)
    compiled = torch._inductor.aoti_load_package(path, device_index=device_index)
    device = torch.device("xxnpu", device_index) if device_index >= 0 else torch.device("xxnpu")
    weights = {k: v.to(device) for k, v in model.state_dict().items()}
    compiled.load_constants({k: weights[k] for k in compiled.get_constant_fqns()}, check_full_update=True,
                            user_managed=True)
    return compiled


def _package_runs_on_xxnpu_as_on_cpu(model, x):
    """`model` packaged and run on xxnpu: its result on xxnpu:0, as the CPU's, and no op
    on the CPU fallback."""
    compiled = _package_and_load(model, x)
    torch_xxnpu.ops.reset_fallback_counts()
    out = compiled(x.to("xxnpu"))
    assert out.device == torch.device("xxnpu", 0)
    torch.testing.assert_close(out.cpu(), model.cpu()(x), rtol=1e-4, atol=1e-5)
    assert torch_xxnpu.ops.fallback_counts() == {}


class TinyConv(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.up = nn.ConvTranspose2d(4, 2, 2, stride=2)

    def forward(self, x):
        return self.up(self.conv(x).relu())


def test_convolution_package_runs_on_xxnpu_and_matches_cpu():
    # Convolution is an extern kernel with a C shim: the package calls torch_xxnpu's
    # aoti_torch_xxnpu_convolution, which runs the xxnpu convolution.
    _package_runs_on_xxnpu_as_on_cpu(TinyConv(), torch.randn(2, 3, 8, 8))


class TinyAttention(nn.Module):
    """Causal self-attention through F.scaled_dot_product_attention (the fused SDPA's C shim)."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        torch.manual_seed(0)
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.o = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(attn.transpose(1, 2).reshape(B, T, C))


def test_attention_package_runs_the_xxnpu_sdpa_and_matches_cpu():
    # SDPA is an extern kernel with integer results (max_q, max_k): the package calls
    # torch_xxnpu's aoti_torch_xxnpu__scaled_dot_product_fused_attention_overrideable, which
    # runs the fused xxnpu kernel.
    model = TinyAttention()
    x = torch.randn(2, 16, 32)
    compiled = _package_and_load(model, x)
    torch_xxnpu.ops.reset_fallback_counts()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        out = compiled(x.to("xxnpu"))
        torch.xxnpu.synchronize()
    assert out.device == torch.device("xxnpu", 0)
    torch.testing.assert_close(out.cpu(), model.cpu()(x), rtol=1e-4, atol=1e-5)
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert "xxnpu::sdpa_flash_fwd" in names, names
    assert torch_xxnpu.ops.fallback_counts() == {}


class Int8WeightOnlyLinear(nn.Module):
    """A linear layer with int8 weights and per-channel scales (torchao's int8
    weight-only form): torch._weight_int8pack_mm, then a float bias and GELU."""

    def __init__(self, dim_in=64, dim_out=48):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.register_buffer("weight", torch.randint(-8, 8, (dim_out, dim_in), dtype=torch.int8, generator=g))
        self.register_buffer("scales", torch.rand(dim_out, generator=g) / 8 + 0.05)
        self.bias = nn.Parameter(torch.randn(dim_out, generator=g))

    def forward(self, x):
        return torch.nn.functional.gelu(torch._weight_int8pack_mm(x, self.weight, self.scales) + self.bias)


def test_int8_weight_only_package_runs_on_xxnpu_and_matches_cpu():
    # _weight_int8pack_mm is an extern kernel with a C shim: the package calls torch_xxnpu's
    # aoti_torch_xxnpu__weight_int8pack_mm, which dispatches to the xxnpu kernel (no CPU
    # fallback), the rest in generated xxnpu kernels.
    _package_runs_on_xxnpu_as_on_cpu(Int8WeightOnlyLinear(), torch.randn(5, 64))


def test_dynamic_batch_package_runs_every_batch_size():
    # One package exported with a dynamic batch dimension serves every batch in its range:
    # its generated kernels take the sizes as arguments.
    model = TinyMlp()
    batch = torch.export.Dim("batch", min=1, max=64)
    compiled = _package_and_load(model, _input(), dynamic_shapes={"x": {0: batch}})
    cpu_model = TinyMlp()  # the same seeded weights, on the CPU
    for b in (1, 3, 17, 64):
        x = torch.randn(b, *_input().shape[1:])
        out = compiled(x.to("xxnpu"))
        assert out.shape[0] == b
        torch.testing.assert_close(out.cpu(), cpu_model(x), rtol=1e-4, atol=1e-5)


def test_package_loaded_for_the_second_device_runs_there():
    # aoti_load_package(device_index=1): the package compiled on xxnpu:0 runs on xxnpu:1,
    # every kernel on that device's rows, none on xxnpu:0.
    model = TinyMlp()
    x = _input()
    compiled = _package_and_load(model, x, device_index=1)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        out = compiled(x.to("xxnpu:1"))
        torch.xxnpu.synchronize(1)
    assert out.device == torch.device("xxnpu", 1)
    torch.testing.assert_close(out.cpu(), TinyMlp()(x), rtol=1e-4, atol=1e-5)
    devices = {e.device_index for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1}
    assert devices == {1}, devices


class BranchyLinear(nn.Module):
    """torch.cond on the input's sign around a linear layer: a package with two subgraphs."""

    def __init__(self):
        super().__init__()
        with torch.random.fork_rng():  # seeded weights without touching the tests' RNG
            torch.manual_seed(0)
            self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: self.lin(x).relu(), lambda x: (self.lin(x) * 2).sin(), (x,))


class DoublingLoop(nn.Module):
    def forward(self, x):
        return while_loop(lambda i, x: i < 4, lambda i, x: (i + 1, x * 2 + 1),
                          (torch.zeros((), dtype=torch.int64, device=x.device), x))[1]


@pytest.mark.parametrize("model", [BranchyLinear(), DoublingLoop()], ids=["cond", "while_loop"])
def test_control_flow_package_runs_on_xxnpu_and_matches_cpu(model):
    # AOTInductor inlines the subgraphs into the model's C++: the predicate is read back from
    # the device, the taken branch (both are tried) or the loop's body runs as device kernels.
    x = torch.randn(4, 16)
    compiled = _package_and_load(model, x)
    for inp in (x.abs(), -x.abs()):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            out = compiled(inp.to("xxnpu"))
            torch.xxnpu.synchronize()
        torch.testing.assert_close(out.cpu(), model.cpu()(inp), rtol=1e-4, atol=1e-5)
        kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
        assert any(k.startswith("cpp_fused_") for k in kernels), kernels
