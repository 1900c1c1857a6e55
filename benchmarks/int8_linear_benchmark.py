"""The int8 weight-only linear (torch._weight_int8pack_mm) against the float linear it
replaces, on xxnpu and on the CPU, at decode and prefill shapes (docs/kernel-performance.md,
"int8 weight-only matmul").

    bazel run --config=opt //benchmarks:int8_linear_benchmark [-- --reps 7]
    python benchmarks/int8_linear_benchmark.py [--reps 7]

Per shape and dtype: the median time per call of _weight_int8pack_mm(x, w_int8, scales)
and of F.linear(x, w) with w the dequantised weight in the same dtype, on both backends.
The CPU's float32 _weight_int8pack_mm is a scalar loop and is timed only where it takes
under a second; K is a multiple of 64 throughout (torch 2.13's CPU bfloat16 kernel reads
past rows of other K).
"""
import argparse

import torch
import torch.nn.functional as F
import torch_xxnpu  # noqa: F401

from benchlib import per_call

SHAPES = [(4, 1024, 2048), (4, 4096, 4096), (64, 1024, 2048), (296, 4096, 4096)]  # M, K, N


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args(argv)
    torch.set_num_threads(2)
    sync = torch.xxnpu.synchronize
    print(f"medians of {args.reps}, us per call; int8 = _weight_int8pack_mm, float = F.linear on the dequantised weight")
    print(f"{'dtype':9} {'M':>4} {'K':>5} {'N':>5} | {'xxnpu int8':>11} {'xxnpu float':>11} {'int8/float':>10} |"
          f" {'cpu int8':>10} {'cpu float':>10} | {'xxnpu int8 vs cpu int8':>22}")
    for dtype in (torch.float32, torch.bfloat16):
        for m, k, n in SHAPES:
            g = torch.Generator().manual_seed(0)
            x = torch.randn(m, k, generator=g).to(dtype)
            w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=g)
            s = (torch.rand(n, generator=g) / 16).to(dtype)
            wf = (w.float() * s.float()[:, None]).to(dtype)
            xd, wd, sd, wfd = (t.to("xxnpu") for t in (x, w, s, wf))
            calls = max(2, int(2e8 // (m * k * n)))
            xi = per_call(lambda: torch._weight_int8pack_mm(xd, wd, sd), sync, calls, args.reps) * 1e6
            xf = per_call(lambda: F.linear(xd, wfd), sync, calls, args.reps) * 1e6
            slow_cpu = dtype == torch.float32 and m * k * n > 1e8
            ci = float("nan") if slow_cpu else per_call(lambda: torch._weight_int8pack_mm(x, w, s), lambda: None,
                                                        max(1, calls // 4), args.reps) * 1e6
            cf = per_call(lambda: F.linear(x, wf), lambda: None, calls, args.reps) * 1e6
            print(f"{str(dtype)[6:]:9} {m:4} {k:5} {n:5} | {xi:11.1f} {xf:11.1f} {xi / xf:10.2f} |"
                  f" {ci:10.1f} {cf:10.1f} | {ci / xi:21.2f}x", flush=True)


if __name__ == "__main__":
    main()
