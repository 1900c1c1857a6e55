"""python -m torch_xxnpu.testing.fuzz against deliberately broken kernels: the fuzzer must
find a wrong kernel (and minimise the case), survive a kernel that segfaults and one that
hangs (reporting each with a replay token), replay exactly that case with --replay, and
fail the run unless the finding is in --known-failures.

A test-only plugin (passed with --import, so the workers load it) overrides aten kernels
for xxnpu: abs 1% off for |x| > 1, neg segfaulting on a NaN, sign hanging on an infinity."""
import json
import re
import textwrap

from testlib import run_python_module

PLUGIN = textwrap.dedent('''
    import ctypes
    import time

    import torch

    _aten = torch.library.Library("aten", "IMPL")

    def _wrong_abs(x):
        y = x.cpu().abs()
        return torch.where(y > 1, y * 1.01, y).to(x.device)

    def _crashing_neg(x):
        if x.is_floating_point() and bool(x.cpu().isnan().any()):
            ctypes.string_at(0)
        return (-x.cpu()).to(x.device)

    def _hanging_sign(x):
        if x.is_floating_point() and bool(x.cpu().isinf().any()):
            time.sleep(3600)
        return x.cpu().sign().to(x.device)

    _aten.impl("abs", _wrong_abs, "PrivateUse1")
    _aten.impl("neg", _crashing_neg, "PrivateUse1")
    _aten.impl("sign", _hanging_sign, "PrivateUse1")
''')


def _fuzz(tmp_path, *args, timeout=600):
    plugin = tmp_path / "broken_kernels.py"
    plugin.write_text(PLUGIN)
    proc = run_python_module(tmp_path, "torch_xxnpu.testing.fuzz", "--import", str(plugin), *args, timeout=timeout)
    print(proc.stdout[-8000:])
    print(proc.stderr[-4000:])
    return proc


def test_wrong_crashing_and_hanging_kernels_are_found_and_replayable(tmp_path):
    proc = _fuzz(tmp_path, "--ops", "abs,neg,sign", "--probes", "values,extremes", "--dtypes", "float32",
                 "--max-examples", "25", "--max-findings-per-op", "2", "--max-deaths-per-op", "2",
                 "--timeout", "30", "--json", "r.json")
    assert proc.returncode == 1, "findings not in a known-failures list must fail the run"
    doc = json.loads((tmp_path / "r.json").read_text())
    found = {f["signature"]: f for f in doc["findings"]}
    assert "abs | values | wrong-values" in found, list(found)
    assert "neg | extremes | crash" in found, list(found)
    assert "sign | extremes | hang" in found, list(found)
    # The crash and the hang did not end the run: each op was fuzzed, the workers replaced.
    assert doc["meta"]["worker_restarts"] >= 2
    for op in ("abs", "neg", "sign"):
        assert doc["ops"][op]["pass"] > 0, doc["ops"][op]
    # An op that keeps killing its worker is left after --max-deaths-per-op.
    assert 1 <= doc["ops"]["sign"]["hang"] <= 2 and 1 <= doc["ops"]["neg"]["crash"] <= 2, doc["ops"]
    # The wrong kernel's case was minimised: the simplest probe parameters, float32.
    wrong = found["abs | values | wrong-values"]
    assert wrong["minimal"] is not None and wrong["minimal"]["spec"]["sample"] <= 2, wrong["minimal"]
    assert "elements differ" in wrong["minimal"]["result"]["detail"]

    # --replay re-runs exactly that case (and only it).
    crash = found["neg | extremes | crash"]
    ex = crash["minimal"] or crash["first"]
    rep = _fuzz(tmp_path, "--replay", ex["token"], "--timeout", "30", "--json", "replay.json")
    assert rep.returncode == 1
    rdoc = json.loads((tmp_path / "replay.json").read_text())
    assert rdoc["meta"]["cases"] == 1
    assert [f["signature"] for f in rdoc["findings"]] == ["neg | extremes | crash"]
    assert re.search(r"signal 11|Segmentation fault", rdoc["findings"][0]["first"]["result"]["detail"])


def test_known_failures_keep_the_run_green_and_are_reported(tmp_path):
    known = tmp_path / "known.json"
    known.write_text(json.dumps({"failures": [
        {"op": "abs", "probe": "values", "kind": "wrong-values", "reason": "open: test plugin's wrong abs"}]}))
    proc = _fuzz(tmp_path, "--ops", "abs", "--probes", "values", "--dtypes", "float32", "--max-examples", "10",
                 "--known-failures", str(known), "--json", "r.json")
    assert proc.returncode == 0, "a known failure must not fail the run"
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [(f["signature"], f["known"]) for f in doc["findings"]] == [
        ("abs | values | wrong-values", "open: test plugin's wrong abs")]
    assert "[known (open: test plugin's wrong abs)] abs | values | wrong-values" in proc.stdout
    # A known-failures file without reasons is a bad argument.
    known.write_text(json.dumps({"failures": [{"op": "abs", "probe": "values", "kind": "wrong-values"}]}))
    bad = _fuzz(tmp_path, "--ops", "abs", "--known-failures", str(known))
    assert bad.returncode == 2 and "lacks reason" in bad.stderr
