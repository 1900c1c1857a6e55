"""What torch.profiler costs on xxnpu, relative to what it costs on CPU (docs/profiler.md).

A loop of small ops (N x `c = a + b` on 64-float tensors, then a synchronize) runs
unprofiled and inside torch.profiler.profile(activities=[CPU, PrivateUse1]), on xxnpu
tensors and on CPU tensors, interleaved, in one process; each figure is the median of
--reps repetitions. The loop is timed inside the capture (start/stop and post-processing
excluded; they are reported separately per op), with Python's garbage collector paused as
timeit does.

  overhead(device)   = profiled loop time / unprofiled loop time        (in capture)
  end to end(device) = (start + loop + stop) / unprofiled loop time     (a whole capture)
  reported: each for xxnpu / the same for cpu   (target <= 1.2 for both)

"stop" is the `with` block's exit: torch stops Kineto, the plugin converts the device
records, torch builds its event tree. The table (`prof.key_averages()`, torch's Python
post-processing, which scales with the number of events: 3 per op on xxnpu as on CUDA, 1
on CPU) is reported on its own, per op.

A third column profiles with ProfilerActivity.CPU only (the xxnpu plugin is not asked
for): the difference to CPU+PrivateUse1 is the device activity collection, the rest is
torch's own op recording (which records more ops per `a + b` on xxnpu than on CPU: see
"recorded per op").

Run: bazel run --config=opt //benchmarks:profiler_overhead_benchmark [-- --ops 2000 --reps 7]
The runtime's own per-launch tracing cost is measured by //device:runtime_benchmark
(BM_LaunchEnqueueTraced vs BM_LaunchEnqueue).
"""
import argparse
import gc
import statistics
import time

import torch
import torch_xxnpu  # noqa: F401
from torch.profiler import ProfilerActivity, profile

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
CPU_ONLY = [ProfilerActivity.CPU]


def _sync(device):
    if device == "xxnpu":
        torch.xxnpu.synchronize()


def _loop(a, b, ops, device):
    # As timeit: no garbage collection inside the timed loop (the previous run's profiler
    # results would otherwise be collected in whichever loop comes next; callers collect
    # before starting).
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        for _ in range(ops):
            c = a + b
        _sync(device)
        del c
        return time.perf_counter_ns() - t0
    finally:
        gc.enable()


def _unprofiled(a, b, ops, device):
    gc.collect()
    return {"loop": _loop(a, b, ops, device)}


def _profiled(a, b, ops, device, activities=ACTIVITIES):
    """Times of one capture's parts, in ns: start, the loop inside it, stop, the table."""
    gc.collect()
    t0 = time.perf_counter_ns()
    prof = profile(activities=activities)
    prof.__enter__()
    t1 = time.perf_counter_ns()
    loop_ns = _loop(a, b, ops, device)
    t2 = time.perf_counter_ns()
    prof.__exit__(None, None, None)
    t3 = time.perf_counter_ns()
    prof.key_averages()  # post-processing, as a user's table would trigger
    t4 = time.perf_counter_ns()
    return {"loop": loop_ns, "start": t1 - t0, "stop": t3 - t2, "table": t4 - t3,
            "whole": (t1 - t0) + loop_ns + (t3 - t2)}


def _profiled_cpu_only(a, b, ops, device):
    return _profiled(a, b, ops, device, CPU_ONLY)


def _recorded_per_op(a, b, device, ops=100):
    """Events in a capture of the loop, per op: (torch's CPU ops, xxnpu runtime + device)."""
    with profile(activities=ACTIVITIES) as prof:
        _loop(a, b, ops, device)
    events = [e for e in prof.events() if not e.name.startswith("xxnpuDeviceSynchronize")]
    cpu_ops = [e for e in events if e.device_type == torch.autograd.DeviceType.CPU and "xxnpu" not in e.name]
    return len(cpu_ops) / ops, (len(events) - len(cpu_ops)) / ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=2000, help="ops per loop")
    parser.add_argument("--reps", type=int, default=7, help="repetitions (medians are reported)")
    parser.add_argument("--numel", type=int, default=64, help="elements per tensor")
    args = parser.parse_args()

    torch.set_num_threads(1)  # CPU adds of 64 floats: no intra-op threads either way
    tensors = {d: (torch.ones(args.numel, device=d), torch.ones(args.numel, device=d)) for d in ("xxnpu", "cpu")}
    fns = {"unprofiled": _unprofiled, "cpu only": _profiled_cpu_only, "profiled": _profiled}
    runs = {(d, mode): [] for d in tensors for mode in fns}
    parts = {d: {"start": [], "stop": [], "table": [], "whole": []} for d in tensors}

    for d, (a, b) in tensors.items():  # warm-up: first launches, profiler initialisation
        for mode, fn in fns.items():
            fn(a, b, args.ops, d)
    for _ in range(args.reps):
        for d, (a, b) in tensors.items():
            for mode, fn in fns.items():
                times = fn(a, b, args.ops, d)
                runs[(d, mode)].append(times["loop"])
                if mode == "profiled":
                    for part in parts[d]:
                        parts[d][part].append(times[part])

    per_op = {k: statistics.median(v) / args.ops / 1000 for k, v in runs.items()}  # us
    print(f"{args.ops} x add of {args.numel} floats, median of {args.reps} (torch {torch.__version__})")
    print("per op, in us:         unprofiled  CPU only  CPU+PrivateUse1  overhead  recorded per op")
    overhead, end_to_end = {}, {}
    med = {d: {part: statistics.median(v) / args.ops / 1000 for part, v in p.items()} for d, p in parts.items()}
    for d, (a, b) in tensors.items():
        overhead[d] = per_op[(d, "profiled")] / per_op[(d, "unprofiled")]
        end_to_end[d] = med[d]["whole"] / per_op[(d, "unprofiled")]
        ops_recorded, device_recorded = _recorded_per_op(a, b, d)
        print(f"  {d:20} {per_op[(d, 'unprofiled')]:10.2f} {per_op[(d, 'cpu only')]:9.2f} "
              f"{per_op[(d, 'profiled')]:16.2f} {overhead[d]:8.2f}x  "
              f"{ops_recorded:.0f} ops + {device_recorded:.0f} xxnpu")
    print("whole capture, per op, in us:  start    stop   start+loop+stop  end to end  | table")
    for d in tensors:
        print(f"  {d:28} {med[d]['start']:6.2f} {med[d]['stop']:7.2f} {med[d]['whole']:17.2f} "
              f"{end_to_end[d]:10.2f}x  | {med[d]['table']:6.2f}")
    ratio = overhead["xxnpu"] / overhead["cpu"]
    print(f"in capture: overhead(xxnpu) / overhead(cpu) = {ratio:.2f}  "
          f"(target <= 1.2: {'met' if ratio <= 1.2 else 'NOT met'})")
    ratio = end_to_end["xxnpu"] / end_to_end["cpu"]
    print(f"end to end: end to end(xxnpu) / end to end(cpu) = {ratio:.2f}  "
          f"(target <= 1.2: {'met' if ratio <= 1.2 else 'NOT met'})")
    torch_extra = (per_op[("xxnpu", "cpu only")] - per_op[("xxnpu", "unprofiled")]) - \
                  (per_op[("cpu", "cpu only")] - per_op[("cpu", "unprofiled")])
    device = per_op[("xxnpu", "profiled")] - per_op[("xxnpu", "cpu only")]
    print(f"xxnpu's cost per op beyond CPU's: torch op recording {torch_extra * 1000:+.0f} ns, "
          f"device activity collection {device * 1000:+.0f} ns")


if __name__ == "__main__":
    main()
