"""Analysis of a torch.profiler chrome trace with the xxnpu device timeline
(``python -m torch_xxnpu.profiler.analyze``; ``torch_xxnpu.profiler.analyze`` re-exports
the public functions).

Modules, in the order the data flows: ``loading`` (read the file), ``checks``
(``--check``), ``capture`` (sort the events out, link them: ``links``), one module per
summary section (``kernels``, ``ops``, ``compiled`` (``compiled_graphs``) for torch.compile's graphs, ``utilization``
with the idle split and longest gaps, ``latency``, ``memory``, ``collectives``, ``graphs`` (graph
launches), ``timeline`` for the HTML report),
``summary`` (``summarize`` composes the sections), ``text`` and ``html_report`` (render
a summary), ``cli``. Helpers: ``errors``, ``events``, ``numeric``, ``intervals``,
``display``.

What the trace holds (profiler/record_conversion.cc): device work as ``X`` events with
``cat`` ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` on pid = device, tid = stream, with
``args`` ``device``, ``stream``, ``correlation`` (shared with the launching runtime call,
``cat`` ``privateuse1_runtime``, e.g. ``xxnpuLaunchKernel``) and ``External id`` (shared with
the ATen/custom op, ``cat`` ``cpu_op``). Host waits on the device are runtime events named
``... (wait)`` (``xxnpuStreamSynchronize (wait)``, ``xxnpuDeviceSynchronize (wait)``, ...).
``profile_memory=True`` adds ``[memory]`` instant events (``Bytes``, ``Total Allocated``,
``Total Reserved``, ``Device Type``, ``Device Id``, ``Addr``) on the allocating host thread.

Definitions used by the summary (all times in microseconds, relative to the capture
window's start):

* capture window: first to last timed event of the trace (metadata and Kineto's ``Trace``
  spans excluded).
* busy time of a device / stream: the union of its kernel, memcpy and memset intervals;
  when streams overlap, the union counts each instant once, kernels first, then memcpy,
  then memset.
* idle time, split by cause (the parts add up to ``window - busy``):
  - ``queued``: the device had launched work that had not started yet (launch call
    returned, activity not started: the device's queue latency, or device work from
    before the capture still running, which the trace cannot show);
  - ``sync_wait``: otherwise, a host thread was blocked in a ``(wait)`` runtime event or
    the stream waited on an event (``cuda_sync``): the host was not launching because it
    waited for the device;
  - ``host_launch``: otherwise: nothing queued, nobody waiting - the host did not launch
    work fast enough (the next launch came after the previous work ended).
* launch-to-start latency: kernel ``ts`` minus its launch runtime event's ``ts`` (matched by
  ``args.correlation``, else by the ``ac2g`` flow); percentiles interpolate linearly
  between closest ranks (numpy's default).
* device time per op: device activities are attributed to the op whose ``External id``
  they carry (the innermost op that launched them); ``top_level`` is the outermost
  ``cpu_op`` around it on the same thread.
* device time per compiled graph: device activities whose op sits inside a
  ``## Call CompiledFxGraph <key> ##`` op (Inductor's call of a compiled graph), grouped by
  that key, under the graph's ``Torch-Compiled Region: f/r`` (forward) or
  ``CompiledFunctionBackward`` (backward); each kernel with its ``fused nodes`` arg.
* memory: ``[memory]`` events of non-CPU devices, attributed to the ops around them on
  the allocating thread; "live at peak" are the capture's allocations not yet freed when
  the device's allocated bytes peaked (``baseline`` is what was allocated before the
  capture).
"""
from torch_xxnpu.profiler.analysis.checks import check_trace
from torch_xxnpu.profiler.analysis.cli import main
from torch_xxnpu.profiler.analysis.display import fmt_bytes, fmt_time
from torch_xxnpu.profiler.analysis.errors import ControlCharacterError, NoDeviceActivityError, TraceError
from torch_xxnpu.profiler.analysis.html_report import render_html
from torch_xxnpu.profiler.analysis.loading import load_trace
from torch_xxnpu.profiler.analysis.numeric import percentile
from torch_xxnpu.profiler.analysis.summary import summarize
from torch_xxnpu.profiler.analysis.text import format_text

__all__ = [
    "TraceError",
    "ControlCharacterError",
    "NoDeviceActivityError",
    "load_trace",
    "check_trace",
    "summarize",
    "format_text",
    "render_html",
    "fmt_time",
    "fmt_bytes",
    "percentile",
    "main",
]
