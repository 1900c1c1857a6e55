"""torch.compile on xxnpu (python/torch_xxnpu/compiler/, docs/compile.md): the default
Inductor backend against CPU eager, kernels as device kernels in the profiler, Dynamo's
view of torch.xxnpu streams/events/synchronize, and how failures are reported.

Inductor's C++ compile is slow here (seconds per kernel on two cores), so the cases are
few and small, and each compiles once. Inductor's caches go to a directory private to this
test (set before Inductor is imported), so a run neither reads nor pollutes the user's.
The target runs with XXNPU_STRICT_MEMORY=1 (BUILD): a generated kernel that touched device
memory from the host thread would fault, not pass.
"""
import copy
import json
import math
import os
import re
import tempfile

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="xxnpu_compile_test_")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_xxnpu  # noqa: E402,F401
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import torch._dynamo  # noqa: E402
import torch._dynamo.testing  # noqa: E402
import torch._inductor.config as inductor_config  # noqa: E402

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
GENERATED = re.compile(r"cpp_fused_\w+_\d+$")


def _close(actual, expected, **kw):
    torch.testing.assert_close(actual.cpu(), expected, rtol=1e-4, atol=1e-4, **kw)


def _device_kernels(prof):
    """Device kernel events of a capture, in order (names and bytes)."""
    return [
        e for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.PrivateUse1 and not e.name.startswith(("Memcpy", "Memset"))
    ]


def _trace_kernels(prof, tmp_path):
    """Device kernel events of a capture's chrome trace (with their args)."""
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"]


@pytest.fixture(autouse=True)
def clean_device():
    torch.xxnpu.set_device(0)
    torch.xxnpu.synchronize()
    yield
    torch.xxnpu.synchronize()


def test_strict_memory_is_on():
    # What makes every case below also a check that the host never reads device memory.
    assert os.environ.get("XXNPU_STRICT_MEMORY") == "1"
    assert torch.xxnpu.get_device_properties(0).strict_memory


def test_elementwise_chain_is_one_device_kernel_named_after_inductor():
    def f(x, y):
        return ((x + y) * 2).relu() - y.sigmoid()

    x, y = torch.randn(1000), torch.randn(1000)
    xd, yd = x.to("xxnpu"), y.to("xxnpu")
    cf = torch.compile(f)
    _close(cf(xd, yd), f(x, y))  # compiles
    torch.xxnpu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        out = cf(xd, yd)
        torch.xxnpu.synchronize()
    _close(out, f(x, y))
    kernels = _device_kernels(prof)
    assert [bool(GENERATED.match(k.name)) for k in kernels] == [True], [k.name for k in kernels]
    assert kernels[0].name.startswith("cpp_fused_")
    assert kernels[0].device_time_total > 0
    # The wrapper allocated the output on the device (no CPU buffer, no copy).
    assert out.device == torch.device("xxnpu", 0)


def test_kernel_trace_args_carry_bytes_and_fused_nodes(tmp_path):
    def f(x):
        return (x * 3 + 1).relu()

    x = torch.randn(4096, device="xxnpu")
    cf = torch.compile(f)
    cf(x)
    torch.xxnpu.synchronize()
    with profile(activities=ACTIVITIES) as prof:
        cf(x)
        torch.xxnpu.synchronize()
    kernels = _trace_kernels(prof, tmp_path)
    assert len(kernels) == 1 and GENERATED.match(kernels[0]["name"]), kernels
    # Inductor's count: one float32 read and one write of 4096 elements.
    assert kernels[0]["args"]["bytes"] == 2 * 4096 * 4
    assert kernels[0]["args"]["stream"] == torch.xxnpu.current_stream().stream_id
    # The nodes of the traced FX graph the kernel fused, in graph order (Inductor's
    # "Source Nodes" comment above the generated kernel).
    assert kernels[0]["args"]["fused nodes"] == "mul, add, relu"
    # The analyzer groups device time by compiled graph, under its Dynamo region.
    from torch_xxnpu.profiler import analyze

    graphs = analyze.summarize(analyze.load_trace(str(tmp_path / "trace.json")))["compiled_graphs"]
    assert len(graphs) == 1, graphs
    assert re.fullmatch(r"Torch-Compiled Region: \d+/\d+", graphs[0]["region"]), graphs[0]
    assert graphs[0]["calls"] == 1 and graphs[0]["device_total_us"] > 0
    assert [(k["name"], k["fused_nodes"]) for k in graphs[0]["kernels"]] == [(kernels[0]["name"], "mul, add, relu")]


def test_reduction_and_softmax_match_cpu():
    def f(x):
        return x.sum(1) + x.amax(1), torch.softmax(x, -1)

    x = torch.randn(37, 129)
    got = torch.compile(f)(x.to("xxnpu"))
    want = f(x)
    _close(got[0], want[0])
    _close(got[1], want[1])


def test_matmul_with_epilogue_runs_the_xxnpu_mm_kernel():
    def f(a, b, c):
        return torch.relu(a @ b + c) * 0.5

    a, b, c = torch.randn(64, 32), torch.randn(32, 48), torch.randn(48)
    args = [t.to("xxnpu") for t in (a, b, c)]
    cf = torch.compile(f)
    cf(*args)
    torch.xxnpu.synchronize()
    torch_xxnpu.ops.reset_fallback_counts()
    with profile(activities=ACTIVITIES) as prof:
        out = cf(*args)
        torch.xxnpu.synchronize()
    _close(out, f(a, b, c))
    names = [k.name for k in _device_kernels(prof)]
    # The matmul is Inductor's extern kernel, dispatched to the xxnpu ATen kernel (not the
    # CPU fallback); the epilogue is a generated kernel after it on the same stream.
    assert any(n.startswith("xxnpu::") and "mm" in n for n in names), names
    assert any(GENERATED.match(n) for n in names), names
    assert torch_xxnpu.ops.fallback_counts() == {}


def test_mlp_forward_and_backward_match_cpu():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    dev = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to("xxnpu")
    x = torch.randn(12, 16)
    torch.compile(dev)(x.to("xxnpu")).square().mean().backward()
    cpu(x).square().mean().backward()
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        _close(q.grad, p.grad, msg=name)


def test_dynamic_shapes_compile_once_for_two_sizes():
    def f(x):
        return (x * 3).sin().sum() + x.mean()

    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    cf = torch.compile(f, backend=counter, dynamic=True)
    for n in (10, 1037):
        x = torch.randn(n)
        _close(cf(x.to("xxnpu")), f(x))
    assert counter.frame_count == 1


# Big enough that Inductor splits their loops (config.cpp.min_chunk_size) and the device
# spreads them (LaunchConfig::parallel_threshold): each kind of parallel loop Inductor
# writes, in one graph so that it compiles once.
def _parallel_graph(x, y, rows, tall, wide):
    chain = torch.sigmoid(x * y + 1).relu() - y           # one flat parallel loop
    long_rows = rows.sum(-1) + rows.amax(-1)               # 2 rows: a parallel reduction
    softmax = torch.softmax(wide, -1)                      # parallel over rows
    permuted = (tall.permute(1, 2, 0) * 2).contiguous()    # [1, 3, N]: collapse(2)
    var, mean = torch.var_mean(rows, -1)                   # Welford, parallel reduction
    return chain, long_rows, softmax, permuted, var, mean, rows.argmax(-1)


def test_large_kernels_split_their_loops_over_the_compute_threads(tmp_path):
    from torch._inductor.utils import run_and_get_code

    torch.manual_seed(0)
    cpu = [torch.randn(1 << 20), torch.randn(1 << 20), torch.randn(2, 1 << 17), torch.randn(1 << 18, 1, 3),
           torch.randn(512, 1024)]
    dev = [t.to("xxnpu") for t in cpu]
    torch._dynamo.reset()
    cf = torch.compile(_parallel_graph)
    got, codes = run_and_get_code(cf, *dev)
    for g, w in zip(got, _parallel_graph(*cpu)):
        if w.dtype == torch.int64:
            assert torch.equal(g.cpu(), w)
        else:
            torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-3)
    code = "\n".join(codes)
    # Each parallel loop is a child grid of N = the device's compute threads, never an
    # OpenMP team (which would run on threads the device does not own).
    threads = torch.xxnpu.get_device_properties(0).multi_processor_count
    assert threads >= 2, "the test needs a device with two compute threads"
    regions = re.findall(r"xxnpu_device::parallel\((\d+), \[&\]\(int64_t tid\)", code)
    assert len(regions) >= 3 and set(regions) == {str(threads)}, regions
    assert "#pragma omp parallel" not in code and "omp_get_thread_num" not in code
    assert "tmp_acc0_arr[tid]" in code  # a parallel reduction's per-share accumulators
    assert "xxnpu_n1_" in code  # a collapsed nest shared out as one loop
    with profile(activities=ACTIVITIES) as prof:
        cf(*dev)
        torch.xxnpu.synchronize()
    kernels = [k for k in _trace_kernels(prof, tmp_path) if GENERATED.match(k["name"])]
    # Inductor's C++ backend puts a graph's loop nests into as few kernels as it can (one
    # here, with a region per nest): each is still one device kernel, its child grids'
    # time its own, on the current stream.
    assert len(kernels) >= 1, kernels
    assert all(k["args"]["stream"] == torch.xxnpu.current_stream().stream_id for k in kernels)


def test_a_fault_in_a_parallel_loop_is_a_sticky_error_naming_the_kernel():
    def f(x, i):
        return x[i] * 2

    x = torch.randn(1 << 18, device="xxnpu")
    i = torch.randint(0, 1 << 18, (1 << 18,))
    cf = torch.compile(f)
    _close(cf(x, i.to("xxnpu")), x.cpu()[i] * 2)
    bad = i.clone()
    bad[-3] = 1 << 20  # in the last share: a compute thread other than the kernel's own
    cf(x, bad.to("xxnpu"))
    with pytest.raises(RuntimeError, match=r"kernel 'cpp_fused_\w+' failed on xxnpu:0 .*index out of bounds"):
        torch.xxnpu.synchronize()
    torch.xxnpu.synchronize()
    _close(cf(x, i.to("xxnpu")), x.cpu()[i] * 2)


def test_runs_on_the_current_stream(tmp_path):
    def f(x):
        return x.cos() + 1

    x = torch.randn(256, device="xxnpu")
    cf = torch.compile(f)
    cf(x)
    s = torch.xxnpu.Stream()
    s.wait_stream(torch.xxnpu.current_stream())
    with profile(activities=ACTIVITIES) as prof:
        with torch.xxnpu.stream(s):
            out = cf(x)
        torch.xxnpu.current_stream().wait_stream(s)
        torch.xxnpu.synchronize()
    _close(out, x.cpu().cos() + 1)
    kernels = _trace_kernels(prof, tmp_path)
    assert [GENERATED.match(k["name"]) is not None for k in kernels] == [True], kernels
    assert kernels[0]["args"]["stream"] == s.stream_id != torch.xxnpu.default_stream().stream_id


def test_cpu_scalar_tensor_is_read_at_launch():
    # Eager lets a 0-dim CPU tensor join xxnpu ones; Inductor passes its host pointer into
    # the kernel. The launcher reads the value at launch (the kernel must not read host
    # memory later, from the device thread): changing the tensor afterwards changes nothing.
    x = torch.randn(64, device="xxnpu")
    s = torch.tensor(2.0)
    cf = torch.compile(lambda x, s: x * s + 1)
    _close(cf(x, s), x.cpu() * 2 + 1)
    torch.xxnpu.synchronize()
    s.fill_(3.0)
    _close(cf(x, s), x.cpu() * 3 + 1)


def test_graph_on_the_second_device_stays_there():
    # Inductor's generic allocation names no index; the wrapper adds it (else xxnpu:0).
    x = torch.randn(64, device="xxnpu:1")
    out = torch.compile(lambda x: x.exp() * 2)(x)
    torch.xxnpu.synchronize(1)
    assert out.device == torch.device("xxnpu", 1)
    _close(out, x.cpu().exp() * 2)


def test_norms_and_softmax_with_dtype_match_cpu():
    # softmax computing in float64 from float32 over a short last dim mixes vector widths in
    # one kernel: it failed to compile ("no match for operator-" between VectorizedN<double,
    # 2> and Vectorized<float>) while Inductor took xxnpu for a Triton device
    # (_xxnpu_is_a_cpp_backend in compiler/inductor.py).
    def f(x, w, b, y):
        n = x.shape[-1]
        return (F.layer_norm(x, (n,), w, b, 1e-5), F.rms_norm(x, (n,), w, 1e-6), torch.log_softmax(x, -1),
                torch.softmax(y, -1, dtype=torch.float64))

    x, w, b, y = torch.randn(6, 37, 96) * 3, torch.randn(96), torch.randn(96), torch.randn(5, 10, 5)
    got = torch.compile(f)(*[t.to("xxnpu") for t in (x, w, b, y)])
    for g, want in zip(got, f(x, w, b, y)):
        _close(g, want)


def test_sdpa_matches_cpu():
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).flatten(2) * 2

    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    got = torch.compile(f)(*[t.to("xxnpu") for t in (q, k, v)])
    _close(got, f(q, k, v))


class _LlamaBlock(nn.Module):
    """A Llama decoder block in plain torch (small dims): RMSNorm, grouped-query causal
    attention with rotary embeddings (NeoX halves), SwiGLU MLP, residuals; the model of
    examples/llama_decode.py without its inference-only custom ops."""

    def __init__(self, dim=32, heads=4, kv_heads=2, ffn=64, seq=8):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.attn_norm, self.mlp_norm = nn.RMSNorm(dim, eps=1e-5), nn.RMSNorm(dim, eps=1e-5)
        self.qkv = nn.Linear(dim, (heads + 2 * kv_heads) * self.head_dim, bias=False)
        self.o = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.gate_up = nn.Linear(dim, 2 * ffn, bias=False)
        self.down = nn.Linear(ffn, dim, bias=False)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.arange(seq).float()[:, None] * inv_freq[None, :]
        self.register_buffer("cos", angles.cos().repeat(1, 2), persistent=False)
        self.register_buffer("sin", angles.sin().repeat(1, 2), persistent=False)

    def _rope(self, t):
        a, b = t.chunk(2, dim=-1)
        return t * self.cos + torch.cat([-b, a], dim=-1) * self.sin

    def forward(self, x):
        B, T, _ = x.shape
        hd = self.head_dim
        q, k, v = self.qkv(self.attn_norm(x)).split([self.heads * hd, self.kv_heads * hd, self.kv_heads * hd], -1)
        q = self._rope(q.view(B, T, self.heads, hd).transpose(1, 2))
        k = self._rope(k.view(B, T, self.kv_heads, hd).transpose(1, 2))
        v = v.view(B, T, self.kv_heads, hd).transpose(1, 2)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(hd))
        h = x + self.o(attn.transpose(1, 2).reshape(B, T, -1))
        gate, up = self.gate_up(self.mlp_norm(h)).chunk(2, dim=-1)
        return h + self.down(F.silu(gate) * up)


def _llama_block_training(**options):
    """A Llama block compiled with `options`, forward + backward against the CPU's eager
    block (output, input and parameter gradients). Returns the profile of the backward."""
    torch.manual_seed(0)
    cpu = _LlamaBlock()
    dev = copy.deepcopy(cpu).to("xxnpu")
    x = torch.randn(2, 8, 32)
    xd = x.to("xxnpu").requires_grad_()
    x.requires_grad_()
    out = torch.compile(dev, options=options)(xd)
    with profile(activities=ACTIVITIES) as prof:
        out.square().mean().backward()
        torch.xxnpu.synchronize()
    want = cpu(x)
    want.square().mean().backward()
    _close(out, want.detach())
    _close(xd.grad, x.grad)
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        _close(q.grad, p.grad, msg=name)
    return prof


def test_llama_block_forward_and_backward_match_cpu():
    _llama_block_training()


def test_compiled_adamw_step_matches_cpu_eager():
    # torch.compile(opt.step): the update of every parameter compiled into xxnpu kernels
    # (foreach AdamW, the default for xxnpu), two steps against the CPU's eager AdamW.
    torch._dynamo.reset()
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    dev = copy.deepcopy(cpu).to("xxnpu")
    opt_cpu = torch.optim.AdamW(cpu.parameters(), lr=0.01, weight_decay=0.1)
    opt_dev = torch.optim.AdamW(dev.parameters(), lr=0.01, weight_decay=0.1)
    before = [p.detach().clone() for p in cpu.parameters()]
    step = torch.compile(opt_dev.step)
    for _ in range(2):
        x = torch.randn(12, 16)
        for model, inp in ((cpu, x), (dev, x.to("xxnpu"))):
            model.zero_grad()
            model(inp).square().mean().backward()
        opt_cpu.step()
        step()
    torch.xxnpu.synchronize()
    for (name, p), q, p0 in zip(cpu.named_parameters(), dev.parameters(), before):
        assert (p.detach() - p0).abs().max() > 1e-3, name  # the steps did move it
        _close(q, p.detach(), msg=name)


_SECOND_PROCESS = """
import torch, torch_xxnpu
from torch._dynamo.utils import counters
from torch.profiler import ProfilerActivity, profile

def f(x, y):
    return ((x + y) * 2).relu() - y.sigmoid()

x, y = torch.randn(1000, device="xxnpu"), torch.randn(1000, device="xxnpu")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
    out = torch.compile(f)(x, y)
    torch.xxnpu.synchronize()
torch.testing.assert_close(out.cpu(), f(x.cpu(), y.cpu()))
kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
print("hits", counters["inductor"]["fxgraph_cache_hit"], "kernels", kernels)
"""


def test_fx_graph_cache_hit_in_a_second_process_launches_the_cached_kernel(tmp_path):
    # The wrapper Inductor caches must work in a process that never generated it: it
    # imports the launcher glue and interns the kernel name again.
    def f(x, y):
        return ((x + y) * 2).relu() - y.sigmoid()

    torch._dynamo.reset()
    x, y = torch.randn(1000, device="xxnpu"), torch.randn(1000, device="xxnpu")
    torch.compile(f)(x, y)  # same graph as the script's: fills this test's cache dir
    torch.xxnpu.synchronize()
    script = tmp_path / "second.py"
    script.write_text(_SECOND_PROCESS)
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    match = re.search(r"hits (\d+) kernels \[(.*)\]", done.stdout)
    assert match, done.stdout
    assert int(match.group(1)) == 1
    assert GENERATED.match(match.group(2).strip("'")), match.group(2)


# ---------------------------------------------------------------- random ops


def _dropout(x):
    return F.dropout(x, 0.5, training=True) * 2


def test_dropout_compiles_and_draws_from_the_xxnpu_generator():
    # By default Inductor generates the random numbers inside the fused kernel (its own
    # Philox), from seeds it draws with one randint on the xxnpu generator: the same xxnpu
    # seed gives the same mask whatever the CPU generator's state; the next call, a new one.
    torch._dynamo.reset()
    x = torch.randn(4096, device="xxnpu")
    cf = torch.compile(_dropout)
    torch.xxnpu.manual_seed(1)
    torch.random.default_generator.manual_seed(5)
    first = cf(x).cpu()
    torch.xxnpu.manual_seed(1)
    torch.random.default_generator.manual_seed(6)
    seeded = torch.xxnpu.get_rng_state()
    with profile(activities=ACTIVITIES) as prof:
        again = cf(x).cpu()
    assert not torch.equal(torch.xxnpu.get_rng_state(), seeded)  # drawn from the xxnpu generator
    assert torch.equal(first, again)
    assert not torch.equal(again, cf(x).cpu())
    kept = first != 0
    assert 0.4 < kept.float().mean().item() < 0.6
    _close(first[kept], x.cpu()[kept] * 4)  # kept values scaled by 1 / (1 - p), then * 2
    # The mask is made inside the generated kernel, not by an eager bernoulli.
    names = [k.name for k in _device_kernels(prof)]
    assert any(GENERATED.match(n) and "dropout" in n for n in names), names
    assert not any("bernoulli" in n for n in names), names

    # With fallback_random, random ops stay ATen calls on xxnpu: compiled == eager for a seed.
    torch._dynamo.reset()
    with inductor_config.patch(fallback_random=True):
        cf = torch.compile(_dropout)
        torch.manual_seed(3)
        got = cf(x).cpu()
    torch.manual_seed(3)
    assert torch.equal(got, _dropout(x).cpu())


def test_fx_graph_cache_key_covers_the_xxnpu_codegen(monkeypatch):
    # Inductor keys its FX graph cache on torch's sources, not on this backend's: an entry
    # written by another torch_xxnpu (other codegen rules, another launch ABI) must miss.
    from torch._dynamo.utils import counters
    from torch._inductor.codegen.common import custom_backend_passes

    def f(x):
        return x.tan() * 2 - 1

    x = torch.randn(64, device="xxnpu")
    counters.clear()
    for _ in range(2):
        torch._dynamo.reset()
        torch.compile(f)(x)
    assert counters["inductor"]["fxgraph_cache_hit"] == 1  # same torch_xxnpu: a hit
    monkeypatch.setattr(type(custom_backend_passes["xxnpu"]), "uuid", lambda self: b"another torch_xxnpu")
    torch._dynamo.reset()
    _close(torch.compile(f)(x), x.cpu().tan() * 2 - 1)
    assert counters["inductor"]["fxgraph_cache_hit"] == 1
    assert counters["inductor"]["fxgraph_cache_miss"] == 2


# ---------------------------------------------------------------- Dynamo: streams, events


def _stream_code(x, s):
    torch.xxnpu.synchronize()
    cur = torch.xxnpu.current_stream()
    s.wait_stream(cur)
    with torch.xxnpu.stream(s):
        y = x * 2
    e = torch.xxnpu.Event()
    e.record(s)
    cur.wait_event(e)
    return y + 1


def test_streams_events_and_synchronize_trace_without_graph_breaks():
    torch._dynamo.reset()
    x = torch.randn(64, device="xxnpu")
    s = torch.xxnpu.Stream()
    out = torch.compile(_stream_code, fullgraph=True)(x, s)  # fullgraph: a break raises
    torch.xxnpu.synchronize()
    _close(out, x.cpu() * 2 + 1)


def test_device_interface_is_registered():
    from torch._dynamo.device_interface import get_interface_for_device

    iface = get_interface_for_device("xxnpu")
    assert get_interface_for_device("xxnpu:1") is iface
    assert issubclass(iface.Stream, torch.Stream) and issubclass(iface.Event, torch.Event)
    assert iface.device_count() == torch.xxnpu.device_count()
    assert iface.current_stream() == torch.xxnpu.current_stream()
    assert iface.get_raw_stream(0) == torch.xxnpu.current_stream().native_handle
    assert iface.Worker.get_device_properties("xxnpu:0").name == torch.xxnpu.get_device_name(0)


# ---------------------------------------------------------------- failures


def test_failing_generated_kernel_is_a_sticky_error_naming_it():
    def f(x, i):
        return x[i] * 2

    x = torch.randn(4, device="xxnpu")
    cf = torch.compile(f)
    _close(cf(x, torch.tensor([0, 3], device="xxnpu")), x.cpu()[[0, 3]] * 2)
    cf(x, torch.tensor([0, 7], device="xxnpu"))  # returns at once; the device finds it
    with pytest.raises(RuntimeError, match=r"kernel 'cpp_fused_\w+' failed on xxnpu:0 .*index out of bounds"):
        torch.xxnpu.synchronize()
    torch.xxnpu.synchronize()  # reported once; the device goes on
    _close(cf(x, torch.tensor([1], device="xxnpu")), x.cpu()[[1]] * 2)


def test_cpp_compile_error_names_the_kernel_and_its_source():
    torch._dynamo.reset()
    x = torch.randn(8, device="xxnpu")
    with inductor_config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "compile_error"}):
        expected = r"xxnpu kernel cpp_fused_\w*relu\w* failed to compile \(source /\S+\.cpp\)"
        with pytest.raises(Exception, match=expected):
            torch.compile(lambda x: torch.relu(x) + 1)(x)


# ---------------------------------------------------------------- cpp_wrapper=True
# A C++ wrapper includes torch's headers: each compile is ~30 s here, so one graph covers an
# elementwise chain, a reduction, a matmul with an epilogue and an indexed read, and is
# compiled once for the cases below.


def _cpp_wrapper_graph(x, y, a, b, c, i):
    chain = ((x + y) * 2).relu() - y.sigmoid()
    reduced = x.sum(1) + x.amax(1)
    mm = torch.relu(a @ b + c) * 0.5
    gathered = y[i] * 3
    # An ATen fallback without a C shim: dispatched by name at run time (to xxnpu's sort).
    ranked = torch.sort(x, -1).values + 1
    return chain, reduced, mm, gathered, ranked


def _cpp_wrapper_inputs():
    torch.manual_seed(0)
    # x, y big enough for parallel loops (the chain's and the reductions' run as child grids).
    cpu = [torch.randn(512, 1031), torch.randn(512, 1031), torch.randn(64, 32), torch.randn(32, 48), torch.randn(48)]
    cpu.append(torch.tensor([0, 5, 36]))
    return cpu, [t.to("xxnpu") for t in cpu]


@pytest.fixture(scope="module")
def cpp_wrapper_compiled():
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    cpu, dev = _cpp_wrapper_inputs()
    cf = torch.compile(_cpp_wrapper_graph, options={"cpp_wrapper": True})
    _, codes = run_and_get_code(cf, *dev)
    torch.xxnpu.synchronize()
    return cf, "\n".join(codes)


def test_cpp_wrapper_matches_cpu_eager(cpp_wrapper_compiled):
    cf, _ = cpp_wrapper_compiled
    cpu, dev = _cpp_wrapper_inputs()
    got, want = cf(*dev), _cpp_wrapper_graph(*cpu)
    for g, w in zip(got, want):
        assert g.device == torch.device("xxnpu", 0)  # buffers the C++ wrapper allocated
        _close(g, w)


def test_cpp_wrapper_launches_generated_kernels_as_device_kernels(cpp_wrapper_compiled):
    cf, code = cpp_wrapper_compiled
    # The C++ wrapper, not the Python one, and its kernel calls go through the launcher.
    assert "cpp_wrapper_src" in code and "inductor_entry_impl" in code
    launched = set(re.findall(r"xxnpu_compiled::Kernel<&(cpp_fused_\w+)>::launch\(", code))
    assert len(launched) >= 2, launched
    # Their parallel loops are child grids on the device, as in the Python wrapper's kernels.
    assert "xxnpu_device::parallel(" in code and "#pragma omp parallel" not in code
    # No kernel is called directly on the host thread.
    for name in launched:
        assert not re.search(rf"(?<![&\w]){name}\((?!const|int|float|double|long|bool)", code.split("inductor_entry_impl")[-1]), name
    _, dev = _cpp_wrapper_inputs()
    torch_xxnpu.ops.reset_fallback_counts()
    with profile(activities=ACTIVITIES) as prof:
        cf(*dev)
        torch.xxnpu.synchronize()
    kernels = _device_kernels(prof)
    names = [k.name for k in kernels]
    # Every generated kernel ran on the device under its Inductor name, on the current stream.
    assert {n for n in names if GENERATED.match(n)} == launched, names
    assert all(k.device_time_total > 0 for k in kernels if GENERATED.match(k.name))
    # The matmul is the xxnpu ATen kernel (torch_xxnpu's aoti_torch_xxnpu_addmm_out / mm_out
    # shim), not the CPU fallback.
    assert any(n.startswith("xxnpu::") and "mm" in n for n in names), names
    assert any(n.startswith("xxnpu::") and "sort" in n for n in names), names
    assert torch_xxnpu.ops.fallback_counts() == {}


def test_cpp_wrapper_kernel_trace_args_carry_bytes_and_fused_nodes(cpp_wrapper_compiled, tmp_path):
    cf, _ = cpp_wrapper_compiled
    _, dev = _cpp_wrapper_inputs()
    with profile(activities=ACTIVITIES) as prof:
        cf(*dev)
        torch.xxnpu.synchronize()
    generated = [k for k in _trace_kernels(prof, tmp_path) if GENERATED.match(k["name"])]
    assert generated
    for k in generated:
        assert k["args"]["bytes"] > 0, k
        assert k["args"]["stream"] == torch.xxnpu.current_stream().stream_id
    # The elementwise chain is in one kernel (with whatever Inductor fused beside it), named
    # by the traced graph's nodes (the last is the variable it was assigned to).
    fused = [k["args"].get("fused nodes", "") for k in generated]
    assert any(f.startswith("add, mul, relu, sigmoid, chain") for f in fused), fused


def test_cpp_wrapper_kernel_fault_is_a_sticky_error_naming_it(cpp_wrapper_compiled):
    cf, _ = cpp_wrapper_compiled
    cpu, dev = _cpp_wrapper_inputs()
    dev[-1] = torch.tensor([0, 5, 999], device="xxnpu")
    cf(*dev)  # returns: the launch is asynchronous
    with pytest.raises(RuntimeError, match=r"kernel 'cpp_fused_\w+' failed on xxnpu:0 .*index out of bounds"):
        torch.xxnpu.synchronize()
    torch.xxnpu.synchronize()
    _, dev = _cpp_wrapper_inputs()
    _close(cf(*dev)[3], _cpp_wrapper_graph(*cpu)[3])


def test_cpp_wrapper_convolution_runs_through_the_xxnpu_shim():
    # aoti_torch_xxnpu_convolution (torch ships the C shim for in-tree devices only) calls
    # the xxnpu convolution: ordinary with bias and groups, and transposed.
    torch._dynamo.reset()
    torch.manual_seed(0)
    x, w, b, wt = torch.randn(2, 4, 8, 8), torch.randn(6, 2, 3, 3), torch.randn(6), torch.randn(4, 3, 2, 2)

    def f(x, w, b, wt):
        return F.relu(F.conv2d(x, w, b, padding=1, groups=2)) + 1, F.conv_transpose2d(x, wt, stride=2) * 2

    got = torch.compile(f, options={"cpp_wrapper": True})(*(t.to("xxnpu") for t in (x, w, b, wt)))
    for g, want in zip(got, f(x, w, b, wt)):
        assert g.device.type == "xxnpu"
        _close(g, want)


def test_cpp_wrapper_sdpa_runs_through_the_xxnpu_shim():
    from torch._inductor.utils import run_and_get_code

    # The fused SDPA (ops/attention_ops.cc) is an extern kernel whose results include two
    # integers (max_q, max_k): the wrapper calls torch_xxnpu's
    # aoti_torch_xxnpu__scaled_dot_product_fused_attention_overrideable, causal, and with a
    # mask and a scale, and gets the xxnpu kernel's results.
    torch._dynamo.reset()
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    mask = torch.randn(16, 16)

    def f(q, k, v, mask):
        return (F.scaled_dot_product_attention(q, k, v, is_causal=True) * 2,
                F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3) + 1)

    cf = torch.compile(f, options={"cpp_wrapper": True})
    got, codes = run_and_get_code(cf, *(t.to("xxnpu") for t in (q, k, v, mask)))
    calls = "AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_xxnpu__scaled_dot_product_fused_attention_overrideable("
    assert "\n".join(codes).count(calls) == 2
    torch_xxnpu.ops.reset_fallback_counts()
    with profile(activities=ACTIVITIES) as prof:
        cf(*(t.to("xxnpu") for t in (q, k, v, mask)))
        torch.xxnpu.synchronize()
    assert [k.name for k in _device_kernels(prof)].count("xxnpu::sdpa_flash_fwd") == 2
    assert torch_xxnpu.ops.fallback_counts() == {}
    for g, want in zip(got, f(q, k, v, mask)):
        assert g.device.type == "xxnpu"
        _close(g, want)


def test_cpp_wrapper_llama_block_forward_and_backward_match_cpu():
    # Training under the C++ wrapper: the backward graph calls SDPA's backward through
    # aoti_torch_xxnpu__scaled_dot_product_fused_attention_overrideable_backward.
    torch._dynamo.reset()
    prof = _llama_block_training(cpp_wrapper=True)
    assert any(k.name.startswith("xxnpu::sdpa_flash_bwd") for k in _device_kernels(prof))


def test_cpp_wrapper_baddbmm_runs_through_the_xxnpu_shim():
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    a, b, c = torch.randn(2, 3, 4), torch.randn(2, 3, 5), torch.randn(2, 5, 4)

    def f(a, b, c):
        return torch.baddbmm(a, b, c, beta=0.5, alpha=2) + 1

    got, codes = run_and_get_code(torch.compile(f, options={"cpp_wrapper": True}), *(t.to("xxnpu") for t in (a, b, c)))
    assert "AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_xxnpu_baddbmm_out(" in "\n".join(codes)
    _close(got, f(a, b, c))


def test_cpp_wrapper_int8_and_float8_matmuls_run_through_the_xxnpu_shims():
    # torch._int_mm, _weight_int8pack_mm (int8 weight-only linear, as torchao's) and
    # _scaled_mm (float8): Inductor leaves them to ATen; the C++ wrapper calls
    # aoti_torch_xxnpu_* for them, which dispatch to what eager xxnpu runs (the xxnpu
    # kernel for _weight_int8pack_mm, the CPU fallback for the other two).
    import warnings

    from torch._inductor.utils import run_and_get_code

    g = torch.Generator().manual_seed(0)
    a, b = (torch.randint(-8, 8, (32, 64), dtype=torch.int8, generator=g) for _ in range(2))
    w = torch.randint(-8, 8, (48, 64), dtype=torch.int8, generator=g)
    scales, x = torch.rand(48, generator=g) + 0.5, torch.randn(5, 64, generator=g)
    p = (torch.randn(32, 64, generator=g) / 4).to(torch.float8_e4m3fn)
    q = (torch.randn(48, 64, generator=g) / 4).to(torch.float8_e4m3fn)
    sa, sb = torch.tensor(0.5), torch.tensor(2.0)
    cases = [
        ("_int_mm_out", lambda a, b: torch._int_mm(a, b.t().contiguous()) + 1, (a, b)),
        ("_weight_int8pack_mm", lambda x, w, s: torch._weight_int8pack_mm(x, w, s) * 2, (x, w, scales)),
        ("_scaled_mm_out", lambda p, q, sa, sb: torch._scaled_mm(p, q.t(), sa, sb, out_dtype=torch.float32) + 1,
         (p, q, sa, sb)),
    ]
    for shim, f, args in cases:
        torch._dynamo.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the CPU fallback's warning
            got, codes = run_and_get_code(torch.compile(f, options={"cpp_wrapper": True}),
                                          *(t.to("xxnpu") for t in args))
        assert f"aoti_torch_xxnpu_{shim}(" in "\n".join(codes), shim
        assert got.device.type == "xxnpu", shim
        # float sums in another order than the CPU kernel's: float32 rounding apart
        torch.testing.assert_close(got.cpu(), f(*args), rtol=1e-5, atol=1e-4, msg=shim)


def test_cpp_wrapper_extern_kernel_without_xxnpu_shim_is_refused_clearly(monkeypatch):
    # Extern kernels the C++ wrapper calls through a C shim: mm/addmm/bmm/baddbmm,
    # convolution, the fused SDPA and the int8/float8 matmuls have an xxnpu one. One that
    # has none (the _int_mm shim hidden here: no op Inductor externs on xxnpu lacks one now)
    # is refused at code generation, naming it (before any C++ compile).
    import torch_xxnpu.compiler.inductor as xxnpu_inductor

    monkeypatch.setattr(xxnpu_inductor, "_XXNPU_SHIM_FUNCTIONS", frozenset(
        n for n in xxnpu_inductor._XXNPU_SHIM_FUNCTIONS if "_int_mm" not in n))
    torch._dynamo.reset()
    a, b = (torch.randint(-5, 5, (32, 32), dtype=torch.int8, device="xxnpu") for _ in range(2))
    with pytest.raises(Exception, match=r"extern kernel aoti_torch_xxnpu__int_mm_out has no xxnpu C shim"):
        torch.compile(lambda a, b: torch._int_mm(a, b) + 1, options={"cpp_wrapper": True})(a, b)


def test_cpp_wrapper_fallback_returning_integers_is_refused_clearly(monkeypatch):
    # An op without an xxnpu shim goes through torch's runtime-dispatch codegen, which in
    # torch 2.13 cannot take integer outputs: refused, naming the op. SDPA (which has a shim
    # now) is the op of that kind at hand: its shim is hidden here.
    import torch_xxnpu.compiler.inductor as xxnpu_inductor

    monkeypatch.setattr(xxnpu_inductor, "_XXNPU_SHIM_FUNCTIONS", frozenset(
        n for n in xxnpu_inductor._XXNPU_SHIM_FUNCTIONS if "scaled_dot_product" not in n))
    torch._dynamo.reset()
    q = torch.randn(1, 2, 4, 8, device="xxnpu")
    with pytest.raises(Exception, match=r"_scaled_dot_product_fused_attention_overrideable.* returns integers"):
        torch.compile(lambda q: F.scaled_dot_product_attention(q, q, q) * 2, options={"cpp_wrapper": True})(q)


# ---------------------------------------------------------------- opcheck --compile


def test_opcheck_compile_reports_the_compiled_op_per_dtype(tmp_path):
    # The OpInfo sweep with the xxnpu side through torch.compile. softmax.with_dtype
    # (float32 in, float64 math) did not compile for xxnpu before _xxnpu_is_a_cpp_backend.
    import subprocess
    import sys

    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "torch_xxnpu.testing.opcheck", "--compile", "--ops", "softmax.with_dtype,sin",
         "--dtypes", "float32", "--max-samples", "2", "-j", "1", "--no-progress", "--json", str(out)],
        capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "opcheck --compile: 2 ops, 2 (op, dtype) pairs" in done.stdout
    doc = json.loads(out.read_text())
    assert doc["meta"]["compile"] is True
    rows = {r["op"]: r for r in doc["rows"]}
    for op in ("softmax.with_dtype", "sin"):
        assert rows[op]["status"] == "pass" and 1 <= rows[op]["samples"] <= 2, rows[op]  # --max-samples 2
        assert rows[op]["reason"] == "", rows[op]  # every sample ran as a compiled graph
