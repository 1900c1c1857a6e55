"""Cross-layer: the device runtime's clock, through the extension, is Unix-epoch ns."""
import time

from torch_xxnpu import _C


def test_device_clock_is_unix_epoch_nanoseconds():
    before = time.time_ns()
    now = _C._now_ns()
    after = time.time_ns()
    assert before <= now <= after


def test_device_clock_is_not_microseconds():
    # A µs clock would be ~1000x smaller than time.time_ns().
    assert _C._now_ns() > 10**18


def test_trace_clock_converts_to_unix_nanoseconds():
    # The records' clock (the TSC on x86-64) and its conversion, as the last capture did
    # it (before any capture: the runtime's fitted line). Within a millisecond of the
    # wall clock, and order-preserving.
    before = time.time_ns()
    ticks = [_C._trace_clock_now() for _ in range(3)]
    after = time.time_ns()
    assert ticks == sorted(ticks)
    ns = _C._trace_clock_to_unix_ns(ticks)
    assert ns == sorted(ns) and len(ns) == 3
    assert before - 1_000_000 <= ns[0] <= ns[-1] <= after + 1_000_000
    assert _C._trace_clock_source() in ("torch.profiler", "fitted")


def test_trace_clock_conversion_refuses_what_is_not_a_list_of_ints():
    import pytest
    with pytest.raises(TypeError):
        _C._trace_clock_to_unix_ns(["1"])
    with pytest.raises(TypeError):
        _C._trace_clock_to_unix_ns(None)
