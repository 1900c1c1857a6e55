"""``python -m torch_xxnpu.testing.fuzz``: the hypothesis-driven loop over the ops, the
findings (distinct per op, probe and kind; minimised by hypothesis's shrinker), the
summary, the JSON report and the exit status."""
import argparse
import hashlib
import json
import os
import platform
import shlex
import sys
import time
from typing import Any, Dict, List

from torch_xxnpu.testing.fuzz.spec import (FINDING_KINDS, KnownFailures, from_token, signature, token)

COUNTED = ("pass", "both-raise", "rejected", "lenient", "n/a", "reference-crash") + FINDING_KINDS


def build_parser():
    p = argparse.ArgumentParser(
        prog="python -m torch_xxnpu.testing.fuzz",
        description="Differential fuzzer: hypothesis-drawn cases (shapes, layouts, dtypes, extreme values, "
                    "out=, aliasing, mixed devices, bad indices) run on the CPU and on xxnpu, compared.")
    p.add_argument("--ops", help="comma-separated op names or fnmatch patterns (OpInfo names such as add, "
                                 "nn.functional.relu; custom ops as xxnpu::rms_norm). Default: every native op")
    p.add_argument("--probes", help="comma-separated probes (values, layout, shapes, extremes, mixed_dtype, "
                                    "mixed_device, inplace, index_range, out_dtype, out_shape, out_device, out_alias, "
                                    "out_overlap). Default: all that apply")
    p.add_argument("--dtypes", help="comma-separated dtypes to draw from (float32,bfloat16,int64,...). "
                                    "Default: every dtype the op supports among float32/64/16, bfloat16, "
                                    "int8/16/32/64, uint8, bool")
    p.add_argument("--max-examples", type=int, default=40,
                   help="cases hypothesis draws per op and search round (default 40)")
    p.add_argument("--seconds", type=float, default=0.0,
                   help="overall time budget, shared out among the ops (default: none; --max-examples bounds the run)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed: the same seed draws the same cases")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds one case may take before its worker is "
                                                               "killed and the case reported as a hang (default 20)")
    p.add_argument("--max-findings-per-op", type=int, default=4,
                   help="search rounds per op: each new finding is minimised, set aside, and the search goes on")
    p.add_argument("--max-deaths-per-op", type=int, default=3,
                   help="crashes and hangs after which an op is left (each costs a worker start; default 3)")
    p.add_argument("--shrink-budget", type=int, default=150,
                   help="new cases hypothesis may run to minimise one finding (default 150)")
    p.add_argument("--known-failures", metavar="FILE",
                   help="JSON list of understood findings with reasons: they do not fail the run")
    p.add_argument("--regressions", metavar="FILE", action="append", default=[],
                   help="JSON file of explicit cases ({\"cases\": [{\"token\": ...}]}) run before fuzzing")
    p.add_argument("--replay", metavar="TOKEN", action="append", default=[],
                   help="run exactly this case (the token a finding prints) and nothing else")
    p.add_argument("--case", metavar="FILE", action="append", default=[],
                   help="run exactly the cases in FILE (a spec, a list of specs or a regressions file)")
    p.add_argument("--json", metavar="FILE", help="write the report (per-op counts, findings with their cases)")
    p.add_argument("--list", action="store_true", help="list the ops and probes that would be fuzzed, and exit")
    p.add_argument("--no-opinfo", action="store_true", help="only the torch.ops.xxnpu custom ops")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE_OR_FILE",
                   help="module or .py file the workers import first (kernels registered from Python, "
                        "sample generators for custom ops); repeatable")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-op table, findings and totals only")
    return p


def _read_cases(path: str) -> List[Dict[str, Any]]:
    with open(path) as f:
        doc = json.load(f)
    items = doc.get("cases") if isinstance(doc, dict) and "cases" in doc else doc
    items = items if isinstance(items, list) else [items]
    out = []
    for i, it in enumerate(items):
        if isinstance(it, dict) and "token" in it:
            out.append(from_token(it["token"]))
        elif isinstance(it, dict) and "spec" in it:
            out.append(it["spec"])
        elif isinstance(it, dict) and "op" in it:
            out.append(it)
        else:
            raise ValueError(f"{path}: case {i} is neither a spec nor {{'token': ...}}")
    return out


class _OutOfTime(BaseException):
    """Ends an op's hypothesis run when its share of --seconds is spent (a BaseException,
    so hypothesis does not take it for a failing example)."""


class _Finding(Exception):
    pass


class Fuzzer:
    def __init__(self, runner, known: KnownFailures, args):
        self.runner, self.known, self.args = runner, known, args
        self.cache: Dict[str, Dict[str, Any]] = {}
        self.ops: Dict[str, Dict[str, int]] = {}
        self.findings: Dict[str, Dict[str, Any]] = {}
        self.cases_run = 0

    def run_spec(self, spec) -> Dict[str, Any]:
        tok = token(spec)
        if tok in self.cache:
            return self.cache[tok]
        row = self.runner.run(spec)
        self.cache[tok] = row
        self.cases_run += 1
        st = self.ops.setdefault(spec["op"], {k: 0 for k in COUNTED})
        st[row["kind"]] = st.get(row["kind"], 0) + 1
        if row["kind"] in FINDING_KINDS:
            sig = signature(spec, row["kind"])
            f = self.findings.get(sig)
            if f is None:
                reason = self.known.match(spec, row["kind"])
                f = self.findings[sig] = {"signature": sig, "op": spec["op"], "probe": spec["probe"],
                                          "kind": row["kind"], "known": reason, "count": 0, "dtypes": [],
                                          "first": {"token": tok, "spec": spec, "result": row}, "minimal": None}
            f["count"] += 1
            if spec["dtype"] not in f["dtypes"]:
                f["dtypes"].append(spec["dtype"])
        return row

    def _deaths(self, op) -> int:
        st = self.ops.get(op, {})
        return st.get("crash", 0) + st.get("hang", 0)

    def new_finding(self, sig) -> bool:
        f = self.findings.get(sig)
        return f is not None and not f["known"] and f["minimal"] is None

    def fuzz_target(self, target, deadline: float):
        from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings

        from torch_xxnpu.testing.fuzz.strategies import case_spec

        done = set()  # signatures minimised in an earlier round of this op
        for rnd in range(self.args.max_findings_per_op):
            state = {"target": None, "fresh": 0, "dead": 0, "last": None}
            s = int.from_bytes(hashlib.sha256(f"{self.args.seed}:{target.name}:{rnd}".encode()).digest()[:8], "big")

            @seed(s)
            @settings(max_examples=self.args.max_examples, database=None, deadline=None, derandomize=False,
                      suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink],
                      verbosity=Verbosity.quiet, report_multiple_bugs=False, print_blob=False)
            @given(case_spec(target))
            def prop(spec):
                if time.monotonic() > deadline or self._deaths(target.name) >= self.args.max_deaths_per_op:
                    raise _OutOfTime()
                tok = token(spec)
                if tok not in self.cache and state["target"] is not None:
                    # Minimising: a bounded number of new cases, and few worker deaths (each
                    # one costs a worker start).
                    if state["fresh"] >= self.args.shrink_budget or state["dead"] >= 3:
                        return
                    state["fresh"] += 1
                row = self.run_spec(spec)
                kind = row["kind"]
                if kind not in FINDING_KINDS:
                    return
                if kind in ("crash", "hang") and state["target"] is not None:
                    state["dead"] += 1
                sig = signature(spec, kind)
                if sig in done or not (sig == state["target"] or (state["target"] is None and self.new_finding(sig))):
                    return
                state["target"] = sig
                state["last"] = spec
                raise _Finding(sig)

            try:
                prop()
            except _Finding:
                sig = state["target"]
                spec = state["last"]
                self.findings[sig]["minimal"] = {"token": token(spec), "spec": spec,
                                                 "result": self.cache[token(spec)]}
                done.add(sig)
                continue
            except _OutOfTime:
                if state["last"] is not None:  # stopped while minimising: keep the smallest so far
                    sig = state["target"]
                    self.findings[sig]["minimal"] = {"token": token(state["last"]), "spec": state["last"],
                                                     "result": self.cache[token(state["last"])]}
                return
            except Exception as e:  # noqa: BLE001 - hypothesis gave up (e.g. flaky): report, go on
                print(f"fuzz: {target.name}: hypothesis stopped: {type(e).__name__}: {e}"[:500], file=sys.stderr)
            return


def _fmt_side(v) -> str:
    if isinstance(v, dict):
        return f"{v.get('type')}: {v.get('message', '').splitlines()[0][:160] if v.get('message') else ''}"
    return str(v)


def _print_finding(f, out):
    ex = f["minimal"] or f["first"]
    r = ex["result"]
    label = f"known ({f['known']})" if f["known"] else "NEW"
    out.write(f"\n[{label}] {f['signature']}  x{f['count']}  dtypes {','.join(f['dtypes'])}\n")
    out.write(f"  {'minimised' if f['minimal'] else 'first'} case: dtype {ex['spec']['dtype']} "
              f"sample {ex['spec']['sample']} {r.get('note') or ''}\n")
    smp = r.get("sample") or {}
    if smp:
        out.write(f"    input {smp.get('input', '')[:200]}\n    args {smp.get('args', '')[:200]}  "
                  f"kwargs {smp.get('kwargs', '')[:120]}\n")
    out.write(f"  cpu:   {_fmt_side(r.get('cpu'))}\n  xxnpu: {_fmt_side(r.get('xxnpu'))}\n")
    if r.get("detail"):
        out.write(f"  {r['detail'][:300]}\n")
    out.write(f"  replay: python -m torch_xxnpu.testing.fuzz --replay {ex['token']}\n")


def _summary(fz: Fuzzer, targets, elapsed, quiet, out):
    if not quiet:
        out.write(f"\n{'op':34} {'cases':>6} {'pass':>5} {'raise':>5} {'rej':>4} {'n/a':>4} "
                  f"{'mism':>5} {'crash':>5} {'hang':>4}\n")
        for t in targets:
            s = fz.ops.get(t.name, {})
            mism = sum(s.get(k, 0) for k in ("wrong-values", "wrong-meta", "xxnpu-accepts", "xxnpu-raises",
                                             "exception-class"))
            out.write(f"{t.name[:34]:34} {sum(s.values()):6} {s.get('pass', 0):5} {s.get('both-raise', 0):5} "
                      f"{s.get('rejected', 0):4} {s.get('n/a', 0):4} {mism:5} {s.get('crash', 0):5} "
                      f"{s.get('hang', 0):4}\n")
    for f in sorted(fz.findings.values(), key=lambda f: (bool(f["known"]), f["signature"])):
        _print_finding(f, out)
    new = [f for f in fz.findings.values() if not f["known"]]
    by_kind: Dict[str, int] = {}
    for f in fz.findings.values():
        by_kind[f["kind"]] = by_kind.get(f["kind"], 0) + 1
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())) or "none"
    out.write(f"\nfuzz: {len(targets)} ops, {fz.cases_run} cases in {elapsed:.1f}s, {fz.runner.restarts} worker "
              f"restarts; {len(fz.findings)} distinct findings ({kinds}); {len(new)} not in the known failures\n")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--worker" in argv:
        from torch_xxnpu.testing.fuzz.worker import worker_main

        return worker_main(argv)
    args = build_parser().parse_args(argv)
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        print("fuzz: needs hypothesis (pip install hypothesis; tools/setup.sh pins it)", file=sys.stderr)
        return 2
    try:
        known = KnownFailures.load(args.known_failures) if args.known_failures else KnownFailures()
        explicit = [from_token(t) for t in args.replay]
        for path in args.case:
            explicit += _read_cases(path)
        regressions = [c for path in args.regressions for c in _read_cases(path)]
    except (OSError, ValueError) as e:
        print(f"fuzz: {e}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    from torch_xxnpu.testing.opcheck.worker import setup_process

    imports = [os.path.abspath(m) if m.endswith(".py") else m for m in args.imports]
    setup_process(imports)
    import torch
    import torch_xxnpu

    from torch_xxnpu.testing.fuzz.targets import Target
    from torch_xxnpu.testing.fuzz.worker import CaseRunner

    runner = CaseRunner(args.timeout, opinfo=not args.no_opinfo, imports=imports)
    fz = Fuzzer(runner, known, args)
    try:
        def find(ops, probes, dtypes):
            return [Target(t["op"], t["kind"], t["dtypes"], t["probes"]) for t in runner.targets(ops, probes, dtypes)]

        if explicit:
            for spec in explicit:
                fz.run_spec(spec)
            targets = find(",".join(sorted({s["op"] for s in explicit})), None, None)
        else:
            targets = find(args.ops, args.probes, args.dtypes)
            if args.list:
                for t in targets:
                    print(f"{t.name:34} {','.join(t.dtypes):60} {','.join(t.probes)}")
                print(f"{len(targets)} ops")
                return 0
            if not targets:
                print("fuzz: no op matches --ops/--probes/--dtypes", file=sys.stderr)
                return 2
            names = {t.name for t in targets}
            for spec in regressions:
                if spec["op"] in names:
                    fz.run_spec(spec)
            end = t0 + args.seconds if args.seconds else float("inf")
            for i, t in enumerate(targets):
                now = time.monotonic()
                if now > end:
                    break
                share = (end - now) / (len(targets) - i) if args.seconds else float("inf")
                if not args.quiet:
                    print(f"fuzz: [{i + 1}/{len(targets)}] {t.name}", file=sys.stderr, flush=True)
                fz.fuzz_target(t, min(end, now + share))
    finally:
        runner.close()
    elapsed = time.monotonic() - t0
    _summary(fz, targets, elapsed, args.quiet, sys.stdout)
    if args.json:
        doc = {
            "meta": {"command": "python -m torch_xxnpu.testing.fuzz " + " ".join(shlex.quote(a) for a in argv),
                     "torch": torch.__version__, "torch_xxnpu": torch_xxnpu.__version__,
                     "hypothesis": hypothesis.__version__, "python": platform.python_version(),
                     "seed": args.seed, "seconds": round(elapsed, 1), "cases": fz.cases_run, "ops": len(targets),
                     "worker_restarts": runner.restarts},
            "ops": {t.name: fz.ops.get(t.name, {}) for t in targets},
            "findings": sorted(fz.findings.values(), key=lambda f: f["signature"]),
            "known_failures_not_seen": known.unused(),
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True, default=str)
    return 1 if any(not f["known"] for f in fz.findings.values()) else 0
