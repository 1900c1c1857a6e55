"""``--check``: what Perfetto, chrome://tracing and HTA rely on in a trace, as a list of
problems."""
from collections import defaultdict

from torch_xxnpu.profiler.analysis.display import clip
from torch_xxnpu.profiler.analysis.errors import DEVICE_EXPECTED
from torch_xxnpu.profiler.analysis.events import DEVICE_CATS, DEVICE_ROW_CATS, row_key
from torch_xxnpu.profiler.analysis.numeric import is_int, is_num, to_ns


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
        if ph in ("X", "B", "E", "i", "I", "s", "f", "t", "C") and not is_num(e.get("ts")):
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
        if not is_num(e.get("dur")) or e["dur"] < 0:
            add("event", f"traceEvents[{i}] ({e.get('name')!r}) has no non-negative numeric \"dur\"")
            continue
        rows[(e["pid"], e["tid"])].append((to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"]), i, e.get("name")))
        cat = e.get("cat")
        if cat in DEVICE_CATS:
            device_count += 1
            device_pids.add(e["pid"])
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            stream = args.get("stream")
            if not (is_int(stream) and stream >= 0):
                add("hta", f"{cat} event {e.get('name')!r} at ts {e['ts']} (traceEvents[{i}]): args.stream "
                           f"must be an int >= 0, got {stream!r}")
            if not is_int(args.get("correlation")):
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
    for row in sorted(rows, key=row_key):
        stack = []
        for s, e, i, name in sorted(rows[row], key=lambda r: (r[0], -r[1], r[2])):
            while stack and stack[-1][1] <= s:
                stack.pop()
            if stack and e > stack[-1][1]:
                ps, pe, pi, pname = stack[-1]
                cats = {events[i].get("cat"), events[pi].get("cat")}
                hint = (" (upstream torch with with_stack=True: the Python tracer's slice of the call that "
                        "opens a record_function ends before the range does)" if "python_function" in cats else "")
                add("nesting", f"row pid {row[0]} tid {row[1]}: {clip(str(name))!r} starts inside "
                               f"{clip(str(pname))!r} (traceEvents[{i}] in [{pi}]) and ends "
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
