"""The timeline the HTML report draws (``_timeline`` in the summary): a lane per device
stream with its activities and idle gaps by cause, and the host rows that launched the
work with their top-level ops, launches and waits."""
from torch_xxnpu.profiler.analysis.events import row_key
from torch_xxnpu.profiler.analysis.numeric import to_us
from torch_xxnpu.profiler.analysis.utilization import IDLE_CAUSES


def timeline(cap, streams):
    """``streams``: ``(device, stream, label, activities, intervals by part)`` as
    ``utilization()`` returns them."""
    lanes = []
    for dv, st, label, evs, parts in streams:
        lanes.append({
            "label": label, "device": dv, "stream": st,
            "bars": [[cap.rel(d.start), to_us(d.dur), d.name, cap.kind_of(d),
                      cap.op_of[d.idx].name if cap.op_of[d.idx] is not None else ""] for d in evs],
            "idle": [[cap.rel(s), to_us(e - s), cause] for cause in IDLE_CAUSES for s, e in parts[cause]],
        })
    return {"window_us": to_us(cap.window), "lanes": lanes, "host": _host_lanes(cap)}


def _host_lanes(cap):
    """Host rows that launched device work: their top-level ops and waits."""
    host_rows = sorted({cap.launch_of[d.idx].row for d in cap.device if cap.launch_of[d.idx] is not None},
                       key=row_key)
    lanes = []
    for hrow in host_rows:
        tops = [o for o in cap.ops_by_row.get(hrow, []) if cap.parents.get(o.idx) is None]
        wts = [r for r in cap.runtime if r.row == hrow and r.name.endswith("(wait)")]
        launches = [r for r in cap.runtime if r.row == hrow and not r.name.endswith("(wait)")]
        lanes.append({
            "label": cap.thread_names.get(hrow) or f"host {hrow[0]}/{hrow[1]}",
            "ops": [[cap.rel(o.start), to_us(o.dur), o.name] for o in tops],
            "waits": [[cap.rel(r.start), to_us(r.dur), r.name] for r in wts],
            "launches": [[cap.rel(r.start), to_us(r.dur), r.name] for r in launches],
        })
    return lanes
