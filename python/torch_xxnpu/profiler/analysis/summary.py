"""``summarize``: the analysis of a loaded trace, composed of its sections, and the
summary's header (window, devices, counts, steps) and warnings."""
from torch_xxnpu.profiler.analysis.capture import Capture
from torch_xxnpu.profiler.analysis.collectives import collectives
from torch_xxnpu.profiler.analysis.compiled import device_time_by_compiled_graph
from torch_xxnpu.profiler.analysis.graphs import graphs
from torch_xxnpu.profiler.analysis.kernels import device_time_by_kernel
from torch_xxnpu.profiler.analysis.latency import launch_latency
from torch_xxnpu.profiler.analysis.memory import memory
from torch_xxnpu.profiler.analysis.numeric import is_int, to_us
from torch_xxnpu.profiler.analysis.ops import device_time_by_op
from torch_xxnpu.profiler.analysis.timeline import timeline
from torch_xxnpu.profiler.analysis.utilization import utilization


def summarize(trace, source=None):
    """The analysis of a loaded trace, as a JSON-serialisable dict.

    Raises ``NoDeviceActivityError`` when the trace has no device activity. Keys starting
    with ``_`` hold bulk data for the HTML report (timeline bars, memory series) and are
    left out of ``--json``.
    """
    cap = Capture(trace, source)
    by_op, op_kernel_map = device_time_by_op(cap)
    util_rows, wait_source, longest_gaps, streams = utilization(cap)
    latency, latency_values = launch_latency(cap)
    return {
        **_header(cap),
        "kernels": device_time_by_kernel(cap),
        "ops": by_op,
        "op_kernel_map": op_kernel_map,
        "compiled_graphs": device_time_by_compiled_graph(cap),
        "utilization": util_rows,
        "wait_source": wait_source,
        "longest_gaps": longest_gaps,
        "launch_latency": latency,
        "memory": memory(cap),
        "collectives": collectives(cap),
        "graphs": graphs(cap),
        "steps": _steps(cap),
        "warnings": _warnings(cap),
        "_timeline": timeline(cap, streams),
        "_latency_values_us": latency_values,
    }


def _header(cap):
    device = cap.device
    trace = cap.trace
    dev_props = trace.get("deviceProperties") if isinstance(trace.get("deviceProperties"), list) else []
    return {
        "source": cap.source,
        "window": {"start_us": to_us(cap.w0), "end_us": to_us(cap.w1), "duration_us": to_us(cap.window)},
        "devices": [{"device": dv, "label": cap.label(dv),
                     "streams": sorted(st for (d2, st) in cap.by_stream if d2 == dv)}
                    for dv in sorted(cap.by_dev, key=str)],
        "device_properties": [p for p in dev_props if isinstance(p, dict)],
        "counts": {
            "kernels": sum(1 for d in device if d.cat == "kernel"),
            "memcpy": sum(1 for d in device if d.cat == "gpu_memcpy"),
            "memset": sum(1 for d in device if d.cat == "gpu_memset"),
            "cpu_ops": len(cap.ops), "runtime": len(cap.runtime), "memory_events": len(cap.mem_events),
            "device_time_us": to_us(cap.total_device),
        },
    }


def _steps(cap):
    return [{"name": a.name, "start_us": cap.rel(a.start), "dur_us": to_us(a.dur)}
            for a in sorted(cap.annotations, key=lambda a: a.start) if a.name.startswith("ProfilerStep#")]


def _warnings(cap):
    warnings = []
    if cap.malformed:
        warnings.append(f"{cap.malformed} malformed events skipped")
    unlinked = sum(1 for d in cap.device if cap.op_of[d.idx] is None)
    if unlinked:
        warnings.append(f"{unlinked} of {len(cap.device)} device activities are not linked to an op "
                        "(no cpu_op with their External id)")
    unmatched = sum(1 for d in cap.device if d.cat == "kernel" and cap.launch_of[d.idx] is None)
    if unmatched:
        warnings.append(f"{unmatched} kernels have no launch event (no runtime event with their correlation)")
    dropped = cap.trace.get("xxnpu_dropped_records")
    if is_int(dropped) and dropped > 0:
        warnings.append(f"the device runtime dropped {dropped} activity records: the timeline is incomplete")
    return warnings
