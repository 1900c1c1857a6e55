"""200 torch.profiler captures in a row on xxnpu: memory stays flat after warm-up.

Each capture records launches, kernels, copies, allocations, markers and a short-lived
thread's launch (a runtime trace ring created and freed per capture), then is processed
(table, and a chrome trace every 20th).

Warm-up: the runtime's per-thread trace rings are raw storage whose pages become resident
as records are first written (65536 records x ~136 bytes, ~9 MB per recording thread), so
RSS grows until each ring has wrapped once; the warm-up pushes more than that through the
host thread's and the device thread's rings first.
"""
import ctypes
import gc
import os
import threading
import time

import torch
import torch_xxnpu  # noqa: F401
from torch.profiler import ProfilerActivity, profile

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
OPS_PER_CAPTURE = 100
CYCLES = 200
RSS_BOUND = 3 << 20        # keeping ~300 bytes per device activity would be ~12 MiB
VIRTUAL_BOUND = 512 << 20  # keeping a freed thread's ring (~9 MiB mapped) per capture: ~1.8 GiB


def _statm():
    # Hand freed heap back to the OS first, so RSS counts what is still in use.
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/statm") as f:
        size, resident = (int(v) for v in f.read().split()[:2])
    page = os.sysconf("SC_PAGE_SIZE")
    return size * page, resident * page


def _capture(x, tmp_path, i, ops=OPS_PER_CAPTURE, process=True):
    with profile(activities=ACTIVITIES, profile_memory=True) as prof:
        with torch.xxnpu.markers.range("capture"):
            for _ in range(ops):
                y = x + 1
            torch.xxnpu.markers.mark("ops queued")
        worker = threading.Thread(target=lambda: torch.ones(4, device="xxnpu"))
        worker.start()
        worker.join()
        y.cpu()
    if process:
        avg = {e.key: e for e in prof.key_averages()}
        assert avg["aten::add"].count == ops
        assert avg["aten::add"].self_device_time_total > 0
        if i % 20 == 0:
            prof.export_chrome_trace(str(tmp_path / "cycle.json"))


def test_two_hundred_captures_do_not_grow_memory(tmp_path):
    x = torch.ones(256, device="xxnpu")
    t0 = time.monotonic()
    # Warm-up: > 65536 kernel records on the device thread, more host records on this one,
    # in captures small enough not to fill a ring within one capture.
    for i in range(5):
        _capture(x, tmp_path, 1, ops=15_000, process=False)
    # ... and settle whatever torch's own post-processing keeps around (about 5 MiB,
    # reached within the first 50 captures, then flat).
    for i in range(60):
        _capture(x, tmp_path, i)
    virtual0, rss0 = _statm()
    t1 = time.monotonic()
    for i in range(CYCLES):
        _capture(x, tmp_path, i)
        if i % 50 == 49:
            print(f"after {i + 1}: RSS {(_statm()[1] - rss0) / 2**20:+.2f} MiB")
    virtual1, rss1 = _statm()
    t2 = time.monotonic()
    print(f"warm-up {t1 - t0:.1f} s; {CYCLES} captures {t2 - t1:.1f} s; "
          f"RSS {(rss1 - rss0) / 2**20:+.2f} MiB, virtual {(virtual1 - virtual0) / 2**20:+.2f} MiB")
    assert rss1 - rss0 < RSS_BOUND, (rss0, rss1)
    assert virtual1 - virtual0 < VIRTUAL_BOUND, (virtual0, virtual1)
    assert not torch._C._autograd._profiler_enabled()
