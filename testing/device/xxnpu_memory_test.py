"""torch.xxnpu memory management (torch.cuda.memory's twin): statistics, cache control,
memory fraction, OOM, and memory snapshots that torch.cuda._memory_viz renders."""
import base64
import json
import pickle
import re
import subprocess
import sys

import pytest
import torch
from torch.cuda import _memory_viz

from testlib import run_python

import torch_xxnpu  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:xxnpu.*has no xxnpu kernel")

MiB = 1 << 20


@pytest.fixture(autouse=True)
def _clean():
    torch.xxnpu.init()
    yield
    torch.xxnpu.memory._record_memory_history(enabled=None)
    for d in range(torch.xxnpu.device_count()):
        torch.xxnpu.set_per_process_memory_fraction(1.0, d)
    torch.xxnpu.empty_cache()


# ---------------------------------------------------------------- statistics


def test_allocated_and_reserved_follow_tensors():
    base_alloc = torch.xxnpu.memory_allocated()
    base_reserved = torch.xxnpu.memory_reserved()
    x = torch.empty(1000, device="xxnpu")  # 4000 bytes -> 4096 (512-byte rounding, as CUDA)
    assert torch.xxnpu.memory_allocated() - base_alloc == 4096
    assert torch.xxnpu.memory_allocated("xxnpu:0") == torch.xxnpu.memory_allocated(0)
    assert torch.xxnpu.memory_reserved() >= torch.xxnpu.memory_allocated()
    assert torch.xxnpu.memory_reserved() - base_reserved in (0, 2 * MiB)  # a small-pool segment
    big = torch.empty(5 * MiB, dtype=torch.uint8, device="xxnpu")
    assert torch.xxnpu.memory_allocated() - base_alloc == 4096 + 5 * MiB
    assert torch.xxnpu.memory_reserved() - base_reserved >= 5 * MiB
    del x, big
    assert torch.xxnpu.memory_allocated() == base_alloc
    # device 1 has its own books
    before1 = torch.xxnpu.memory_allocated(1)
    y = torch.empty(3 * MiB, dtype=torch.uint8, device="xxnpu:1")
    assert torch.xxnpu.memory_allocated(1) - before1 == 3 * MiB
    assert torch.xxnpu.memory_allocated(0) == base_alloc
    del y


def test_peaks_and_their_reset():
    torch.xxnpu.reset_peak_memory_stats()
    base = torch.xxnpu.memory_allocated()
    assert torch.xxnpu.max_memory_allocated() == base
    x = torch.empty(8 * MiB, dtype=torch.uint8, device="xxnpu")
    del x
    assert torch.xxnpu.max_memory_allocated() == base + 8 * MiB
    assert torch.xxnpu.max_memory_reserved() >= base + 8 * MiB
    assert torch.xxnpu.memory_allocated() == base
    torch.xxnpu.reset_peak_memory_stats(0)
    assert torch.xxnpu.max_memory_allocated() == base
    torch.xxnpu.reset_max_memory_allocated()
    assert torch.xxnpu.max_memory_allocated() == base


def test_memory_stats_keys_and_accumulated_reset():
    stats = torch.xxnpu.memory_stats()
    for key in (
        "allocated_bytes.all.current",
        "allocated_bytes.small_pool.peak",
        "reserved_bytes.large_pool.current",
        "active_bytes.all.allocated",
        "inactive_split_bytes.all.freed",
        "requested_bytes.all.current",
        "allocation.all.current",
        "segment.all.current",
        "num_ooms",
        "num_alloc_retries",
    ):
        assert key in stats, key
    x = torch.empty(100, device="xxnpu")
    after = torch.xxnpu.memory_stats()
    assert after["allocation.all.allocated"] == stats["allocation.all.allocated"] + 1
    assert after["requested_bytes.all.current"] - stats["requested_bytes.all.current"] == 400
    del x
    torch.xxnpu.reset_accumulated_memory_stats()
    assert torch.xxnpu.memory_stats()["allocation.all.allocated"] == 0


def test_empty_cache_returns_free_segments():
    x = torch.empty(30 * MiB, dtype=torch.uint8, device="xxnpu")
    del x
    cached = torch.xxnpu.memory_reserved()
    assert cached - torch.xxnpu.memory_allocated() >= 30 * MiB
    free_before, total = torch.xxnpu.mem_get_info()
    torch.xxnpu.empty_cache()
    assert cached - torch.xxnpu.memory_reserved() >= 30 * MiB
    free_after, total_after = torch.xxnpu.mem_get_info()
    assert total == total_after == torch.xxnpu.get_device_properties(0).total_memory
    assert free_after - free_before >= 30 * MiB


def test_memory_summary_layout():
    x = torch.empty(3 * MiB, dtype=torch.uint8, device="xxnpu:1")
    summary = torch.xxnpu.memory_summary(1)
    assert "PyTorch xxnpu memory summary, device ID 1" in summary
    assert re.search(r"Allocated memory\s+\|\s+3072 KiB", summary), summary
    for row in ("Active memory", "xxnpu reserved memory", "from large pool", "from small pool", "xxnpu OOMs"):
        assert row in summary
    short = torch.xxnpu.memory_summary(device="xxnpu:1", abbreviated=True)
    assert "from large pool" not in short and "Allocated memory" in short
    del x


def test_stats_before_initialisation_are_empty_and_do_not_initialise():
    r = run_python(
        """
        import torch, torch_xxnpu
        print(torch.xxnpu.memory_stats() == {}, torch.xxnpu.memory_allocated(), torch.xxnpu.is_initialized())
        torch.xxnpu.empty_cache()
        print(torch.xxnpu.is_initialized())
        """
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "0", "False", "False"]


# ---------------------------------------------------------------- fraction and OOM


def test_per_process_memory_fraction_caps_the_device():
    with pytest.raises(TypeError, match="must be `float`"):
        torch.xxnpu.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match="Allowed range: 0~1"):
        torch.xxnpu.set_per_process_memory_fraction(1.5)
    torch.xxnpu.set_per_process_memory_fraction(0.01, "xxnpu:1")  # ~82 MiB of 8 GiB
    assert torch.xxnpu.get_per_process_memory_fraction(1) == pytest.approx(0.01)
    with pytest.raises(torch.OutOfMemoryError) as info:
        torch.empty(200 * MiB, dtype=torch.uint8, device="xxnpu:1")
    assert "Tried to allocate 200.00 MiB" in str(info.value)
    small = torch.empty(10 * MiB, dtype=torch.uint8, device="xxnpu:1")  # still fits
    torch.empty(200 * MiB, dtype=torch.uint8, device="xxnpu:0")  # device 0 is not capped
    torch.xxnpu.set_per_process_memory_fraction(1.0, 1)
    torch.empty(200 * MiB, dtype=torch.uint8, device="xxnpu:1")
    del small


def test_oom_names_device_and_sizes_and_program_goes_on():
    r = run_python(
        """
        import torch, torch_xxnpu
        MiB = 1 << 20
        torch.xxnpu.memory._record_memory_history()
        a = torch.empty(40 * MiB, dtype=torch.uint8, device="xxnpu")
        try:
            torch.empty(40 * MiB, dtype=torch.uint8, device="xxnpu")
            print("NO OOM")
        except torch.OutOfMemoryError as e:
            assert isinstance(e, RuntimeError)
            print("MSG", str(e).replace("\\n", " "))
        print("OOMS", torch.xxnpu.memory_stats()["num_ooms"])
        actions = [e["action"] for e in torch.xxnpu.memory._snapshot()["device_traces"][0]]
        print("TRACE_OOM", "oom" in actions)
        del a
        b = torch.empty(40 * MiB, dtype=torch.uint8, device="xxnpu")
        b.fill_(7)
        print("AFTER", b[-1].item(), torch.xxnpu.memory_allocated() == 40 * MiB)
        """,
        XXNPU_DEVICE_MEMORY="64M",
    )
    assert r.returncode == 0, r.stderr
    out = dict(line.split(" ", 1) for line in r.stdout.strip().splitlines())
    msg = out["MSG"]
    assert "xxnpu out of memory on device 0" in msg
    assert "Tried to allocate 40.00 MiB" in msg
    assert "total capacity of 64.00 MiB" in msg
    assert "40.00 MiB (41943040 bytes) is already allocated" in msg
    assert out["OOMS"] == "1"
    assert out["TRACE_OOM"] == "True"
    assert out["AFTER"] == "7 True"


# ---------------------------------------------------------------- snapshots


def _allocate_for_snapshot():
    return torch.empty(1000, device="xxnpu"), torch.empty(3 * MiB, dtype=torch.uint8, device="xxnpu")


def _trace(snapshot, device=0):
    return snapshot["device_traces"][device]


def test_snapshot_schema_history_and_stacks():
    torch.xxnpu.memory._record_memory_history(max_entries=100000, clear_history=True)
    small, big = _allocate_for_snapshot()
    small_addr = small.data_ptr()
    del small
    snap = torch.xxnpu.memory._snapshot()
    assert set(snap) >= {"segments", "device_traces", "allocator_settings"}
    assert len(snap["device_traces"]) == torch.xxnpu.device_count()

    trace = _trace(snap)
    allocs = [e for e in trace if e["action"] == "alloc"]
    assert [e["size"] for e in allocs[-2:]] == [4096, 3 * MiB]
    assert any(e["action"] == "free_requested" and e["addr"] == small_addr for e in trace)
    assert any(e["action"] == "free_completed" and e["addr"] == small_addr for e in trace)
    for e in allocs[-2:]:
        names = [f["name"] for f in e["frames"]]
        assert "_allocate_for_snapshot" in names, names
        assert {"filename", "line", "name"} <= set(e["frames"][0])
        assert isinstance(e["time_us"], int) and e["stream"] == 0

    # the live block appears in its segment with its stack
    blocks = [
        (seg, b) for seg in snap["segments"] for b in seg["blocks"] if b["address"] == big.data_ptr()
    ]
    assert len(blocks) == 1
    seg, block = blocks[0]
    assert seg["device"] == 0 and seg["segment_type"] == "large"
    assert block["state"] == "active_allocated" and block["size"] == 3 * MiB
    assert "_allocate_for_snapshot" in [f["name"] for f in block["frames"]]
    assert seg["total_size"] >= seg["allocated_size"] >= 3 * MiB
    segs = torch.xxnpu.memory.memory_snapshot()
    assert any(b["address"] == big.data_ptr() and b["state"] == "active_allocated" for s in segs for b in s["blocks"])
    del big


def test_memory_viz_renders_the_snapshot():
    torch.xxnpu.memory._record_memory_history(clear_history=True)
    keep = _allocate_for_snapshot()
    snap = torch.xxnpu.memory._snapshot()

    summary = _memory_viz.segsum(snap)
    assert "total_reserved:" in summary and "total_allocated:" in summary
    text = _memory_viz.trace(snap)
    assert text.startswith("Device 0 ----------------")
    assert "cudaMalloc(" in text and "= a[0:4.0KiB]" in text

    def same(x):
        return x

    flame = _memory_viz.segments(snap, format_flamegraph=same)
    assert "_allocate_for_snapshot" in flame
    assert "_allocate_for_snapshot" in _memory_viz.memory(snap, format_flamegraph=same)
    before = snap["segments"]
    extra = torch.empty(30 * MiB, dtype=torch.uint8, device="xxnpu")
    after = torch.xxnpu.memory._snapshot()["segments"]
    assert "only_after" in _memory_viz.compare(before, after, format_flamegraph=same)

    for html in (_memory_viz.segment_plot(snap), _memory_viz.trace_plot(snap), _memory_viz.trace_plot(snap, plot_segments=True)):
        assert html.lstrip().startswith("<!DOCTYPE html>") and "MemoryViz.js" in html
        # the page embeds the pickled snapshot: it decodes back to ours
        payload = json.loads(re.search(r"const local_files = (\[.*\])", html).group(1))[0]["base64"]
        decoded = pickle.loads(base64.b64decode(payload))
        assert decoded["segments"] == snap["segments"]
    del keep, extra


def test_dump_snapshot_file_is_read_by_memory_viz_cli(tmp_path):
    torch.xxnpu.memory._record_memory_history(clear_history=True)
    keep = _allocate_for_snapshot()
    path = tmp_path / "snap.pickle"
    torch.xxnpu.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        loaded = pickle.load(f)
    assert "_allocate_for_snapshot" in json.dumps(loaded["device_traces"][0])
    r = subprocess.run(
        [sys.executable, "-m", "torch.cuda._memory_viz", "trace", str(path)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert "cudaMalloc(" in r.stdout
    out = tmp_path / "plot.html"
    r = subprocess.run(
        [sys.executable, "-m", "torch.cuda._memory_viz", "trace_plot", str(path), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "MemoryViz.js" in out.read_text()
    del keep


def test_history_can_be_stopped_bounded_and_filtered():
    torch.xxnpu.memory._record_memory_history(max_entries=3, clear_history=True)
    for _ in range(10):
        torch.empty(100, device="xxnpu")
    assert len(_trace(torch.xxnpu.memory._snapshot())) == 3

    torch.xxnpu.memory._record_memory_history(enabled=None)
    torch.empty(100, device="xxnpu")
    assert _trace(torch.xxnpu.memory._snapshot()) == []

    torch.xxnpu.memory._record_memory_history(skip_actions=["free_requested", "free_completed"])
    torch.empty(100, device="xxnpu")
    actions = {e["action"] for e in _trace(torch.xxnpu.memory._snapshot())}
    assert "alloc" in actions and not actions & {"free_requested", "free_completed"}

    torch.xxnpu.memory._record_memory_history(enabled=None)
    torch.xxnpu.memory._record_memory_history(context=None)
    keep = torch.empty(100, device="xxnpu")
    assert all(e["frames"] == [] for e in _trace(torch.xxnpu.memory._snapshot()))
    del keep

    with pytest.raises(ValueError, match="enabled must be"):
        torch.xxnpu.memory._record_memory_history(enabled="everything")
    with pytest.raises(ValueError, match="unknown skip_actions"):
        torch.xxnpu.memory._record_memory_history(skip_actions=["nope"])


def test_state_only_and_legacy_signature():
    torch.xxnpu.memory._record_memory_history(enabled="state", clear_history=True)
    keep = _allocate_for_snapshot()
    snap = torch.xxnpu.memory._snapshot()
    assert _trace(snap) == []  # no history, but live blocks keep their stacks
    frames = [b["frames"] for seg in snap["segments"] for b in seg["blocks"] if b["address"] == keep[1].data_ptr()]
    assert "_allocate_for_snapshot" in [f["name"] for f in frames[0]]
    torch.xxnpu.memory._record_memory_history(enabled=None)

    torch.xxnpu.memory._record_memory_history(True, trace_alloc_max_entries=50, trace_alloc_record_context=True)
    torch.empty(100, device="xxnpu")
    assert any(e["action"] == "alloc" for e in _trace(torch.xxnpu.memory._snapshot()))
    torch.xxnpu.memory._record_memory_history(False)
    torch.empty(100, device="xxnpu")
    assert _trace(torch.xxnpu.memory._snapshot()) == []
    del keep


# ---------------------------------------------------------------- the host bounds device memory
#
# Device memory is host RAM. An allocation the host cannot back must be torch.OutOfMemoryError,
# not the OOM killer or a SIGBUS (docs/device-runtime.md, "Memory"). The children below run
# under limits, so that a regression fails the test instead of endangering the machine.

_HOST_LIMITED_CHILD = """
    import resource
    import torch, torch_xxnpu
    MiB, GiB = 1 << 20, 1 << 30
    def status(field):
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field + ":"))
    def meminfo(field):
        with open("/proc/meminfo") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field + ":"))
    # Before the runtime starts: 4 GiB of address space on top of what torch took.
    limit = status("VmSize") + 4 * GiB
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    total = torch.xxnpu.get_device_properties(0).total_memory
    print("TOTAL", total)
    for what, n in [("capacity", total + MiB), ("ram", meminfo("MemTotal") + GiB)]:
        try:
            torch.empty(n, dtype=torch.uint8, device="xxnpu")
            print(what, "NO OOM")
        except torch.OutOfMemoryError as e:
            print(what, "OOM", str(e).replace("\\n", " "))
    x = torch.ones(MiB, device="xxnpu")
    print("AFTER", x.sum().item())
"""


def test_default_capacity_fits_an_address_space_limited_process_and_beyond_it_is_oom():
    r = run_python(_HOST_LIMITED_CHILD, XXNPU_DEVICE_COUNT="2")
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    # A quarter of the 4 GiB left, over 2 devices (before: a fixed 8 GiB per device whose
    # 32 GiB reservation failed, and the device was unusable).
    assert int(lines["TOTAL"]) <= 512 * MiB
    assert lines["capacity"].startswith("OOM"), lines["capacity"]
    assert "xxnpu out of memory on device 0" in lines["capacity"]
    assert lines["ram"].startswith("OOM"), lines["ram"]
    assert lines["AFTER"] == str(float(MiB))


def test_explicit_capacity_beyond_ram_fails_an_allocation_beyond_ram_as_oom():
    # XXNPU_DEVICE_MEMORY=1T is kept (more than this host has), so only the runtime's check
    # of the host's available RAM stands between the allocation and the OOM killer. The
    # child volunteers as the OOM killer's first victim, should that check ever regress.
    r = run_python(
        """
        import torch, torch_xxnpu
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
        GiB = 1 << 30
        with open("/proc/meminfo") as f:
            ram = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemTotal:"))
        print("TOTAL", torch.xxnpu.get_device_properties(0).total_memory)
        try:
            torch.empty(ram + GiB, dtype=torch.uint8, device="xxnpu")
            print("BIG NO OOM")
        except torch.OutOfMemoryError as e:
            print("BIG OOM", str(e).replace("\\n", " "))
        x = torch.full((1 << 20,), 2.0, device="xxnpu")
        print("AFTER", x.sum().item())
        """,
        XXNPU_DEVICE_MEMORY="1T",
        XXNPU_DEVICE_COUNT="1",
    )
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(" ", 1) for line in r.stdout.splitlines())
    assert lines["TOTAL"] == str(1 << 40)
    assert lines["BIG"].startswith("OOM"), lines["BIG"]
    assert re.search(r"the host has only \d+ bytes of RAM available", lines["BIG"]), lines["BIG"]
    assert lines["AFTER"] == str(2.0 * (1 << 20))
