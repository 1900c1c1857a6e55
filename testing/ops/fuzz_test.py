"""python -m torch_xxnpu.testing.fuzz, the differential fuzzer, as CI runs it: a bounded,
seeded run over every native op and the torch.ops.xxnpu ops (about 2 minutes), with the
minimised cases of earlier findings replayed first (fuzz_regressions.json). It fails on
any finding that testing/ops/fuzz_known_failures.json does not list with a reason.

Deterministic: a fixed --seed and --max-examples (no time budget) draw the same cases on
every run; the time cap only guards against a wedged machine."""
import json
import os

from testlib import run_python_module

HERE = os.path.dirname(os.path.abspath(__file__))
KNOWN = os.path.join(HERE, "fuzz_known_failures.json")
REGRESSIONS = os.path.join(HERE, "fuzz_regressions.json")


def test_bounded_fuzz_run_has_no_new_finding(tmp_path):
    report = tmp_path / "fuzz.json"
    proc = run_python_module(tmp_path, "torch_xxnpu.testing.fuzz", "--seed", "0", "--max-examples", "6",
                             "--max-findings-per-op", "3", "--shrink-budget", "60", "--seconds", "600",
                             "--known-failures", KNOWN, "--regressions", REGRESSIONS, "--json", str(report), "-q",
                             timeout=840)
    print(proc.stdout[-20000:])
    print(proc.stderr[-5000:])
    assert report.exists(), "the fuzzer wrote no report"
    doc = json.loads(report.read_text())
    new = [f for f in doc["findings"] if not f["known"]]
    for f in new:  # what to fix, or to add to the known failures with a reason
        ex = f["minimal"] or f["first"]
        print(f"NEW {f['signature']}: {ex['result'].get('detail')}\n  cpu {ex['result'].get('cpu')}\n"
              f"  xxnpu {ex['result'].get('xxnpu')}\n  python -m torch_xxnpu.testing.fuzz --replay {ex['token']}")
    assert proc.returncode == 0 and not new, \
        f"new findings (not in fuzz_known_failures.json): {[f['signature'] for f in new]}"
    # It really fuzzed: every native op family, thousands of cases.
    assert doc["meta"]["ops"] >= 150, doc["meta"]
    assert doc["meta"]["cases"] >= 600, doc["meta"]
    for op in ("add", "gather", "index_select", "sort", "xxnpu::rms_norm", "xxnpu::paged_attention"):
        assert sum(doc["ops"][op].values()) > 0, op


def test_known_failures_and_regressions_are_well_formed():
    with open(KNOWN) as f:
        known = json.load(f)["failures"]
    for e in known:
        assert {"op", "probe", "kind", "reason"} <= set(e), e
        assert e["reason"].split(":")[0] in ("open", "wontfix", "torch"), e
    with open(REGRESSIONS) as f:
        cases = json.load(f)["cases"]
    from torch_xxnpu.testing.fuzz import from_token

    for c in cases:
        spec = from_token(c["token"])
        assert spec["op"] and spec["probe"] and c.get("finding"), c
