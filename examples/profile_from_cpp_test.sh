#!/usr/bin/env bash
# Runs examples/profile_from_cpp and checks the chrome trace it wrote: the device timeline
# (kernels on the xxnpu row, linked to their ops), the marker range, the named rows.
set -euo pipefail
python="$1"
program="$2"
trace="${TEST_TMPDIR:-$(mktemp -d)}/cpp_trace.json"
out="$("$program" "$trace")"
echo "$out"
grep -Eq '^result: mean 9\.0' <<<"$out" || { echo "wrong result" >&2; exit 1; }
grep -Eq '^  xxnpu::add +[0-9.]+ us +stream [0-9]+ +<- xxnpu::add$' <<<"$out" \
  || { echo "xxnpu::add kernel not linked to its op in the result" >&2; exit 1; }
"$python" - "$trace" <<'PY'
import json, sys
with open(sys.argv[1]) as f:
    trace = json.load(f)
events = trace["traceEvents"]
kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
names = sorted(k["name"] for k in kernels)
assert names == ["xxnpu::add", "xxnpu::mul"], names
ops = {e["args"]["External id"]: e["name"] for e in events if e.get("cat") == "cpu_op"}
for k in kernels:
    assert k["pid"] == 0 and k["dur"] > 0 and isinstance(k["args"]["stream"], int), k
    assert ops[k["args"]["External id"]] == {"xxnpu::add": "xxnpu::add", "xxnpu::mul": "aten::mul"}[k["name"]]
assert [e["name"] for e in events if e.get("cat") == "gpu_memcpy"] == ["Memcpy DtoH"]
assert any(e.get("name") == "xxnpuLaunchKernel" for e in events)
step = [e for e in events if e.get("name") == "step" and e.get("args", {}).get("marker") == "range"]
assert {e["cat"] for e in step} == {"privateuse1_runtime", "gpu_user_annotation"}, step
procs = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
assert procs[0] == "xxnpu:0", procs
print(f"trace ok: {len(events)} events, kernels {names}")
PY
echo "1 passed, 0 failed"
