"""Summary section: graph launches (``xxnpuGraphLaunch``) and the device work they ran.

A replay's kernels carry ``graph id`` and ``graph node id`` in their args and the
correlation id of the launch that ran them, so one launch = the device work with one
(graph id, correlation) pair. Per graph id: how many launches, how many nodes each ran,
and their device time.
"""
from collections import defaultdict

from torch_xxnpu.profiler.analysis.numeric import is_int, pct, to_us

LAUNCH_NAME = "xxnpuGraphLaunch"


def graphs(cap):
    """``{"launches": n, "graphs": [per graph id, the most device time first]}``.

    ``launches`` counts the ``xxnpuGraphLaunch`` runtime calls in the trace (a launch whose
    work fell outside the capture window is counted there but has no graph row)."""
    per_launch = defaultdict(lambda: {"nodes": set(), "device_ns": 0, "activities": 0})
    for d in cap.device:
        gid = d.args.get("graph id")
        if not is_int(gid) or gid == 0:
            continue
        launch = per_launch[(gid, d.args.get("correlation"))]
        node = d.args.get("graph node id")
        if is_int(node):
            launch["nodes"].add(node)
        launch["device_ns"] += d.dur
        launch["activities"] += 1
    by_graph = defaultdict(list)
    for (gid, _corr), launch in per_launch.items():
        by_graph[gid].append(launch)
    rows = []
    for gid, launches in by_graph.items():
        nodes = [len(x["nodes"]) for x in launches]
        device_ns = sum(x["device_ns"] for x in launches)
        rows.append({
            "graph_id": gid, "launches": len(launches),
            "nodes_per_launch": {"min": min(nodes), "max": max(nodes), "avg": round(sum(nodes) / len(nodes), 2)},
            "activities": sum(x["activities"] for x in launches),
            "device_total_us": to_us(device_ns), "device_per_launch_us": to_us(device_ns / len(launches)),
            "pct_device_time": pct(device_ns, cap.total_device),
        })
    rows.sort(key=lambda r: (-r["device_total_us"], r["graph_id"]))
    return {"launches": sum(1 for r in cap.runtime if r.name == LAUNCH_NAME), "graphs": rows}
