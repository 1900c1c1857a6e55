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
