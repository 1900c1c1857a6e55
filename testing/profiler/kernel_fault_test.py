"""A device kernel that fails, seen from Python: async error reporting, and a profile
around the fault.

torch.ops.xxnpu._debug_fail_kernel(x, msg) queues a kernel "xxnpu::debug_fail" on x's
current stream whose body fails with `msg`. As on CUDA the host returns at once and the
failure surfaces at the next synchronizing call, as a RuntimeError naming the kernel, the
device and the stream; the runtime then clears it (docs/device-runtime.md, "Errors").
"""
import json
import re

import pytest
import torch
import torch_xxnpu  # noqa: F401
from torch.profiler import ProfilerActivity, profile

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def failure(msg, stream=r"\d+"):
    return re.escape("kernel 'xxnpu::debug_fail' failed on xxnpu:0 stream ") + stream + re.escape(": " + msg)


@pytest.fixture(autouse=True)
def clean_device():
    torch.xxnpu.set_device(0)
    torch.xxnpu.synchronize()
    yield
    # Whatever a test left behind must not leak into the next one.
    try:
        torch.xxnpu.synchronize()
    finally:
        assert not torch._C._autograd._profiler_enabled()


def test_schema():
    schema = str(torch.ops.xxnpu._debug_fail_kernel.default._schema)
    assert schema == "xxnpu::_debug_fail_kernel(Tensor x, str message) -> ()"


# ---------------------------------------------------------------- async errors


def test_failure_is_asynchronous_and_surfaces_at_synchronize():
    x = torch.ones(4, device="xxnpu")
    torch.ops.xxnpu._debug_fail_kernel(x, "boom at sync")  # returns at once
    with pytest.raises(RuntimeError, match=r"torch\.xxnpu\.synchronize: " + failure("boom at sync")):
        torch.xxnpu.synchronize()
    torch.xxnpu.synchronize()  # reported once, then cleared
    assert torch.equal((x + 1).cpu(), torch.full((4,), 2.0))


def test_work_queued_before_the_report_is_skipped_and_later_work_runs():
    y = torch.zeros(4, device="xxnpu")
    torch.ops.xxnpu._debug_fail_kernel(y, "skip")
    y.add_(1)  # queued behind the failed kernel, before the error is reported: skipped
    with pytest.raises(RuntimeError, match=failure("skip")):
        torch.xxnpu.synchronize()
    assert torch.equal(y.cpu(), torch.zeros(4))
    y.add_(1)
    assert torch.equal(y.cpu(), torch.ones(4))


def test_failure_surfaces_at_a_copy_to_the_host():
    x = torch.ones(4, device="xxnpu")
    torch.ops.xxnpu._debug_fail_kernel(x, "boom at copy")
    with pytest.raises(RuntimeError, match=r"copy from xxnpu: " + failure("boom at copy")):
        x.cpu()
    assert torch.equal(x.cpu(), torch.ones(4))


def test_copy_to_the_host_that_reports_a_failure_also_clears_it():
    x = torch.ones(4, device="xxnpu")
    torch.ops.xxnpu._debug_fail_kernel(x, "cleared by copy")
    with pytest.raises(RuntimeError, match="cleared by copy"):
        x.cpu()
    torch.xxnpu.synchronize()  # reported once: does not raise again
    assert torch.equal(x.cpu(), torch.ones(4))


def test_failure_stays_on_its_stream():
    x = torch.ones(4, device="xxnpu")
    side = torch.xxnpu.Stream()
    with torch.xxnpu.stream(side):
        torch.ops.xxnpu._debug_fail_kernel(x, "side stream")
    # The current (default) stream is unaffected.
    torch.xxnpu.current_stream().synchronize()
    assert torch.equal((x * 3).cpu(), torch.full((4,), 3.0))
    with pytest.raises(RuntimeError, match=failure("side stream", stream=str(side.stream_id))):
        side.synchronize()
    side.synchronize()


def test_event_after_a_failure_reports_it_without_clearing():
    x = torch.ones(4, device="xxnpu")
    torch.ops.xxnpu._debug_fail_kernel(x, "event")
    e = torch.xxnpu.Event()
    e.record()
    with pytest.raises(RuntimeError, match=failure("event")):
        e.synchronize()
    with pytest.raises(RuntimeError, match=failure("event")):
        torch.xxnpu.synchronize()  # the stream still held it
    torch.xxnpu.synchronize()


def test_bad_input():
    with pytest.raises(NotImplementedError, match="_debug_fail_kernel"):
        torch.ops.xxnpu._debug_fail_kernel(torch.ones(2), "cpu tensor")
    # Meta (fake tensors, torch.compile tracing): nothing to run.
    torch.ops.xxnpu._debug_fail_kernel(torch.empty(2, device="meta"), "meta")


# ---------------------------------------------------------------- under the profiler


def _writer(path):
    def on_trace_ready(prof):
        prof.export_chrome_trace(str(path))
    return on_trace_ready


def _kernels(path):
    with open(path) as f:
        trace = json.load(f)
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]


def _device_and_profiler_work(tmp_path):
    x = torch.ones(8, device="xxnpu")
    with profile(activities=ACTIVITIES) as prof:
        y = x + 1
    assert torch.equal(y.cpu(), torch.full((8,), 2.0))
    assert {e.key for e in prof.key_averages()} >= {"aten::add", "xxnpu::add"}


def test_failure_inside_a_capture_surfaces_at_synchronize_and_the_trace_is_written(tmp_path):
    path = tmp_path / "fault.json"
    x = torch.ones(8, device="xxnpu")
    with pytest.raises(RuntimeError, match=failure("under profiler")):
        with profile(activities=ACTIVITIES, on_trace_ready=_writer(path)):
            y = x * 2
            torch.ops.xxnpu._debug_fail_kernel(x, "under profiler")
            torch.xxnpu.synchronize()
    kernels = {k["name"]: k for k in _kernels(path)}
    # The failed kernel ran (and failed) on the device: it is in the timeline, linked to its op.
    assert set(kernels) == {"xxnpu::mul", "xxnpu::debug_fail"}
    assert "External id" in kernels["xxnpu::debug_fail"]["args"]
    assert torch.equal(y.cpu(), torch.full((8,), 2.0))  # queued before the failure: ran
    _device_and_profiler_work(tmp_path)


def test_failure_found_by_the_profilers_own_exit_sync(tmp_path):
    """No synchronizing call inside the capture: torch.profiler's exit calls
    torch.xxnpu.synchronize() before it stops, so the error comes out of the `with` and
    torch (2.13, as with CUDA) leaves the capture running; prof.stop() finishes it."""
    path = tmp_path / "exit.json"
    x = torch.ones(8, device="xxnpu")
    with pytest.raises(RuntimeError, match=failure("found at exit")):
        with profile(activities=ACTIVITIES, on_trace_ready=_writer(path)) as prof:
            torch.ops.xxnpu._debug_fail_kernel(x, "found at exit")
    assert torch._C._autograd._profiler_enabled()  # torch did not get to stop it
    prof.stop()  # the error was reported (and cleared): this time the stop completes
    assert not torch._C._autograd._profiler_enabled()
    assert [k["name"] for k in _kernels(path)] == ["xxnpu::debug_fail"]
    _device_and_profiler_work(tmp_path)


# ---------------------------------------------------------------- kernels that throw


def test_a_kernel_that_throws_fails_like_any_kernel_fault():
    # Before, the exception reached std::terminate on the device thread: the process died.
    x = torch.ones(4, device="xxnpu")
    torch.ops.xxnpu._debug_throw_kernel(x, "bad_alloc")
    y = x + 1  # queued behind the fault before it is reported: skipped
    with pytest.raises(RuntimeError, match=re.escape("kernel 'xxnpu::debug_throw' failed on xxnpu:0 stream ") +
                       r"\d+: threw std::bad_alloc: std::bad_alloc"):
        torch.xxnpu.synchronize()
    torch.xxnpu.synchronize()  # reported once
    assert torch.equal((x + 1).cpu(), torch.full((4,), 2.0))
    del y
    torch.ops.xxnpu._debug_throw_kernel(x, "non_std")
    with pytest.raises(RuntimeError, match=r"kernel 'xxnpu::debug_throw' failed .*: threw "
                       r"xxnpu::\(anonymous namespace\)::DebugNotAnException \(not a std::exception\)"):
        x.cpu()
    assert torch.equal(x.cpu(), torch.ones(4))


def test_throw_kernel_bad_input():
    x = torch.ones(2, device="xxnpu")
    with pytest.raises(RuntimeError, match="kind must be 'bad_alloc' or 'non_std', got 'oops'"):
        torch.ops.xxnpu._debug_throw_kernel(x, "oops")
    with pytest.raises(NotImplementedError, match="_debug_throw_kernel"):
        torch.ops.xxnpu._debug_throw_kernel(torch.ones(2), "bad_alloc")
