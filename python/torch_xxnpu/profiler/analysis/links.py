"""What links the trace's events: op nesting on a host thread, the op around an instant,
and each device activity's launch call and op (by correlation id, ``ac2g`` flow,
``External id``, or the op around its launch)."""
from collections import defaultdict

from torch_xxnpu.profiler.analysis.numeric import is_int


def op_parents(ops_by_row):
    """{op idx: enclosing op or None}; sorts each row's ops by (start, -end, idx) in place."""
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
    return parents


def enclosing(ops_by_row, queries):
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


def op_path(inner, outer, parents):
    """Names of the ops from the outermost down to ``inner``."""
    if inner is None:
        return []
    path, o = [], inner
    while o is not None:
        path.append(o.name)
        o = parents.get(o.idx)
    return list(reversed(path))


def link_device_work(device, runtime, ops, ops_by_row, flow_s, flow_f, annotations=()):
    """({device idx: launch runtime event or None}, {device idx: op or None}).

    ``device`` sorted by start; ``flow_s``: (pid, tid, ts_ns) -> id of ``s`` flow events,
    ``flow_f``: id -> (pid, tid, ts_ns) of ``f`` flow events. ``annotations``: the
    ``record_function`` ranges; work launched outside any op (a graph replay) carries its
    range's External id (profiler/record_conversion.cc) and is that range's.
    """
    op_by_ext = {}
    for o in ops:
        ext = o.args.get("External id")
        if is_int(ext):
            op_by_ext.setdefault(ext, o)
    for a in annotations:
        ext = a.args.get("External id")
        if is_int(ext):
            op_by_ext.setdefault(ext, a)  # ids are unique across ops and ranges; ops first

    launch_by_corr = {}
    runtime_by_start = {}
    for r in runtime:
        corr = r.args.get("correlation")
        if is_int(corr) and not r.name.endswith("(wait)"):
            launch_by_corr.setdefault(corr, r)
        runtime_by_start[(r.pid, r.tid, r.start)] = r

    launch_of, op_of = {}, {}
    fallback_queries, fallback_events = [], []
    for d in device:
        corr = d.args.get("correlation")
        launch_of[d.idx] = launch_by_corr.get(corr) if is_int(corr) else None
    # Flow fallback: f event at (device pid, tid, kernel ts) -> id -> s event -> runtime event.
    f_by_key = {key: fid for fid, key in flow_f.items()}
    s_by_id = {fid: key for key, fid in flow_s.items()}
    for d in device:
        if launch_of[d.idx] is None:
            fid = f_by_key.get((d.pid, d.tid, d.start))
            if fid is not None and fid in s_by_id:
                launch_of[d.idx] = runtime_by_start.get(s_by_id[fid])
        ext = d.args.get("External id")
        op = op_by_ext.get(ext) if is_int(ext) else None
        launch = launch_of[d.idx]
        if op is None and launch is not None:
            lext = launch.args.get("External id")
            op = op_by_ext.get(lext) if is_int(lext) else None
            if op is None:
                fallback_queries.append((launch.row, launch.start))
                fallback_events.append(d)
        op_of[d.idx] = op
    if fallback_queries:
        found = enclosing(ops_by_row, fallback_queries)
        for qi, d in enumerate(fallback_events):
            op_of[d.idx] = found[qi][0]
    return launch_of, op_of
