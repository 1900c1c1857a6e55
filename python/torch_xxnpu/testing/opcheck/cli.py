"""``python -m torch_xxnpu.testing.opcheck``: arguments, the tasks, --native-only's two
passes, the reports and the exit status."""
import argparse
import json
import os
import platform
import shlex
import sys
import time
from typing import Any, Dict, List, Optional

from torch_xxnpu.testing.opcheck.cases import load_cases, select_cases
from torch_xxnpu.testing.opcheck.dtypes import dtype_name, parse_dtypes
from torch_xxnpu.testing.opcheck.pool import WorkerPool
from torch_xxnpu.testing.opcheck.worker import setup_process, worker_main


def build_parser():
    p = argparse.ArgumentParser(
        prog="python -m torch_xxnpu.testing.opcheck",
        description="Checks xxnpu ops against the CPU with PyTorch's OpInfo database and the "
                    "torch.ops.xxnpu custom ops; reports per op and dtype.")
    p.add_argument("--ops", help="comma-separated op names (OpInfo names such as add, "
                                 "nn.functional.relu, div.floor_rounding; custom ops as xxnpu::add). "
                                 "Default: all")
    p.add_argument("--dtypes", help="comma-separated dtypes (float32,float16,bfloat16,int64,...). "
                                    "Default: every dtype the op supports on the CPU")
    p.add_argument("--native-only", action="store_true",
                   help="run only (op, dtype) pairs whose first sample runs without the CPU fallback")
    p.add_argument("--backward", action="store_true", help="also compare gradients where the op supports autograd")
    p.add_argument("--compile", action="store_true",
                   help="run the xxnpu side through torch.compile (Inductor), one graph per sample, against "
                        "CPU eager (slow: seconds of C++ compile per sample; see --max-samples)")
    p.add_argument("--no-opinfo", action="store_true", help="only the custom ops")
    p.add_argument("--namespaces", default="xxnpu",
                   help="custom-op namespaces to include (comma-separated; default xxnpu)")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE_OR_FILE",
                   help="module or .py file every worker imports first (kernels registered from Python, "
                        "sample generators for custom ops); repeatable")
    p.add_argument("--max-samples", type=int, default=0, help="at most this many samples per op and dtype")
    p.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds one op may take for one dtype before its worker is killed (default 300)")
    p.add_argument("--json", metavar="FILE", help="write every row as JSON (usable as a --baseline)")
    p.add_argument("--markdown", metavar="FILE", help="write the coverage report as Markdown")
    p.add_argument("--html", metavar="FILE", help="write the report as a self-contained HTML page")
    p.add_argument("--baseline", metavar="FILE",
                   help="JSON of an earlier run: exit 1 only on regressions against it")
    p.add_argument("--no-progress", action="store_true", help="no progress output")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the summary")
    return p


def _command_line(argv):
    return "python -m torch_xxnpu.testing.opcheck " + " ".join(shlex.quote(a) for a in argv)


def _run_native_only(pool: "WorkerPool", tasks: List[Dict[str, Any]], progress: bool) -> List[Dict[str, Any]]:
    """--native-only in two passes: one probe dtype per op (float32 when it has it), then
    the op's other dtypes only if the probe did not fall back. Whether an op falls back
    is decided by the dispatcher per op, not per dtype, so most of op_db is settled by
    one sample each."""
    by_op: Dict[str, List[Dict[str, Any]]] = {}
    for t in tasks:
        by_op.setdefault(t["op"], []).append(t)
    probes = {op: next((t for t in ts if t["dtype"] == "float32"), ts[0]) for op, ts in by_op.items()}
    rows: Dict[int, Dict[str, Any]] = {}
    for t, row in zip(probes.values(), pool.run(list(probes.values()), progress)):
        rows[t["id"]] = row
    rest = []
    for op, ts in by_op.items():
        probe = rows[probes[op]["id"]]
        fell_back = probe.get("status") == "skipped" and probe.get("execution") == "fallback"
        # A probe that crashed or hung would most likely do so for every dtype, each time
        # costing a worker restart (or the whole timeout): report the op once.
        died = probe.get("status") in ("crashed", "timeout")
        for t in ts:
            if t["id"] in rows:
                continue
            if not fell_back and not died:
                rest.append(t)
                continue
            row = {"op": op, "kind": probe.get("kind"), "dtype": t["dtype"], "status": "skipped",
                   "execution": probe.get("execution"), "native_kernel": probe.get("native_kernel"),
                   "seconds": 0.0}
            if fell_back:
                row["fallback_ops"] = probe.get("fallback_ops", {})
                row["reason"] = (f"not native (--native-only): on {probe['dtype']} it falls back for "
                                 + ", ".join(sorted(probe.get("fallback_ops", {}))))
            else:
                row["reason"] = f"not run: the {probe['dtype']} probe {probe['status']} (--native-only)"
            rows[t["id"]] = row
    if rest:
        for t, row in zip(rest, pool.run(rest, progress)):
            rows[t["id"]] = row
    return [rows[t["id"]] for t in tasks]


def _only_custom_ops(ops: Optional[str]) -> bool:
    return bool(ops) and all("::" in o for o in ops.split(",") if o.strip())


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--worker" in argv:
        return worker_main(argv)
    args = build_parser().parse_args(argv)
    # The baseline is read before anything is written: `--json X --baseline X` (refresh a
    # baseline file and compare with what it held) must compare against the old run, not
    # against the one just written over it; and a bad baseline fails before the sweep.
    base = None
    if args.baseline:
        try:
            with open(args.baseline) as f:
                base = json.load(f)
            if not isinstance(base, dict) or not isinstance(base.get("rows"), list):
                raise ValueError('expected an object with a "rows" list, as --json writes')
        except (OSError, ValueError) as e:
            print(f"opcheck: cannot read --baseline {args.baseline}: {e}", file=sys.stderr)
            return 2
    t0 = time.monotonic()
    want = parse_dtypes(args.dtypes)
    setup_process(args.imports)
    import torch
    import torch_xxnpu
    from torch_xxnpu.testing import report

    namespaces = [n for n in args.namespaces.split(",") if n]
    with_opinfo = not args.no_opinfo and not _only_custom_ops(args.ops)
    worker_args = [a for m in args.imports for a in ("--import", os.path.abspath(m) if m.endswith(".py") else m)]
    worker_args += ["--namespaces", ",".join(namespaces)] + ([] if with_opinfo else ["--no-opinfo"])
    pool = WorkerPool(args.jobs, args.timeout, worker_args)
    try:
        cases = select_cases(load_cases(namespaces, with_opinfo=with_opinfo), args.ops)
        opts = {"backward": args.backward, "native_only": args.native_only, "max_samples": args.max_samples,
                "compile": args.compile}
        tasks = []
        for case in cases:
            for d in case.dtypes():
                if want is None or d in want:
                    tasks.append({"id": len(tasks), "op": case.name, "dtype": dtype_name(d), "opts": opts})
        if not tasks:
            print("opcheck: nothing to run (no op supports the dtypes asked for)", file=sys.stderr)
            return 2
        if not args.quiet:
            print(f"opcheck: {len(cases)} ops, {len(tasks)} (op, dtype) pairs, {args.jobs} workers", file=sys.stderr)
        progress = not (args.no_progress or args.quiet)
        rows = _run_native_only(pool, tasks, progress) if args.native_only else pool.run(tasks, progress)
    finally:
        pool.close()
    elapsed = time.monotonic() - t0
    meta = {
        "command": _command_line(argv),
        "torch": torch.__version__,
        "torch_xxnpu": torch_xxnpu.__version__,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seconds": round(elapsed, 1),
        "jobs": args.jobs,
        "native_only": args.native_only,
        "backward": args.backward,
        "compile": args.compile,
        "native_ops": len(torch_xxnpu.ops.native_ops()),
    }
    doc = {"meta": meta, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report.markdown(doc))
    if args.html:
        with open(args.html, "w") as f:
            f.write(report.html(doc))
    print(report.summary(doc))
    if base is not None:
        regressions, improvements = report.diff(base, doc)
        for r in improvements:
            print(f"improved: {r}")
        for r in regressions:
            print(f"REGRESSION: {r}")
        print(f"opcheck: {len(regressions)} regressions, {len(improvements)} improvements against {args.baseline}")
        return 1 if regressions else 0
    return 1 if any(report.is_bad(r) for r in rows) else 0
