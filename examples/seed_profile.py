"""The seed scenario, verbatim: profile torch.ops.xxnpu.add on xxnpu with torch.profiler.

Only the tensors are ours (the seed's shape, on xxnpu); the profiling code below the
marker is the seed document's snippet unchanged. The trace goes to ./logs/ under the
current directory (tools/demo.sh runs it from the repository root).
"""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def _missing_capabilities():
    """What this build lacks for the seed example; empty when it can run."""
    missing = []
    try:
        import torch_xxnpu  # noqa: F401
    except ImportError as e:
        return [f"torch_xxnpu cannot be imported ({e})"]
    if torch._C._get_privateuse1_backend_name() != "xxnpu":
        missing.append("device registration: PrivateUse1 is not renamed to 'xxnpu' (issue: c10 integration)")
    elif not hasattr(torch, "xxnpu") or not torch.xxnpu.is_available():
        missing.append("torch.xxnpu device module (issue: c10 integration)")
    if not hasattr(torch.ops, "xxnpu") or not hasattr(torch.ops.xxnpu, "add"):
        missing.append("custom op torch.ops.xxnpu.add (issue: ops)")
    if ProfilerActivity.PrivateUse1 not in torch.profiler.supported_activities():
        missing.append("ProfilerActivity.PrivateUse1 in torch.profiler (issue: profiler)")
    return missing


missing = _missing_capabilities()
if missing:
    print("seed_profile: this build cannot run the seed example yet. Missing:")
    for m in missing:
        print("  -", m)
    sys.exit(0)

os.makedirs("./logs", exist_ok=True)
a = torch.randn(2560, 16, 8, 128, device="xxnpu")
b = torch.randn(2560, 16, 8, 128, device="xxnpu")

# ---- the seed's snippet, verbatim ---------------------------------------------------


def trace_handler(p):
	p.export_chrome_trace("./logs/paged_attention_llama3_8b_decode_shape.json")

with profile(
	activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],  # xxnpu
	schedule=torch.profiler.schedule(wait=1, warmup=1, active=9,repeat=1),
	record_shapes=True,
	with_stack=True,
	profile_memory=True,
	on_trace_ready=trace_handler,
) as prof:
	for _ in range(10):
		output = torch.ops.xxnpu.add(a, b)
		prof.step()
print(prof.key_averages(group_by_input_shape=True).table(
	sort_by="self_cpu_time_total", row_limit=80
))

# ---- end of the seed's snippet; beyond it: the trace's analysis ----------------------
# The same as `python -m torch_xxnpu.profiler.analyze <trace> --html <report>`: device time
# by kernel and op, the op -> kernel map, utilisation and idle causes, launch latency,
# memory peaks, printed here and written as an offline HTML report next to the trace.
from torch_xxnpu.profiler import analyze  # noqa: E402

print()
sys.exit(analyze.main(["./logs/paged_attention_llama3_8b_decode_shape.json",
                       "--html", "./logs/xxnpu_profile_report.html"]))
