"""examples/llama_decode.py end to end: a small Llama-style model prefills and decodes with
the paged-KV-cache custom ops on xxnpu, and its tokens and logits match the CPU run of the
same model; the script reports tokens/s for both and the decode step's CPU fallbacks.

Zero CPU fallbacks in the decode step is required (the issue's target; every aten op the
model uses has a native kernel). LLAMA_DECODE_REQUIRE_NATIVE=0 relaxes it while bringing up
a model whose ops are not all native yet.
"""
import json
import os
import re
import subprocess
import sys

import pytest
from testlib import example_script

REQUIRE_NATIVE_DECODE = os.environ.get("LLAMA_DECODE_REQUIRE_NATIVE", "1") == "1"


def _script():
    return example_script('llama_decode.py')


def _run(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, _script(), *args], env=env, capture_output=True, text=True, timeout=300)
    return r, r.stdout


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_llama_decode_matches_cpu(dtype):
    # float32 also runs with --require-native-decode: the script then fails (exit 1) while
    # any op of the decode step falls back to the CPU, and passes once none does.
    strict = dtype == "float32"
    args = ["--layers", "2", "--hidden", "128", "--vocab", "512", "--new-tokens", "12", "--prompt-lens", "9,3,18",
            "--dtype", dtype, "--reps", "1"] + (["--require-native-decode"] if strict else [])
    trace = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), f"llama_decode_{dtype}.json")
    if dtype == "bfloat16":
        args += ["--trace", trace]
    r, out = _run(*args)
    assert "Traceback" not in r.stderr, r.stderr[-4000:]
    if dtype == "bfloat16":
        # The custom ops' kernels are on the profiler's device timeline.
        with open(trace) as f:
            names = {e.get("name") for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel"}
        for op in ["rms_norm", "fused_add_rms_norm", "rotary_embedding", "reshape_and_cache", "paged_attention",
                   "silu_and_mul"]:
            assert f"xxnpu::{op}" in names, sorted(n for n in names if n)
    assert "MISMATCH" not in out, out
    m = re.search(r"logits \(xxnpu fed the cpu's tokens\): max \|diff\| (\S+) over prefill \+ 11 decode steps "
                  r"\(tolerance (\S+)\); greedy choices equal (\d+)/36", out)
    assert m and float(m.group(1)) <= float(m.group(2)), out
    if dtype == "float32":
        # No near-ties at this precision: the free-running decode gives the CPU's tokens.
        assert int(m.group(3)) == 36, out
        assert "match: tokens identical (3 x 12) decoding on its own" in out, out
    m = re.search(r"decode \(11 steps x batch 3\): cpu ([\d.]+) tokens/s, xxnpu ([\d.]+) tokens/s, "
                  r"xxnpu/cpu ([\d.]+)x", out)
    assert m and float(m.group(1)) > 0 and float(m.group(2)) > 0, out
    line = next((l for l in out.splitlines() if l.startswith("decode-step CPU fallbacks: ")), None)
    assert line and re.fullmatch(r"decode-step CPU fallbacks: (none|[\d.]+ per step \(.*\))", line), out
    # The custom ops themselves never fall back.
    assert "xxnpu::" not in line, line
    native = line == "decode-step CPU fallbacks: none"
    if REQUIRE_NATIVE_DECODE:
        assert native, out
    if strict and not native:
        assert r.returncode == 1 and "FAILED: --require-native-decode" in out, out + r.stderr[-4000:]
    else:
        assert r.returncode == 0, f"stdout:\n{out[-4000:]}\nstderr:\n{r.stderr[-4000:]}"


def test_llama_decode_step_graphed_replay_equals_eager():
    # The decode step captured once (static inputs and the KV cache updated in place) and
    # replayed per step gives the eager xxnpu decode's logits and tokens exactly.
    r, out = _run("--layers", "2", "--hidden", "128", "--vocab", "512", "--new-tokens", "12", "--prompt-lens",
                  "9,3,18", "--reps", "1", "--graphed")
    assert "Traceback" not in r.stderr, r.stderr[-4000:]
    assert "graphed decode vs eager xxnpu: logits max |diff| 0.00e+00, tokens identical" in out, out
    m = re.search(r"graphed decode: xxnpu graph ([\d.]+) tokens/s, eager xxnpu ([\d.]+) tokens/s, "
                  r"graph/eager ([\d.]+)x", out)
    assert m and float(m.group(1)) > 0, out
    assert "MISMATCH" not in out and r.returncode == 0, out + r.stderr[-4000:]
