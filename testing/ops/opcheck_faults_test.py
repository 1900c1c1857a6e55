"""python -m torch_xxnpu.testing.opcheck against deliberately broken kernels.

A test-only plugin (passed with --import, so every worker loads it) overrides aten::abs
for xxnpu with a kernel that is 1% off for |x| > 1, and defines a namespace of custom ops
whose xxnpu kernels are wrong, segfault, hang or are right. The sweep must report the
wrong ones as `fail` with their first failing sample, the segfault as `crashed`, the hang
as `timeout`, carry on to the right one, and flag regressions against a baseline.
"""
import json
import textwrap

import torch_xxnpu


from testlib import opcheck_rows as _rows
from testlib import run_opcheck as _run


PLUGIN = textwrap.dedent('''
    """Test-only kernels: wrong, crashing and hanging ones."""
    import ctypes
    import time

    import torch
    from torch.testing import make_tensor
    from torch.testing._internal.opinfo.core import SampleInput

    from torch_xxnpu.testing.custom_samples import register_samples

    # aten::abs overridden for xxnpu with a kernel that is wrong for |x| > 1.
    _aten = torch.library.Library("aten", "IMPL")

    def _wrong_abs(x):
        y = x.cpu().abs()
        return torch.where(y > 1, y * 1.01, y).to(x.device)

    _aten.impl("abs", _wrong_abs, "PrivateUse1")

    # A test namespace: right CPU kernels, xxnpu kernels that are wrong / crash / hang / right.
    _lib = torch.library.Library("opcheck_selftest", "DEF")
    for name in ("scale", "crash", "hang", "good"):
        _lib.define(name + "(Tensor x) -> Tensor")
        _lib.impl(name, lambda x: x * 2, "CPU")

    _lib.impl("scale", lambda x: (x.cpu() * 2 + (x.cpu().abs() > 3)).to(x.device), "PrivateUse1")
    _lib.impl("crash", lambda x: ctypes.string_at(0), "PrivateUse1")
    _lib.impl("hang", lambda x: time.sleep(3600), "PrivateUse1")
    _lib.impl("good", lambda x: (x.cpu() * 2).to(x.device), "PrivateUse1")

    for name in ("scale", "crash", "hang", "good"):
        @register_samples("opcheck_selftest::" + name, dtypes=(torch.float32,))
        def _samples(dtype, requires_grad):
            yield SampleInput(make_tensor((3, 4), dtype=dtype, device="cpu", low=-5, high=5))
            yield SampleInput(make_tensor((10,), dtype=dtype, device="cpu", low=-5, high=5,
                                          noncontiguous=True))
''')


def test_wrong_kernels_are_caught_and_crashes_and_hangs_are_isolated(tmp_path):
    plugin = tmp_path / "selftest_kernels.py"
    plugin.write_text(PLUGIN)
    # The baseline claims everything passed before: the wrong kernels are regressions.
    baseline = {"meta": {}, "rows": [
        {"op": op, "dtype": "float32", "status": "pass", "execution": "native"}
        for op in ("abs", "opcheck_selftest::scale", "opcheck_selftest::good")]}
    (tmp_path / "base.json").write_text(json.dumps(baseline))
    r = _run(tmp_path, "--ops", "abs,opcheck_selftest::scale,opcheck_selftest::crash,opcheck_selftest::hang,"
             "opcheck_selftest::good", "--namespaces", "opcheck_selftest", "--import", str(plugin),
             "--dtypes", "float32", "--timeout", "15", "-j", "2", "--json", "out.json", "--markdown", "out.md",
             "--baseline", "base.json")
    assert r.returncode == 1, r.stdout + r.stderr
    doc, rows = _rows(tmp_path / "out.json")

    abs_row = rows[("abs", "float32")]
    assert abs_row["status"] == "fail", abs_row
    assert abs_row["execution"] == "native"  # the override is an xxnpu kernel, not the fallback
    ff = abs_row["first_failure"]
    assert "shape=" in ff["input"] and "stride=" in ff["input"] and "dtype=float32" in ff["input"]
    assert "elements differ beyond rtol" in ff["message"]
    assert isinstance(ff["sample"], int)
    assert 0.005 < abs_row["max_rel"] < 0.02  # the 1% error, measured

    scale = rows[("opcheck_selftest::scale", "float32")]
    assert scale["status"] == "fail" and scale["kind"] == "custom"
    assert "elements differ" in scale["first_failure"]["message"]

    crash = rows[("opcheck_selftest::crash", "float32")]
    assert crash["status"] == "crashed", crash
    assert "signal 11" in crash["reason"]
    hang = rows[("opcheck_selftest::hang", "float32")]
    assert hang["status"] == "timeout", hang
    # The sweep went on after both, on replaced workers.
    assert rows[("opcheck_selftest::good", "float32")]["status"] == "pass"

    assert "REGRESSION: abs float32: pass -> fail" in r.stdout
    assert "REGRESSION: opcheck_selftest::scale float32: pass -> fail" in r.stdout
    assert "REGRESSION: opcheck_selftest::good" not in r.stdout
    md = (tmp_path / "out.md").read_text()
    assert "| abs | float32 | forward | native | fail |" in md
    assert "| opcheck_selftest::crash | float32 | forward | unknown | crashed |" in md


