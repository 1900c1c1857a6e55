"""Summary section: device time by compiled graph (torch.compile).

Inductor runs each compiled graph under a host op ``## Call CompiledFxGraph <key> ##``
(the key is its FX graph cache key); its kernels and extern ops (mm, ...) are launched
inside it. A forward graph sits in Dynamo's ``Torch-Compiled Region: <frame>/<recompile>``
(through ``CompiledFunction``), a backward graph in ``CompiledFunctionBackward``. A device
activity belongs to the innermost graph op around the op that launched it; the graph's
row names its region, its calls, its device time and its kernels, with the FX nodes each
generated kernel fused (the kernel's ``fused nodes`` arg)."""
import re

from torch_xxnpu.profiler.analysis.numeric import pct, to_us

_GRAPH = re.compile(r"^## Call CompiledFxGraph (\S+) ##$")
_REGION = re.compile(r"^(Torch-Compiled Region: \S+|CompiledFunctionBackward)$")


def _graph_of(cap, op):
    """(graph key, graph op, region name) of the innermost compiled graph around ``op``."""
    graph = graph_op = None
    while op is not None:
        if graph is None:
            m = _GRAPH.match(op.name)
            if m:
                graph, graph_op = m.group(1), op
        elif _REGION.match(op.name):
            return graph, graph_op, op.name
        op = cap.parents.get(op.idx)
    return graph, graph_op, ""


def device_time_by_compiled_graph(cap):
    """One row per compiled graph, the most device time first; [] for a trace without any."""
    graphs = {}
    for d in cap.device:
        graph, graph_op, region = _graph_of(cap, cap.op_of[d.idx])
        if graph is None:
            continue
        g = graphs.setdefault(graph, {"graph": graph, "region": region, "calls": set(), "device_ns": 0,
                                      "kernels": {}})
        g["calls"].add(graph_op.idx)
        g["device_ns"] += d.dur
        k = g["kernels"].setdefault((d.name, cap.kind_of(d)), {
            "name": d.name, "kind": cap.kind_of(d), "count": 0, "total_ns": 0,
            "fused_nodes": str(d.args.get("fused nodes", "")),
        })
        k["count"] += 1
        k["total_ns"] += d.dur
    rows = []
    for g in graphs.values():
        kernels = sorted(g["kernels"].values(), key=lambda k: (-k["total_ns"], k["name"]))
        rows.append({
            "graph": g["graph"], "region": g["region"], "calls": len(g["calls"]),
            "device_total_us": to_us(g["device_ns"]), "device_avg_us": to_us(g["device_ns"] / len(g["calls"])),
            "pct_device_time": pct(g["device_ns"], cap.total_device),
            "kernels": [{"name": k["name"], "kind": k["kind"], "count": k["count"], "total_us": to_us(k["total_ns"]),
                         "fused_nodes": k["fused_nodes"]} for k in kernels],
        })
    rows.sort(key=lambda r: (-r["device_total_us"], r["graph"]))
    return rows
