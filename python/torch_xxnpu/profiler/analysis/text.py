"""The human-readable report of a summary: one function per section, ``format_text``
joins them."""
from torch_xxnpu.profiler.analysis.display import clip, fmt_bytes, fmt_time


def format_text(summary, top=25):
    """The human-readable report of ``summarize()``'s result."""
    s = summary
    out = _header(s)
    out += _kernels(s, top)
    out += _ops(s, top)
    out += _op_kernel_map(s, top)
    out += _compiled_graphs(s, top)
    out += _utilization(s)
    out += _longest_gaps(s)
    out += _launch_latency(s)
    out += _memory(s)
    out += _collectives(s)
    out += _graphs(s)
    for w in s["warnings"]:
        out.append(f"warning: {w}")
    return "\n".join(out)


def _table(headers, rows, align=None):
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    align = align or ["<"] + [">"] * (len(headers) - 1)
    fmt = "  ".join(f"{{:{a}{w}}}" for a, w in zip(align, widths))
    out = [("  " + fmt.format(*headers)).rstrip(), "  " + "  ".join("-" * w for w in widths)]
    out += [("  " + fmt.format(*r)).rstrip() for r in cells]
    return out


def _header(s):
    c = s["counts"]
    devs = ", ".join(f"{d['label']} (streams {', '.join(map(str, d['streams']))})" for d in s["devices"])
    return [
        f"xxnpu profile analysis: {s.get('source') or 'trace'}",
        f"  capture window {fmt_time(s['window']['duration_us'])}; {devs}",
        f"  {c['kernels']} kernels, {c['memcpy']} memcpy, {c['memset']} memset: "
        f"{fmt_time(c['device_time_us'])} of device time; {c['cpu_ops']} ops, {c['runtime']} runtime calls",
        "",
    ]


def _kernels(s, top):
    out = ["Device time by kernel (% of the summed device time)"]
    out += _table(["Kernel", "Kind", "Calls", "Total", "Avg", "Min", "Max", "%"],
                  [[clip(k["name"]), k["kind"], k["calls"], fmt_time(k["total_us"]), fmt_time(k["avg_us"]),
                    fmt_time(k["min_us"]), fmt_time(k["max_us"]), f"{k['pct_device_time']:.2f}%"]
                   for k in s["kernels"][:top]], ["<", "<"] + [">"] * 6)
    if len(s["kernels"]) > top:
        out.append(f"  ... {len(s['kernels']) - top} more")
    out.append("")
    return out


def _ops(s, top):
    out = ["Device time by op (the op that launched the work; host = the op's own CPU time)"]
    out += _table(["Op", "Calls", "Host total", "Device total", "Device/call", "Activities", "%"],
                  [[clip(o["name"]), o["calls"], fmt_time(o["host_total_us"]), fmt_time(o["device_total_us"]),
                    fmt_time(o["device_avg_us"]), o["device_activities"], f"{o['pct_device_time']:.2f}%"]
                   for o in s["ops"][:top]])
    out.append("")
    return out


def _op_kernel_map(s, top):
    out = ["Op -> kernel map"]
    last = None
    for m in s["op_kernel_map"][: top * 3]:
        op = clip(m["op"], 50) if m["op"] != last else ""
        last = m["op"]
        under = f"  (inside {', '.join(m['top_level_ops'])})" if m["top_level_ops"] and op else ""
        out.append(f"  {op:<50} -> {m['kernel']} [{m['kind']}] x{m['count']}, {fmt_time(m['total_us'])} "
                   f"(avg {fmt_time(m['avg_us'])}){under}")
    out.append("")
    return out


def _compiled_graphs(s, top):
    graphs = s.get("compiled_graphs") or []
    if not graphs:
        return []
    out = ["Device time by compiled graph (torch.compile; the graph's FX graph cache key)"]
    for g in graphs[:top]:
        out.append(f"  {g['region'] or '(no region)'}  graph {g['graph'][:16]}: x{g['calls']}, "
                   f"{fmt_time(g['device_total_us'])} (avg {fmt_time(g['device_avg_us'])}), "
                   f"{g['pct_device_time']:.2f}%")
        for k in g["kernels"][:top]:
            fused = f"  fused: {clip(k['fused_nodes'], 60)}" if k["fused_nodes"] else ""
            out.append(f"    {clip(k['name'], 50)} [{k['kind']}] x{k['count']}, {fmt_time(k['total_us'])}{fused}")
    if len(graphs) > top:
        out.append(f"  ... {len(graphs) - top} more")
    out.append("")
    return out


def _utilization(s):
    out = [f"Device utilisation over the capture window ({fmt_time(s['window']['duration_us'])}); "
           "idle split by cause"]
    rows = []
    for u in s["utilization"]:
        ip = u["idle_pct_of_window"]
        rows.append([u["label"] if u["stream"] is None else "  stream " + str(u["stream"]),
                     fmt_time(u["busy_us"]), f"{u['utilization_pct']:.2f}%", fmt_time(u["kernel_us"]),
                     fmt_time(u["memcpy_us"]), fmt_time(u["memset_us"]),
                     f"{fmt_time(u['idle']['host_launch'])} ({ip['host_launch']:.1f}%)",
                     f"{fmt_time(u['idle']['sync_wait'])} ({ip['sync_wait']:.1f}%)",
                     f"{fmt_time(u['idle']['queued'])} ({ip['queued']:.1f}%)"])
    out += _table(["Device / stream", "Busy", "Util", "Kernels", "Memcpy", "Memset",
                   "Idle: host launch", "Idle: sync wait", "Idle: queued"], rows)
    out.append("  host launch: nothing queued and no host wait (the host did not launch fast enough); "
               f"sync wait: a host thread blocked in a wait ({s['wait_source']}); queued: launched work "
               "not started yet (device queue, or work from before the capture)")
    out.append("")
    return out


def _longest_gaps(s):
    out = ["Longest device idle gaps"]
    names = {"host_launch": "host not launching", "sync_wait": "waiting on sync", "queued": "launched, not started"}
    for g in s["longest_gaps"]:
        before = f"after {g['before']['name']}" if g["before"] else "from the capture start"
        after = (f"before {g['after']['name']}" + (f" (op {g['after']['op']})" if g["after"]["op"] else "")
                 if g["after"] else "until the capture end")
        split = ", ".join(f"{names[k]} {fmt_time(v)}" for k, v in g["causes_us"].items() if v > 0)
        out.append(f"  {g['label']}: {fmt_time(g['dur_us'])} at +{fmt_time(g['start_us'])}, {before}, {after}: "
                   f"{split}")
    out.append("")
    return out


def _launch_latency(s):
    lat = s["launch_latency"]
    out = ["Launch-to-start latency (kernel start - its launch call start)"]
    if lat["count"]:
        out.append(f"  {lat['count']} kernels: p50 {fmt_time(lat['p50_us'])}, p90 {fmt_time(lat['p90_us'])}, "
                   f"p99 {fmt_time(lat['p99_us'])}, max {fmt_time(lat['max_us'])} "
                   f"(min {fmt_time(lat['min_us'])}, mean {fmt_time(lat['mean_us'])})")
        out.append(f"  without the queueing (start - max(launch, previous activity end on the stream)): "
                   f"p50 {fmt_time(lat['free_stream_p50_us'])}, p90 {fmt_time(lat['free_stream_p90_us'])}, "
                   f"max {fmt_time(lat['free_stream_max_us'])}")
    else:
        out.append("  no kernel has a matching launch event")
    out.append("")
    return out


def _memory(s):
    mem = s["memory"]
    out = ["Device memory ([memory] events; profile_memory=True)"]
    if not mem["devices"]:
        out.append("  no device memory events in this trace (profile with profile_memory=True)")
    for d in mem["devices"]:
        out.append(f"  {d['label']}: peak allocated {fmt_bytes(d['peak_allocated'])} at +{fmt_time(d['peak_at_us'])} "
                   f"in {d['peak_op']}; peak reserved {fmt_bytes(d['peak_reserved'])}; "
                   f"{d['allocations']} allocs ({fmt_bytes(d['bytes_allocated'])}), {d['frees']} frees "
                   f"({fmt_bytes(d['bytes_freed'])}); allocated before the capture "
                   f"{fmt_bytes(d['allocated_at_start'])}")
        if d["live_at_peak_by_op"]:
            parts = ", ".join(f"{clip(r['op'], 40)} {fmt_bytes(r['bytes'])}" for r in d["live_at_peak_by_op"][:5])
            out.append(f"    live at the peak: {parts}; from before the capture {fmt_bytes(d['baseline_at_peak'])}")
    if mem["by_op"]:
        out.append("  Top memory consumers by op (outermost op; sorted by bytes live at the peak, then allocated)")
        out += _table(["Op", "Device", "Live at peak", "Allocated", "Allocs", "Largest", "Via"],
                      [[clip(r["op"], 40), r["device"], fmt_bytes(r["live_at_peak"]), fmt_bytes(r["bytes_allocated"]),
                        r["allocations"], fmt_bytes(r["largest_allocation"]), clip(r["via"], 50)]
                       for r in mem["by_op"][:10]], ["<", ">", ">", ">", ">", ">", "<"])
        out.append("  Largest allocations")
        out += _table(["Bytes", "Device", "At", "Lifetime", "Op"],
                      [[fmt_bytes(r["bytes"]), r["device"], "+" + fmt_time(r["at_us"]),
                        fmt_time(r["lifetime_us"]) if r["lifetime_us"] is not None else "not freed",
                        clip(r["path"], 70)] for r in mem["largest"]], [">", ">", ">", ">", "<"])
    out.append("")
    return out


def _collectives(s):
    out = ["Collectives"]
    if s["collectives"]:
        out += _table(["Name", "Side", "Count", "Total", "Avg", "Max"],
                      [[clip(x["name"]), x["side"], x["count"], fmt_time(x["total_us"]), fmt_time(x["avg_us"]),
                        fmt_time(x["max_us"])] for x in s["collectives"]], ["<", "<", ">", ">", ">", ">"])
    else:
        out.append("  no collective communication in this trace")
    return out


def _graphs(s):
    g = s.get("graphs") or {"launches": 0, "graphs": []}
    if not g["launches"] and not g["graphs"]:
        return []  # no graphs in the trace: no section
    out = ["", f"Graph launches ({g['launches']} xxnpuGraphLaunch calls)"]
    out += _table(["Graph id", "Launches", "Nodes/launch", "Device total", "Device/launch", "%"],
                  [[x["graph_id"], x["launches"],
                    (f"{x['nodes_per_launch']['min']}" if x["nodes_per_launch"]["min"] == x["nodes_per_launch"]["max"]
                     else f"{x['nodes_per_launch']['min']}-{x['nodes_per_launch']['max']}"),
                    fmt_time(x["device_total_us"]), fmt_time(x["device_per_launch_us"]),
                    f"{x['pct_device_time']:.2f}%"] for x in g["graphs"]])
    return out
