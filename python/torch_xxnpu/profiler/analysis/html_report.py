"""Self-contained HTML report of ``summarize()``'s result: inline SVG charts and CSS only.

No scripts, fonts or images are fetched: the file reads the same offline. Charts: the
device timeline per stream (bars per kernel, idle gaps coloured by cause, the host rows
that launched the work above), utilisation over time, the window breakdown per
device/stream, device time by kernel and by op (host vs device), the launch-to-start
latency histogram, device memory over time. Hovering a bar shows its details (SVG
``<title>``).
"""
import html
import math

from torch_xxnpu.profiler.analysis.display import fmt_bytes, fmt_time

__all__ = ["render_html"]

PALETTE = ["#4e79a7", "#59a14f", "#9c755f", "#76b7b2", "#edc948", "#ff9da7", "#8cd17d", "#499894",
           "#86bcb6", "#d4a6c8"]
KIND_COLORS = {"memcpy": "#6b4c9a", "memset": "#17becf"}
OTHER_KERNEL = "#8c8c8c"
IDLE_COLORS = {"host_launch": "#e15759", "sync_wait": "#f28e2b", "queued": "#bab0ac"}
IDLE_LABELS = {"host_launch": "idle: host not launching", "sync_wait": "idle: waiting on sync",
               "queued": "idle: launched, not started"}
BUSY_COLORS = {"kernel": "#4e79a7", "memcpy": "#6b4c9a", "memset": "#17becf"}

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;background:#fafafa}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#666;font-size:13px;margin-bottom:12px}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}
.card{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px 14px;min-width:150px}
.card .v{font-size:20px;font-weight:600}.card .k{font-size:12px;color:#666}
.chart{background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px;margin:8px 0;overflow-x:auto}
svg{max-width:100%;height:auto}svg .halo{paint-order:stroke;stroke:#fff;stroke-width:3px}
svg text{font-size:11px;fill:#333}svg .axis{stroke:#999;stroke-width:1}svg .grid{stroke:#eee;stroke-width:1}
table{border-collapse:collapse;font-size:12px;background:#fff;margin:6px 0}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f0f0f0}
td.l,th.l{text-align:left}.note{font-size:12px;color:#555;max-width:1100px}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px;border-radius:2px}
.warn{color:#a33;font-size:13px}
.twocol{display:flex;flex-wrap:wrap;gap:16px}.twocol>div{flex:1 1 560px;min-width:0}
"""


def _e(s):
    return html.escape(str(s), quote=True)


def _nice_step(span, target):
    if span <= 0:
        return 1.0
    raw = span / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _tick(us, step):
    """A short axis label: '0', '250 us', '1.5 ms', '2 s' (decimals as the step needs)."""
    if us == 0:
        return "0"
    for unit, scale in (("s", 1e6), ("ms", 1e3), ("us", 1.0)):
        if step >= scale or unit == "us":
            v, st = us / scale, step / scale
            decimals = 0 if st >= 1 else min(3, int(math.ceil(-math.log10(st))))
            return f"{v:.{decimals}f} {unit}"
    return fmt_time(us)


def _time_axis(x0, width, t_max, y, height, ticks=10):
    step = _nice_step(t_max, ticks)
    out = [f'<line class="axis" x1="{x0}" y1="{y}" x2="{x0 + width}" y2="{y}"/>']
    t = 0.0
    while t <= t_max * 1.0001 and t_max > 0:
        x = x0 + width * t / t_max
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{y - height}" x2="{x:.1f}" y2="{y}"/>')
        out.append(f'<text x="{x:.1f}" y="{y + 13}" text-anchor="middle">{_e(_tick(t, step))}</text>')
        t += step
    return out


def _merge_px(items, scale, min_gap=0.6):
    """items: [(start, dur, title)] sorted; merges bars closer than min_gap px.

    Returns [(x, w, title or None, count)], at most ~width bars per colour."""
    out = []
    for start, dur, title in sorted(items, key=lambda i: i[0]):
        x0, x1 = start * scale, (start + dur) * scale
        # Bars wide enough to see stay separate, even back to back.
        if out and x0 - out[-1][1] < min_gap and (x1 - x0 < 2.0 or out[-1][1] - out[-1][0] < 2.0):
            last = out[-1]
            out[-1] = [last[0], max(last[1], x1), None, last[3] + 1, last[4] + dur]
        else:
            out.append([x0, x1, title, 1, dur])
    return [(a, max(b - a, 0.6), t, n, d) for a, b, t, n, d in out]


def _merge_device_bars(bars, scale, colors, min_gap=0.6, noun="activities"):
    """Device bars -> [(x, w, color, title)]: bars narrower than 2 px that nearly touch are
    merged whatever their kernel (so a lane has at most ~one bar per pixel), coloured by
    the kernel with most time in the merged bar."""
    groups = []
    for s, d, name, k, op in sorted(bars, key=lambda b: b[0]):
        x0, x1 = s * scale, (s + d) * scale
        color = KIND_COLORS.get(k) or colors.get(name, OTHER_KERNEL)
        g = groups[-1] if groups else None
        if g and x0 - g["x1"] < min_gap and (x1 - x0 < 2.0 or g["x1"] - g["x0"] < 2.0):
            g["x1"] = max(g["x1"], x1)
            g["n"] += 1
            g["busy"] += d
            g["by"][(name, color)] = g["by"].get((name, color), 0.0) + d
        else:
            title = (f"{name}: {fmt_time(d)} at +{fmt_time(s)}" if k == "idle" else
                     f"{name} [{k}] {fmt_time(d)} at +{fmt_time(s)}" + (f"\nop: {op}" if op else ""))
            groups.append({"x0": x0, "x1": x1, "n": 1, "busy": d, "by": {(name, color): d}, "title": title,
                           "start": s})
    out = []
    for g in groups:
        (name, color), _ = max(g["by"].items(), key=lambda kv: kv[1])
        if g["n"] == 1:
            title = g["title"]
        else:
            top = sorted(g["by"].items(), key=lambda kv: -kv[1])[:3]
            title = (f"{g['n']} {noun} from +{fmt_time(g['start'])}, {fmt_time(g['busy'])} in total: "
                     + ", ".join(f"{n} {fmt_time(v)}" for (n, _), v in top))
        span = (g["x1"] - g["x0"]) / scale if scale > 0 else 0.0
        density = min(1.0, g["busy"] / span) if span > 0 else 1.0
        out.append((g["x0"], max(g["x1"] - g["x0"], 0.6), color, title, max(density, 0.3)))
    return out


def _downsample_steps(points, px_of, max_per_px=2.0):
    """Step-series points [(t, v)] -> at most ~4 per half pixel: first, min, max, last of
    each bucket (so peaks survive)."""
    buckets = {}
    for t, v in points:
        buckets.setdefault(int(px_of(t) * max_per_px), []).append((t, v))
    out = []
    for _, pts in sorted(buckets.items()):
        if len(pts) <= 4:
            out += pts
            continue
        keep = {0, len(pts) - 1, min(range(len(pts)), key=lambda i: pts[i][1]),
                max(range(len(pts)), key=lambda i: pts[i][1])}
        out += [pts[i] for i in sorted(keep)]
    return out


def _kernel_colors(summary):
    colors = {}
    kernels = [k for k in summary["kernels"] if k["kind"] == "kernel"]
    for i, k in enumerate(kernels[: len(PALETTE)]):
        colors[k["name"]] = PALETTE[i]
    return colors


def _legend(entries):
    return '<div class="legend">' + "".join(
        f'<span><i style="background:{c}"></i>{_e(label)}</span>' for label, c in entries) + "</div>"


# ---------------------------------------------------------------------------- charts


def _timeline_svg(summary, colors):
    tl = summary["_timeline"]
    t_max = tl["window_us"] or 1.0
    left, width, lane_h, gap = 190, 1060, 26, 10
    scale = width / t_max
    rows = []
    for h in tl["host"]:
        rows.append(("host", h))
    for lane in tl["lanes"]:
        rows.append(("device", lane))
    height = 30 + sum((lane_h + 10 if kind == "device" else lane_h) + gap for kind, _ in rows) + 24
    out = [f'<svg width="{left + width + 20}" height="{height}" '
           f'viewBox="0 0 {left + width + 20} {height}" role="img" aria-label="device timeline">']
    y = 20
    axis_top = y
    body = []
    for kind, lane in rows:
        label = lane["label"]
        body.append(f'<text x="{left - 8}" y="{y + lane_h / 2 + 4}" text-anchor="end">{_e(label[:30])}</text>')
        body.append(f'<rect x="{left}" y="{y}" width="{width}" height="{lane_h}" fill="#f6f6f6"/>')
        if kind == "host":
            for x, w, title, n, d in _merge_px([(s, d, f"{name} ({fmt_time(d)})") for s, d, name in lane["ops"]],
                                               scale):
                t = title or f"{n} ops, {fmt_time(d)}"
                body.append(f'<rect x="{left + x:.2f}" y="{y + 2}" width="{w:.2f}" height="{lane_h - 4}" '
                            f'fill="#a0cbe8"><title>{_e(t)}</title></rect>')
            for x, w, title, n, d in _merge_px([(s, d, f"{name} ({fmt_time(d)})") for s, d, name in lane["waits"]],
                                               scale):
                t = title or f"{n} waits, {fmt_time(d)}"
                body.append(f'<rect x="{left + x:.2f}" y="{y + lane_h / 2}" width="{w:.2f}" height="{lane_h / 2 - 2}" '
                            f'fill="{IDLE_COLORS["sync_wait"]}" opacity="0.8"><title>{_e(t)}</title></rect>')
            for x, w, title, n, d in _merge_px([(s, d, f"{name}") for s, d, name in lane["launches"]], scale, 1.0):
                t = title or f"{n} runtime calls"
                body.append(f'<rect x="{left + x:.2f}" y="{y}" width="{max(w, 1.0):.2f}" height="4" fill="#333">'
                            f'<title>{_e(t)}</title></rect>')
            y += lane_h + gap
            continue
        for x, w, color, title, density in _merge_device_bars(lane["bars"], scale, colors):
            # Merged bars are as opaque as they are busy.
            sep = ' stroke="#fff" stroke-width="0.6"' if w >= 3 and density >= 0.999 else ""
            op = f' fill-opacity="{density:.2f}"' if density < 0.999 else ""
            body.append(f'<rect x="{left + x:.2f}" y="{y}" width="{w:.2f}" height="{lane_h}" fill="{color}"{sep}{op}>'
                        f'<title>{_e(title)}</title></rect>')
        idle_colors = {IDLE_LABELS[c]: IDLE_COLORS[c] for c in IDLE_COLORS}
        idle_bars = [(s, d, IDLE_LABELS[cause], "idle", "") for s, d, cause in lane["idle"]]
        for x, w, color, title, density in _merge_device_bars(idle_bars, scale, idle_colors, 0.3, "idle gaps"):
            op = f' fill-opacity="{density:.2f}"' if density < 0.999 else ""
            body.append(f'<rect x="{left + x:.2f}" y="{y + lane_h + 1}" width="{w:.2f}" height="7" '
                        f'fill="{color}"{op}><title>{_e(title)}</title></rect>')
        y += lane_h + 10 + gap
    out += _time_axis(left, width, t_max, y, y - axis_top)
    out += body
    out.append("</svg>")
    return "\n".join(out)


def _utilization_over_time_svg(summary, bins=120):
    tl = summary["_timeline"]
    t_max = tl["window_us"] or 1.0
    devices = {}
    for lane in tl["lanes"]:
        devices.setdefault(lane["device"], []).extend((s, s + d) for s, d, *_ in lane["bars"])
    left, width, h, gap = 190, 1060, 60, 16
    height = 14 + len(devices) * (h + gap) + 20
    out = [f'<svg width="{left + width + 40}" height="{height}" '
           f'viewBox="0 0 {left + width + 40} {height}" role="img" aria-label="utilisation over time">']
    y = 10
    bw = _nice_step(t_max, bins)
    bins = max(1, int(math.ceil(t_max / bw)))
    for dev, ivs in sorted(devices.items(), key=lambda kv: str(kv[0])):
        # Union first so overlapping streams count once.
        merged = []
        for s, e in sorted(ivs):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        busy = [0.0] * bins
        for s, e in merged:
            b0, b1 = int(s / bw), min(int(e / bw), bins - 1)
            for b in range(max(b0, 0), b1 + 1):
                lo, hi = max(s, b * bw), min(e, (b + 1) * bw)
                if hi > lo:
                    busy[b] += hi - lo
        label = next((u["label"] for u in summary["utilization"] if u["device"] == dev and u["stream"] is None), dev)
        out.append(f'<text x="{left - 8}" y="{y + h / 2}" text-anchor="end">{_e(label)}</text>')
        out.append(f'<text x="{left - 8}" y="{y + h / 2 + 13}" text-anchor="end" fill="#666">busy % per '
                   f'{_e(fmt_time(bw))}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{width}" height="{h}" fill="#f6f6f6"/>')
        for frac in (0.5, 1.0):
            yy = y + h - h * frac
            out.append(f'<line class="grid" x1="{left}" y1="{yy}" x2="{left + width}" y2="{yy}"/>')
            out.append(f'<text x="{left + width + 2}" y="{yy + 4}">{int(frac * 100)}%</text>')
        for b, v in enumerate(busy):
            frac = min(v / bw, 1.0)
            if frac <= 0:
                continue
            x = left + width * b * bw / t_max
            bar_w = min(width * bw / t_max, left + width - x)
            out.append(f'<rect x="{x:.2f}" y="{y + h - h * frac:.2f}" width="{bar_w:.2f}" '
                       f'height="{h * frac:.2f}" fill="#4e79a7"><title>+{_e(fmt_time(b * bw))}: '
                       f'{frac * 100:.1f}% busy</title></rect>')
        y += h + gap
    out += _time_axis(left, width, t_max, y - gap + 2, 0)
    out.append("</svg>")
    return "\n".join(out)


def _breakdown_svg(summary):
    rows = summary["utilization"]
    left, width, bar_h, gap = 190, 900, 20, 8
    height = 10 + len(rows) * (bar_h + gap) + 10
    out = [f'<svg width="{left + width + 120}" height="{height}" '
           f'viewBox="0 0 {left + width + 120} {height}" role="img" aria-label="window breakdown">']
    y = 10
    for u in rows:
        w_total = u["window_us"] or 1.0
        parts = [("kernel", u["kernel_us"]), ("memcpy", u["memcpy_us"]), ("memset", u["memset_us"])]
        parts += [(k, u["idle"][k]) for k in ("queued", "sync_wait", "host_launch")]
        label = u["label"] if u["stream"] is None else f"  stream {u['stream']}"
        out.append(f'<text x="{left - 8}" y="{y + bar_h / 2 + 4}" text-anchor="end">{_e(label)}</text>')
        x = left
        for name, v in parts:
            w = width * v / w_total
            if w <= 0:
                continue
            color = BUSY_COLORS.get(name) or IDLE_COLORS[name]
            desc = IDLE_LABELS.get(name, name)
            out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{bar_h}" fill="{color}">'
                       f'<title>{_e(desc)}: {_e(fmt_time(v))} ({100 * v / w_total:.1f}%)</title></rect>')
            if w > 48:
                out.append(f'<text x="{x + w / 2:.1f}" y="{y + bar_h / 2 + 4}" text-anchor="middle" '
                           f'fill="#fff" style="fill:#fff">{100 * v / w_total:.0f}%</text>')
            x += w
        out.append(f'<text x="{left + width + 6}" y="{y + bar_h / 2 + 4}">{u["utilization_pct"]:.1f}% busy</text>')
        y += bar_h + gap
    out.append("</svg>")
    return "\n".join(out)


def _hbar_svg(rows, label="name", series=(("device_total_us", "#4e79a7", "device"),), top=15, fmt=fmt_time):
    rows = rows[:top]
    if not rows:
        return "<p class='note'>nothing to show</p>"
    left, width, bar_h, gap = 230, 360, 16 if len(series) == 1 else 11, 6
    group_h = bar_h * len(series) + gap
    height = 10 + len(rows) * group_h + 10
    vmax = max(max(r[k] for k, _, _ in series) for r in rows) or 1.0
    out = [f'<svg width="{left + width + 90}" height="{height}" '
           f'viewBox="0 0 {left + width + 90} {height}" role="img" aria-label="bar chart">']
    y = 10
    for r in rows:
        name = str(r[label])
        out.append(f'<text x="{left - 8}" y="{y + bar_h * len(series) / 2 + 4}" text-anchor="end">'
                   f'{_e(name if len(name) <= 36 else name[:33] + "...")}<title>{_e(name)}</title></text>')
        for key, color, what in series:
            v = r[key]
            w = max(width * v / vmax, 0.5 if v > 0 else 0)
            out.append(f'<rect x="{left}" y="{y}" width="{w:.2f}" height="{bar_h - 1}" fill="{color}">'
                       f'<title>{_e(name)} {what}: {_e(fmt(v))}</title></rect>')
            out.append(f'<text x="{left + w + 4:.1f}" y="{y + bar_h - 3}">{_e(fmt(v))}</text>')
            y += bar_h
        y += gap
    out.append("</svg>")
    return "\n".join(out)


def _histogram_svg(values, lat):
    if not values:
        return "<p class='note'>no kernel has a matching launch event</p>"
    vals = [max(v, 0.0) for v in values]
    lo, hi = min(vals), max(vals)
    n_bins = 30
    log = lo > 0 and hi / lo > 50
    if hi <= lo:
        hi = lo + 1.0
    if log:
        llo, lhi = math.log10(lo), math.log10(hi)
        edges = [10 ** (llo + (lhi - llo) * i / n_bins) for i in range(n_bins + 1)]
        pos = lambda v: (math.log10(max(v, lo)) - llo) / (lhi - llo)  # noqa: E731
    else:
        edges = [lo + (hi - lo) * i / n_bins for i in range(n_bins + 1)]
        pos = lambda v: (v - lo) / (hi - lo)  # noqa: E731
    counts = [0] * n_bins
    for v in vals:
        b = min(int(pos(v) * n_bins), n_bins - 1)
        counts[max(b, 0)] += 1
    left, width, h = 60, 900, 200
    out = [f'<svg width="{left + width + 40}" height="{h + 60}" '
           f'viewBox="0 0 {left + width + 40} {h + 60}" role="img" aria-label="latency histogram">']
    top = 20
    cmax = max(counts) or 1
    out.append(f'<line class="axis" x1="{left}" y1="{top + h}" x2="{left + width}" y2="{top + h}"/>')
    out.append(f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + h}"/>')
    cstep = max(1, int(_nice_step(cmax, 4)))
    for c in range(0, cmax + 1, cstep):
        yy = top + h - h * c / cmax
        out.append(f'<line class="grid" x1="{left}" y1="{yy:.1f}" x2="{left + width}" y2="{yy:.1f}"/>')
        out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{c}</text>')
    out.append(f'<text x="{left - 40}" y="{top + h / 2}" transform="rotate(-90 {left - 40} {top + h / 2})" '
               'text-anchor="middle">kernels</text>')
    bw = width / n_bins
    for i, c in enumerate(counts):
        if c == 0:
            continue
        bh = h * c / cmax
        out.append(f'<rect x="{left + i * bw + 1:.2f}" y="{top + h - bh:.2f}" width="{bw - 2:.2f}" height="{bh:.2f}" '
                   f'fill="#76b7b2"><title>{_e(fmt_time(edges[i]))} - {_e(fmt_time(edges[i + 1]))}: {c} kernels'
                   f'</title></rect>')
    for i in range(0, n_bins + 1, 5):
        x = left + i * bw
        out.append(f'<text x="{x:.1f}" y="{top + h + 14}" text-anchor="middle">{_e(fmt_time(edges[i]))}</text>')
    marks = [("p50", lat.get("p50_us"), "#4e79a7"), ("p90", lat.get("p90_us"), "#f28e2b"),
             ("p99", lat.get("p99_us"), "#e15759")]
    for name, v, color in marks:
        if v is None:
            continue
        x = left + width * min(max(pos(v), 0.0), 1.0)
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{top + h}" stroke="{color}" '
                   f'stroke-width="2" stroke-dasharray="4 3"/>')
        right = x > left + width * 0.75
        out.append(f'<text x="{x - 4 if right else x + 4:.1f}" y="{top + 6 + 12 * marks.index((name, v, color))}" '
                   f'text-anchor="{"end" if right else "start"}" class="halo" style="fill:{color}">{name} '
                   f'{_e(fmt_time(v))}</text>')
    out.append(f'<text x="{left + width / 2}" y="{top + h + 32}" text-anchor="middle">launch-to-start latency '
               f'({"log" if log else "linear"} bins)</text>')
    out.append("</svg>")
    return "\n".join(out)


def _memory_svg(summary):
    devs = [d for d in summary["memory"]["devices"] if d.get("_series")]
    if not devs:
        return "<p class='note'>no device memory events in this trace (profile with profile_memory=True)</p>"
    t_max = summary["_timeline"]["window_us"] or 1.0
    left, width, h, gap = 90, 1000, 180, 40
    height = 14 + len(devs) * (h + gap)
    out = [f'<svg width="{left + width + 200}" height="{height}" '
           f'viewBox="0 0 {left + width + 200} {height}" role="img" aria-label="memory over time">']
    y = 10
    for d in devs:
        series = d["_series"]
        vmax = max(max(p[1] for p in series), max((p[2] or 0) for p in series)) or 1
        unit = 1 << (10 * max(0, min(4, int(math.log(vmax, 1024)))))
        step = _nice_step(vmax / unit, 4) * unit
        ymax = step * math.ceil(vmax / step)
        sx = lambda t: left + width * t / t_max  # noqa: E731
        sy = lambda v: y + h - h * v / ymax  # noqa: E731
        out.append(f'<text x="{left + width + 8}" y="{y + 12}" style="font-weight:600">{_e(d["label"])}</text>')
        v = 0.0
        while v <= ymax + 1e-9:
            out.append(f'<line class="grid" x1="{left}" y1="{sy(v):.1f}" x2="{left + width}" y2="{sy(v):.1f}"/>')
            out.append(f'<text x="{left - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{_e(fmt_bytes(int(v)))}</text>')
            v += step
        for key, color, name in ((2, "#bab0ac", "reserved"), (1, "#b07aa1", "allocated")):
            pts = []
            prev = None
            points = _downsample_steps([(p[0], p[key]) for p in series if p[key] is not None], sx)
            for p in points:
                if prev is not None:
                    pts.append(f"{sx(p[0]):.2f},{sy(prev):.2f}")
                pts.append(f"{sx(p[0]):.2f},{sy(p[1]):.2f}")
                prev = p[1]
            if prev is not None:
                pts.append(f"{sx(t_max):.2f},{sy(prev):.2f}")
            if pts:
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(pts)}">'
                           f'<title>{name}</title></polyline>')
        if d.get("peak_at_us") is not None:
            px, py = sx(d["peak_at_us"]), sy(d["peak_allocated"])
            out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="#e15759"><title>peak allocated '
                       f'{_e(fmt_bytes(d["peak_allocated"]))} at +{_e(fmt_time(d["peak_at_us"]))} in '
                       f'{_e(d["peak_op"])}</title></circle>')
            anchor = "end" if px > left + width * 0.7 else "start"
            dx = -6 if anchor == "end" else 6
            out.append(f'<text x="{px + dx:.1f}" y="{max(py - 6, y + 10):.1f}" text-anchor="{anchor}" '
                       f'style="fill:#e15759">peak {_e(fmt_bytes(d["peak_allocated"]))} in '
                       f'{_e(d["peak_op"][:70])}</text>')
        out += _time_axis(left, width, t_max, y + h, 0, ticks=8)
        y += h + gap
    out.append("</svg>")
    return "\n".join(out)


# ---------------------------------------------------------------------------- tables


MAX_ROWS = 100


def _more(rows):
    n = len(rows) - MAX_ROWS
    return f'<p class="note">... {n} more rows (the --json output has them all)</p>' if n > 0 else ""


def _table(headers, rows, left_cols=(0,)):
    out = ["<table><tr>" + "".join(f'<th class="{"l" if i in left_cols else ""}">{_e(h)}</th>'
                                   for i, h in enumerate(headers)) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="{"l" if i in left_cols else ""}">{_e(c)}</td>'
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def render_html(summary, title="xxnpu profile report"):
    """The report as one HTML string (no external resources)."""
    s = summary
    colors = _kernel_colors(s)
    dev_rows = [u for u in s["utilization"] if u["stream"] is None]
    util = ", ".join(f"{u['label']} {u['utilization_pct']:.1f}%" for u in dev_rows)
    host_idle = max((u["idle_pct_of_window"]["host_launch"] for u in dev_rows), default=0.0)
    lat = s["launch_latency"]
    mem = s["memory"]
    peak = max((d["peak_allocated"] for d in mem["devices"]), default=None)
    cards = [
        ("capture window", fmt_time(s["window"]["duration_us"])),
        ("device utilisation", util),
        ("device time", fmt_time(s["counts"]["device_time_us"])),
        ("kernels / copies", f"{s['counts']['kernels']} / {s['counts']['memcpy'] + s['counts']['memset']}"),
        ("idle: host not launching", f"{host_idle:.1f}% of window"),
        ("launch latency p50 / p99", f"{fmt_time(lat.get('p50_us'))} / {fmt_time(lat.get('p99_us'))}"
         if lat["count"] else "-"),
        ("peak device memory", fmt_bytes(peak) if peak is not None else "not profiled"),
    ]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title>", f"<style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<div class="sub">{_e(s.get("source") or "trace")} &middot; '
        + _e(", ".join(f"{d['label']} (streams {', '.join(map(str, d['streams']))})" for d in s["devices"]))
        + (" &middot; " + _e(", ".join(p.get("name", "") for p in s["device_properties"]))
           if s["device_properties"] else "") + "</div>",
        '<div class="cards">' + "".join(f'<div class="card"><div class="v">{_e(v)}</div><div class="k">{_e(k)}'
                                        f"</div></div>" for k, v in cards) + "</div>",
    ]
    for w in s["warnings"]:
        parts.append(f'<div class="warn">warning: {_e(w)}</div>')

    legend = [(name, c) for name, c in colors.items()]
    if any(k["kind"] == "kernel" and k["name"] not in colors for k in s["kernels"]):
        legend.append(("other kernels", OTHER_KERNEL))
    legend += [("memcpy", KIND_COLORS["memcpy"]), ("memset", KIND_COLORS["memset"])]
    legend += [(IDLE_LABELS[k], IDLE_COLORS[k]) for k in ("host_launch", "sync_wait", "queued")]
    legend += [("host: top-level ops", "#a0cbe8"), ("host: runtime calls (ticks)", "#333")]
    parts += [
        "<h2>Timeline: host threads and device streams</h2>",
        '<p class="note">Each device stream is a row of kernel/copy bars; the thin strip under it shows the '
        "idle gaps coloured by cause. Host rows show the launching thread's top-level ops, its runtime calls "
        "(ticks on top) and its waits on the device (orange, lower half). Bars closer than a pixel are "
        "merged (faded as much as they are idle); hover for details.</p>",
        _legend(legend), f'<div class="chart">{_timeline_svg(s, colors)}</div>',
        "<h2>Device utilisation</h2>",
        f'<div class="chart">{_utilization_over_time_svg(s)}</div>',
        _legend([("kernel", BUSY_COLORS["kernel"]), ("memcpy", BUSY_COLORS["memcpy"]),
                 ("memset", BUSY_COLORS["memset"])] + [(IDLE_LABELS[k], IDLE_COLORS[k])
                                                       for k in ("queued", "sync_wait", "host_launch")]),
        f'<div class="chart">{_breakdown_svg(s)}</div>',
        _table(["Device / stream", "Busy", "Util %", "Kernels", "Memcpy", "Memset", "Idle: host launch",
                "Idle: sync wait", "Idle: queued"],
               [[u["label"], fmt_time(u["busy_us"]), f"{u['utilization_pct']:.2f}", fmt_time(u["kernel_us"]),
                 fmt_time(u["memcpy_us"]), fmt_time(u["memset_us"]),
                 f"{fmt_time(u['idle']['host_launch'])} ({u['idle_pct_of_window']['host_launch']:.1f}%)",
                 f"{fmt_time(u['idle']['sync_wait'])} ({u['idle_pct_of_window']['sync_wait']:.1f}%)",
                 f"{fmt_time(u['idle']['queued'])} ({u['idle_pct_of_window']['queued']:.1f}%)"]
                for u in s["utilization"]]),
        '<p class="note">host not launching: the device had nothing queued and no host thread was waiting on it; '
        f"waiting on sync: a host thread was blocked in a wait ({_e(s['wait_source'])}); launched, not started: "
        "work was queued but had not started (device queue latency, or work from before the capture that the "
        "trace cannot show).</p>",
        '<div class="twocol"><div>',
        "<h2>Device time by kernel</h2>",
        f'<div class="chart">{_hbar_svg(s["kernels"], series=(("total_us", "#4e79a7", "device"),))}</div>',
        "</div><div>",
        "<h2>Device vs host time by op</h2>",
        '<div class="chart">' + _hbar_svg(s["ops"], series=(("device_total_us", "#4e79a7", "device"),
                                                            ("host_total_us", "#f28e2b", "host"))) + "</div>",
        _legend([("device time of the work the op launched", "#4e79a7"), ("host time of the op", "#f28e2b")]),
        "</div></div>",
        _table(["Kernel", "Kind", "Calls", "Total", "Avg", "Min", "Max", "% device time"],
               [[k["name"], k["kind"], k["calls"], fmt_time(k["total_us"]), fmt_time(k["avg_us"]),
                 fmt_time(k["min_us"]), fmt_time(k["max_us"]), f"{k['pct_device_time']:.2f}"]
                for k in s["kernels"][:MAX_ROWS]], left_cols=(0, 1)),
        _more(s["kernels"]),
        _table(["Op", "Calls", "Host total", "Device total", "Device / call", "Activities", "% device time"],
               [[o["name"], o["calls"], fmt_time(o["host_total_us"]), fmt_time(o["device_total_us"]),
                 fmt_time(o["device_avg_us"]), o["device_activities"], f"{o['pct_device_time']:.2f}"]
                for o in s["ops"][:MAX_ROWS]]),
        _more(s["ops"]),
        "<h2>Op &rarr; kernel map</h2>",
        _table(["Op (launched the work)", "Kernel", "Kind", "Count", "Total", "Avg", "Inside"],
               [[m["op"], m["kernel"], m["kind"], m["count"], fmt_time(m["total_us"]), fmt_time(m["avg_us"]),
                 ", ".join(m["top_level_ops"])] for m in s["op_kernel_map"][:MAX_ROWS]], left_cols=(0, 1, 2, 6)),
        _more(s["op_kernel_map"]),
        "<h2>Launch-to-start latency</h2>",
        f'<div class="chart">{_histogram_svg(s["_latency_values_us"], lat)}</div>',
    ]
    if lat["count"]:
        parts.append(f'<p class="note">{lat["count"]} kernels: p50 {_e(fmt_time(lat["p50_us"]))}, p90 '
                     f'{_e(fmt_time(lat["p90_us"]))}, p99 {_e(fmt_time(lat["p99_us"]))}, max '
                     f'{_e(fmt_time(lat["max_us"]))}. Without the queueing behind earlier work on the stream '
                     f'(start - max(launch, previous end)): p50 {_e(fmt_time(lat["free_stream_p50_us"]))}, p90 '
                     f'{_e(fmt_time(lat["free_stream_p90_us"]))}.</p>')
    parts += ["<h2>Device memory</h2>", f'<div class="chart">{_memory_svg(s)}</div>',
              _legend([("allocated", "#b07aa1"), ("reserved (allocator cache)", "#bab0ac"), ("peak", "#e15759")])]
    for d in mem["devices"]:
        parts.append(f'<p class="note">{_e(d["label"])}: peak allocated {_e(fmt_bytes(d["peak_allocated"]))} at '
                     f'+{_e(fmt_time(d["peak_at_us"]))} in {_e(d["peak_op"])}; live at the peak: '
                     + _e(", ".join(f"{r['op']} {fmt_bytes(r['bytes'])}" for r in d["live_at_peak_by_op"][:6]))
                     + f"; from before the capture {_e(fmt_bytes(d['baseline_at_peak']))}.</p>")
    if mem["by_op"]:
        parts.append(_table(["Op (outermost)", "Device", "Live at peak", "Allocated", "Allocs", "Largest", "Via"],
                            [[r["op"], r["device"], fmt_bytes(r["live_at_peak"]), fmt_bytes(r["bytes_allocated"]),
                              r["allocations"], fmt_bytes(r["largest_allocation"]), r["via"]]
                             for r in mem["by_op"][:15]], left_cols=(0, 6)))
        parts.append(_table(["Largest allocations", "Device", "At", "Lifetime", "Op"],
                            [[fmt_bytes(r["bytes"]), r["device"], "+" + fmt_time(r["at_us"]),
                              fmt_time(r["lifetime_us"]) if r["lifetime_us"] is not None else "not freed",
                              r["path"]] for r in mem["largest"]], left_cols=(4,)))
    parts.append("<h2>Collectives</h2>")
    if s["collectives"]:
        parts.append(_table(["Name", "Side", "Count", "Total", "Avg", "Max"],
                            [[c["name"], c["side"], c["count"], fmt_time(c["total_us"]), fmt_time(c["avg_us"]),
                              fmt_time(c["max_us"])] for c in s["collectives"]], left_cols=(0, 1)))
    else:
        parts.append('<p class="note">no collective communication in this trace</p>')
    parts.append('<p class="note">Generated by python -m torch_xxnpu.profiler.analyze; times are relative to the '
                 "capture window's start.</p></body></html>")
    return "\n".join(parts)
