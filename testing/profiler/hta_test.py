"""HolisticTraceAnalysis (HTA 0.5.0, a pinned test dependency) on xxnpu traces through
torch_xxnpu.profiler.hta: every analysis is checked against figures computed here from
the trace's own events, on one rank and on a 2-rank xxccl run."""
import json
import math
import os
import sys
import warnings

import pytest
import torch
import torch_xxnpu  # noqa: F401
from torch.profiler import ProfilerActivity, profile, schedule

# Not importorskip: HTA is pinned in tools/setup.sh; without it this test must fail.
import hta  # noqa: F401
from hta.analyzers.critical_path_analysis import CPEdgeType
from hta.trace_analysis import TraceAnalysis as PlainTraceAnalysis
from hta.trace_diff import DeviceType, TraceDiff
from hta.version import __version_tuple__ as HTA_VERSION

from torch_xxnpu.profiler import hta as xhta

# The 2-rank run uses the distributed tests' harness (spawned ranks, FileStore).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "distributed"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the ranks import this module by name
from dist_harness import check_all_ok, run_ranks  # noqa: E402

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCHES = ("xxnpuLaunchKernel", "xxnpuMemcpyAsync", "xxnpuMemsetAsync")
US = dict(abs=1e-3)  # HTA works on the trace's float microseconds (ns resolution), shifted to start at 0


def test_hta_is_the_pinned_version():
    assert tuple(HTA_VERSION) == xhta.SUPPORTED_HTA_VERSION == (0, 5, 0)


# ---------------------------------------------------------------- traces


def _capture(path, step_fn, steps):
    """`steps` profiler steps of `step_fn(i)`, exported to `path`."""
    with profile(activities=ACTIVITIES, schedule=schedule(wait=0, warmup=0, active=steps, repeat=1),
                 record_shapes=True) as prof:
        for i in range(steps):
            step_fn(i)
            prof.step()
    prof.export_chrome_trace(path)
    with open(path) as f:
        return json.load(f)


N = 1280  # A and B take tens of milliseconds each: far longer than the host's part of a step, also on a loaded machine


def _dependent_streams_step(i):
    """Step i: copies in and out (the host waits for the copy out); A (a long matmul) on
    the current stream; B (a long matmul) on a side stream that waits for A through an
    event; then C (an add, the step's last device work) after B, reached through a stream
    wait on even steps and through the host synchronizing the side stream on odd ones; a
    device synchronize. (Nothing is launched behind C: HTA's critical path calls the gap
    before a kernel a launch delay only if no later launch is queued when it starts, and
    the simulator's stream thread can be slow to wake on a loaded machine.)"""
    main = torch.xxnpu.current_stream()
    side = _dependent_streams_step.side
    a = _dependent_streams_step.a
    h = torch.randn(128, N).to("xxnpu")  # Memcpy HtoD
    _ = (h * 2).cpu()  # xxnpu::mul, Memcpy DtoH
    x = a @ a  # A
    side.wait_stream(main)
    with torch.xxnpu.stream(side):
        y = x @ a  # B
    if i % 2 == 0:
        main.wait_stream(side)
    else:
        side.synchronize()
    _ = y + 1  # C
    torch.xxnpu.synchronize()


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    d = tmp_path_factory.mktemp("one_rank")
    _dependent_streams_step.side = torch.xxnpu.Stream()
    _dependent_streams_step.a = torch.randn(N, N, device="xxnpu")
    torch.xxnpu.synchronize()
    trace = _capture(str(d / "rank0.json"), _dependent_streams_step, steps=5)
    return str(d), {0: trace}


def ddp_with_overlap(rank, world, trace_dir):
    """A DDP step, then an all_reduce overlapped with matmuls on the compute stream."""
    import torch
    import torch.distributed as dist

    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)).to("xxnpu")
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    x = torch.randn(64, 256, device="xxnpu")
    big = torch.ones(1 << 20, device="xxnpu")
    # Enough matmul work to outlast the all_reduce's start on either rank: four 256^3
    # products (~1 ms since the matmuls use both compute threads) could finish before
    # rank 0's collective kernel began, and its overlap was then 0.
    m = torch.randn(512, 512, device="xxnpu")

    def step(i):
        ddp(x).sum().backward()
        opt.step()
        opt.zero_grad()
        work = dist.all_reduce(big, async_op=True)
        for _ in range(8):
            m.copy_(m @ m * 1e-3)
        work.wait()
        torch.xxnpu.synchronize()

    step(-1)
    dist.barrier()
    path = os.path.join(trace_dir, f"rank{rank}.json")
    _capture(path, step, steps=3)
    return path


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("two_ranks"))
    paths = check_all_ok(run_ranks(ddp_with_overlap, 2, trace_dir=d, deadline_s=240))
    traces = {}
    for rank, path in paths.items():
        with open(path) as f:
            traces[rank] = json.load(f)
    return d, traces


def _analyzer(trace_dir):
    # include_last_profiler_step: every step's work counts (HTA drops the last step's by
    # default); the expectations below apply the same rule.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xhta.TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)


@pytest.fixture(scope="module")
def one_rank_hta(one_rank):
    return _analyzer(one_rank[0])


@pytest.fixture(scope="module")
def two_ranks_hta(two_ranks):
    return _analyzer(two_ranks[0])


# ---------------------------------------------------------------- expectations


def _x(trace, cat=None):
    return [(i, e) for i, e in enumerate(trace["traceEvents"])
            if e.get("ph") == "X" and (cat is None or e.get("cat") == cat)]


def _end(e):
    return e["ts"] + e["dur"]


def _steps_end(trace):
    return max(_end(e) for _, e in _x(trace, "user_annotation") if e["name"].startswith("ProfilerStep#"))


def _calls(trace):
    """correlation -> runtime call (the host side of every device activity)."""
    return {e["args"]["correlation"]: e for _, e in _x(trace, "privateuse1_runtime") if "correlation" in e["args"]}


def _launches(trace):
    """correlation -> call, for the calls HTA counts as launches (its cudaLaunchKernel,
    cudaMemcpyAsync, cudaMemsetAsync)."""
    return {c: e for c, e in _calls(trace).items() if e["name"] in LAUNCHES}


def _device_work(trace):
    """The device work HTA keeps with include_last_profiler_step=True: queued by a call
    that starts before the last profiler step ends."""
    calls, last = _calls(trace), _steps_end(trace)
    out = []
    for _, e in _x(trace):
        if e["cat"] in DEVICE_WORK:
            call = calls.get(e["args"]["correlation"])
            if call is not None and call["ts"] <= last:
                out.append(e)
    return out


def _launched_work(trace):
    launches = _launches(trace)
    return [e for e in _device_work(trace) if e["args"]["correlation"] in launches]


def _union(intervals):
    merged = []
    for s, t in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], t)
        else:
            merged.append([s, t])
    return merged


def _length(intervals):
    return sum(t - s for s, t in intervals)


def _intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, t = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < t:
            out.append([s, t])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _is_comm(e):
    return e["cat"] == "kernel" and e["name"].startswith("xxccl:")


def _is_compute(e):
    return e["cat"] == "kernel" and not _is_comm(e)


def _row(df, **where):
    for k, v in where.items():
        df = df[df[k] == v]
    assert len(df) == 1, (where, df)
    return df.iloc[0]


# ---------------------------------------------------------------- the checks


def _check_temporal_breakdown(analyzer, traces):
    df = analyzer.get_temporal_breakdown(visualize=False)
    assert sorted(df["rank"]) == sorted(traces)
    for rank, trace in traces.items():
        work = _device_work(trace)
        span = max(map(_end, work)) - min(e["ts"] for e in work)
        idle = span - _length(_union((e["ts"], _end(e)) for e in work))
        compute = _length(_union((e["ts"], _end(e)) for e in work if _is_compute(e)))
        row = _row(df, rank=rank)
        # Sums over many events: each end point is good to the trace's 1 ns.
        near = dict(abs=1e-3 * len(work))
        assert row["kernel_time(us)"] == pytest.approx(span, **US)
        assert row["idle_time(us)"] == pytest.approx(idle, **near)
        assert row["compute_time(us)"] == pytest.approx(compute, **near)
        assert row["non_compute_time(us)"] == pytest.approx(span - compute - idle, **near)


def _check_kernel_breakdown(analyzer, traces):
    by_type, by_kernel = analyzer.get_gpu_kernel_breakdown(visualize=False, num_kernels=1000, duration_ratio=1.0)
    for rank, trace in traces.items():
        work = _device_work(trace)
        for name in {e["name"] for e in work}:
            durs = [e["dur"] for e in work if e["name"] == name]
            kind = work[[e["name"] for e in work].index(name)]
            expected_type = ("COMMUNICATION" if _is_comm(kind) else "COMPUTATION" if _is_compute(kind)
                             else "MEMORY")
            row = _row(by_kernel, rank=rank, name=name)
            assert row["kernel_type"] == expected_type, name
            assert row["sum (us)"] == pytest.approx(sum(durs), **US)
            assert row["max (us)"] == pytest.approx(max(durs), **US)
            assert row["min (us)"] == pytest.approx(min(durs), **US)
        assert set(by_kernel[by_kernel["rank"] == rank]["name"]) == {e["name"] for e in work}
    # By type, over all ranks: time split by which types run at once ("COMPUTATION
    # overlapping COMMUNICATION", ...); HTA truncates each piece to whole microseconds.
    expected, pieces = {}, {}
    for trace in traces.values():
        for label, (s, t) in _type_pieces(_device_work(trace)):
            expected[label] = expected.get(label, 0.0) + (t - s)
            pieces[label] = pieces.get(label, 0) + 1
    got = dict(zip(by_type["kernel_type"], by_type["sum"]))
    assert set(got) == set(expected)
    for label, total in expected.items():
        assert total - pieces[label] - 1e-3 <= got[label] <= total + 1e-3, label
    assert by_type["percentage"].sum() == pytest.approx(100.0, abs=0.5)


def _kernel_type(e):
    return "COMMUNICATION" if _is_comm(e) else "COMPUTATION" if _is_compute(e) else "MEMORY"


def _type_pieces(work):
    """(label, interval) for each stretch of time during which the same set of kernel
    types runs, labelled as HTA does."""
    order = ("COMPUTATION", "COMMUNICATION", "MEMORY")
    merged = {k: _union((e["ts"], _end(e)) for e in work if _kernel_type(e) == k) for k in order}
    points = sorted({p for iv in merged.values() for s, t in iv for p in (s, t)})
    out = []
    for s, t in zip(points, points[1:]):
        mid = (s + t) / 2
        running = [k for k in order if any(a <= mid < b for a, b in merged[k])]
        if running:
            out.append((" overlapping ".join(running), (s, t)))
    return out


def _check_idle_time_breakdown(analyzer, traces):
    df, stats = analyzer.get_idle_time_breakdown(ranks=sorted(traces), visualize=False, show_idle_interval_stats=True)
    for rank, trace in traces.items():
        calls = _calls(trace)
        streams = {}
        for e in _device_work(trace):
            streams.setdefault(e["args"]["stream"], []).append(e)
        assert set(df[df["rank"] == rank]["stream"]) == set(streams)
        for stream, evs in streams.items():
            evs.sort(key=lambda e: e["ts"])
            expected = {"host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0}
            # Times from the earliest event, as HTA keeps them: "ts" is microseconds on the
            # trace's clock (~5e12, where a double resolves ~1 ns), so ts + dur computed there
            # rounds each end by up to half that, and over a stream's gaps the sums came out
            # 0.0145 us off HTA's, past the tolerance. The subtraction itself is exact.
            base = min(x["ts"] for t in traces.values() for _, x in _x(t))
            for prev, e in zip(evs, evs[1:]):
                prev_end = (prev["ts"] - base) + prev["dur"]
                gap = (e["ts"] - base) - prev_end
                if calls[e["args"]["correlation"]]["ts"] - base > prev_end:
                    expected["host_wait"] += gap  # the host had not launched it yet
                elif gap < 30:
                    expected["kernel_wait"] += gap
                else:
                    expected["other"] += gap
            got = df[(df["rank"] == rank) & (df["stream"] == stream)].set_index("idle_category")["idle_time"]
            for category, value in expected.items():
                # HTA rounds its table to 2 decimals.
                assert float(got.get(category, 0.0)) == pytest.approx(value, abs=0.01 + 1e-6 * value), (
                    rank, stream, category)
    assert stats is not None and not stats.empty


def _check_launch_stats(analyzer, traces):
    stats = analyzer.get_cuda_kernel_launch_stats(ranks=sorted(traces), visualize=False)
    for rank, trace in traces.items():
        launches = _launches(trace)
        work = {e["args"]["correlation"]: e for e in _launched_work(trace)}
        df = stats[rank].set_index("correlation")
        assert sorted(df.index) == sorted(work), "one row per device activity launched in the capture"
        for corr, e in work.items():
            launch = launches[corr]
            row = df.loc[corr]
            assert row["cpu_duration"] == pytest.approx(launch["dur"], **US)
            assert row["gpu_duration"] == pytest.approx(e["dur"], **US)
            assert row["launch_delay"] == pytest.approx(max(0.0, e["ts"] - _end(launch)), **US)


def _check_queue_length(analyzer, traces):
    summary = analyzer.get_queue_length_summary(ranks=sorted(traces))
    assert summary is not None
    for rank, trace in traces.items():
        launches = _launches(trace)
        steps = {}
        for e in _launched_work(trace):
            launch = launches[e["args"]["correlation"]]
            steps.setdefault(e["args"]["stream"], []).extend([(launch["ts"], 1), (e["ts"], -1)])
        for stream, changes in steps.items():
            lengths, n = [], 0
            for _, d in sorted(changes):
                n += d
                lengths.append(n)
            row = summary.loc[(rank, stream)]["queue_length"]
            assert row["count"] == len(lengths)
            assert row["max"] == max(lengths)
            assert row["mean"] == pytest.approx(sum(lengths) / len(lengths))
            assert lengths[-1] == 0 and row["min"] == 0


def _check_memory_bandwidth(analyzer, traces):
    summary = analyzer.get_memory_bw_summary(ranks=sorted(traces))
    for rank, trace in traces.items():
        copies = {}
        for e in _device_work(trace):
            if e["cat"] == "gpu_memcpy" and e["args"].get("memory bandwidth (GB/s)", 0) > 0:
                copies.setdefault(e["name"][:11], []).append(e)
        for kind, evs in copies.items():
            # One copy at a time (one stream): the series' nonzero points are the copies.
            assert not any(_intersect([[a["ts"], _end(a)]], [[b["ts"], _end(b)]])
                           for a in evs for b in evs if a is not b)
            bw = [e["args"]["memory bandwidth (GB/s)"] for e in evs]
            row = summary.loc[(rank, kind)]["memory_bw_gbps"]
            assert row["count"] == len(bw), kind
            assert row["mean"] == pytest.approx(sum(bw) / len(bw))
            assert row["max"] == pytest.approx(max(bw))
        assert set(summary.loc[rank].index) == set(copies)


def _check_overlap(analyzer, traces):
    df = analyzer.get_comm_comp_overlap(visualize=False)
    for rank, trace in traces.items():
        work = _device_work(trace)
        comm = _union((e["ts"], _end(e)) for e in work if _is_comm(e))
        comp = _union((e["ts"], _end(e)) for e in work if _is_compute(e))
        got = _row(df, rank=rank)["comp_comm_overlap_pctg"]
        if not comm:
            assert math.isnan(got)  # no communication: HTA's ratio is 0/0
            continue
        expected = 100 * _length(_intersect(comm, comp)) / _length(comm)
        assert 0 <= got <= 100
        assert got == pytest.approx(expected, abs=0.01)


CHECKS = [_check_temporal_breakdown, _check_kernel_breakdown, _check_idle_time_breakdown, _check_launch_stats,
          _check_queue_length, _check_memory_bandwidth, _check_overlap]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[len("_check_"):])
def test_one_rank(one_rank, one_rank_hta, check):
    check(one_rank_hta, one_rank[1])


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[len("_check_"):])
def test_two_ranks(two_ranks, two_ranks_hta, check):
    check(two_ranks_hta, two_ranks[1])


def test_two_ranks_have_distributed_info_and_overlapping_collectives(two_ranks, two_ranks_hta):
    assert two_ranks_hta.t.get_ranks() == [0, 1]
    for rank, trace in two_ranks[1].items():
        info = trace["distributedInfo"]
        assert info["rank"] == rank and info["world_size"] == 2 and info["backend"] == "xxccl"
        # As an NCCL run's: the process groups, with the backend each uses for xxnpu.
        assert info["pg_count"] >= 1, info
        default = [pg for pg in info["pg_config"] if pg["pg_desc"] == "default_pg"]
        assert len(default) == 1 and default[0]["ranks"] == [0, 1] and default[0]["pg_size"] == 2, info
        assert "xxnpu:xxccl" in default[0]["backend_config"], info
    # The workload overlaps the all_reduce with matmuls: the figure is not trivially 0.
    df = two_ranks_hta.get_comm_comp_overlap(visualize=False)
    assert (df["comp_comm_overlap_pctg"] > 0).all(), df


# ---------------------------------------------------------------- critical path


def _named(trace, cat, name):
    return [(i, e) for i, e in _x(trace, cat) if e["name"] == name]


def _in(outer, e):
    return outer["ts"] <= e["ts"] and _end(e) <= _end(outer)


@pytest.mark.parametrize("step", [2, 3], ids=["stream_wait", "host_stream_sync"])
def test_critical_path_follows_cross_stream_and_host_syncs(one_rank, one_rank_hta, step):
    trace = one_rank[1][0]
    name = f"ProfilerStep#{step}"
    (_, cpu_step), = _named(trace, "user_annotation", name)
    # The step's projections onto the streams (same name) are not instances of it.
    assert _named(trace, "gpu_user_annotation", name)
    graph, ok = one_rank_hta.critical_path_analysis(rank=0, annotation=name, instance_id=0)
    assert ok
    on_path = graph.critical_path_events_set

    calls = _calls(trace)
    main = torch.xxnpu.default_stream().stream_id
    work = sorted(((i, e) for i, e in _x(trace) if e["cat"] in DEVICE_WORK
                   and _in(cpu_step, calls.get(e["args"]["correlation"], {"ts": -1, "dur": 0}))),
                  key=lambda ie: ie[1]["ts"])
    (a_i, a), = [(i, e) for i, e in work if e["name"] == "xxnpu::mm" and e["args"]["stream"] == main]
    (b_i, b), = [(i, e) for i, e in work if e["name"] == "xxnpu::mm" and e["args"]["stream"] != main]
    (c_i, c), = [(i, e) for i, e in work if e["name"] == "xxnpu::add"]
    breakdown = graph.get_critical_path_breakdown()
    assert a_i in on_path and b_i in on_path, breakdown[breakdown["duration"] > 100].to_string()

    def edge(src_event, src_end, dst_event, dst_end, on_critical_path=True):
        s = graph.get_nodes_for_event(src_event)[1 if src_end else 0]
        d = graph.get_nodes_for_event(dst_event)[1 if dst_end else 0]
        e = graph.edges[s.idx, d.idx]["object"]
        assert not on_critical_path or e in graph.critical_path_edges_set
        return e

    # B waited on the device for A (a Stream Wait Event naming the xxnpuEventRecord after A).
    assert edge(a_i, True, b_i, False).type == CPEdgeType.SYNC_DEPENDENCY
    if step % 2 == 0:
        # C, queued at once, waited on the device for B.
        assert c_i in on_path
        assert edge(b_i, True, c_i, False).type == CPEdgeType.SYNC_DEPENDENCY
    else:
        # The host waited for the side stream (a Stream Sync), then went on.
        (sync_i, _), = [(i, e) for i, e in _named(trace, "privateuse1_runtime", "xxnpuStreamSynchronize")
                        if _in(cpu_step, e) and e["args"].get("target stream") == b["args"]["stream"]]
        assert edge(b_i, True, sync_i, True).type == CPEdgeType.SYNC_DEPENDENCY
    # The host's device synchronize ended when the last device work did (a Context Sync).
    # Not necessarily on the path: the step may end there, a tie with the kernel's end.
    (dsync_i, _), = [(i, e) for i, e in _named(trace, "privateuse1_runtime", "xxnpuDeviceSynchronize")
                     if _in(cpu_step, e)]
    last_i = max(((i, e) for i, e in work), key=lambda ie: _end(ie[1]))[0]
    assert edge(last_i, True, dsync_i, True, on_critical_path=False).type == CPEdgeType.SYNC_DEPENDENCY
    # A's and B's time is the device's, not a launch delay or the host waiting.
    by_event = breakdown.groupby("event_idx")["duration"].sum()
    assert by_event[a_i] == pytest.approx(a["dur"], **US)
    assert by_event[b_i] == pytest.approx(b["dur"], **US)
    assert set(breakdown[breakdown["event_idx"].isin([a_i, b_i])]["bound_by"]) == {"gpu_compute_bound"}
    assert breakdown["duration"].sum() <= cpu_step["dur"] + 1e-3


def test_two_ranks_critical_path_counts_collectives_as_communication(two_ranks_hta):
    bound = {}
    for rank in (0, 1):
        graph, ok = two_ranks_hta.critical_path_analysis(rank=rank, annotation="ProfilerStep#1", instance_id=0)
        assert ok
        b = graph.get_critical_path_breakdown()
        # A kernel's own time (not the gap after it, also attributed to it).
        b = b[b["type"] == CPEdgeType.OPERATOR_KERNEL.value]
        names = b["s_name"].fillna("")
        bound.update({(rank, n): v for n, v in zip(names, b["bound_by"]) if n.startswith("xxccl:")})
    assert bound, "a collective is on some rank's critical path"
    assert set(bound.values()) == {"gpu_communication_bound"}, bound


def test_launch_ids_and_aten_op_to_kernel_delays(one_rank, one_rank_hta):
    trace = one_rank[1][0]
    df = one_rank_hta.get_aten_op_kernels_and_delay(ranks=[0])[0].set_index(["aten_op_name", "kernel_sequence"])
    # Every matmul (A and B of each step) launched its one kernel from aten::mm.
    mm = [e for e in _launched_work(trace) if e["name"] == "xxnpu::mm"]
    assert df.loc[("aten::mm", "xxnpu::mm"), "occurrence_count"] == len(mm) == 10


# ---------------------------------------------------------------- trace diff


def test_trace_diff_counts_the_extra_kernels(tmp_path):
    x = torch.randn(64, 64, device="xxnpu")

    def adds(n):
        def step(i):
            y = x
            for _ in range(n):
                y = y + x
            torch.xxnpu.synchronize()
        return step

    traces = {}
    for label, n in (("control", 3), ("test", 5)):
        d = tmp_path / label
        d.mkdir()
        traces[label] = _capture(str(d / "rank0.json"), adds(n), steps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        diff = TraceDiff.compare_traces(xhta.labeled_trace(str(tmp_path / "control"), "control"),
                                        xhta.labeled_trace(str(tmp_path / "test"), "test"),
                                        device_type=DeviceType.GPU)

    def first_step_adds(trace):
        (_, step), = [(i, e) for i, e in _x(trace, "user_annotation") if e["name"] == "ProfilerStep#0"]
        calls = _calls(trace)
        return [e for _, e in _named(trace, "kernel", "xxnpu::add") if _in(step, calls[e["args"]["correlation"]])]

    row = diff.loc["xxnpu::add"]
    control, test = first_step_adds(traces["control"]), first_step_adds(traces["test"])
    assert (len(control), len(test)) == (3, 5)
    assert row["control_counts"] == 3 and row["test_counts"] == 5 and row["diff_counts"] == 2
    assert row["counts_change_categories"] == "+"
    assert row["control_total_duration"] == pytest.approx(sum(e["dur"] for e in control), **US)
    assert row["test_total_duration"] == pytest.approx(sum(e["dur"] for e in test), **US)


# ---------------------------------------------------------------- the trace itself


def test_plain_hta_tells_host_events_from_device_work(one_rank):
    """Without the adapter, HTA still splits host and device events right: only device
    rows carry args.stream (Kineto's convention), so no launch, wait or annotation is
    taken for a kernel."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = PlainTraceAnalysis(trace_dir=one_rank[0])
    df = plain.t.get_trace(0)
    names = plain.t.symbol_table.get_sym_table()
    device_names = {names[i] for i in df[df["stream"] != -1]["name"].unique()}
    trace = one_rank[1][0]
    expected = {e["name"] for _, e in _x(trace) if e["cat"] in (*DEVICE_WORK, "cuda_sync")}
    assert device_names == expected
    assert "Stream Wait Event" in device_names


def test_stream_waits_name_the_event_record_they_wait_for(one_rank):
    trace = one_rank[1][0]
    records = {e["args"]["correlation"]: e for _, e in _named(trace, "privateuse1_runtime", "xxnpuEventRecord")}
    waits = [e for _, e in _x(trace, "cuda_sync")]
    assert waits and records
    for w in waits:
        args = w["args"]
        assert w["name"] == args["cuda_sync_kind"] == "Stream Wait Event"
        record = records[args["wait_on_cuda_event_record_corr_id"]]
        assert record["args"]["target stream"] == args["wait_on_stream"] != args["stream"]
        assert record["ts"] <= w["ts"]
