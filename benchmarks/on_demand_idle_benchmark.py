"""What XXNPU_PROFILER_ON_DEMAND=1 costs a program while no capture is requested
(docs/profiler.md, "On-demand capture").

The variable is read when torch_xxnpu is imported, so each figure comes from a child
process started with or without it; the children alternate (off, on, off, on, ...) so
that the machine's load drifts over both alike. Each child times:

- a training loop (a 2-layer MLP on xxnpu, SGD, ``loss.item()`` per iteration, as a loop
  that logs its loss): median time per iteration over --iterations, after a warm-up;
- ``optimizer.step()`` of an SGD over one 1-element CPU tensor (a step that does almost
  nothing, so the global post hook's cost is not lost in it): median per call; in the
  children with the variable, also with our hook taken out of torch.optim's global hooks,
  interleaved in the same process (the hook's own cost, free of the processes' spread);
- ``torch.xxnpu.markers.step()``: median per call.

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
    gc.disable()
    try:
        times = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter_ns() - t0) / calls / 1e3)
        return statistics.median(times)
    finally:
        gc.enable()


def child(iterations):
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

    for _ in range(30):
        iteration()
    times = []
    gc.disable()
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        iteration()
        times.append((time.perf_counter_ns() - t0) / 1e3)
    gc.enable()

    tiny = torch.zeros(1, requires_grad=True)
    tiny.grad = torch.zeros(1)
    tiny_opt = torch.optim.SGD([tiny], lr=0.0)
    result = {
        "iteration_us": statistics.median(times),
        "optimizer_step_us": _per_call_us(tiny_opt.step, 2000),
        "marker_step_us": _per_call_us(torch.xxnpu.markers.step, 100000),
        "listening": any(t.name == "xxnpu-on-demand" for t in __import__("threading").enumerate()),
    }
    if result["listening"]:
        from torch.optim import optimizer as optim_module

        from torch_xxnpu.profiler.capture import agent

        hooks = optim_module._global_optimizer_post_hooks
        key = next(k for k, h in hooks.items() if h is agent._on_optimizer_step)
        with_hook, without = [], []
        for _ in range(7):
            with_hook.append(_per_call_us(tiny_opt.step, 2000, reps=1))
            del hooks[key]
            without.append(_per_call_us(tiny_opt.step, 2000, reps=1))
            hooks[key] = agent._on_optimizer_step
        result["hook_us"] = statistics.median(a - b for a, b in zip(with_hook, without))
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
    print(f"{'our post hook, same process':28}{'':20}{med('on', 'hook_us'):+11.2f}")
    print("per process, iteration us (off / on): " + ", ".join(
        f"{a['iteration_us']:.0f}/{b['iteration_us']:.0f}" for a, b in zip(results["off"], results["on"])))


if __name__ == "__main__":
    main()
