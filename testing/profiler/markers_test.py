"""xxnpu markers (torch.xxnpu.markers.range/range_push/range_pop/mark, emit_xxnpu) in a
torch.profiler capture, and a capture asking for PrivateUse1 without CPU.

A marker range is a host event on its thread's row (args.marker == "range"), a CPU row of
the table that encloses the ops inside it, and a gpu_user_annotation on each stream that
ran device work launched inside it. A mark is a zero-length event (args.marker == "mark").
"""
import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch
import torch_xxnpu  # noqa: F401
from torch.profiler import ProfilerActivity, profile

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


@pytest.fixture(scope="module", autouse=True)
def warm():
    torch.ones(4, device="xxnpu").cpu()
    torch.xxnpu.synchronize()


def _trace(prof, tmp_path, name="trace.json"):
    path = tmp_path / name
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        return json.load(f)


def _markers(trace, kind=None, cat=None):
    out = []
    for e in trace["traceEvents"]:
        marker = e.get("args", {}).get("marker")
        if marker is None or (kind is not None and marker != kind) or (cat is not None and e.get("cat") != cat):
            continue
        out.append(e)
    return out


def _by_name(events):
    out = {}
    for e in events:
        out.setdefault(e["name"], []).append(e)
    return out


def _contains(outer, inner):
    return outer["ts"] <= inner["ts"] and inner["ts"] + inner.get("dur", 0) <= outer["ts"] + outer["dur"]


def test_markers_module_and_its_earlier_name_are_one_module():
    # torch.xxnpu.markers is torch.cuda.nvtx's twin; torch.xxnpu.profiler, its earlier name,
    # stays importable for existing code and must be the same module, not a second copy.
    import torch.xxnpu.markers as new_by_torch_name
    import torch.xxnpu.profiler as old_by_torch_name
    import torch_xxnpu.xxnpu.profiler as old_by_import
    from torch_xxnpu.xxnpu import profiler as old_by_from

    assert torch.xxnpu.profiler is torch.xxnpu.markers
    assert old_by_import is torch.xxnpu.markers and old_by_from is torch.xxnpu.markers
    assert new_by_torch_name is torch.xxnpu.markers and old_by_torch_name is torch.xxnpu.markers
    assert torch.xxnpu.markers.__name__ == "torch_xxnpu.xxnpu.markers"
    assert set(torch.xxnpu.markers.__all__) == {"range_push", "range_pop", "mark", "range", "emit_xxnpu", "step"}


def test_step_is_a_no_op_without_on_demand_capture():
    # torch.xxnpu.markers.step() marks iterations for on-demand capture (on_demand_test);
    # without XXNPU_PROFILER_ON_DEMAND=1 nothing is behind it.
    assert torch.xxnpu.markers._step_hook is None
    assert torch.xxnpu.markers.step() is None


def test_range_and_mark_show_in_the_trace_and_the_table(tmp_path):
    x = torch.ones(64, device="xxnpu")
    with profile(activities=ACTIVITIES) as prof:
        torch.xxnpu.markers.mark("start")
        with torch.xxnpu.markers.range("phase1"):
            y = torch.ops.xxnpu.add(x, x)
            with torch.xxnpu.markers.range("inner"):
                z = y * 2
        assert torch.xxnpu.markers.range_push("manual") == 0
        w = z - 1
        assert torch.xxnpu.markers.range_pop() == 0
        assert torch.xxnpu.markers.range_pop() == -1  # nothing open
    trace = _trace(prof, tmp_path)

    host = _by_name(_markers(trace, cat="privateuse1_runtime"))
    assert sorted(host) == ["inner", "manual", "phase1", "start"], host
    tid = threading.get_native_id()
    for events in host.values():
        assert len(events) == 1
        e = events[0]
        assert e["pid"] == os.getpid() and e["tid"] == tid, e
        assert e["args"]["device"] == 0
    start, phase1, inner, manual = host["start"][0], host["phase1"][0], host["inner"][0], host["manual"][0]
    assert start["args"]["marker"] == "mark" and start["dur"] == 0 and start["ph"] == "X"
    assert phase1["args"]["marker"] == inner["args"]["marker"] == "range"
    assert start["ts"] <= phase1["ts"]
    assert _contains(phase1, inner) and phase1["ts"] + phase1["dur"] <= manual["ts"]

    # Ranges enclose the ops (same row) that ran inside them, and only those.
    ops = _by_name(e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e.get("ph") == "X")
    assert _contains(phase1, ops["xxnpu::add"][0]) and _contains(phase1, ops["aten::mul"][0])
    assert _contains(inner, ops["aten::mul"][0]) and not _contains(inner, ops["xxnpu::add"][0])
    assert _contains(manual, ops["aten::sub"][0]) and not _contains(phase1, ops["aten::sub"][0])

    # Projected onto the stream: over the kernels launched inside the range.
    kernels = _by_name(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    device = _by_name(_markers(trace, cat="gpu_user_annotation"))
    assert sorted(device) == ["inner", "manual", "phase1"], device
    add_k, mul_k = kernels["xxnpu::add"], kernels["xxnpu::mul"]
    assert len(mul_k) == 1 and len(add_k) == 2  # torch.ops.xxnpu.add, then sub (an add with alpha)
    p1 = device["phase1"][0]
    assert p1["pid"] == 0 and p1["tid"] == add_k[0]["tid"] == add_k[0]["args"]["stream"]
    # On the stream's row, but not device work: no args.stream (as Kineto's own; HTA takes
    # an event with one for a kernel).
    assert "stream" not in p1["args"]
    # (Kineto widens a gpu_user_annotation by 1 ns on each side so it encloses its kernels.)
    near = lambda v: pytest.approx(v, abs=0.003)  # noqa: E731 (microseconds)
    assert p1["ts"] == near(add_k[0]["ts"])
    assert p1["ts"] + p1["dur"] == near(mul_k[0]["ts"] + mul_k[0]["dur"])
    assert device["inner"][0]["ts"] == near(mul_k[0]["ts"])
    assert device["inner"][0]["dur"] == near(mul_k[0]["dur"])
    assert device["manual"][0]["ts"] == near(add_k[1]["ts"])

    # The table: a marker range is a CPU row whose device total is its ops' device time.
    avg = {(e.key, str(e.device_type)): e for e in prof.key_averages()}
    row = avg[("phase1", "DeviceType.CPU")]
    assert row.count == 1 and row.cpu_time_total > 0
    assert row.device_time_total == pytest.approx(add_k[0]["dur"] + mul_k[0]["dur"], rel=0.01, abs=0.01)
    assert avg[("start", "DeviceType.CPU")].count == 1
    del w


def test_markers_outside_a_capture_are_dropped(tmp_path):
    torch.xxnpu.markers.mark("before")
    with torch.xxnpu.markers.range("before_range"):
        torch.ones(4, device="xxnpu")
    with profile(activities=ACTIVITIES) as prof:
        torch.xxnpu.markers.mark("during")
    torch.xxnpu.markers.mark("after")
    names = {e["name"] for e in _markers(_trace(prof, tmp_path))}
    assert names == {"during"}


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_distinct_marker_names_outside_a_capture_do_not_grow_memory():
    # Issue 21: every range's name was interned for the life of the process, so a loop
    # with range(f"step {i}") grew without bound (here ~100 MB for 100k 1 KB names).
    pad = "x" * 1000
    for i in range(2000):  # the allocator's own pools reach their steady state first
        with torch.xxnpu.markers.range(f"warm {i} {pad}"):
            pass
    before = _rss_bytes()
    for i in range(100_000):
        with torch.xxnpu.markers.range(f"step {i} {pad}"):
            torch.xxnpu.markers.mark(f"mark {i} {pad}")
    grown = _rss_bytes() - before
    assert grown < (16 << 20), f"100k distinct marker names grew the process by {grown >> 20} MiB"


def test_marker_names_of_successive_captures_stay_right(tmp_path):
    # Names are released a capture later (torch_xxnpu's name generations): every trace of
    # a run of captures shows its own names, never a freed or a later capture's.
    for k in range(4):
        with profile(activities=ACTIVITIES) as prof:
            with torch.xxnpu.markers.range(f"capture {k} range"):
                torch.xxnpu.markers.mark(f"capture {k} mark")
        names = {e["name"] for e in _markers(_trace(prof, tmp_path, f"trace{k}.json"))}
        assert names == {f"capture {k} range", f"capture {k} mark"}


def test_range_opened_before_the_capture_is_clipped_to_its_start(tmp_path):
    torch.xxnpu.markers.range_push("outer")
    with profile(activities=ACTIVITIES) as prof:
        torch.ones(4, device="xxnpu")
        torch.xxnpu.markers.range_pop()
    trace = _trace(prof, tmp_path)
    outer = _by_name(_markers(trace, cat="privateuse1_runtime"))["outer"][0]
    fill = _by_name(e for e in trace["traceEvents"] if e.get("cat") == "cpu_op")["aten::fill_"][0]
    assert outer["ts"] <= fill["ts"] and outer["dur"] > 0


def test_emit_xxnpu_turns_ops_into_marker_ranges(tmp_path):
    """emit_xxnpu (emit_nvtx's twin) on a thread, while a capture runs on this one."""
    x = torch.ones(16, device="xxnpu")
    tids = []

    def worker():
        tids.append(threading.get_native_id())
        with torch.xxnpu.markers.emit_xxnpu():
            y = x + x
            y.mul_(3)
        y.sub_(1)  # after emit_xxnpu: not a marker
        torch.xxnpu.synchronize()

    with profile(activities=ACTIVITIES) as prof:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    trace = _trace(prof, tmp_path)
    host = _by_name(_markers(trace, kind="range", cat="privateuse1_runtime"))
    assert "aten::add" in host and "aten::mul_" in host, sorted(host)
    assert "aten::sub_" not in host
    for events in host.values():
        assert all(e["tid"] == tids[0] for e in events)
    # Each op's range is projected over the kernel it launched.
    kernels = _by_name(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    device = _by_name(_markers(trace, cat="gpu_user_annotation"))
    assert device["aten::add"][0]["ts"] == pytest.approx(kernels["xxnpu::add"][0]["ts"], abs=0.003)
    assert device["aten::mul_"][0]["ts"] == pytest.approx(kernels["xxnpu::mul"][0]["ts"], abs=0.003)


def test_emit_xxnpu_cannot_nest_in_a_capture_on_the_same_thread():
    # As emit_nvtx: torch allows one profiler state per thread.
    with profile(activities=ACTIVITIES):
        with pytest.raises(RuntimeError, match="already enabled"):
            torch.xxnpu.markers.emit_xxnpu().__enter__()
    # ... and both still work afterwards.
    with torch.xxnpu.markers.emit_xxnpu():
        torch.ones(4, device="xxnpu")
    with profile(activities=ACTIVITIES) as prof:
        torch.ones(4, device="xxnpu")
    assert any(e.key == "xxnpu::fill" for e in prof.key_averages())


def test_emit_xxnpu_disabled_is_a_no_op():
    with torch.xxnpu.markers.emit_xxnpu(enabled=False):
        with profile(activities=ACTIVITIES) as prof:  # would raise if emit_xxnpu had started
            torch.ones(4, device="xxnpu")
    assert any(e.key == "aten::fill_" for e in prof.key_averages())


# ------------------------------------------------ PrivateUse1 without CPU (own process)

WARNING = "ProfilerActivity.PrivateUse1 without ProfilerActivity.CPU"

PRIVATEUSE1_ONLY = """
import json, sys
import torch, torch_xxnpu
from torch.profiler import ProfilerActivity, profile
x = torch.ones(8, device="xxnpu"); torch.xxnpu.synchronize()
print("== first", file=sys.stderr, flush=True)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
    torch.ops.xxnpu.add(x, x)
print("== device only", file=sys.stderr, flush=True)
for i in range(2):
    with profile(activities=[ProfilerActivity.PrivateUse1]) as prof:
        torch.ops.xxnpu.add(x, x)
prof.export_chrome_trace(sys.argv[1])
avg = {e.key: e for e in prof.key_averages()}
print(json.dumps({k: [e.count, e.self_device_time_total, e.self_cpu_time_total] for k, e in avg.items()}))
"""


def test_privateuse1_without_cpu_records_device_work_and_warns_once(tmp_path):
    path = tmp_path / "device_only.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(PRIVATEUSE1_ONLY), str(path)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    first, device_only = r.stderr.split("== device only")
    assert WARNING not in first  # CPU + PrivateUse1: no warning
    assert device_only.count(WARNING) == 1, r.stderr  # two captures, one warning
    assert "Add ProfilerActivity.CPU" in device_only
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    # The device timeline is there (kernel rows with device time) but no op owns it.
    assert rows["xxnpu::add"][0] == 1 and rows["xxnpu::add"][1] > 0
    assert "aten::empty" not in rows
    trace = json.loads(path.read_text())
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    assert [k["name"] for k in kernels] == ["xxnpu::add"]
    assert "External id" not in kernels[0]["args"]
    assert any(e.get("name") == "xxnpuLaunchKernel" for e in trace["traceEvents"])
    assert not [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op"]
