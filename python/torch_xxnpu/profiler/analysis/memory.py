"""Summary section: device memory from the ``[memory]`` events (``profile_memory=True``):
peaks, what was live at them by op, consumers by op, the largest allocations."""
from collections import defaultdict

from torch_xxnpu.profiler.analysis.links import enclosing, op_path
from torch_xxnpu.profiler.analysis.numeric import is_int, to_us


def memory(cap):
    """Peaks per device with what was live at them, consumers by op, the largest allocations."""
    w0 = cap.w0
    evs = []
    for m in cap.mem_events:
        a = m.args
        dtype = a.get("Device Type")
        if not is_int(a.get("Bytes")) or not is_int(dtype) or dtype == 0:
            continue  # CPU memory, or not an allocator record
        evs.append(m)
    if not evs:
        return {"devices": [], "by_op": [], "largest": [], "events": 0}
    evs.sort(key=lambda m: (m.start, m.idx))
    found = enclosing(cap.ops_by_row, [(m.row, m.start) for m in evs])

    def path_of(qi):
        inner, outer = found[qi]
        return op_path(inner, outer, cap.parents)

    allocs = []  # dicts, in order
    live_by_addr = defaultdict(list)
    per_dev = {}
    for qi, m in enumerate(evs):
        a = m.args
        dv = a.get("Device Id") if is_int(a.get("Device Id")) else 0
        b = a["Bytes"]
        total_alloc = a.get("Total Allocated")
        total_res = a.get("Total Reserved")
        path = path_of(qi)
        st = per_dev.setdefault(dv, {"series": [], "peak": None, "peak_res": 0, "allocs": 0, "frees": 0,
                                     "bytes_alloc": 0, "bytes_freed": 0, "first": None})
        if is_int(total_alloc):
            if st["first"] is None:
                st["first"] = total_alloc - b
                st["series"].append([to_us(m.start - w0), total_alloc - b, total_res if is_int(total_res) else None])
            st["series"].append([to_us(m.start - w0), total_alloc, total_res if is_int(total_res) else None])
            if st["peak"] is None or total_alloc > st["peak"][0]:
                st["peak"] = (total_alloc, m.start, path)
        if is_int(total_res):
            st["peak_res"] = max(st["peak_res"], total_res)
        if b > 0:
            rec = {"device": dv, "bytes": b, "t": m.start, "free_t": None, "path": path,
                   "addr": a.get("Addr")}
            allocs.append(rec)
            live_by_addr[(dv, a.get("Addr"))].append(rec)
            st["allocs"] += 1
            st["bytes_alloc"] += b
        elif b < 0:
            st["frees"] += 1
            st["bytes_freed"] += -b
            lst = live_by_addr.get((dv, a.get("Addr")))
            if lst:
                lst.pop()["free_t"] = m.start

    def op_name(path):
        return path[0] if path else "(no op)"

    devices = []
    live_at_peak_by_op = defaultdict(int)
    for dv in sorted(per_dev):
        st = per_dev[dv]
        peak_bytes, peak_t, peak_path = st["peak"] if st["peak"] else (0, None, [])
        live = [r for r in allocs if r["device"] == dv and peak_t is not None and r["t"] <= peak_t
                and (r["free_t"] is None or r["free_t"] > peak_t)]
        live_ops = defaultdict(int)
        for r in live:
            live_ops[op_name(r["path"])] += r["bytes"]
            live_at_peak_by_op[(dv, op_name(r["path"]))] += r["bytes"]
        devices.append({
            "device": dv, "label": cap.label(dv),
            "peak_allocated": peak_bytes, "peak_at_us": to_us(peak_t - w0) if peak_t is not None else None,
            "peak_op": " > ".join(peak_path) if peak_path else "(no op)",
            "peak_reserved": st["peak_res"], "allocated_at_start": st["first"],
            "allocations": st["allocs"], "frees": st["frees"],
            "bytes_allocated": st["bytes_alloc"], "bytes_freed": st["bytes_freed"],
            "live_at_peak_by_op": sorted(({"op": k, "bytes": v} for k, v in live_ops.items()),
                                         key=lambda r: -r["bytes"]),
            "baseline_at_peak": peak_bytes - sum(r["bytes"] for r in live),
            "_series": st["series"],
        })

    grouped = defaultdict(lambda: {"allocs": 0, "bytes": 0, "largest": 0, "freed": 0, "paths": defaultdict(int)})
    for r in allocs:
        g = grouped[(r["device"], op_name(r["path"]))]
        g["allocs"] += 1
        g["bytes"] += r["bytes"]
        g["largest"] = max(g["largest"], r["bytes"])
        if r["free_t"] is not None:
            g["freed"] += r["bytes"]
        g["paths"][" > ".join(r["path"]) or "(no op)"] += r["bytes"]
    by_op = [{
        "device": dv, "op": op, "allocations": g["allocs"], "bytes_allocated": g["bytes"],
        "largest_allocation": g["largest"], "bytes_freed_in_capture": g["freed"],
        "live_at_peak": live_at_peak_by_op.get((dv, op), 0),
        "via": max(g["paths"], key=g["paths"].get),
    } for (dv, op), g in grouped.items()]
    by_op.sort(key=lambda r: (-r["live_at_peak"], -r["bytes_allocated"], r["op"]))

    largest = sorted(allocs, key=lambda r: (-r["bytes"], r["t"]))[:10]
    largest = [{
        "device": r["device"], "bytes": r["bytes"], "op": op_name(r["path"]),
        "path": " > ".join(r["path"]) or "(no op)", "at_us": to_us(r["t"] - w0),
        "lifetime_us": to_us(r["free_t"] - r["t"]) if r["free_t"] is not None else None,
    } for r in largest]
    return {"devices": devices, "by_op": by_op, "largest": largest, "events": len(evs)}
