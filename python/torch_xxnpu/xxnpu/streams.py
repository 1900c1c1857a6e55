"""torch.xxnpu streams and events (torch.cuda.Stream/Event's twins).

``Stream`` and ``Event`` are torch's device-generic ``torch.Stream``/``torch.Event``
(backed by the xxnpu DeviceGuardImpl), so they work with torch.accelerator, autograd
and ``torch.Stream`` consumers unchanged.
"""
import contextlib
from typing import Any, Optional

import torch

import torch_xxnpu.xxnpu as _xxnpu
from torch_xxnpu import _C
from torch_xxnpu.xxnpu._utils import _get_device_index

__all__ = [
    "Stream",
    "ExternalStream",
    "Event",
    "StreamContext",
    "stream",
    "current_stream",
    "default_stream",
    "set_stream",
]


class Stream(torch.Stream):
    """An in-order queue of xxnpu device work.

    Args:
        device: the stream's device (default: the current one).
        priority: lower is higher priority; -1 (high) or 0 (low, the default).
    """

    def __new__(cls, device=None, priority=0, **kwargs):
        if kwargs:  # Stream(stream_id=..., device_index=..., device_type=...)
            return super().__new__(cls, **kwargs)
        _xxnpu._lazy_init()
        idx = _get_device_index(device, optional=True, check=True)
        with _xxnpu.device(idx):
            return super().__new__(cls, device=torch.device("xxnpu", idx), priority=priority)

    @property
    def priority(self) -> int:
        """-1 for a high-priority stream, 0 otherwise."""
        return _C._stream_priority(self.stream_id, self.device_index, self.device_type)

    @staticmethod
    def priority_range():
        """(lowest, highest) priority: (0, -1)."""
        return tuple(_C._stream_priority_range())

    @property
    def xxnpu_stream(self) -> int:
        """The runtime's stream handle as an int (ExternalStream takes it back)."""
        return self.native_handle

    def wait_event(self, event: "Event") -> None:
        event.wait(self)

    def wait_stream(self, stream: "Stream") -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __eq__(self, o: Any) -> bool:
        return isinstance(o, torch.Stream) and super().__eq__(o)

    def __hash__(self):
        return hash((self.stream_id, self.device_type, self.device_index))

    def __repr__(self):
        return f"<torch.xxnpu.Stream device=xxnpu:{self.device_index} stream_id={self.stream_id}>"


def _wrap(packed) -> Stream:
    stream_id, device_index, device_type = packed
    return Stream(stream_id=stream_id, device_index=device_index, device_type=device_type)


class ExternalStream(Stream):
    """Wraps a stream created outside torch (an ``xxnpuStream_t`` handle as an int)."""

    def __new__(cls, stream_ptr: int, device=None, **kwargs):
        _xxnpu._lazy_init()
        idx = _get_device_index(device, optional=True, check=True)
        stream_id, device_index, device_type = _C._stream_from_external(int(stream_ptr), idx)
        return super().__new__(cls, stream_id=stream_id, device_index=device_index, device_type=device_type)


class Event(torch.Event):
    """A point in a stream; with ``enable_timing=True`` it can time device work."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        if interprocess:
            raise NotImplementedError("xxnpu events cannot be shared between processes")
        _xxnpu._lazy_init()
        return super().__new__(
            cls, device=torch.device("xxnpu", _xxnpu.current_device()), enable_timing=enable_timing, blocking=blocking
        )

    def record(self, stream: Optional[torch.Stream] = None) -> None:
        super().record(current_stream() if stream is None else stream)

    def wait(self, stream: Optional[torch.Stream] = None) -> None:
        super().wait(current_stream() if stream is None else stream)

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds from this event to ``end_event`` (both recorded, completed, with
        ``enable_timing=True``, on one device)."""
        return _C._event_elapsed_time(self, end_event)

    def __repr__(self):
        return f"<torch.xxnpu.Event device=xxnpu:{self.device.index}>"


def current_stream(device=None) -> Stream:
    """The current stream of this thread on ``device`` (default: current device)."""
    if torch.compiler.is_compiling():
        # What Dynamo traces for torch.cuda.current_stream (its current-stream handler).
        return torch.accelerator.current_stream(*_xxnpu._compile_device_arg(device))
    _xxnpu._lazy_init()
    return _wrap(_C._current_stream(_get_device_index(device, optional=True, check=True)))


def default_stream(device=None) -> Stream:
    _xxnpu._lazy_init()
    return _wrap(_C._default_stream(_get_device_index(device, optional=True, check=True)))


def set_stream(stream: Optional[torch.Stream]) -> None:
    """Makes ``stream`` current on its device, and that device current, for this thread
    (as torch.cuda.set_stream; None: no-op)."""
    if stream is None:
        return
    _xxnpu._lazy_init()
    _C._set_stream(stream.stream_id, stream.device_index, stream.device_type)
    if _C._get_device() != stream.device_index:
        _C._set_device(stream.device_index)


class StreamContext:
    """Makes a stream current (on its device, which also becomes current) within a block."""

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self.idev = -1

    def __enter__(self):
        cur = self.stream
        if cur is None:
            return
        _xxnpu._lazy_init()
        self.src_prev_stream = current_stream(None)
        if self.src_prev_stream.device_index != cur.device_index:
            with _xxnpu.device(cur.device_index):
                self.dst_prev_stream = current_stream(cur.device_index)
        set_stream(cur)
        return cur

    def __exit__(self, type: Any, value: Any, traceback: Any):
        cur = self.stream
        if cur is None:
            return
        if self.src_prev_stream.device_index != cur.device_index:
            set_stream(self.dst_prev_stream)
        set_stream(self.src_prev_stream)


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    if torch.compiler.is_compiling():
        # Dynamo traces a torch.Stream used as a context manager (what torch.cuda.stream
        # becomes in a graph); StreamContext's runtime calls would break the graph.
        return contextlib.nullcontext() if stream is None else stream
    return StreamContext(stream)
