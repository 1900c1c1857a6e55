"""torch.xxnpu.markers: NVTX-like markers for the xxnpu device timeline (torch.cuda.nvtx's twin).

``range_push``/``range_pop``/``mark`` put named ranges and instants into the activity
trace that torch.profiler's xxnpu timeline shows; ``emit_xxnpu()`` wraps every op in such
a range (like ``torch.autograd.profiler.emit_nvtx``), for a profile taken by another tool
(any reader of the runtime's activity trace) or a torch.profiler capture running on
another thread. Markers are recorded only while such a capture is on. Like emit_nvtx,
emit_xxnpu is itself a profiler state: it cannot be entered inside a torch.profiler
capture on the same thread (torch raises "Profiler is already enabled on this thread").
``step()`` marks an iteration boundary for on-demand capture (``python -m
torch_xxnpu.profiler.capture``) in loops without a torch.optim optimizer.
Also reachable as ``torch.xxnpu.profiler`` (the same module), its earlier name.
See docs/profiler.md.
"""
import torch
from torch.autograd.profiler import _disable_profiler, _enable_profiler, _run_on_profiler_start, _run_on_profiler_stop
from torch._C._profiler import _ExperimentalConfig
from torch.autograd import ProfilerConfig, ProfilerState

from torch_xxnpu import _C

__all__ = ["range_push", "range_pop", "mark", "range", "emit_xxnpu", "step"]

# Set by torch_xxnpu.profiler.capture.agent when XXNPU_PROFILER_ON_DEMAND=1; None otherwise.
_step_hook = None


def range_push(msg: str) -> int:
    """Opens a range on this thread; returns its depth (0 for the outermost)."""
    return _C._marker_range_push(msg)


def range_pop() -> int:
    """Closes this thread's innermost range; returns its depth, or -1 if none was open."""
    return _C._marker_range_pop()


def mark(msg: str) -> None:
    """An instant marker."""
    _C._marker_mark(msg)


def step() -> None:
    """Marks an iteration boundary (the end of one iteration, the start of the next).

    For on-demand capture of a loop that has no torch.optim optimizer (whose steps are
    boundaries already): ``python -m torch_xxnpu.profiler.capture --pid N --iterations K``
    captures K iterations between such calls. A no-op unless the process was started with
    XXNPU_PROFILER_ON_DEMAND=1 and a capture is requested. Call it once per iteration, on
    the thread that runs the loop.
    """
    hook = _step_hook
    if hook is not None:
        hook()


class range:
    """``with torch.xxnpu.markers.range("name"):`` — a marker range around a block."""

    def __init__(self, msg: str):
        self.msg = msg

    def __enter__(self):
        range_push(self.msg)
        return self

    def __exit__(self, *exc):
        range_pop()
        return False


class emit_xxnpu:
    """Every op inside becomes an xxnpu marker range named after the op (emit_nvtx's twin)."""

    def __init__(self, enabled: bool = True, record_shapes: bool = False):
        self.enabled = enabled
        self.entered = False
        self.record_shapes = record_shapes

    def __enter__(self):
        if not self.enabled:
            return
        if self.entered:
            raise RuntimeError("emit_xxnpu is not reentrant")
        self.entered = True
        torch.xxnpu.synchronize()
        _run_on_profiler_start()
        _enable_profiler(
            ProfilerConfig(ProfilerState.PRIVATEUSE1, self.record_shapes, False, False, False, False,
                           _ExperimentalConfig()),
            set(),
        )
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if not self.enabled:
            return
        torch.xxnpu.synchronize()
        _disable_profiler()
        _run_on_profiler_stop()
        return False
