"""Summary sections: device and stream utilisation over the capture window with idle
time split by cause (host launch, sync wait, queued), and the longest idle gaps."""
import bisect
from collections import defaultdict

from torch_xxnpu.profiler.analysis.intervals import intersect, subtract, total, union
from torch_xxnpu.profiler.analysis.numeric import is_int, is_num, pct, to_us

IDLE_CAUSES = ("host_launch", "sync_wait", "queued")


def utilization(cap):
    """The utilisation rows (a device, then its streams), the source of the host waits,
    the longest gaps per device, and per stream ``(device, stream, label, activities,
    intervals by part)`` for the timeline."""
    waits = [(r.start, r.end) for r in cap.runtime if r.name.endswith("(wait)")]
    wait_source = "(wait) runtime events"
    if not waits:
        waits = [(r.start, r.end) for r in cap.runtime if "Synchronize" in r.name]
        wait_source = "runtime *Synchronize calls"
    host_waits = union(waits)

    syncs_by_dev, syncs_by_stream = defaultdict(list), defaultdict(list)
    for s in cap.device_syncs:
        dv = s.args.get("device") if is_int(s.args.get("device")) else s.pid
        st = s.args.get("stream") if is_int(s.args.get("stream")) else s.tid
        syncs_by_dev[dv].append(s)
        syncs_by_stream[(dv, st)].append(s)

    rows, longest_gaps, streams = [], [], []
    for dv in sorted(cap.by_dev, key=lambda v: (0, v) if is_num(v) else (1, str(v))):
        row, dparts = _breakdown(cap, cap.by_dev[dv], syncs_by_dev[dv], host_waits)
        row.update({"device": dv, "stream": None, "label": cap.label(dv)})
        rows.append(row)
        longest_gaps += _longest_gaps(dv, row["label"], cap.by_dev[dv], dparts, cap.op_of, cap.w0, cap.w1)
        for (d2, st) in sorted(k for k in cap.by_stream if k[0] == dv):
            evs = cap.by_stream[(d2, st)]
            srow, parts = _breakdown(cap, evs, syncs_by_stream[(d2, st)], host_waits)
            label = f"{row['label']} stream {st}"
            srow.update({"device": dv, "stream": st, "label": label})
            rows.append(srow)
            streams.append((dv, st, label, evs, parts))
    return rows, wait_source, longest_gaps, streams


def _breakdown(cap, evs, syncs, host_waits):
    """(row, intervals by part) of device work ``evs`` over the window: busy time by kind
    (kernels first, then memcpy, then memset), idle time by cause."""
    window = cap.window
    kernel_iv = union((d.start, d.end) for d in evs if d.cat == "kernel")
    memcpy_iv = subtract(union((d.start, d.end) for d in evs if d.cat == "gpu_memcpy"), kernel_iv)
    busy_km = union(kernel_iv + memcpy_iv)
    memset_iv = subtract(union((d.start, d.end) for d in evs if d.cat == "gpu_memset"), busy_km)
    busy = union(busy_km + memset_iv)
    idle = subtract([(cap.w0, cap.w1)], busy)
    pending = union((cap.launch_of[d.idx].end, d.start) for d in evs if cap.launch_of[d.idx] is not None)
    queued = intersect(idle, pending)
    rest = subtract(idle, pending)
    sync_iv = intersect(rest, union(host_waits + [(s.start, s.end) for s in syncs]))
    host_iv = subtract(rest, sync_iv)
    parts = {"kernel": kernel_iv, "memcpy": memcpy_iv, "memset": memset_iv, "queued": queued,
             "sync_wait": sync_iv, "host_launch": host_iv, "idle": idle}
    busy_ns = total(busy)
    idle_ns = window - busy_ns
    row = {
        "window_us": to_us(window), "busy_us": to_us(busy_ns), "utilization_pct": pct(busy_ns, window),
        "kernel_us": to_us(total(kernel_iv)), "memcpy_us": to_us(total(memcpy_iv)),
        "memset_us": to_us(total(memset_iv)), "idle_us": to_us(idle_ns),
        "idle": {k: to_us(total(parts[k])) for k in IDLE_CAUSES},
        "idle_pct_of_window": {k: pct(total(parts[k]), window) for k in IDLE_CAUSES},
        "activities": len(evs),
    }
    return row, parts


def _longest_gaps(dv, label, evs, parts, op_of, w0, w1, top=5):
    """The device's longest idle intervals, with their causes and the work around them."""
    gaps = sorted(parts["idle"], key=lambda g: (-(g[1] - g[0]), g[0]))[:top]
    starts = sorted((d.start, i) for i, d in enumerate(evs))
    ends = sorted((d.end, i) for i, d in enumerate(evs))
    out = []
    for s, e in gaps:
        causes = {k: to_us(total(intersect([(s, e)], parts[k]))) for k in IDLE_CAUSES}
        j = bisect.bisect_right(ends, (s, len(evs))) - 1
        before = evs[ends[j][1]] if j >= 0 else None
        k = bisect.bisect_left(starts, (e, -1))
        after = evs[starts[k][1]] if k < len(starts) else None

        def desc(d):
            if d is None:
                return None
            op = op_of.get(d.idx)
            return {"name": d.name, "op": op.name if op is not None else None}

        out.append({
            "device": dv, "label": label, "start_us": to_us(s - w0), "dur_us": to_us(e - s),
            "cause": max(causes, key=causes.get), "causes_us": causes,
            "before": desc(before), "after": desc(after),
            "at_window_edge": s == w0 or e == w1,
        })
    return out
