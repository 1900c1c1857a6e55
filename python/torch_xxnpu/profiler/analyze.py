"""The trace analyzer's command line and public functions.

    python -m torch_xxnpu.profiler.analyze TRACE.json [--html OUT.html] [--json OUT.json] [--check]

The analysis lives in the ``torch_xxnpu.profiler.analysis`` package, whose docstring
says what the trace holds and defines the figures; this module re-exports its entry
points.
"""
import sys

from torch_xxnpu.profiler.analysis import (  # noqa: F401
    ControlCharacterError,
    NoDeviceActivityError,
    TraceError,
    check_trace,
    fmt_bytes,
    fmt_time,
    format_text,
    load_trace,
    main,
    percentile,
    summarize,
)

__all__ = [
    "TraceError",
    "NoDeviceActivityError",
    "load_trace",
    "check_trace",
    "summarize",
    "format_text",
    "percentile",
    "main",
]

if __name__ == "__main__":
    sys.exit(main())
