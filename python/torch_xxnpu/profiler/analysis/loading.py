"""Reading a chrome trace file: plain or gzip'ed JSON, with errors that say what was
expected."""
import gzip
import json

from torch_xxnpu.profiler.analysis.errors import TRACE_EXPECTED, ControlCharacterError, TraceError


def load_trace(path, strict=True):
    """Reads a chrome trace (``.json`` or gzip'ed ``.json.gz``) and returns its dict.

    A bare JSON array of events (the other chrome trace form) is wrapped as
    ``{"traceEvents": [...]}``. Raises ``TraceError`` with what was expected when the file
    is missing, not JSON, or not a trace; ``ControlCharacterError`` when a string holds a
    raw control character (Perfetto and chrome://tracing reject those) unless
    ``strict=False``.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TraceError(f"{path}: cannot read the file ({e.strerror or e}); expected {TRACE_EXPECTED}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise TraceError(f"{path}: a broken gzip file ({e}); expected {TRACE_EXPECTED}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 text (byte {e.start}); expected {TRACE_EXPECTED}") from None
    if not text.strip():
        raise TraceError(f"{path}: the file is empty; expected {TRACE_EXPECTED}")
    try:
        trace = json.loads(text, strict=strict)
    except json.JSONDecodeError as e:
        if e.msg.startswith("Invalid control character"):
            ch = text[e.pos] if e.pos < len(text) else "?"
            raise ControlCharacterError(
                f"{path}: raw control character U+{ord(ch):04X} inside a JSON string at line {e.lineno} "
                f"column {e.colno}; JSON requires it escaped (Perfetto and chrome://tracing reject the file)"
            ) from None
        raise TraceError(
            f"{path}: invalid JSON at line {e.lineno} column {e.colno} ({e.msg}); expected {TRACE_EXPECTED}"
        ) from None
    if isinstance(trace, list):
        trace = {"traceEvents": trace}
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        what = type(trace).__name__ if not isinstance(trace, dict) else "an object without a \"traceEvents\" list"
        raise TraceError(f"{path}: JSON, but {what}; expected {TRACE_EXPECTED}")
    return trace
