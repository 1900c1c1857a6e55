"""torch.compile(mode="reduce-overhead") on xxnpu (python/torch_xxnpu/compiler/reduce_overhead.py,
docs/compile.md): compiled graphs captured as xxnpu graphs and replayed, against CPU eager.

Each compiled function is small: Inductor's C++ compiles dominate the time. Inductor's
caches go to a directory private to this test.
"""
import os
import tempfile

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="xxnpu_reduce_overhead_test_")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch_xxnpu  # noqa: E402,F401
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import torch._dynamo  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

DEV = "xxnpu"
ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    counters.clear()
    torch.xxnpu.synchronize()
    yield
    torch.xxnpu.synchronize()


def _graph_launches(fn, *args):
    """How many xxnpuGraphLaunch rows one call of fn(*args) makes, and its result."""
    with profile(activities=ACTIVITIES) as prof:
        out = fn(*args)
        torch.xxnpu.synchronize()
    return sum(e.name == "xxnpuGraphLaunch" for e in prof.events()), out, prof


def _chain(x, y):
    for _ in range(6):
        x = x * y + 1
    return x.relu(), x.sum()


def test_second_call_captures_and_later_calls_replay():
    f = torch.compile(_chain, mode="reduce-overhead")
    xs = [torch.randn(64, device=DEV) for _ in range(4)]
    y = torch.randn(64, device=DEV)
    launches = []
    for x in xs:
        n, out, _ = _graph_launches(f, x, y)
        launches.append(n)
        expected = _chain(x.cpu(), y.cpu())
        for a, b in zip(out, expected):
            torch.testing.assert_close(a.cpu(), b)
    # Call 1 is the warm-up (uncaptured); call 2 captures and replays; then replays only.
    assert launches == [0, 1, 1, 1]
    assert counters["inductor"]["cudagraph_skips"] == 0


def test_outputs_are_not_overwritten_by_the_next_replay():
    f = torch.compile(lambda x: (x * 3).exp(), mode="reduce-overhead")
    xs = [torch.randn(32, device=DEV) for _ in range(5)]
    outs = [f(x) for x in xs]
    for x, o in zip(xs, outs):
        torch.testing.assert_close(o.cpu(), (x.cpu() * 3).exp())
    assert len({o.data_ptr() for o in outs}) == len(outs)
    assert counters["inductor"]["cudagraph_skips"] == 0  # calls 2-5 were replays


def test_outputs_sharing_storage_still_share_it():
    def f(x):
        y = x * 2
        return y, y.t()  # the second is a view of the first

    g = torch.compile(f, mode="reduce-overhead")
    x = torch.randn(4, 5, device=DEV)
    for _ in range(3):
        a, b = g(x)
    assert torch.equal(b.cpu(), a.cpu().t())
    a.zero_()
    assert torch.equal(b.cpu(), torch.zeros(5, 4))


def test_expanded_inputs_are_copied_in_and_empty_outputs_come_back():
    # An input with a stride-0 dim is copied into a buffer of the same layout at each replay
    # (through its non-expanded part); an output without bytes is returned fresh.
    def f(x, y):
        return x * y + 1, y[:0] * 2

    g = torch.compile(f, mode="reduce-overhead")
    for i in range(4):
        col = torch.randn(6, 1)
        x = col.to(DEV).expand(6, 5)  # stride (1, 0): each call brings new values
        y = torch.randn(6, 5)
        n, (out, empty), _ = _graph_launches(g, x, y.to(DEV))
        torch.testing.assert_close(out.cpu(), col.expand(6, 5) * y + 1)
        assert empty.shape == (0, 5) and empty.device.type == DEV
        assert n == (0 if i == 0 else 1)
    assert counters["inductor"]["cudagraph_skips"] == 0


def test_parameters_are_read_in_place_and_a_new_parameter_is_seen():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)).to(DEV)
    cpu = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    cpu.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    f = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(4, 16)
    with torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(f(x.to(DEV)).cpu(), cpu(x), rtol=1e-4, atol=1e-4)
        # In place: the captured graph reads the parameter where it is.
        model[0].weight.mul_(2)
        cpu[0].weight.mul_(2)
        n, out, _ = _graph_launches(f, x.to(DEV))
        assert n == 1
        torch.testing.assert_close(out.cpu(), cpu(x), rtol=1e-4, atol=1e-4)
        # A new parameter somewhere else: captured again, still right.
        w = torch.randn(8, 32)
        model[2].weight = nn.Parameter(w.to(DEV))
        cpu[2].weight = nn.Parameter(w.clone())
        for _ in range(3):
            torch.testing.assert_close(f(x.to(DEV)).cpu(), cpu(x), rtol=1e-4, atol=1e-4)


def test_training_steps_match_cpu():
    torch.manual_seed(1)
    cpu = nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 1))
    dev = nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 1)).to(DEV)
    dev.load_state_dict({k: v.to(DEV) for k, v in cpu.state_dict().items()})
    f = torch.compile(dev, mode="reduce-overhead")
    opt_cpu = torch.optim.SGD(cpu.parameters(), lr=0.1)
    opt_dev = torch.optim.SGD(dev.parameters(), lr=0.1)
    for step in range(5):
        x, t = torch.randn(8, 12), torch.randn(8, 1)
        for m, o, fn, d in ((cpu, opt_cpu, cpu, "cpu"), (dev, opt_dev, f, DEV)):
            o.zero_grad()
            loss = ((fn(x.to(d)) - t.to(d)) ** 2).mean()
            loss.backward()
            o.step()
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5, msg=name)
    assert counters["inductor"]["cudagraph_skips"] == 0
    n, _, _ = _graph_launches(lambda: f(torch.randn(8, 12, device=DEV)).sum().backward())
    assert n == 2  # the forward graph and the backward graph


def test_dropout_draws_fresh_numbers_each_replay_and_seeded_runs_repeat():
    f = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.5, training=True), mode="reduce-overhead")
    x = torch.ones(4096, device=DEV)

    def run():
        torch.xxnpu.manual_seed(7)
        return [f(x).cpu() for _ in range(4)]

    first, second = run(), run()
    assert counters["inductor"]["cudagraph_skips"] == 0  # replays, not uncaptured runs
    for a, b in zip(first, second):
        assert torch.equal(a, b)  # seeded: the same numbers again
    masks = [tuple((a != 0).nonzero().flatten().tolist()) for a in first]
    assert len(set(masks)) == 4  # each call, replays included, drew new numbers
    for a in first:
        kept = a[a != 0]
        assert torch.equal(kept, torch.full_like(kept, 2.0)) and 0.4 < kept.numel() / 4096 < 0.6


def test_dynamic_sizes_capture_once_per_size():
    f = torch.compile(lambda x: (x.sin() * 2).sum(0), mode="reduce-overhead", dynamic=True)
    sizes = [8, 16, 8, 16, 24, 8]
    launches = []
    for n in sizes:
        x = torch.randn(n, 3, device=DEV)
        c, out, _ = _graph_launches(f, x)
        launches.append(c)
        torch.testing.assert_close(out.cpu(), (x.cpu().sin() * 2).sum(0), rtol=1e-5, atol=1e-5)
    # Each size: a warm-up call, then captured; a size seen again replays.
    assert launches == [0, 0, 1, 1, 0, 1]
    assert counters["inductor"]["cudagraph_skips"] == 0


def test_mutated_plain_input_is_not_captured_and_stays_right():
    def f(x):
        x.add_(1)
        return x * 2

    g = torch.compile(f, mode="reduce-overhead")
    x = torch.zeros(16, device=DEV)
    for i in range(3):
        n, out, _ = _graph_launches(g, x)
        assert n == 0
        assert torch.equal(out.cpu(), torch.full((16,), 2.0 * (i + 1)))
    assert torch.equal(x.cpu(), torch.full((16,), 3.0))
    assert counters["inductor"]["cudagraph_skips"] >= 1


def test_static_address_input_may_be_mutated_in_the_graph():
    cache = torch.zeros(8, device=DEV)
    torch._dynamo.mark_static_address(cache)

    def f(v, i):
        cache.index_copy_(0, i, v)
        return cache.sum()

    g = torch.compile(f, mode="reduce-overhead")
    expected = torch.zeros(8)
    for k in range(4):
        i = torch.tensor([k], device=DEV)
        v = torch.tensor([k + 1.0], device=DEV)
        n, out, _ = _graph_launches(g, v, i)
        expected[k] = k + 1
        assert out.item() == expected.sum().item()
    assert n == 1
    assert torch.equal(cache.cpu(), expected)


def test_graph_with_a_host_copy_is_skipped_and_right():
    f = torch.compile(lambda x: (x + 1).cpu() * 2, mode="reduce-overhead")
    x = torch.randn(8, device=DEV)
    for _ in range(3):
        torch.testing.assert_close(f(x), (x.cpu() + 1) * 2)
    assert counters["inductor"]["cudagraph_skips"] >= 1


def test_a_failed_capture_runs_uncaptured_from_then_on():
    from torch_xxnpu.compiler.reduce_overhead import graphify

    calls = []

    def model(inputs):
        (x,) = inputs
        inputs.clear()
        calls.append(torch.xxnpu.is_current_stream_capturing())
        y = x + 1
        torch.xxnpu.synchronize()  # illegal inside a capture
        return [y]

    run = graphify(model, (), device_index=0)
    x = torch.arange(4.0, device=DEV)
    for _ in range(3):
        (y,) = run([x])
        assert torch.equal(y.cpu(), torch.arange(4.0) + 1)
    assert calls == [False, True, False, False]  # warm-up, failed capture, then uncaptured
    assert counters["inductor"]["cudagraph_skips"] == 1
    assert not torch.xxnpu.is_current_stream_capturing()
    assert torch.equal((x * 2).cpu(), torch.arange(4.0) * 2)  # the device is usable


def test_replay_on_a_side_stream_and_profiler_attribution(tmp_path):
    f = torch.compile(lambda x, y: (x @ y).relu() + 1, mode="reduce-overhead")
    x, y = torch.randn(32, 64, device=DEV), torch.randn(64, 16, device=DEV)
    s = torch.xxnpu.Stream()
    with torch.xxnpu.stream(s):
        for _ in range(2):
            f(x, y)
        n, out, prof = _graph_launches(f, x, y)
    assert n == 1
    torch.testing.assert_close(out.cpu(), (x.cpu() @ y.cpu()).relu() + 1, rtol=1e-4, atol=1e-4)
    # The replay's kernels ran on the side stream and their device time belongs to the
    # compiled region's rows.
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert {k.name for k in kernels} >= {"xxnpu::mm"}
    rows = {r.key: r for r in prof.key_averages()}
    region = [r for k, r in rows.items() if k.startswith("Torch-Compiled Region")]
    assert region and region[0].device_time_total > 0
