"""Summary section: device time by kernel (and memcpy / memset)."""
from collections import defaultdict

from torch_xxnpu.profiler.analysis.numeric import pct, to_us


def device_time_by_kernel(cap):
    """One row per (name, kind), the most device time first."""
    by_kernel = defaultdict(list)
    for d in cap.device:
        by_kernel[(d.name, cap.kind_of(d))].append(d.dur)
    kernels = []
    for (name, kind), durs in by_kernel.items():
        kernels.append({
            "name": name, "kind": kind, "calls": len(durs), "total_us": to_us(sum(durs)),
            "avg_us": to_us(sum(durs) / len(durs)), "min_us": to_us(min(durs)), "max_us": to_us(max(durs)),
            "pct_device_time": pct(sum(durs), cap.total_device),
        })
    kernels.sort(key=lambda k: (-k["total_us"], k["name"]))
    return kernels
