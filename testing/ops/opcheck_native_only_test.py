"""python -m torch_xxnpu.testing.opcheck --native-only: ops that fall back are reported as
such without being run in full; native ones run. Holds whatever set of kernels is native:
an op is checked against what the fallback counters said about it, except add (native
since the seed)."""

import torch_xxnpu  # noqa: F401
from testlib import opcheck_rows as _rows
from testlib import run_opcheck as _run


def test_native_only_skips_fallback_ops(tmp_path):
    r = _run(tmp_path, "--ops", "add,abs,nn.functional.relu", "--dtypes", "float32,int64", "--native-only",
             "-j", "1", "--json", "out.json")
    assert r.returncode == 0, r.stdout + r.stderr
    _, rows = _rows(tmp_path / "out.json")
    for dt in ("float32", "int64"):
        assert rows[("add", dt)]["status"] == "pass" and rows[("add", dt)]["execution"] == "native"
    for op in ("abs", "nn.functional.relu"):
        probe, other = rows[(op, "float32")], rows[(op, "int64")]
        if probe["execution"] == "fallback":
            # Probed once on float32; the other dtype is not run, and says why.
            assert probe["status"] == "skipped" and probe["reason"].startswith("not native"), probe
            assert probe["fallback_ops"]
            assert other["status"] == "skipped" and "on float32 it falls back for" in other["reason"], other
        else:
            assert probe["status"] == "pass", probe
            assert other["status"] in ("pass", "skipped"), other
