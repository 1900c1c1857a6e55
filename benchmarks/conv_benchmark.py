"""Convolutions on xxnpu (ops/conv_ops.cc: im2col + bmm + col2im from xxnpu kernels) against
the CPU backend (oneDNN), same thread count, one run (docs/kernel-performance.md,
"Convolutions").

    bazel run --config=opt //benchmarks:conv_benchmark -- [--reps 5] [--dtypes float32,bfloat16]
    python benchmarks/conv_benchmark.py [--reps 5]

For each layer (input bytes from KB to tens of MB: a small CNN's layers, ResNet-50's 3x3,
1x1, strided and depthwise layers, a conv_transpose and a conv1d) the median time per call
of the forward and of forward + backward (gradients of input, weight and bias) on both
backends, and the speed (CPU time / xxnpu time). xxnpu's times include reaching the device
and synchronising. The results are checked against the CPU first.
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
import torch_xxnpu  # noqa: F401

from benchlib import per_call

# name, function, input shape, weight shape, kwargs
LAYERS = [
    ("small 3x3, 16->16 @32x32, batch 8", F.conv2d, (8, 16, 32, 32), (16, 16, 3, 3), dict(padding=1)),
    ("resnet 3x3, 64->64 @56x56, batch 8", F.conv2d, (8, 64, 56, 56), (64, 64, 3, 3), dict(padding=1)),
    ("resnet 1x1, 256->64 @56x56, batch 8", F.conv2d, (8, 256, 56, 56), (64, 256, 1, 1), {}),
    ("resnet 3x3 stride 2, 128->128 @28x28, batch 8", F.conv2d, (8, 128, 28, 28), (128, 128, 3, 3),
     dict(stride=2, padding=1)),
    ("depthwise 3x3, 128 @28x28, batch 8", F.conv2d, (8, 128, 28, 28), (128, 1, 3, 3), dict(padding=1, groups=128)),
    ("stem 7x7 stride 2, 3->64 @224x224, batch 2", F.conv2d, (2, 3, 224, 224), (64, 3, 7, 7),
     dict(stride=2, padding=3)),
    ("conv_transpose 4x4 stride 2, 64->32 @32x32, batch 8", F.conv_transpose2d, (8, 64, 32, 32), (64, 32, 4, 4),
     dict(stride=2, padding=1)),
    ("conv1d 5, 256->256 @1024, batch 4", F.conv1d, (4, 256, 1024), (256, 256, 5), dict(padding=2)),
]


def _sync(dev):
    return torch.xxnpu.synchronize if dev == "xxnpu" else (lambda: None)


def bench(fn, xs, ws, kwargs, dtype, reps):
    torch.manual_seed(0)
    x, w = torch.randn(xs).to(dtype), torch.randn(ws).to(dtype) * 0.1
    out_ch = ws[1] * kwargs.get("groups", 1) if fn is F.conv_transpose2d else ws[0]
    b = torch.randn(out_ch).to(dtype)
    times, outs = {}, {}
    for dev in ("cpu", "xxnpu"):
        xd, wd, bd = (t.to(dev).requires_grad_() for t in (x, w, b))
        outs[dev] = fn(xd, wd, bd, **kwargs).detach().cpu().float()
        g = torch.ones_like(fn(xd, wd, bd, **kwargs))

        def fwd():
            with torch.no_grad():
                fn(xd, wd, bd, **kwargs)

        def fwd_bwd():
            xd.grad = wd.grad = bd.grad = None
            fn(xd, wd, bd, **kwargs).backward(g)

        calls = 3
        times[dev] = (per_call(fwd, _sync(dev), calls, reps), per_call(fwd_bwd, _sync(dev), calls, reps))
    tol = 1e-3 if dtype == torch.float32 else 5e-2
    err = ((outs["xxnpu"] - outs["cpu"]).abs().max() / outs["cpu"].abs().max().clamp_min(1)).item()
    if err > tol:
        raise AssertionError(f"xxnpu differs from the CPU: max error {err:.2e} (relative to the output's max)")
    return times


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--dtypes", default="float32,bfloat16")
    args = p.parse_args(argv)
    threads = torch.xxnpu.get_device_properties(0).multi_processor_count
    torch.set_num_threads(threads)
    print(f"CPU threads = xxnpu compute threads = {threads}; medians of {args.reps}; speed = CPU time / xxnpu time")
    print(f"{'layer':52s} {'dtype':9s} {'in MB':>6s} {'fwd cpu ms':>11s} {'fwd xxnpu':>10s} {'speed':>6s} "
          f"{'f+b cpu ms':>11s} {'f+b xxnpu':>10s} {'speed':>6s}")
    speeds = []
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for name, fn, xs, ws, kwargs in LAYERS:
            t = bench(fn, xs, ws, kwargs, dtype, args.reps)
            mb = torch.Size(xs).numel() * dtype.itemsize / 2**20
            sf, sb = t["cpu"][0] / t["xxnpu"][0], t["cpu"][1] / t["xxnpu"][1]
            speeds += [sf, sb]
            print(f"{name:52s} {dtype_name:9s} {mb:6.2f} {t['cpu'][0] * 1e3:11.3f} {t['xxnpu'][0] * 1e3:10.3f} "
                  f"{sf:5.2f}x {t['cpu'][1] * 1e3:11.3f} {t['xxnpu'][1] * 1e3:10.3f} {sb:5.2f}x", flush=True)
    print(f"median speed over {len(speeds)} rows: {statistics.median(speeds):.2f}x (min {min(speeds):.2f}x, "
          f"max {max(speeds):.2f}x)")


if __name__ == "__main__":
    main()
