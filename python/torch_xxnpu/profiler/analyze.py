"""Analysis of a torch.profiler chrome trace with the xxnpu device timeline.

    python -m torch_xxnpu.profiler.analyze TRACE.json [--html OUT.html] [--json OUT.json] [--check]

What the trace holds (profiler/record_conversion.cc): device work as ``X`` events with
``cat`` ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` on pid = device, tid = stream, with
``args`` ``device``, ``stream``, ``correlation`` (shared with the launching runtime call,
``cat`` ``privateuse1_runtime``, e.g. ``xxnpuLaunchKernel``) and ``External id`` (shared with
the ATen/custom op, ``cat`` ``cpu_op``). Host waits on the device are runtime events named
``... (wait)`` (``xxnpuStreamSynchronize (wait)``, ``xxnpuDeviceSynchronize (wait)``, ...).
``profile_memory=True`` adds ``[memory]`` instant events (``Bytes``, ``Total Allocated``,
``Total Reserved``, ``Device Type``, ``Device Id``, ``Addr``) on the allocating host thread.

Definitions used by the summary (all times in microseconds, relative to the capture
window's start):

* capture window: first to last timed event of the trace (metadata and Kineto's ``Trace``
  spans excluded).
* busy time of a device / stream: the union of its kernel, memcpy and memset intervals;
  when streams overlap, the union counts each instant once, kernels first, then memcpy,
  then memset.
* idle time, split by cause (the parts add up to ``window - busy``):
  - ``queued``: the device had launched work that had not started yet (launch call
    returned, activity not started: the device's queue latency, or device work from
    before the capture still running, which the trace cannot show);
  - ``sync_wait``: otherwise, a host thread was blocked in a ``(wait)`` runtime event or
    the stream waited on an event (``cuda_sync``): the host was not launching because it
    waited for the device;
  - ``host_launch``: otherwise: nothing queued, nobody waiting - the host did not launch
    work fast enough (the next launch came after the previous work ended).
* launch-to-start latency: kernel ``ts`` minus its launch runtime event's ``ts`` (matched by
  ``args.correlation``, else by the ``ac2g`` flow); percentiles interpolate linearly
  between closest ranks (numpy's default).
* device time per op: device activities are attributed to the op whose ``External id``
  they carry (the innermost op that launched them); ``top_level`` is the outermost
  ``cpu_op`` around it on the same thread.
* memory: ``[memory]`` events of non-CPU devices, attributed to the ops around them on
  the allocating thread; "live at peak" are the capture's allocations not yet freed when
  the device's allocated bytes peaked (``baseline`` is what was allocated before the
  capture).
"""
import argparse
import bisect
import gzip
import json
import math
import os
import re
import sys
from collections import defaultdict

__all__ = [
    "TraceError",
    "NoDeviceActivityError",
    "load_trace",
    "check_trace",
    "summarize",
    "format_text",
    "percentile",
    "main",
]

DEVICE_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
# What HTA and Perfetto expect on a device row besides device work.
DEVICE_ROW_CATS = set(DEVICE_CATS) | {"gpu_user_annotation", "cuda_sync"}
RUNTIME_CATS = {"privateuse1_runtime", "privateuse1_driver", "cuda_runtime", "cuda_driver"}
OP_CAT = "cpu_op"
COMM_RE = re.compile(
    r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|barrier|\bsend\b|\brecv\b|"
    r"nccl|xxccl|c10d::|record_param_comms",
    re.IGNORECASE,
)

TRACE_EXPECTED = ("a chrome trace: a JSON object with a \"traceEvents\" list, as written by "
                  "torch.profiler's prof.export_chrome_trace(path)")
DEVICE_EXPECTED = ("xxnpu device activity: \"X\" events with cat kernel, gpu_memcpy or gpu_memset. "
                   "Profile with activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1] "
                   "around work on an xxnpu device")


class TraceError(Exception):
    """The input cannot be analysed; the message says what was expected instead."""


class ControlCharacterError(TraceError):
    """Valid JSON for lenient parsers, but a string holds a raw control character."""


class NoDeviceActivityError(TraceError):
    """A chrome trace without any device activity to analyse."""


# ---------------------------------------------------------------------------- loading


def _line_col(text, pos):
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def load_trace(path, strict=True):
    """Reads a chrome trace (``.json`` or gzip'ed ``.json.gz``) and returns its dict.

    A bare JSON array of events (the other chrome trace form) is wrapped as
    ``{"traceEvents": [...]}``. Raises ``TraceError`` with what was expected when the file
    is missing, not JSON, or not a trace; ``ControlCharacterError`` when a string holds a
    raw control character (Perfetto and chrome://tracing reject those) unless
    ``strict=False``.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TraceError(f"{path}: cannot read the file ({e.strerror or e}); expected {TRACE_EXPECTED}") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise TraceError(f"{path}: a broken gzip file ({e}); expected {TRACE_EXPECTED}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 text (byte {e.start}); expected {TRACE_EXPECTED}") from None
    if not text.strip():
        raise TraceError(f"{path}: the file is empty; expected {TRACE_EXPECTED}")
    try:
        trace = json.loads(text, strict=strict)
    except json.JSONDecodeError as e:
        if e.msg.startswith("Invalid control character"):
            ch = text[e.pos] if e.pos < len(text) else "?"
            raise ControlCharacterError(
                f"{path}: raw control character U+{ord(ch):04X} inside a JSON string at line {e.lineno} "
                f"column {e.colno}; JSON requires it escaped (Perfetto and chrome://tracing reject the file)"
            ) from None
        raise TraceError(
            f"{path}: invalid JSON at line {e.lineno} column {e.colno} ({e.msg}); expected {TRACE_EXPECTED}"
        ) from None
    if isinstance(trace, list):
        trace = {"traceEvents": trace}
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        what = type(trace).__name__ if not isinstance(trace, dict) else "an object without a \"traceEvents\" list"
        raise TraceError(f"{path}: JSON, but {what}; expected {TRACE_EXPECTED}")
    return trace


# ---------------------------------------------------------------------------- events


def _ns(x):
    """Trace microseconds (float, ns precision) -> integer nanoseconds."""
    return int(round(float(x) * 1000.0))


def _is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


class _Ev:
    __slots__ = ("name", "cat", "pid", "tid", "start", "end", "args", "idx")

    def __init__(self, e, idx):
        self.name = str(e.get("name", ""))
        self.cat = e.get("cat")
        self.pid = e.get("pid")
        self.tid = e.get("tid")
        self.start = _ns(e["ts"])
        self.end = self.start + (_ns(e["dur"]) if _is_num(e.get("dur")) else 0)
        args = e.get("args")
        self.args = args if isinstance(args, dict) else {}
        self.idx = idx

    @property
    def row(self):
        return (self.pid, self.tid)

    @property
    def dur(self):
        return self.end - self.start


def _row_key(row):
    # Rows mix int and str pids/tids; sort them deterministically.
    return tuple((0, v) if _is_num(v) else (1, str(v)) for v in row)


# ---------------------------------------------------------------------------- intervals


def _union(intervals):
    out = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def _subtract(a, b):
    out, j = [], 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def _total(intervals):
    return sum(e - s for s, e in intervals)


# ---------------------------------------------------------------------------- stats


def percentile(values, p):
    """p-th percentile (0..100) with linear interpolation between closest ranks."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * p / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _us(ns):
    return round(ns / 1000.0, 3)


def _pct(part, whole):
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0


# ---------------------------------------------------------------------------- checks


def check_trace(trace, max_per_kind=20):
    """Checks what trace consumers rely on; returns a list of problems.

    Each problem is a dict ``{"kind", "message", "fatal"}``. Fatal kinds (``--check``
    fails on them): ``event`` (malformed event), ``nesting`` (two X events on one
    (pid, tid) row overlap without nesting: Perfetto and chrome://tracing mis-draw or drop
    them), ``hta`` (device events without an int ``args.stream >= 0`` or
    ``args.correlation``, or events of other categories on a device row), ``device``
    (no device activity at all). Non-fatal: ``flow`` (an ``ac2g`` arrow with one end).
    Raw control characters are rejected earlier, by ``load_trace``.
    """
    problems = []
    counts = defaultdict(int)

    def add(kind, message, fatal=True):
        counts[kind] += 1
        if counts[kind] <= max_per_kind:
            problems.append({"kind": kind, "message": message, "fatal": fatal})

    events = trace.get("traceEvents")
    if not isinstance(events, list):
        return [{"kind": "event", "message": "no \"traceEvents\" list", "fatal": True}]

    rows = defaultdict(list)
    device_pids = set()
    device_count = 0
    flows = defaultdict(lambda: {"s": 0, "f": 0})
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            add("event", f"traceEvents[{i}] is {type(e).__name__}, not an object")
            continue
        ph = e.get("ph")
        if not isinstance(ph, str) or not ph:
            add("event", f"traceEvents[{i}] ({e.get('name')!r}) has no \"ph\" phase")
            continue
        if ph == "M":
            continue
        if ph in ("X", "B", "E", "i", "I", "s", "f", "t", "C") and not _is_num(e.get("ts")):
            add("event", f"traceEvents[{i}] ({e.get('name')!r}, ph {ph}) has no numeric \"ts\"")
            continue
        if ph in ("s", "f", "t"):
            fid = (e.get("cat"), e.get("id"))
            flows[fid]["s" if ph == "s" else "f"] += 1
            continue
        if ph != "X":
            continue
        if "pid" not in e or "tid" not in e:
            add("event", f"traceEvents[{i}] ({e.get('name')!r}) has no pid/tid")
            continue
        if not _is_num(e.get("dur")) or e["dur"] < 0:
            add("event", f"traceEvents[{i}] ({e.get('name')!r}) has no non-negative numeric \"dur\"")
            continue
        rows[(e["pid"], e["tid"])].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), i, e.get("name")))
        cat = e.get("cat")
        if cat in DEVICE_CATS:
            device_count += 1
            device_pids.add(e["pid"])
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            stream = args.get("stream")
            if not (_is_int(stream) and stream >= 0):
                add("hta", f"{cat} event {e.get('name')!r} at ts {e['ts']} (traceEvents[{i}]): args.stream "
                           f"must be an int >= 0, got {stream!r}")
            if not _is_int(args.get("correlation")):
                add("hta", f"{cat} event {e.get('name')!r} at ts {e['ts']} (traceEvents[{i}]): no int "
                           "args.correlation (links it to its launch)")

    if device_count == 0:
        add("device", f"no device activity; expected {DEVICE_EXPECTED}")

    # Categories on device rows.
    for (pid, tid), evs in rows.items():
        if pid not in device_pids:
            continue
        for _, _, i, name in evs:
            cat = events[i].get("cat")
            if cat not in DEVICE_ROW_CATS:
                add("hta", f"event {name!r} (traceEvents[{i}]) on device row pid {pid} tid {tid} has category "
                           f"{cat!r}; device rows hold {', '.join(sorted(DEVICE_ROW_CATS))}")

    # Proper nesting on every row.
    for row in sorted(rows, key=_row_key):
        stack = []
        for s, e, i, name in sorted(rows[row], key=lambda r: (r[0], -r[1], r[2])):
            while stack and stack[-1][1] <= s:
                stack.pop()
            if stack and e > stack[-1][1]:
                ps, pe, pi, pname = stack[-1]
                cats = {events[i].get("cat"), events[pi].get("cat")}
                hint = (" (upstream torch with with_stack=True: the Python tracer's slice of the call that "
                        "opens a record_function ends before the range does)" if "python_function" in cats else "")
                add("nesting", f"row pid {row[0]} tid {row[1]}: {_clip(str(name))!r} starts inside "
                               f"{_clip(str(pname))!r} (traceEvents[{i}] in [{pi}]) and ends "
                               f"{(e - pe) / 1000:.3f} us after it{hint}")
                continue  # keep the enclosing event on the stack
            stack.append((s, e, i, name))

    for (cat, fid), n in sorted(flows.items(), key=lambda kv: str(kv[0])):
        if n["s"] == 0 or n["f"] == 0:
            add("flow", f"flow {cat} id {fid} has {'no start' if n['s'] == 0 else 'no end'}", fatal=False)

    for kind, n in counts.items():
        if n > max_per_kind:
            problems.append({"kind": kind, "message": f"... and {n - max_per_kind} more {kind} problems",
                             "fatal": any(p["fatal"] for p in problems if p["kind"] == kind)})
    return problems


# ---------------------------------------------------------------------------- summary


def _enclosing(ops_by_row, queries):
    """For each query (row, t_ns), the innermost and outermost ops around t on that row.

    ``ops_by_row``: row -> ops sorted by (start, -end). Returns {query index: (inner, outer)}.
    """
    result = {}
    by_row = defaultdict(list)
    for qi, (row, t) in enumerate(queries):
        by_row[row].append((t, qi))
    for row, qs in by_row.items():
        ops = ops_by_row.get(row, [])
        qs.sort()
        stack, k = [], 0
        for t, qi in qs:
            while k < len(ops) and ops[k].start <= t:
                while stack and stack[-1].end < ops[k].start:
                    stack.pop()
                stack.append(ops[k])
                k += 1
            while stack and stack[-1].end < t:
                stack.pop()
            # Stack may hold a closed op below an open one only if nesting is broken.
            inner = next((o for o in reversed(stack) if o.start <= t <= o.end), None)
            outer = next((o for o in stack if o.start <= t <= o.end), None)
            result[qi] = (inner, outer)
    return result


def _op_path(inner, outer, parents):
    if inner is None:
        return []
    path, o = [], inner
    while o is not None:
        path.append(o.name)
        o = parents.get(o.idx)
    return list(reversed(path))


def summarize(trace, source=None):
    """The analysis of a loaded trace, as a JSON-serialisable dict.

    Raises ``NoDeviceActivityError`` when the trace has no device activity. Keys starting
    with ``_`` hold bulk data for the HTML report (timeline bars, memory series) and are
    left out of ``--json``.
    """
    raw = trace.get("traceEvents", [])
    device, runtime, ops, mem_events, device_syncs, annotations = [], [], [], [], [], []
    flow_s, flow_f = {}, {}
    process_names, thread_names = {}, {}
    window_lo, window_hi = None, None
    malformed = 0
    for i, e in enumerate(raw):
        if not isinstance(e, dict):
            malformed += 1
            continue
        ph = e.get("ph")
        if ph == "M":
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            if e.get("name") == "process_name":
                process_names[e.get("pid")] = str(args.get("name", ""))
            elif e.get("name") == "thread_name":
                thread_names[(e.get("pid"), e.get("tid"))] = str(args.get("name", ""))
            continue
        if ph not in ("X", "i", "I", "s", "f") or not _is_num(e.get("ts")):
            if ph in ("X", "i", "I"):
                malformed += 1
            continue
        if ph in ("s", "f"):
            key = (e.get("pid"), e.get("tid"), _ns(e["ts"]))
            (flow_s if ph == "s" else flow_f)[key if ph == "s" else e.get("id")] = (
                e.get("id") if ph == "s" else key)
            continue
        if ph == "X" and not (_is_num(e.get("dur")) and e["dur"] >= 0):
            malformed += 1
            continue
        ev = _Ev(e, i)
        if ev.cat == "Trace" or (ph in ("i", "I") and e.get("s") == "g"):
            continue  # Kineto's span markers: not the workload
        window_lo = ev.start if window_lo is None else min(window_lo, ev.start)
        window_hi = ev.end if window_hi is None else max(window_hi, ev.end)
        if ph in ("i", "I"):
            if ev.name == "[memory]":
                mem_events.append(ev)
            continue
        if ev.cat in DEVICE_CATS:
            device.append(ev)
        elif ev.cat in RUNTIME_CATS:
            runtime.append(ev)
        elif ev.cat == OP_CAT:
            ops.append(ev)
        elif ev.cat == "cuda_sync":
            device_syncs.append(ev)
        elif ev.cat == "user_annotation":
            annotations.append(ev)

    if not device:
        raise NoDeviceActivityError(f"{source or 'trace'}: no device activity; expected {DEVICE_EXPECTED}")

    w0, w1 = window_lo, window_hi
    window = w1 - w0
    rel = lambda t: _us(t - w0)  # noqa: E731

    # --- ops: nesting per row
    ops_by_row = defaultdict(list)
    for o in ops:
        ops_by_row[o.row].append(o)
    parents = {}
    for row, lst in ops_by_row.items():
        lst.sort(key=lambda o: (o.start, -o.end, o.idx))
        stack = []
        for o in lst:
            while stack and stack[-1].end < o.start:
                stack.pop()
            while stack and o.end > stack[-1].end:  # broken nesting: not a parent
                stack.pop()
            parents[o.idx] = stack[-1] if stack else None
            stack.append(o)

    def top_level(o):
        while parents.get(o.idx) is not None:
            o = parents[o.idx]
        return o

    op_by_ext = {}
    for o in ops:
        ext = o.args.get("External id")
        if _is_int(ext):
            op_by_ext.setdefault(ext, o)

    # --- launches
    launch_by_corr = {}
    runtime_by_start = {}
    for r in runtime:
        corr = r.args.get("correlation")
        if _is_int(corr) and not r.name.endswith("(wait)"):
            launch_by_corr.setdefault(corr, r)
        runtime_by_start[(r.pid, r.tid, r.start)] = r

    device.sort(key=lambda d: (d.start, d.end, d.idx))
    launch_of, op_of = {}, {}
    fallback_queries, fallback_events = [], []
    for d in device:
        corr = d.args.get("correlation")
        launch_of[d.idx] = launch_by_corr.get(corr) if _is_int(corr) else None
    # Flow fallback: f event at (device pid, tid, kernel ts) -> id -> s event -> runtime event.
    f_by_key = {key: fid for fid, key in flow_f.items()}
    s_by_id = {fid: key for key, fid in flow_s.items()}
    for d in device:
        if launch_of[d.idx] is None:
            fid = f_by_key.get((d.pid, d.tid, d.start))
            if fid is not None and fid in s_by_id:
                launch_of[d.idx] = runtime_by_start.get(s_by_id[fid])
        ext = d.args.get("External id")
        op = op_by_ext.get(ext) if _is_int(ext) else None
        launch = launch_of[d.idx]
        if op is None and launch is not None:
            lext = launch.args.get("External id")
            op = op_by_ext.get(lext) if _is_int(lext) else None
            if op is None:
                fallback_queries.append((launch.row, launch.start))
                fallback_events.append(d)
        op_of[d.idx] = op
    if fallback_queries:
        found = _enclosing(ops_by_row, fallback_queries)
        for qi, d in enumerate(fallback_events):
            op_of[d.idx] = found[qi][0]

    def dev_of(d):
        v = d.args.get("device")
        return v if _is_int(v) else d.pid

    def stream_of(d):
        v = d.args.get("stream")
        return v if _is_int(v) else d.tid

    kind_of = lambda d: DEVICE_CATS[d.cat]  # noqa: E731
    total_device = sum(d.dur for d in device)

    # --- by kernel
    by_kernel = defaultdict(list)
    for d in device:
        by_kernel[(d.name, kind_of(d))].append(d.dur)
    kernels = []
    for (name, kind), durs in by_kernel.items():
        kernels.append({
            "name": name, "kind": kind, "calls": len(durs), "total_us": _us(sum(durs)),
            "avg_us": _us(sum(durs) / len(durs)), "min_us": _us(min(durs)), "max_us": _us(max(durs)),
            "pct_device_time": _pct(sum(durs), total_device),
        })
    kernels.sort(key=lambda k: (-k["total_us"], k["name"]))

    # --- by op
    op_calls = defaultdict(int)
    op_host = defaultdict(int)
    for o in ops:
        op_calls[o.name] += 1
        op_host[o.name] += o.dur
    per_op = defaultdict(lambda: {"device_ns": 0, "work": 0, "instances": set(), "kernels": defaultdict(list),
                                  "top": defaultdict(int)})
    unlinked = 0
    for d in device:
        op = op_of[d.idx]
        name = op.name if op is not None else "(no op)"
        if op is None:
            unlinked += 1
        rec = per_op[name]
        rec["device_ns"] += d.dur
        rec["work"] += 1
        if op is not None:
            rec["instances"].add(op.idx)
            rec["top"][top_level(op).name] += 1
        rec["kernels"][(d.name, kind_of(d))].append(d.dur)
    by_op, op_kernel_map = [], []
    for name, rec in per_op.items():
        n_inst = len(rec["instances"]) or rec["work"]
        by_op.append({
            "name": name, "calls": op_calls.get(name, 0), "calls_with_device_work": n_inst,
            "host_total_us": _us(op_host.get(name, 0)), "device_total_us": _us(rec["device_ns"]),
            "device_avg_us": _us(rec["device_ns"] / n_inst), "device_activities": rec["work"],
            "pct_device_time": _pct(rec["device_ns"], total_device),
            "kernels": sorted({k for k, _ in rec["kernels"]}),
        })
        for (kname, kind), durs in sorted(rec["kernels"].items(), key=lambda kv: -sum(kv[1])):
            op_kernel_map.append({
                "op": name, "kernel": kname, "kind": kind, "count": len(durs), "total_us": _us(sum(durs)),
                "avg_us": _us(sum(durs) / len(durs)),
                "top_level_ops": sorted(t for t in rec["top"] if t != name),
            })
    by_op.sort(key=lambda r: (-r["device_total_us"], r["name"]))
    order = {r["name"]: i for i, r in enumerate(by_op)}
    op_kernel_map.sort(key=lambda r: (order[r["op"]], -r["total_us"]))

    # --- utilisation and idle causes
    waits = [(r.start, r.end) for r in runtime if r.name.endswith("(wait)")]
    wait_source = "(wait) runtime events"
    if not waits:
        waits = [(r.start, r.end) for r in runtime if "Synchronize" in r.name]
        wait_source = "runtime *Synchronize calls"
    host_waits = _union(waits)
    win = [(w0, w1)]

    def breakdown(evs, syncs):
        kernel_iv = _union((d.start, d.end) for d in evs if d.cat == "kernel")
        memcpy_iv = _subtract(_union((d.start, d.end) for d in evs if d.cat == "gpu_memcpy"), kernel_iv)
        busy_km = _union(kernel_iv + memcpy_iv)
        memset_iv = _subtract(_union((d.start, d.end) for d in evs if d.cat == "gpu_memset"), busy_km)
        busy = _union(busy_km + memset_iv)
        idle = _subtract(win, busy)
        pending = _union((launch_of[d.idx].end, d.start) for d in evs if launch_of[d.idx] is not None)
        queued = _intersect(idle, pending)
        rest = _subtract(idle, pending)
        sync_iv = _intersect(rest, _union(host_waits + [(s.start, s.end) for s in syncs]))
        host_iv = _subtract(rest, sync_iv)
        parts = {"kernel": kernel_iv, "memcpy": memcpy_iv, "memset": memset_iv, "queued": queued,
                 "sync_wait": sync_iv, "host_launch": host_iv, "idle": idle}
        busy_ns = _total(busy)
        idle_ns = window - busy_ns
        row = {
            "window_us": _us(window), "busy_us": _us(busy_ns), "utilization_pct": _pct(busy_ns, window),
            "kernel_us": _us(_total(kernel_iv)), "memcpy_us": _us(_total(memcpy_iv)),
            "memset_us": _us(_total(memset_iv)), "idle_us": _us(idle_ns),
            "idle": {k: _us(_total(parts[k])) for k in ("host_launch", "sync_wait", "queued")},
            "idle_pct_of_window": {k: _pct(_total(parts[k]), window) for k in ("host_launch", "sync_wait", "queued")},
            "activities": len(evs),
        }
        return row, parts

    by_dev = defaultdict(list)
    by_stream = defaultdict(list)
    for d in device:
        by_dev[dev_of(d)].append(d)
        by_stream[(dev_of(d), stream_of(d))].append(d)
    syncs_by_dev, syncs_by_stream = defaultdict(list), defaultdict(list)
    for s in device_syncs:
        dv = s.args.get("device") if _is_int(s.args.get("device")) else s.pid
        st = s.args.get("stream") if _is_int(s.args.get("stream")) else s.tid
        syncs_by_dev[dv].append(s)
        syncs_by_stream[(dv, st)].append(s)

    utilization, timeline_lanes = [], []
    longest_gaps = []
    for dv in sorted(by_dev, key=lambda v: (0, v) if _is_num(v) else (1, str(v))):
        row, dparts = breakdown(by_dev[dv], syncs_by_dev[dv])
        row.update({"device": dv, "stream": None, "label": process_names.get(dv) or f"device {dv}"})
        utilization.append(row)
        longest_gaps += _longest_gaps(dv, row["label"], by_dev[dv], dparts, op_of, w0, w1)
        for (d2, st) in sorted(k for k in by_stream if k[0] == dv):
            evs = by_stream[(d2, st)]
            srow, parts = breakdown(evs, syncs_by_stream[(d2, st)])
            label = f"{row['label']} stream {st}"
            srow.update({"device": dv, "stream": st, "label": label})
            utilization.append(srow)
            timeline_lanes.append({
                "label": label, "device": dv, "stream": st,
                "bars": [[rel(d.start), _us(d.dur), d.name, kind_of(d),
                          op_of[d.idx].name if op_of[d.idx] is not None else ""] for d in evs],
                "idle": [[rel(s), _us(e - s), cause] for cause in ("host_launch", "sync_wait", "queued")
                         for s, e in parts[cause]],
            })

    # Host rows that launched device work: their top-level ops and waits, for the timeline.
    host_rows = sorted({launch_of[d.idx].row for d in device if launch_of[d.idx] is not None}, key=_row_key)
    host_lanes = []
    for hrow in host_rows:
        tops = [o for o in ops_by_row.get(hrow, []) if parents.get(o.idx) is None]
        wts = [r for r in runtime if r.row == hrow and r.name.endswith("(wait)")]
        launches = [r for r in runtime if r.row == hrow and not r.name.endswith("(wait)")]
        host_lanes.append({
            "label": thread_names.get(hrow) or f"host {hrow[0]}/{hrow[1]}",
            "ops": [[rel(o.start), _us(o.dur), o.name] for o in tops],
            "waits": [[rel(r.start), _us(r.dur), r.name] for r in wts],
            "launches": [[rel(r.start), _us(r.dur), r.name] for r in launches],
        })

    # --- launch-to-start latency (kernels)
    lat = []
    unmatched = 0
    for d in device:
        if d.cat != "kernel":
            continue
        launch = launch_of[d.idx]
        if launch is None:
            unmatched += 1
            continue
        lat.append(d.start - launch.start)
    # Start delay when the stream was free: kernel start - max(launch, end of the previous
    # activity on its stream): the launch overhead without the queueing behind other work.
    free_delay = []
    for (dv, st), evs in by_stream.items():
        prev_end = None
        for d in evs:
            launch = launch_of[d.idx]
            if d.cat == "kernel" and launch is not None:
                free_delay.append(d.start - max(launch.start, prev_end if prev_end is not None else launch.start))
            prev_end = d.end if prev_end is None else max(prev_end, d.end)
    latency = {"count": len(lat), "unmatched_kernels": unmatched}
    if lat:
        latency.update({
            "min_us": _us(min(lat)), "p50_us": _us(percentile(lat, 50)), "p90_us": _us(percentile(lat, 90)),
            "p99_us": _us(percentile(lat, 99)), "max_us": _us(max(lat)), "mean_us": _us(sum(lat) / len(lat)),
            "negative": sum(1 for v in lat if v < 0),
            "free_stream_p50_us": _us(percentile(free_delay, 50)),
            "free_stream_p90_us": _us(percentile(free_delay, 90)),
            "free_stream_max_us": _us(max(free_delay)),
        })
    latency_values = [_us(v) for v in lat]

    # --- memory
    memory = _memory_summary(mem_events, ops_by_row, parents, w0, process_names)

    # --- collectives
    comm = defaultdict(list)
    for d in device:
        if COMM_RE.search(d.name):
            comm[(d.name, "device")].append(d.dur)
    for o in ops:
        if COMM_RE.search(o.name):
            comm[(o.name, "host")].append(o.dur)
    collectives = [{"name": n, "side": side, "count": len(v), "total_us": _us(sum(v)),
                    "avg_us": _us(sum(v) / len(v)), "max_us": _us(max(v))}
                   for (n, side), v in comm.items()]
    collectives.sort(key=lambda c: (c["side"], -c["total_us"]))

    warnings = []
    if malformed:
        warnings.append(f"{malformed} malformed events skipped")
    if unlinked:
        warnings.append(f"{unlinked} of {len(device)} device activities are not linked to an op "
                        "(no cpu_op with their External id)")
    if unmatched:
        warnings.append(f"{unmatched} kernels have no launch event (no runtime event with their correlation)")
    dropped = trace.get("xxnpu_dropped_records")
    if _is_int(dropped) and dropped > 0:
        warnings.append(f"the device runtime dropped {dropped} activity records: the timeline is incomplete")

    dev_props = trace.get("deviceProperties") if isinstance(trace.get("deviceProperties"), list) else []
    return {
        "source": source,
        "window": {"start_us": _us(w0), "end_us": _us(w1), "duration_us": _us(window)},
        "devices": [{"device": dv, "label": process_names.get(dv) or f"device {dv}",
                     "streams": sorted(st for (d2, st) in by_stream if d2 == dv)} for dv in sorted(by_dev, key=str)],
        "device_properties": [p for p in dev_props if isinstance(p, dict)],
        "counts": {
            "kernels": sum(1 for d in device if d.cat == "kernel"),
            "memcpy": sum(1 for d in device if d.cat == "gpu_memcpy"),
            "memset": sum(1 for d in device if d.cat == "gpu_memset"),
            "cpu_ops": len(ops), "runtime": len(runtime), "memory_events": len(mem_events),
            "device_time_us": _us(total_device),
        },
        "kernels": kernels,
        "ops": by_op,
        "op_kernel_map": op_kernel_map,
        "utilization": utilization,
        "wait_source": wait_source,
        "longest_gaps": longest_gaps,
        "launch_latency": latency,
        "memory": memory,
        "collectives": collectives,
        "steps": [{"name": a.name, "start_us": rel(a.start), "dur_us": _us(a.dur)}
                  for a in sorted(annotations, key=lambda a: a.start) if a.name.startswith("ProfilerStep#")],
        "warnings": warnings,
        "_timeline": {"window_us": _us(window), "lanes": timeline_lanes, "host": host_lanes},
        "_latency_values_us": latency_values,
    }


def _longest_gaps(dv, label, evs, parts, op_of, w0, w1, top=5):
    """The device's longest idle intervals, with their causes and the work around them."""
    gaps = sorted(parts["idle"], key=lambda g: (-(g[1] - g[0]), g[0]))[:top]
    starts = sorted((d.start, i) for i, d in enumerate(evs))
    ends = sorted((d.end, i) for i, d in enumerate(evs))
    out = []
    for s, e in gaps:
        causes = {k: _us(_total(_intersect([(s, e)], parts[k]))) for k in ("host_launch", "sync_wait", "queued")}
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
            "device": dv, "label": label, "start_us": _us(s - w0), "dur_us": _us(e - s),
            "cause": max(causes, key=causes.get), "causes_us": causes,
            "before": desc(before), "after": desc(after),
            "at_window_edge": s == w0 or e == w1,
        })
    return out


def _memory_summary(mem_events, ops_by_row, parents, w0, process_names):
    evs = []
    for m in mem_events:
        a = m.args
        dtype = a.get("Device Type")
        if not _is_int(a.get("Bytes")) or not _is_int(dtype) or dtype == 0:
            continue  # CPU memory, or not an allocator record
        evs.append(m)
    if not evs:
        return {"devices": [], "by_op": [], "largest": [], "events": 0}
    evs.sort(key=lambda m: (m.start, m.idx))
    found = _enclosing(ops_by_row, [(m.row, m.start) for m in evs])

    def path_of(qi):
        inner, outer = found[qi]
        return _op_path(inner, outer, parents)

    allocs = []  # dicts, in order
    live_by_addr = defaultdict(list)
    per_dev = {}
    for qi, m in enumerate(evs):
        a = m.args
        dv = a.get("Device Id") if _is_int(a.get("Device Id")) else 0
        b = a["Bytes"]
        total_alloc = a.get("Total Allocated")
        total_res = a.get("Total Reserved")
        path = path_of(qi)
        st = per_dev.setdefault(dv, {"series": [], "peak": None, "peak_res": 0, "allocs": 0, "frees": 0,
                                     "bytes_alloc": 0, "bytes_freed": 0, "first": None})
        if _is_int(total_alloc):
            if st["first"] is None:
                st["first"] = total_alloc - b
                st["series"].append([_us(m.start - w0), total_alloc - b, total_res if _is_int(total_res) else None])
            st["series"].append([_us(m.start - w0), total_alloc, total_res if _is_int(total_res) else None])
            if st["peak"] is None or total_alloc > st["peak"][0]:
                st["peak"] = (total_alloc, m.start, path)
        if _is_int(total_res):
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
            "device": dv, "label": process_names.get(dv) or f"device {dv}",
            "peak_allocated": peak_bytes, "peak_at_us": _us(peak_t - w0) if peak_t is not None else None,
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
        "path": " > ".join(r["path"]) or "(no op)", "at_us": _us(r["t"] - w0),
        "lifetime_us": _us(r["free_t"] - r["t"]) if r["free_t"] is not None else None,
    } for r in largest]
    return {"devices": devices, "by_op": by_op, "largest": largest, "events": len(evs)}


# ---------------------------------------------------------------------------- text


def fmt_time(us):
    if us is None:
        return "-"
    a = abs(us)
    if a >= 1e6:
        return f"{us / 1e6:.3f} s"
    if a >= 1e3:
        return f"{us / 1e3:.3f} ms"
    return f"{us:.3f} us"


def fmt_bytes(b):
    if b is None:
        return "-"
    a = abs(b)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if a >= scale:
            return f"{b / scale:.2f} {unit}"
    return f"{b} B"


def _table(headers, rows, align=None):
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    align = align or ["<"] + [">"] * (len(headers) - 1)
    fmt = "  ".join(f"{{:{a}{w}}}" for a, w in zip(align, widths))
    out = [("  " + fmt.format(*headers)).rstrip(), "  " + "  ".join("-" * w for w in widths)]
    out += [("  " + fmt.format(*r)).rstrip() for r in cells]
    return out


def _clip(s, n=60):
    return s if len(s) <= n else s[: n - 3] + "..."


def format_text(summary, top=25):
    """The human-readable report of ``summarize()``'s result."""
    s = summary
    c = s["counts"]
    out = []
    devs = ", ".join(f"{d['label']} (streams {', '.join(map(str, d['streams']))})" for d in s["devices"])
    out.append(f"xxnpu profile analysis: {s.get('source') or 'trace'}")
    out.append(f"  capture window {fmt_time(s['window']['duration_us'])}; {devs}")
    out.append(f"  {c['kernels']} kernels, {c['memcpy']} memcpy, {c['memset']} memset: "
               f"{fmt_time(c['device_time_us'])} of device time; {c['cpu_ops']} ops, {c['runtime']} runtime calls")
    out.append("")

    out.append("Device time by kernel (% of the summed device time)")
    out += _table(["Kernel", "Kind", "Calls", "Total", "Avg", "Min", "Max", "%"],
                  [[_clip(k["name"]), k["kind"], k["calls"], fmt_time(k["total_us"]), fmt_time(k["avg_us"]),
                    fmt_time(k["min_us"]), fmt_time(k["max_us"]), f"{k['pct_device_time']:.2f}%"]
                   for k in s["kernels"][:top]], ["<", "<"] + [">"] * 6)
    if len(s["kernels"]) > top:
        out.append(f"  ... {len(s['kernels']) - top} more")
    out.append("")

    out.append("Device time by op (the op that launched the work; host = the op's own CPU time)")
    out += _table(["Op", "Calls", "Host total", "Device total", "Device/call", "Activities", "%"],
                  [[_clip(o["name"]), o["calls"], fmt_time(o["host_total_us"]), fmt_time(o["device_total_us"]),
                    fmt_time(o["device_avg_us"]), o["device_activities"], f"{o['pct_device_time']:.2f}%"]
                   for o in s["ops"][:top]])
    out.append("")

    out.append("Op -> kernel map")
    last = None
    for m in s["op_kernel_map"][: top * 3]:
        op = _clip(m["op"], 50) if m["op"] != last else ""
        last = m["op"]
        under = f"  (inside {', '.join(m['top_level_ops'])})" if m["top_level_ops"] and op else ""
        out.append(f"  {op:<50} -> {m['kernel']} [{m['kind']}] x{m['count']}, {fmt_time(m['total_us'])} "
                   f"(avg {fmt_time(m['avg_us'])}){under}")
    out.append("")

    out.append(f"Device utilisation over the capture window ({fmt_time(s['window']['duration_us'])}); "
               "idle split by cause")
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

    out.append("Longest device idle gaps")
    names = {"host_launch": "host not launching", "sync_wait": "waiting on sync", "queued": "launched, not started"}
    for g in s["longest_gaps"]:
        before = f"after {g['before']['name']}" if g["before"] else "from the capture start"
        after = (f"before {g['after']['name']}" + (f" (op {g['after']['op']})" if g["after"]["op"] else "")
                 if g["after"] else "until the capture end")
        split = ", ".join(f"{names[k]} {fmt_time(v)}" for k, v in g["causes_us"].items() if v > 0)
        out.append(f"  {g['label']}: {fmt_time(g['dur_us'])} at +{fmt_time(g['start_us'])}, {before}, {after}: "
                   f"{split}")
    out.append("")

    lat = s["launch_latency"]
    out.append("Launch-to-start latency (kernel start - its launch call start)")
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

    mem = s["memory"]
    out.append("Device memory ([memory] events; profile_memory=True)")
    if not mem["devices"]:
        out.append("  no device memory events in this trace (profile with profile_memory=True)")
    for d in mem["devices"]:
        out.append(f"  {d['label']}: peak allocated {fmt_bytes(d['peak_allocated'])} at +{fmt_time(d['peak_at_us'])} "
                   f"in {d['peak_op']}; peak reserved {fmt_bytes(d['peak_reserved'])}; "
                   f"{d['allocations']} allocs ({fmt_bytes(d['bytes_allocated'])}), {d['frees']} frees "
                   f"({fmt_bytes(d['bytes_freed'])}); allocated before the capture "
                   f"{fmt_bytes(d['allocated_at_start'])}")
        if d["live_at_peak_by_op"]:
            parts = ", ".join(f"{_clip(r['op'], 40)} {fmt_bytes(r['bytes'])}" for r in d["live_at_peak_by_op"][:5])
            out.append(f"    live at the peak: {parts}; from before the capture {fmt_bytes(d['baseline_at_peak'])}")
    if mem["by_op"]:
        out.append("  Top memory consumers by op (outermost op; sorted by bytes live at the peak, then allocated)")
        out += _table(["Op", "Device", "Live at peak", "Allocated", "Allocs", "Largest", "Via"],
                      [[_clip(r["op"], 40), r["device"], fmt_bytes(r["live_at_peak"]), fmt_bytes(r["bytes_allocated"]),
                        r["allocations"], fmt_bytes(r["largest_allocation"]), _clip(r["via"], 50)]
                       for r in mem["by_op"][:10]], ["<", ">", ">", ">", ">", ">", "<"])
        out.append("  Largest allocations")
        out += _table(["Bytes", "Device", "At", "Lifetime", "Op"],
                      [[fmt_bytes(r["bytes"]), r["device"], "+" + fmt_time(r["at_us"]),
                        fmt_time(r["lifetime_us"]) if r["lifetime_us"] is not None else "not freed",
                        _clip(r["path"], 70)] for r in mem["largest"]], [">", ">", ">", ">", "<"])
    out.append("")

    out.append("Collectives")
    if s["collectives"]:
        out += _table(["Name", "Side", "Count", "Total", "Avg", "Max"],
                      [[_clip(x["name"]), x["side"], x["count"], fmt_time(x["total_us"]), fmt_time(x["avg_us"]),
                        fmt_time(x["max_us"])] for x in s["collectives"]], ["<", "<", ">", ">", ">", ">"])
    else:
        out.append("  no collective communication in this trace")
    for w in s["warnings"]:
        out.append(f"warning: {w}")
    return "\n".join(out)


# ---------------------------------------------------------------------------- CLI


def _public(summary):
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if not k.startswith("_")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return strip(summary)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m torch_xxnpu.profiler.analyze",
        description="Summarise a torch.profiler chrome trace with the xxnpu device timeline: device time by "
                    "kernel and op, op->kernel map, utilisation and idle causes, launch latency, memory.")
    parser.add_argument("trace", help="chrome trace JSON (or .json.gz) from prof.export_chrome_trace()")
    parser.add_argument("--html", metavar="OUT.html", help="also write a self-contained HTML report")
    parser.add_argument("--json", metavar="OUT.json", help="also write the summary as JSON")
    parser.add_argument("--check", action="store_true",
                        help="validate the trace for Perfetto/chrome://tracing and HTA; exit 1 on violations")
    parser.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    args = parser.parse_args(argv)

    def fail(msg, code=2):
        print(f"error: {msg}", file=sys.stderr)
        return code

    try:
        try:
            trace = load_trace(args.trace)
        except ControlCharacterError as e:
            if args.check:
                print(f"check failed: {e}", file=sys.stderr)
                return 1
            print(f"warning: {e}; analysing it anyway", file=sys.stderr)
            trace = load_trace(args.trace, strict=False)
    except TraceError as e:
        return fail(str(e))

    problems = check_trace(trace)
    if args.check:
        fatal = [p for p in problems if p["fatal"]]
        for p in problems:
            print(f"{'error' if p['fatal'] else 'warning'}: [{p['kind']}] {p['message']}")
        if fatal:
            print(f"check failed: {len(fatal)} problem(s) in {args.trace}")
            return 1
        n = len(trace["traceEvents"])
        print(f"check passed: {args.trace} ({n} events): valid JSON, rows nest, device events carry "
              "int args.stream >= 0 and args.correlation")
        if not (args.html or args.json):
            return 0

    try:
        summary = summarize(trace, source=args.trace)
    except NoDeviceActivityError as e:
        return fail(str(e))
    if not args.check:
        # One line per kind: the first problem and how many more (--check lists them all).
        by_kind = defaultdict(list)
        for p in problems:
            if p["kind"] != "device":
                by_kind[p["kind"]].append(p)
        for kind, ps in by_kind.items():
            more = sum(int(p["message"].split()[2]) if p["message"].startswith("... and") else 1 for p in ps) - 1
            tail = f" [and {more} more like it; --check lists them]" if more > 0 else ""
            print(f"warning: [{kind}] {ps[0]['message']}{tail}", file=sys.stderr)
    if not args.check:
        print(format_text(summary, top=args.top))
    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump(_public(summary), f, indent=1)
        except OSError as e:
            return fail(f"cannot write {args.json}: {e}")
    if args.html:
        from torch_xxnpu.profiler.html_report import render_html

        try:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(render_html(summary))
        except OSError as e:
            return fail(f"cannot write {args.html}: {e}")
        print(f"report written to {os.path.abspath(args.html)}", file=sys.stderr if args.check else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
