"""Summary sections: device time by op (the op that launched the work) and the
op -> kernel map."""
from collections import defaultdict

from torch_xxnpu.profiler.analysis.numeric import pct, to_us


def device_time_by_op(cap):
    """(by_op, op_kernel_map): rows per op, the most device time first, and per (op, kernel)."""
    op_calls = defaultdict(int)
    op_host = defaultdict(int)
    # A record_function range owns the work launched in it outside any op (a graph replay).
    range_owners = {cap.op_of[d.idx].name for d in cap.device
                    if cap.op_of[d.idx] is not None and cap.op_of[d.idx].cat == "user_annotation"}
    for o in list(cap.ops) + [a for a in cap.annotations if a.name in range_owners]:
        op_calls[o.name] += 1
        op_host[o.name] += o.dur
    per_op = defaultdict(lambda: {"device_ns": 0, "work": 0, "instances": set(), "kernels": defaultdict(list),
                                  "top": defaultdict(int)})
    for d in cap.device:
        op = cap.op_of[d.idx]
        name = op.name if op is not None else "(no op)"
        rec = per_op[name]
        rec["device_ns"] += d.dur
        rec["work"] += 1
        if op is not None:
            rec["instances"].add(op.idx)
            rec["top"][cap.top_level(op).name] += 1
        rec["kernels"][(d.name, cap.kind_of(d))].append(d.dur)
    by_op, op_kernel_map = [], []
    for name, rec in per_op.items():
        n_inst = len(rec["instances"]) or rec["work"]
        by_op.append({
            "name": name, "calls": op_calls.get(name, 0), "calls_with_device_work": n_inst,
            "host_total_us": to_us(op_host.get(name, 0)), "device_total_us": to_us(rec["device_ns"]),
            "device_avg_us": to_us(rec["device_ns"] / n_inst), "device_activities": rec["work"],
            "pct_device_time": pct(rec["device_ns"], cap.total_device),
            "kernels": sorted({k for k, _ in rec["kernels"]}),
        })
        for (kname, kind), durs in sorted(rec["kernels"].items(), key=lambda kv: -sum(kv[1])):
            op_kernel_map.append({
                "op": name, "kernel": kname, "kind": kind, "count": len(durs), "total_us": to_us(sum(durs)),
                "avg_us": to_us(sum(durs) / len(durs)),
                "top_level_ops": sorted(t for t in rec["top"] if t != name),
            })
    by_op.sort(key=lambda r: (-r["device_total_us"], r["name"]))
    order = {r["name"]: i for i, r in enumerate(by_op)}
    op_kernel_map.sort(key=lambda r: (order[r["op"]], -r["total_us"]))
    return by_op, op_kernel_map
