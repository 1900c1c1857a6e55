"""What XXNPU_PROFILER_ON_DEMAND=1 costs a program while no capture is requested
(docs/profiler.md, "On-demand capture").

The variable is read when torch_xxnpu is imported, so each figure comes from a child
process started with or without it; the children alternate (off, on, off, on, ...) so
that the machine's load drifts over both alike. Each child times:

- a training loop (a 2-layer MLP on xxnpu, SGD, ``loss.item()`` per iteration, as a loop
  that logs its loss): median time per iteration over --iterations, after a warm-up; in
  the children with the variable, also with our hook taken out and put back, alternating;
- ``optimizer.step()`` of an SGD over one 1-element CPU tensor (a step that does almost
  nothing, so the global post hook's cost is not lost in it): per call, and the same
  alternation (the hook's own cost, free of the spread between processes);
- ``torch.xxnpu.markers.step()``: per call;
- the idle hook called directly (from a lambda: an upper bound of what the optimizer's
  hook loop pays for it).

Per-call figures are timeit's (the fastest of several runs); per-iteration ones medians.

Run: bazel run --config=opt //benchmarks:on_demand_idle_benchmark [-- --runs 6 --iterations 300]
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time


def _per_call_us(fn, calls, reps=7):
    """timeit's figure: the fastest of `reps` runs (the others were disturbed more)."""
    gc.disable()
    try:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter_ns() - t0) / calls / 1e3)
        return min(times)
    finally:
        gc.enable()


def child(iterations):
    import threading

    import torch
    import torch_xxnpu  # noqa: F401

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 16)).to("xxnpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256, device="xxnpu"), torch.randn(64, 16, device="xxnpu")

    def iteration():
        opt.zero_grad()
        loss = (model(x) - y).square().mean()
        loss.backward()
        loss.item()
        opt.step()

    def loop_us(n):
        gc.disable()
        times = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            iteration()
            times.append((time.perf_counter_ns() - t0) / 1e3)
        gc.enable()
        return statistics.median(times)

    for _ in range(30):
        iteration()
    tiny = torch.zeros(1, requires_grad=True)
    tiny.grad = torch.zeros(1)
    tiny_opt = torch.optim.SGD([tiny], lr=0.0)
    result = {
        "iteration_us": loop_us(iterations),
        "optimizer_step_us": _per_call_us(tiny_opt.step, 2000),
        "marker_step_us": _per_call_us(torch.xxnpu.markers.step, 100000),
        "listening": any(t.name == "xxnpu-on-demand" for t in threading.enumerate()),
    }
    if result["listening"]:
        # What the variable changes for a running loop is our optimizer hook (the listener
        # thread sleeps in accept()): with it and without it, alternating in one process.
        from torch.optim import optimizer as optim_module

        from torch_xxnpu.profiler.capture import agent

        hooks = optim_module._global_optimizer_post_hooks
        key = next(k for k, h in hooks.items() if h is agent._on_optimizer_step)
        step_diff, iter_diff = [], []
        for _ in range(7):
            with_hook = (_per_call_us(tiny_opt.step, 500, reps=3), loop_us(iterations // 7))
            del hooks[key]
            without = (_per_call_us(tiny_opt.step, 500, reps=3), loop_us(iterations // 7))
            hooks[key] = agent._on_optimizer_step
            step_diff.append(with_hook[0] - without[0])
            iter_diff.append(with_hook[1] - without[1])
        result["hook_step_us"] = statistics.median(step_diff)
        result["hook_iteration_us"] = statistics.median(iter_diff)
        hook = agent._on_optimizer_step
        result["hook_call_us"] = _per_call_us(lambda: hook(tiny_opt, (), {}), 100000)
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=6, help="child processes per setting (alternating)")
    p.add_argument("--iterations", type=int, default=300, help="timed training iterations per child")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.iterations)))
        return
    results = {"off": [], "on": []}
    for _ in range(args.runs):
        for setting in ("off", "on"):
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(x for x in sys.path if x))
            env.pop("XXNPU_PROFILER_ON_DEMAND", None)
            if setting == "on":
                env["XXNPU_PROFILER_ON_DEMAND"] = "1"
            out = subprocess.run([sys.executable, __file__, "--child", "--iterations", str(args.iterations)],
                                 env=env, capture_output=True, text=True, check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            assert r["listening"] == (setting == "on"), r
            results[setting].append(r)

    def med(setting, key):
        return statistics.median(r[key] for r in results[setting])

    print(f"XXNPU_PROFILER_ON_DEMAND idle cost: median over {args.runs} processes per setting, alternating")
    print(f"{'':28}{'off':>10}{'on':>10}{'on - off':>11}")
    for key, label in (("iteration_us", "training iteration (us)"), ("optimizer_step_us", "tiny optimizer.step (us)"),
                       ("marker_step_us", "markers.step() (us)")):
        off, on = med("off", key), med("on", key)
        print(f"{label:28}{off:10.2f}{on:10.2f}{on - off:+11.2f}")
    print("with the variable, our hook present - removed, alternating in one process:")
    print(f"{'  training iteration (us)':28}{'':20}{med('on', 'hook_iteration_us'):+11.2f}")
    print(f"{'  tiny optimizer.step (us)':28}{'':20}{med('on', 'hook_step_us'):+11.2f}")
    print(f"{'  a call of the idle hook (us)':28}{'':20}{med('on', 'hook_call_us'):11.3f}  (from a lambda, as timed)")
    print("per process, iteration us (off / on): " + ", ".join(
        f"{a['iteration_us']:.0f}/{b['iteration_us']:.0f}" for a, b in zip(results["off"], results["on"])))


if __name__ == "__main__":
    main()
