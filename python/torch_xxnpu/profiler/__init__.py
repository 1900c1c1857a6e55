"""Offline analysis of torch.profiler chrome traces with the xxnpu device timeline.

``python -m torch_xxnpu.profiler.analyze TRACE.json [--html OUT.html] [--json OUT.json]
[--check]`` prints device time by kernel and by op, the op->kernel map, device
utilisation with idle time split by cause, launch-to-start latency, memory consumers and
collectives, and writes a self-contained HTML report. The functions are importable::

    from torch_xxnpu.profiler import analyze
    trace = analyze.load_trace("trace.json")
    summary = analyze.summarize(trace)
    print(analyze.format_text(summary))

The analysis itself is plain Python over the trace's JSON (no torch needed to run it).
"""
# Lazy: ``python -m torch_xxnpu.profiler.analyze`` must not find the module imported
# already by its package (runpy warns about that).
_EXPORTS = {
    "TraceError": "analyze",
    "check_trace": "analyze",
    "format_text": "analyze",
    "load_trace": "analyze",
    "main": "analyze",
    "summarize": "analyze",
    "render_html": "html_report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        module = importlib.import_module(f"torch_xxnpu.profiler.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'torch_xxnpu.profiler' has no attribute {name!r}")
