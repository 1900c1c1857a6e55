"""torch.compile's C++ wrapper (cpp_wrapper=True) vs its Python wrapper, on xxnpu and the CPU
(docs/compile.md, "cpp_wrapper=True and AOTInductor").

The elementwise chain ((x + y) * 2).relu() - y.sigmoid() on --numel floats. One process
per (device, wrapper) case, each with a fresh Inductor cache and a throwaway compile first
(Dynamo/Inductor start-up stays out of the first call): the first call's time (compile
included), then the median of --reps calls (xxnpu calls end with a synchronize). The
compiled result is checked against eager before anything is timed.

    bazel run --config=opt //benchmarks:cpp_wrapper_benchmark -- [--reps 200] [--numel 1000] [--rounds 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def chain(x, y):
    return ((x + y) * 2).relu() - y.sigmoid()


def run_case(device: str, cpp_wrapper: bool, numel: int, reps: int) -> dict:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="xxnpu_cpp_wrapper_bench_")
    import torch
    import torch._inductor.config as inductor_config
    import torch_xxnpu  # noqa: F401

    def sync():
        if device == "xxnpu":
            torch.xxnpu.synchronize()

    torch.compile(lambda a: a + 1)(torch.randn(4, device=device))
    x, y = torch.randn(numel, device=device), torch.randn(numel, device=device)
    start = time.perf_counter()
    with inductor_config.patch({"cpp_wrapper": cpp_wrapper}):
        compiled = torch.compile(chain)
        out = compiled(x, y)
        sync()
    first = time.perf_counter() - start
    torch.testing.assert_close(out.cpu(), chain(x.cpu(), y.cpu()), rtol=1e-5, atol=1e-5)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        compiled(x, y)
        sync()
        times.append(time.perf_counter() - t)
    return {"first_s": first, "median_us": statistics.median(times) * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--numel", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2, help="each case this many times, interleaved")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        device, wrapper = args.case.split(",")
        print(json.dumps(run_case(device, wrapper == "cpp", args.numel, args.reps)))
        return
    cases = [(d, w) for d in ("xxnpu", "cpu") for w in ("python", "cpp")]
    results = {c: [] for c in cases}
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for _ in range(args.rounds):
        for device, wrapper in cases:
            line = subprocess.run(
                [sys.executable, __file__, "--case", f"{device},{wrapper}", "--reps", str(args.reps),
                 "--numel", str(args.numel)],
                check=True, capture_output=True, text=True,
            ).stdout.strip().splitlines()[-1]
            results[(device, wrapper)].append(json.loads(line))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"chain on {args.numel} floats; per process: first call (s), median of {args.reps} calls (us); rounds: {args.rounds}")
    print(f"{'device':6} {'wrapper':7} {'first call (s)':>24} {'steady (us)':>24}")
    for device, wrapper in cases:
        runs = results[(device, wrapper)]
        first = " / ".join(f"{r['first_s']:.2f}" for r in runs)
        steady = " / ".join(f"{r['median_us']:.0f}" for r in runs)
        print(f"{device:6} {wrapper:7} {first:>24} {steady:>24}")


if __name__ == "__main__":
    main()
