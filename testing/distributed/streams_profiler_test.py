"""NCCL stream semantics of xxccl: the comm kernel runs on its own stream after the
caller's queued work, work.wait() orders the caller's stream after it without blocking
the host, compute overlaps communication, and each collective is a named kernel with its
bytes on the profiler's device timeline."""
import json
import os
import sys

# Bazel's runfiles make this directory a package; the harness is imported as a sibling.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dist_harness import check_all_ok, run_ranks


def ordering(rank, world):
    import torch
    import torch.distributed as dist

    n = 1 << 22
    # Written by a long chain of kernels on the current stream, then reduced at once:
    # the comm stream must wait for them, or it would reduce stale values.
    x = torch.zeros(n, device="xxnpu")
    for _ in range(20):
        x.add_(1.0)
    work = dist.all_reduce(x, async_op=True)
    work.wait()  # the current stream now waits; the host does not
    y = x * 2  # queued behind the collective on the current stream
    assert torch.equal(y.cpu(), torch.full((n,), 40.0 * world)), y[:4].cpu()
    assert work.is_completed() and work.is_success()
    # On a side stream: the side stream is the one made to wait.
    s = torch.xxnpu.Stream()
    with torch.xxnpu.stream(s):
        z = torch.ones(1024, device="xxnpu") * (rank + 1)
        dist.all_reduce(z)
        z2 = z + 0
    s.synchronize()
    assert torch.equal(z2.cpu(), torch.full((1024,), float(sum(range(1, world + 1)))))
    # The future (DDP's comm hooks) orders its waiter after the collective too.
    f = torch.ones(8, device="xxnpu")
    fut = dist.all_reduce(f, async_op=True).get_future()
    out = fut.wait()[0]
    assert torch.equal(out.cpu(), torch.full((8,), float(world)))
    return True


def test_stream_ordering_and_wait():
    check_all_ok(run_ranks(ordering, 2))


def profiled(rank, world, trace_dir):
    import os

    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    n = 1 << 22  # 16 MB: long enough to overlap compute
    a = torch.ones(n, device="xxnpu")
    c = torch.ones(n, device="xxnpu")
    dist.barrier()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        work = dist.all_reduce(a, async_op=True)
        for _ in range(30):
            c.mul_(1.0001)  # compute on the current stream while the collective runs
        work.wait()
        torch.xxnpu.synchronize()
    path = os.path.join(trace_dir, f"rank{rank}.json")
    prof.export_chrome_trace(path)
    assert torch.equal(a.cpu(), torch.full((n,), float(world)))
    return path


def test_collective_is_a_kernel_on_its_own_stream_overlapping_compute(tmp_path):
    results = check_all_ok(run_ranks(profiled, 2, trace_dir=str(tmp_path)))
    with open(results[0]) as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    comm = [e for e in kernels if e["name"] == "xxccl:all_reduce"]
    assert len(comm) == 1, sorted({e["name"] for e in kernels})
    comm = comm[0]
    assert comm["args"]["bytes"] == 4 * (1 << 22)
    compute = [e for e in kernels if not e["name"].startswith("xxccl:")]
    assert compute, "no compute kernels in the trace"
    assert all(e["args"]["stream"] != comm["args"]["stream"] for e in compute), "comm kernel on a compute stream"
    start, end = comm["ts"], comm["ts"] + comm["dur"]
    overlapping = [e for e in compute if e["ts"] < end and e["ts"] + e["dur"] > start]
    assert overlapping, f"no compute kernel overlaps the collective [{start}, {end}]"
