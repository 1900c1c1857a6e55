"""Summary section: collective communication, on the device and on the host."""
from collections import defaultdict

from torch_xxnpu.profiler.analysis.events import COMM_RE
from torch_xxnpu.profiler.analysis.numeric import to_us


def collectives(cap):
    comm = defaultdict(list)
    for d in cap.device:
        if COMM_RE.search(d.name):
            comm[(d.name, "device")].append(d.dur)
    for o in cap.ops:
        if COMM_RE.search(o.name):
            comm[(o.name, "host")].append(o.dur)
    rows = [{"name": n, "side": side, "count": len(v), "total_us": to_us(sum(v)),
             "avg_us": to_us(sum(v) / len(v)), "max_us": to_us(max(v))}
            for (n, side), v in comm.items()]
    rows.sort(key=lambda c: (c["side"], -c["total_us"]))
    return rows
