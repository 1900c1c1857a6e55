"""Graphs on xxnpu from Python: torch.accelerator.Graph and torch.xxnpu's CUDA-style graph
API (XXNPUGraph, graph, graph_pool_handle, make_graphed_callables) on the runtime's
stream capture and the caching allocator's private pools."""
import copy
import json
import gc

import pytest
import torch

import torch_xxnpu  # noqa: F401
from torch_xxnpu import _C

pytestmark = pytest.mark.filterwarnings("ignore:xxnpu.*has no xxnpu kernel")

DEV = "xxnpu"


@pytest.fixture(autouse=True)
def _restore():
    torch.xxnpu.set_device(0)
    yield
    torch.xxnpu.synchronize()
    for d in range(torch.xxnpu.device_count()):
        torch.xxnpu.set_stream(torch.xxnpu.default_stream(d))


def _pools():
    return _C._graph_pools(0)


def _chain(x):
    y = x + 1
    for _ in range(5):
        y = y * 2 - x
    return y


# ---------------------------------------------------------------- torch.accelerator.Graph


def test_accelerator_graph_captures_and_replays_on_xxnpu():
    x = torch.arange(64, dtype=torch.float32, device=DEV)
    s = torch.Stream(device=DEV)
    g = torch.accelerator.Graph()
    with s, g:
        x += 1
    torch.xxnpu.synchronize()
    # Captured, not run: the capture leaves x as it was.
    assert torch.equal(x.cpu(), torch.arange(64, dtype=torch.float32))
    for _ in range(3):
        g.replay()
    assert torch.equal(x.cpu(), torch.arange(64, dtype=torch.float32) + 3)
    pool = g.pool()
    assert isinstance(pool, tuple) and len(pool) == 2 and pool != (0, 0)


def test_accelerator_graph_keep_graph_debug_dump(tmp_path):
    x = torch.zeros(8, device=DEV)
    g = torch.accelerator.Graph(keep_graph=True)
    g.enable_debug_mode()
    with torch.Stream(device=DEV), g:
        x.add_(2)
        x.mul_(3)
    g.replay()  # instantiated at the first replay
    assert torch.equal(x.cpu(), torch.full((8,), 6.0))
    path = tmp_path / "graph.txt"
    g.debug_dump(str(path))
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("node ") for line in lines)


def test_capture_on_default_stream_is_refused_and_device_usable():
    g = torch.accelerator.Graph()
    x = torch.ones(4, device=DEV)
    with pytest.raises(RuntimeError, match="default stream"):
        g.capture_begin()
    assert not torch.xxnpu.is_current_stream_capturing()
    assert torch.equal((x + 1).cpu(), torch.full((4,), 2.0))


# ---------------------------------------------------------------- torch.xxnpu graphs


def test_small_op_chain_replay_equals_eager_and_sees_input_updates():
    static_x = torch.randn(64, device=DEV)
    torch.xxnpu.synchronize()
    g = torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(g):
        assert torch.xxnpu.is_current_stream_capturing()
        static_y = _chain(static_x)
    assert not torch.xxnpu.is_current_stream_capturing()
    for _ in range(3):
        new = torch.randn(64)
        static_x.copy_(new.to(DEV))  # in-place update of the static input
        g.replay()
        torch.testing.assert_close(static_y.cpu(), _chain(new))
        torch.testing.assert_close(static_y.cpu(), _chain(static_x).cpu())


def test_graph_context_restores_stream_and_accepts_a_stream():
    s = torch.xxnpu.Stream()
    before = torch.xxnpu.current_stream()
    g = torch.xxnpu.XXNPUGraph()
    x = torch.zeros(4, device=DEV)
    with torch.xxnpu.graph(g, stream=s):
        assert torch.xxnpu.current_stream() == s
        x.add_(1)
    assert torch.xxnpu.current_stream() == before
    g.replay()
    g.replay()
    assert torch.equal(x.cpu(), torch.full((4,), 2.0))


def test_bad_capture_error_mode_is_a_value_error():
    with pytest.raises(ValueError, match="capture_error_mode"):
        torch.xxnpu.graph(torch.xxnpu.XXNPUGraph(), capture_error_mode="bogus")
    with pytest.raises(TypeError, match="XXNPUGraph"):
        torch.xxnpu.graph(object())


def test_replay_without_capture_and_double_capture_raise():
    g = torch.xxnpu.XXNPUGraph()
    with pytest.raises(RuntimeError, match="replay without a successful capture"):
        g.replay()
    x = torch.zeros(4, device=DEV)
    with torch.xxnpu.graph(g):
        x.add_(1)
    with pytest.raises(RuntimeError, match="reset"):
        with torch.xxnpu.graph(g):
            x.add_(1)
    g.reset()
    with torch.xxnpu.graph(g):
        x.add_(5)
    g.replay()
    assert torch.equal(x.cpu(), torch.full((4,), 5.0))


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_capture_modes(mode):
    x = torch.zeros(4, device=DEV)
    g = torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(g, capture_error_mode=mode):
        x.add_(1)
    g.replay()
    assert torch.equal(x.cpu(), torch.ones(4))


def test_multi_stream_capture_through_events():
    a = torch.randn(256, device=DEV)
    side = torch.xxnpu.Stream()
    g = torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(g):
        origin = torch.xxnpu.current_stream()
        side.wait_stream(origin)  # fork: side joins the capture
        with torch.xxnpu.stream(side):
            b = a * 2
        origin.wait_stream(side)  # join
        c = a + b
        d = c.sin()
    for _ in range(2):
        new = torch.randn(256)
        a.copy_(new.to(DEV))
        g.replay()
        torch.testing.assert_close(d.cpu(), (new + new * 2).sin())


def test_unjoined_fork_fails_the_capture_and_device_stays_usable():
    a = torch.randn(16, device=DEV)
    side = torch.xxnpu.Stream()
    g = torch.xxnpu.XXNPUGraph()
    with pytest.raises(RuntimeError, match="xxnpu graph capture failed"):
        with torch.xxnpu.graph(g):
            side.wait_stream(torch.xxnpu.current_stream())
            with torch.xxnpu.stream(side):
                a.mul_(2)
    assert not torch.xxnpu.is_current_stream_capturing()
    torch.xxnpu.synchronize()
    assert torch.equal((a + 1).cpu(), a.cpu() + 1)


# ---------------------------------------------------------------- capture errors


@pytest.mark.parametrize(
    "illegal",
    [
        pytest.param(lambda x: torch.xxnpu.synchronize(), id="synchronize"),
        pytest.param(lambda x: x.sum().item(), id="item"),
        pytest.param(lambda x: x.cpu(), id="cpu"),
    ],
)
def test_illegal_calls_in_capture_raise_and_device_stays_usable(illegal):
    x = torch.ones(32, device=DEV)
    g = torch.xxnpu.XXNPUGraph()
    before = torch.xxnpu.current_stream()
    with pytest.raises(RuntimeError) as info:
        with torch.xxnpu.graph(g):
            y = x * 2
            illegal(y)
    # The illegal call's own error, chained under capture_end's report of the capture it spoilt.
    messages = str(info.value) + str(info.value.__context__)
    assert "captur" in messages
    assert torch.xxnpu.current_stream() == before
    assert not torch.xxnpu.is_current_stream_capturing()
    # The device, the capture stream and the graph object are all usable again.
    torch.xxnpu.synchronize()
    assert torch.equal((x + 1).cpu(), torch.full((32,), 2.0))
    # The failed capture gave its pool back.
    assert not [p for p in _pools() if p["id"] == g.pool() and p["use_count"] > 0]
    with torch.xxnpu.graph(g):
        x.add_(1)
    g.replay()
    assert torch.equal(x.cpu(), torch.full((32,), 2.0))


# ---------------------------------------------------------------- memory pools


def test_graphs_allocate_from_their_private_pool_and_release_it_on_reset():
    x = torch.randn(1024, device=DEV)
    g = torch.xxnpu.XXNPUGraph()
    gc.collect()  # as torch.xxnpu.graph does: earlier tests' cycles must not go mid-test
    before = torch.xxnpu.memory_allocated()
    with torch.xxnpu.graph(g):
        y = (x + 1) * 2
    pools = [p for p in _pools() if p["id"] == g.pool()]
    assert len(pools) == 1
    pool = pools[0]
    assert pool["use_count"] == 1 and not pool["allocating"]
    assert pool["allocations"] >= 1 and pool["allocated_bytes"] >= y.numel() * 4
    assert torch.xxnpu.memory_allocated() > before
    # The memory snapshot (what _memory_viz renders) names the pool of y's segment, as
    # CUDA's segment_pool_id; eager x's segment is in no private pool.
    def segment_pool(t):
        addr = t.data_ptr()
        (seg,) = [s for s in torch.xxnpu.memory._snapshot()["segments"]
                  if s["address"] <= addr < s["address"] + s["total_size"]]
        return tuple(seg["segment_pool_id"])
    assert segment_pool(y) == tuple(g.pool()) != (0, 0)
    assert segment_pool(x) == (0, 0)
    g.reset()
    # Released, but y still holds a block of it: the pool stays until that is freed and
    # the cache emptied.
    assert [p["use_count"] for p in _pools() if p["id"] == g.pool()] == [0]
    del y
    torch.xxnpu.empty_cache()
    assert not [p for p in _pools() if p["id"] == g.pool()]
    assert torch.xxnpu.memory_allocated() == before


def test_graphs_share_a_pool_handle_and_reuse_its_memory():
    handle = torch.xxnpu.graph_pool_handle()
    assert handle != torch.xxnpu.graph_pool_handle()
    x = torch.randn(4096, device=DEV)
    g1, g2 = torch.xxnpu.XXNPUGraph(), torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(g1, pool=handle):
        tmp = x * 3
        out1 = tmp + 1
        del tmp  # freed inside the capture: reusable by the next graph of the pool
    with torch.xxnpu.graph(g2, pool=g1.pool()):
        out2 = out1 * 2
    assert g1.pool() == g2.pool() == handle
    (pool,) = [p for p in _pools() if p["id"] == handle]
    assert pool["use_count"] == 2
    assert pool["segments"] == 1  # the second graph fitted in the first one's segment
    g1.replay()
    g2.replay()
    torch.testing.assert_close(out2.cpu(), (x.cpu() * 3 + 1) * 2)
    g1.reset()
    assert [p["use_count"] for p in _pools() if p["id"] == handle] == [1]
    g2.reset()
    del out1, out2
    torch.xxnpu.empty_cache()
    assert not [p for p in _pools() if p["id"] == handle]


def test_ten_thousand_replays_do_not_grow_memory():
    x = torch.randn(64, device=DEV)
    g = torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(g):
        y = x + 1
        for _ in range(4):
            y = y + x
    g.replay()
    torch.xxnpu.synchronize()
    allocated, reserved = torch.xxnpu.memory_allocated(), torch.xxnpu.memory_reserved()
    live = _C._graph_live_counts()
    for _ in range(10_000):
        g.replay()
    torch.xxnpu.synchronize()
    assert torch.xxnpu.memory_allocated() == allocated
    assert torch.xxnpu.memory_reserved() == reserved
    assert _C._graph_live_counts() == live
    torch.testing.assert_close(y.cpu(), x.cpu() * 5 + 1)


# ---------------------------------------------------------------- models


def _mse(out, target):
    # Written out: F.mse_loss has no xxnpu kernel, and its CPU fallback copies to the host,
    # which a capture refuses.
    return (out - target).square().mean()


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def test_mlp_forward_backward_graph_equals_eager():
    model = _mlp().to(DEV)
    ref = copy.deepcopy(model).cpu()
    static_x = torch.randn(8, 16, device=DEV)
    static_t = torch.randn(8, 4, device=DEV)
    # Warm up on a side stream, as on CUDA: autograd's first run allocates lazily.
    side = torch.xxnpu.Stream()
    side.wait_stream(torch.xxnpu.current_stream())
    with torch.xxnpu.stream(side):
        for _ in range(2):
            model.zero_grad(set_to_none=True)
            _mse(model(static_x), static_t).backward()
    torch.xxnpu.current_stream().wait_stream(side)
    model.zero_grad(set_to_none=True)
    g = torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(g):
        static_loss = _mse(model(static_x), static_t)
        static_loss.backward()
    for _ in range(3):
        x, t = torch.randn(8, 16), torch.randn(8, 4)
        static_x.copy_(x.to(DEV))
        static_t.copy_(t.to(DEV))
        g.replay()
        ref.zero_grad(set_to_none=True)
        loss = _mse(ref(x), t)
        loss.backward()
        torch.testing.assert_close(static_loss.cpu(), loss)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad)


def test_make_graphed_callables_mlp_matches_eager():
    model = _mlp().to(DEV)
    ref = copy.deepcopy(model).cpu()
    sample = torch.randn(8, 16, device=DEV, requires_grad=True)
    graphed = torch.xxnpu.make_graphed_callables(model, (sample,))
    assert graphed is model
    for _ in range(2):
        x = torch.randn(8, 16)
        xd = x.to(DEV).requires_grad_()
        xr = x.clone().requires_grad_()
        model.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        out = graphed(xd)
        out.square().sum().backward()
        ref_out = ref(xr)
        ref_out.square().sum().backward()
        torch.testing.assert_close(out.cpu(), ref_out)
        torch.testing.assert_close(xd.grad.cpu(), xr.grad)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad)
    # Eval mode was not captured: it runs eagerly and still gives the right answer.
    model.eval()
    x = torch.randn(8, 16)
    torch.testing.assert_close(model(x.to(DEV)).cpu(), ref(x))


def test_make_graphed_callables_functions_share_a_pool():
    w = torch.randn(16, 16, device=DEV, requires_grad=True)

    def f1(x):
        return (x @ w).relu()

    def f2(x):
        return x.sin() * 2

    a = torch.randn(4, 16, device=DEV, requires_grad=True)
    b = torch.randn(4, 16, device=DEV, requires_grad=True)
    g1, g2 = torch.xxnpu.make_graphed_callables((f1, f2), ((a,), (b,)))
    x = torch.randn(4, 16, device=DEV, requires_grad=True)
    out = g2(g1(x))
    out.sum().backward()
    x2 = x.detach().clone().requires_grad_()
    ref = f2(f1(x2))
    ref.sum().backward()
    torch.testing.assert_close(out.cpu(), ref.cpu())
    torch.testing.assert_close(x.grad.cpu(), x2.grad.cpu())
    with pytest.raises(TypeError, match="only tensors"):
        torch.xxnpu.make_graphed_callables(f1, (3,))


# ---------------------------------------------------------------- graph-safe RNG

_DROP_IN = None


def _random_step():
    """Dropout and randn: two random ops, so the second's offset depends on the first's."""
    return torch.nn.functional.dropout(_DROP_IN, 0.5), torch.randn(7, device=DEV)


def _capture_random_step():
    global _DROP_IN
    _DROP_IN = torch.ones(1000, device=DEV)
    _random_step()  # warm-up, as before any capture
    g = torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(g):
        out = _random_step()
    return g, out


def test_dropout_in_a_graph_draws_fresh_numbers_on_every_replay():
    g, (mask, _) = _capture_random_step()
    seen = []
    for _ in range(3):
        g.replay()
        seen.append(mask.cpu())
    assert not torch.equal(seen[0], seen[1]) and not torch.equal(seen[1], seen[2])
    for m in seen:  # still dropout: zeros and 2s, about half each
        assert set(m.unique().tolist()) == {0.0, 2.0}
        assert 300 < int((m == 0).sum()) < 700


def test_seeded_replays_match_the_same_ops_run_eagerly_and_advance_the_generator():
    g, out = _capture_random_step()
    torch.xxnpu.manual_seed(123)
    replayed = []
    for _ in range(3):
        g.replay()
        replayed.append([t.cpu() for t in out])
    after_replays = torch.randn(5, device=DEV).cpu()

    torch.xxnpu.manual_seed(123)
    eager = [[t.cpu() for t in _random_step()] for _ in range(3)]
    after_eager = torch.randn(5, device=DEV).cpu()
    for r, e in zip(replayed, eager):
        assert torch.equal(r[0], e[0]) and torch.equal(r[1], e[1])
    # The replays moved the generator on: the next eager op continues the sequence.
    assert torch.equal(after_replays, after_eager)
    assert not any(torch.equal(after_replays[:5], r[1][:5]) for r in replayed)

    # Two seeded runs of replays agree.
    torch.xxnpu.manual_seed(123)
    g.replay()
    assert torch.equal(out[0].cpu(), replayed[0][0]) and torch.equal(out[1].cpu(), replayed[0][1])


def test_graph_without_random_ops_leaves_the_generator_alone():
    x = torch.zeros(8, device=DEV)
    g = torch.accelerator.Graph()
    with torch.xxnpu.stream(torch.xxnpu.Stream()), g:
        x.add_(1)
    torch.xxnpu.manual_seed(7)
    g.replay()
    assert torch.xxnpu.default_generators[0].get_offset() == 0


def test_accelerator_graph_replays_random_ops_with_fresh_numbers():
    y = torch.zeros(16, device=DEV)
    g = torch.accelerator.Graph()
    with torch.xxnpu.stream(torch.xxnpu.Stream()), g:
        y.uniform_()
    g.replay()
    first = y.cpu()
    g.replay()
    assert not torch.equal(first, y.cpu())


def test_other_generators_must_be_registered_before_capture():
    gen = torch.Generator(device=DEV)
    with pytest.raises(RuntimeError, match="not registered with the graph"):
        with torch.xxnpu.graph(torch.xxnpu.XXNPUGraph()):
            torch.randn(4, device=DEV, generator=gen)
    assert not torch.xxnpu.is_current_stream_capturing()

    g = torch.xxnpu.XXNPUGraph()
    g.register_generator_state(gen)
    g.register_generator_state(gen)  # twice is once
    with torch.xxnpu.graph(g):
        y = torch.randn(4, device=DEV, generator=gen)
    gen.manual_seed(5)
    g.replay()
    a = y.cpu()
    g.replay()
    b = y.cpu()
    gen.manual_seed(5)
    assert torch.equal(a, torch.randn(4, device=DEV, generator=gen).cpu())
    assert torch.equal(b, torch.randn(4, device=DEV, generator=gen).cpu())

    with pytest.raises(TypeError, match="expects a torch.Generator"):
        g.register_generator_state(3)
    with pytest.raises(ValueError, match="expects an xxnpu generator"):
        g.register_generator_state(torch.Generator())


# ---------------------------------------------------------------- profiler


def test_profiler_shows_a_replay_as_one_launch_of_graph_kernels(tmp_path):
    x = torch.zeros(64, device=DEV)
    g = torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(g):
        x.add_(1)
        x.mul_(2)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
    with torch.profiler.profile(activities=activities) as prof:
        g.replay()
        torch.xxnpu.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    (launch,) = [e for e in events if e.get("name") == "xxnpuGraphLaunch"]
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: e["args"]["graph node id"])
    assert [k["name"] for k in kernels] == ["xxnpu::add", "xxnpu::mul"]
    assert [k["args"]["graph node id"] for k in kernels] == [0, 1]
    assert len({k["args"]["graph id"] for k in kernels}) == 1 and kernels[0]["args"]["graph id"] != 0
    # Both ran from the one launch: its correlation id (the flow arrow's).
    assert all(k["args"]["correlation"] == launch["args"]["correlation"] for k in kernels)


def _profile_replay(g, steps=1):
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            with torch.profiler.record_function("step"):
                g.replay()
        torch.xxnpu.synchronize()
    return prof


def test_profiler_gives_a_replays_device_time_to_the_range_that_called_it():
    x = torch.zeros(1 << 14, device=DEV)
    g = torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(g):
        for _ in range(3):
            x.add_(1)
            x.mul_(2)
    prof = _profile_replay(g, steps=2)
    kernels = [e for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU]
    kernel_us = sum(e.device_time for e in kernels if e.name in ("xxnpu::add", "xxnpu::mul"))
    assert kernel_us > 0
    (step,) = [e for e in prof.key_averages() if e.key == "step" and e.device_type == torch.autograd.DeviceType.CPU]
    assert step.count == 2
    # The six kernels of each replay count as the range's own device time.
    assert step.self_device_time_total == pytest.approx(kernel_us, rel=1e-6)
    assert step.device_time_total == pytest.approx(kernel_us, rel=1e-6)


def test_analyzer_reports_graph_launches(tmp_path):
    from torch_xxnpu.profiler import analyze

    x = torch.zeros(64, device=DEV)
    g = torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(g):
        for _ in range(4):
            x.add_(1)
    g.replay()  # warm
    prof = _profile_replay(g, steps=3)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    s = analyze.summarize(analyze.load_trace(str(path)))
    assert s["graphs"]["launches"] == 3
    (row,) = s["graphs"]["graphs"]
    assert row["launches"] == 3 and row["nodes_per_launch"] == {"min": 4, "max": 4, "avg": 4.0}
    assert row["device_total_us"] > 0 and row["pct_device_time"] == 100.0
    assert "Graph launches (3 xxnpuGraphLaunch calls)" in analyze.format_text(s)
    # The replays' work belongs to the range that called replay(), not to "(no op)".
    ops = {o["name"]: o for o in s["ops"]}
    assert set(ops) == {"step"}
    assert ops["step"]["calls"] == 3 and ops["step"]["device_total_us"] == row["device_total_us"]
    assert not [w for w in s["warnings"] if "not linked" in w], s["warnings"]


# ---------------------------------------------------------------- torch.compile


def _pointwise_chain(x, y):
    for _ in range(10):
        x = x * y + 1
    return x.relu()


def test_reduce_overhead_graphs_and_make_graphed_callables_graphs_a_compiled_function():
    from torch._dynamo.utils import counters

    x, y = torch.randn(64, device=DEV), torch.randn(64, device=DEV)
    expected = _pointwise_chain(x, y).cpu()
    counters.clear()
    reduce_overhead = torch.compile(_pointwise_chain, mode="reduce-overhead")
    for _ in range(3):  # warm-up, capture + replay, replay
        assert torch.allclose(reduce_overhead(x, y).cpu(), expected)
    # torch 2.13's Inductor graphs only "cuda" graphs by itself; torch_xxnpu's
    # compiler.reduce_overhead lets xxnpu graphs through (testing/compiler/reduce_overhead_test.py).
    assert counters["inductor"]["cudagraph_skips"] == 0

    # The explicit path: the compiled function captured by make_graphed_callables (its
    # warm-up calls compile it, outside the capture).
    graphed = torch.xxnpu.make_graphed_callables(torch.compile(_pointwise_chain), (x, y))
    x2 = torch.randn(64, device=DEV)
    assert torch.allclose(graphed(x2, y).cpu(), _pointwise_chain(x2, y).cpu())
    x2.fill_(0.5)  # a new input is seen by the next replay
    assert torch.allclose(graphed(x2, y).cpu(), _pointwise_chain(x2, y).cpu())


def test_generator_graphsafe_state_is_shared_between_generators():
    g1 = torch.Generator(device=DEV)
    g1.manual_seed(3)
    g2 = torch.Generator(device=DEV)
    g2.graphsafe_set_state(g1.graphsafe_get_state())
    a = torch.randn(4, device=DEV, generator=g2).cpu()
    assert g1.get_offset() == 4  # g2's draw advanced the shared state
    g1.manual_seed(3)
    assert torch.equal(torch.randn(4, device=DEV, generator=g1).cpu(), a)
    clone = g1.clone_state()
    torch.randn(4, device=DEV, generator=g1)
    assert clone.get_offset() == 4 and g2.get_offset() == 8  # a clone is a copy
    with pytest.raises(RuntimeError, match="expected the state of an xxnpu generator"):
        g2.graphsafe_set_state(torch.Generator())
