"""python -m torch_xxnpu.testing.opcheck on small op subsets.

Proves that the sweep reports native vs fallback consistently, writes its reports, compares
gradients and baselines (--native-only: opcheck_native_only_test.py; wrong kernels,
crashes and hangs: opcheck_faults_test.py). Works whatever set of kernels is native: it checks that the
report agrees with the fallback counters rather than naming which ops are native (add is,
since the seed).
"""
import json
import math

import pytest
import torch
import torch_xxnpu  # noqa: F401

from torch_xxnpu.testing import opcheck, report


from testlib import opcheck_rows as _rows
from testlib import run_opcheck as _run


def _check_execution_consistent(row):
    if row["status"] in ("crashed", "timeout"):
        return
    if row.get("execution") == "native":
        assert not row.get("fallback_ops"), row
    elif row.get("execution") == "fallback":
        assert row.get("fallback_ops"), row


def test_sweep_reports_native_fallback_and_writes_reports(tmp_path):
    r = _run(tmp_path, "--ops", "add,mul,abs,sum,xxnpu::add", "--dtypes", "float32,int64,bfloat16", "--backward",
             "-j", "2", "--json", "out.json", "--markdown", "out.md", "--html", "out.html")
    assert r.returncode == 0, r.stdout + r.stderr
    doc, rows = _rows(tmp_path / "out.json")
    for op in ("add", "mul", "abs", "sum", "xxnpu::add"):
        for dt in ("float32", "int64", "bfloat16"):
            row = rows[(op, dt)]
            assert row["status"] == "pass", row
            assert row["samples"] > 0
            _check_execution_consistent(row)
    # add has had a native kernel since the seed; its float32 samples all run natively.
    assert rows[("add", "float32")]["execution"] == "native"
    assert rows[("add", "float32")]["native_kernel"] is True
    assert rows[("xxnpu::add", "float32")]["kind"] == "custom"
    assert rows[("xxnpu::add", "float32")]["execution"] == "native"
    # Gradients: compared for floating dtypes, not for integers.
    assert rows[("mul", "float32")]["backward"]["status"] == "pass"
    assert rows[("xxnpu::add", "float32")]["backward"]["status"] == "pass"
    assert "backward" not in rows[("mul", "int64")]
    # Tolerances: the OpInfo's or assert_close's, recorded per row.
    assert rows[("add", "bfloat16")]["rtol"] >= 1.6e-2
    assert rows[("add", "int64")]["rtol"] == 0 and rows[("add", "int64")]["atol"] == 0
    md = (tmp_path / "out.md").read_text()
    assert "python -m torch_xxnpu.testing.opcheck --no-progress --ops add,mul" in md
    assert "| float32 |" in md and "## Failing rows (0)" in md
    html = (tmp_path / "out.html").read_text()
    assert "<table id='rows'>" in html and "xxnpu::add" in html
    assert "opcheck: 5 ops, 15 (op, dtype) pairs" in r.stdout
    # The run against itself as a baseline: nothing regressed (the CLI's baseline exit codes:
    # opcheck_faults_test).
    assert report.diff(doc, doc) == ([], [])


def test_unknown_op_and_dtype_are_usage_errors(tmp_path):
    r = _run(tmp_path, "--ops", "add", "--dtypes", "float33")
    assert r.returncode != 0 and "unknown dtype 'float33'" in r.stderr
    cases = opcheck.load_cases(["xxnpu"], with_opinfo=False)
    with pytest.raises(SystemExit, match="no such op: no_such_op"):
        opcheck.select_cases(cases, "no_such_op")
    assert [c.name for c in opcheck.select_cases(cases, "xxnpu.add")] == ["xxnpu::add"]


def test_baseline_read_before_the_json_overwrites_it(tmp_path):
    # `--json X --baseline X` refreshes a baseline: the comparison is against what X held
    # (here: add failed before), not against the run just written over it.
    old = {"meta": {}, "rows": [{"op": "add", "dtype": "float32", "status": "fail", "execution": "native"}]}
    (tmp_path / "base.json").write_text(json.dumps(old))
    r = _run(tmp_path, "--ops", "add", "--dtypes", "float32", "--json", "base.json", "--baseline", "base.json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "improved: add float32: fail -> pass" in r.stdout, r.stdout
    assert "0 regressions, 1 improvements against base.json" in r.stdout
    _, rows = _rows(tmp_path / "base.json")  # and the file now holds the new run
    assert rows[("add", "float32")]["status"] == "pass"


def test_unreadable_baseline_is_an_error_before_the_sweep(tmp_path):
    r = _run(tmp_path, "--ops", "add", "--dtypes", "float32", "--baseline", "missing.json", "--json", "out.json")
    assert r.returncode == 2 and "cannot read --baseline missing.json" in r.stderr, r.stderr
    assert not (tmp_path / "out.json").exists()  # nothing ran
    (tmp_path / "bad.json").write_text("[1, 2]")
    r = _run(tmp_path, "--ops", "add", "--dtypes", "float32", "--baseline", "bad.json")
    assert r.returncode == 2 and 'expected an object with a "rows" list' in r.stderr, r.stderr


def test_html_report_escapes_every_field():
    # A run's JSON is re-rendered by `python -m torch_xxnpu.testing.report`: any field may
    # hold text, none may become markup.
    evil = "<script>alert(1)</script>"
    doc = {"meta": {"command": evil, "date": evil, "torch": evil, "seconds": evil},
           "rows": [{"op": evil, "dtype": "float32", "status": "fail", "execution": evil, "samples": evil,
                     "seconds": evil, "reason": evil, "max_abs": None, "max_rel": None}]}
    page = report.html(doc)
    assert "<script>alert" not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 7


# ---- in-process unit tests of the comparison and the device copies


def test_compare_tolerances_nan_inf_and_metadata():
    t = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0])
    ok, a, r, _ = opcheck.compare(t.to("xxnpu"), t, 1.3e-6, 1e-5)
    assert ok and a == 0 and r == 0
    ok, a, r, msg = opcheck.compare((t * 1.001).to("xxnpu"), t, 1.3e-6, 1e-5)
    assert not ok and "differ" in msg and math.isclose(a, 1e-3, rel_tol=1e-3)
    ok, _, _, msg = opcheck.compare(torch.tensor([1.0, 2.0]).to("xxnpu"), torch.tensor([1.0, float("nan")]), 0, 0)
    assert not ok
    ok, _, _, msg = opcheck.compare(torch.ones(2, dtype=torch.float64).to("xxnpu"), torch.ones(2), 0, 0)
    assert not ok and "dtype float64 on xxnpu, float32 on CPU" in msg
    ok, _, _, msg = opcheck.compare(torch.ones(2), torch.ones(2), 0, 0)
    assert not ok and "expected an xxnpu tensor" in msg
    ok, _, _, _ = opcheck.compare((torch.ones(2, device="xxnpu"), 3), (torch.ones(2), 3), 0, 0)
    assert ok


def test_tie_order_accepts_only_a_reordering_of_equal_elements(tmp_path):
    from types import SimpleNamespace

    from torch_xxnpu.testing.opcheck.ties import tie_order_match

    x = torch.tensor([[2, 1, 2, 1, 3], [0, 0, 5, 0, 1]], dtype=torch.int64)
    values, indices = x.sort(-1)  # the CPU's: ties in index order

    def sample(*args, **kwargs):
        return SimpleNamespace(input=x, args=args, kwargs=kwargs)

    # Ties swapped: [1, 1, 2, 2, 3] from indices [3, 1, 2, 0, 4] instead of [1, 3, 0, 2, 4].
    swapped = torch.tensor([[3, 1, 2, 0, 4], [3, 1, 0, 4, 2]])
    assert tie_order_match("sort", sample(), (values, swapped), (values, indices), 0, 0) is not None
    assert tie_order_match("argsort", sample(dim=-1), swapped, indices, 0, 0) is not None
    # Not ties: indices that do not select the values, an index taken twice, wrong values.
    wrong = torch.tensor([[3, 1, 2, 4, 0], [3, 1, 0, 4, 2]])
    twice = torch.tensor([[1, 1, 2, 0, 4], [3, 1, 0, 4, 2]])  # picks the right values, twice
    assert tie_order_match("sort", sample(), (values, wrong), (values, indices), 0, 0) is None
    assert tie_order_match("argsort", sample(), wrong, indices, 0, 0) is None
    assert tie_order_match("argsort", sample(), twice, indices, 0, 0) is None
    assert tie_order_match("sort", sample(), (values + 1, swapped), (values, indices), 0, 0) is None
    # stable=True specifies the order; other ops are not reordered at all.
    assert tie_order_match("sort", sample(stable=True), (values, swapped), (values, indices), 0, 0) is None
    assert tie_order_match("max", sample(), (values, swapped), (values, indices), 0, 0) is None
    # topk: its values in any order when sorted=False, in the CPU's otherwise.
    tv, ti = x.topk(3, 1)
    rv, ri = tv.flip(1), ti.flip(1)
    assert tie_order_match("topk", sample(3, 1, True, False), (rv, ri), (tv, ti), 0, 0) is not None
    assert tie_order_match("topk", sample(3, 1), (rv, ri), (tv, ti), 0, 0) is None
    # kthvalue / mode: any index of an equal element, reduced dim or kept.
    kv, ki = x.kthvalue(2, 1)  # row 0: 1 at index 1 or 3
    assert tie_order_match("kthvalue", sample(2, 1), (kv, torch.tensor([3, 3])), (kv, ki), 0, 0) is not None
    assert tie_order_match("kthvalue", sample(2, 1), (kv, torch.tensor([0, 3])), (kv, ki), 0, 0) is None
    mv, mi = x.mode(1, True)
    assert tie_order_match("mode", sample(1, True), (mv, torch.tensor([[1], [0]])), (mv, mi), 0, 0) is not None
    assert tie_order_match("mode", sample(1, True), (mv, torch.tensor([[0], [0]])), (mv, mi), 0, 0) is None
    # And in the sweep: sort, argsort and topk pass for the dtypes full of ties, where the
    # CPU's indices and xxnpu's differ.
    r = _run(tmp_path, "--ops", "sort,argsort,topk", "--dtypes", "bool,uint8,bfloat16", "-j", "1", "--json", "t.json")
    assert r.returncode == 0, r.stdout + r.stderr
    _, rows = _rows(tmp_path / "t.json")
    for op, dt in (("sort", "bool"), ("argsort", "uint8"), ("sort", "bfloat16"), ("topk", "uint8")):
        assert rows[(op, dt)]["status"] == "pass", rows[(op, dt)]
    assert any("order equal elements differently" in row["reason"] for row in rows.values()), rows


def test_device_copies_keep_strides_offsets_and_grad():
    base = torch.arange(60.0).view(6, 10)
    for t in (base[1:5:2, 2::3], base.t(), base[2].expand(4, 10), base[0, 0]):
        d = opcheck.copy_to(t, "xxnpu")
        assert d.device.type == "xxnpu"
        assert d.stride() == t.stride() and d.storage_offset() == t.storage_offset()
        assert torch.equal(d.cpu(), t)
    g = opcheck.copy_to(torch.randn(3, requires_grad=True), "xxnpu")
    assert g.requires_grad and g.is_leaf


def test_report_diff_flags_regressions_and_lost_native_kernels():
    base = {"rows": [{"op": "a", "dtype": "float32", "status": "pass", "execution": "native"},
                     {"op": "b", "dtype": "float32", "status": "fail", "execution": "native"},
                     {"op": "c", "dtype": "float32", "status": "pass", "execution": "native"}]}
    new = {"rows": [{"op": "a", "dtype": "float32", "status": "error", "execution": "native", "reason": "boom"},
                    {"op": "b", "dtype": "float32", "status": "pass", "execution": "native"},
                    {"op": "c", "dtype": "float32", "status": "pass", "execution": "fallback",
                     "fallback_ops": {"aten::c": 1}}]}
    regressions, improvements = report.diff(base, new)
    assert any(s.startswith("a float32: pass -> error") for s in regressions)
    assert any("c float32: was native, now falls back for aten::c" in s for s in regressions)
    assert improvements == ["b float32: fail -> pass"]
