"""Elementwise ops on non-contiguous layouts against the CPU backend.

kernels_benchmark.py times contiguous tensors only; this times what slicing, striding and
broadcasting give an elementwise kernel (docs/kernel-performance.md, "Not in the suite"):
short rows of a wider tensor, every third element, interleaved halves, a transposed view,
a bias broadcast over short rows. float32, both backends on the same thread count, the
CPU's outputs kept in memory as xxnpu's caching allocator keeps them (kernels_benchmark's
reuse_cpu_memory). Medians of --reps batches; speed = CPU time / xxnpu time.

    python benchmarks/layouts_benchmark.py [--reps 7] [--threads 2]
"""
import argparse
import sys
from pathlib import Path

import torch
import torch_xxnpu  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import per_call  # noqa: E402
from kernels_benchmark import reuse_cpu_memory  # noqa: E402


def cases(device):
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device)

    narrow, wide, tall = randn(65536, 8), randn(65536, 64), randn(65536, 260)
    big = randn(1024, 4096)
    rows4, bias = randn(65536, 4), randn(4)
    return {
        "tanh, [65536, 4] slice of [65536, 8]": lambda: torch.tanh(narrow[:, :4]),
        "tanh, [65536, 4] slice of [65536, 64]": lambda: torch.tanh(wide[:, :4]),
        "tanh, [65536, 256] slice of [65536, 260]": lambda: torch.tanh(tall[:, :256]),
        "exp, x[:, ::3] of [65536, 64]": lambda: torch.exp(wide[:, ::3]),
        "sigmoid, [1024, 4096].t()": lambda: torch.sigmoid(big.t()),
        "x > 0, [65536, 4] slice": lambda: wide[:, :4] > 0,
        "add, x[:, ::2] + x[:, 1::2] of [1024, 4096]": lambda: big[:, ::2] + big[:, 1::2],
        "add, [65536, 4] + bias [4]": lambda: rows4 + bias,
        "mul, two [65536, 4] slices": lambda: wide[:, :4] * wide[:, 8:12],
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=7, help="batches timed (the median is reported)")
    p.add_argument("--calls", type=int, default=50, help="calls per batch")
    p.add_argument("--threads", type=int, default=2, help="the CPU's intra-op threads (xxnpu: XXNPU_COMPUTE_THREADS)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    if not reuse_cpu_memory():
        print("warning: mallopt unavailable; the CPU's outputs are page-faulted afresh per call", file=sys.stderr)
    units = torch.xxnpu.get_device_properties(0).multi_processor_count
    print(f"threads: cpu {torch.get_num_threads()}, xxnpu {units}; medians of {args.reps} x {args.calls} calls")
    timings = {}
    for device, sync in (("cpu", lambda: None), ("xxnpu", torch.xxnpu.synchronize)):
        timings[device] = {name: per_call(fn, sync, args.calls, args.reps) for name, fn in cases(device).items()}
    print(f"{'case (float32)':46s} {'cpu us':>9s} {'xxnpu us':>9s} {'speed':>7s}")
    for name, cpu_s in timings["cpu"].items():
        xxnpu_s = timings["xxnpu"][name]
        print(f"{name:46s} {cpu_s * 1e6:9.1f} {xxnpu_s * 1e6:9.1f} {cpu_s / xxnpu_s:6.2f}x")


if __name__ == "__main__":
    main()
