"""Optimizer steps and an MLP training step on xxnpu against the CPU backend, one run, same
thread count, for each torch.optim implementation: default, foreach and fused.

    bazel run --config=opt //benchmarks:optimizer_benchmark -- [--reps 5] [--optimizers AdamW,SGD]

The MLP step is kernels_benchmark's (Linear-GELU-Linear 1024, batch 256, zero_grad +
forward + backward + step). The optimizer step alone runs on four parameters of 1M float32
elements each (weight, bias-sized and two more in kernels_benchmark: here four equal
ones), gradients set once. "default" is what torch.optim picks for the device: the
foreach path on xxnpu (as on CUDA), the per-tensor loop on the CPU. speed = CPU time /
xxnpu time of the same implementation; "vs cpu default" compares with the CPU's default.
"""
import argparse

import torch

import torch_xxnpu  # noqa: F401
from benchlib import per_call

IMPLS = {"default": {}, "foreach": {"foreach": True}, "fused": {"fused": True}}
OPTIMIZERS = {
    "AdamW": (torch.optim.AdamW, dict(lr=1e-4)),
    "Adam": (torch.optim.Adam, dict(lr=1e-4)),
    "SGD": (torch.optim.SGD, dict(lr=1e-3, momentum=0.9)),
}


def sync_for(device):
    return torch.xxnpu.synchronize if device == "xxnpu" else (lambda: None)


def mlp_step(device, cls, kw, impl_kw):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 1024)).to(device)
    opt = cls(model.parameters(), **kw, **impl_kw)
    x = torch.randn(256, 1024).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()

    return step


def optimizer_step(device, cls, kw, impl_kw, numel=1 << 20):
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(numel, generator=g).to(device)) for _ in range(4)]
    for p in params:
        p.grad = torch.randn(numel, generator=g).to(device)
    return cls(params, **kw, **impl_kw).step


def measure(make, reps, calls):
    out = {}
    for device in ("cpu", "xxnpu"):
        fn = make(device)
        out[device] = per_call(fn, sync_for(device), calls, reps)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--optimizers", default="AdamW", help="comma-separated of " + ",".join(OPTIMIZERS))
    args = p.parse_args(argv)
    threads = torch.xxnpu.get_device_properties(0).multi_processor_count
    torch.set_num_threads(threads)
    print(f"threads: cpu {torch.get_num_threads()}, xxnpu {threads}; medians of {args.reps}")
    print(f"{'what':<34} {'impl':<8} {'cpu ms':>8} {'xxnpu ms':>9} {'speed':>7} {'vs cpu default':>15}")
    for name in args.optimizers.split(","):
        cls, kw = OPTIMIZERS[name]
        for what, maker, calls in [(f"MLP training step, {name}", mlp_step, 5),
                                   (f"{name} step, 4 x 1M float32", optimizer_step, 10)]:
            cpu_default = None
            for impl, impl_kw in IMPLS.items():
                t = measure(lambda device: maker(device, cls, kw, impl_kw), args.reps, calls)
                if impl == "default":
                    cpu_default = t["cpu"]
                print(f"{what:<34} {impl:<8} {t['cpu'] * 1e3:>8.2f} {t['xxnpu'] * 1e3:>9.2f} "
                      f"{t['cpu'] / t['xxnpu']:>6.2f}x {cpu_default / t['xxnpu']:>14.2f}x", flush=True)


if __name__ == "__main__":
    main()
