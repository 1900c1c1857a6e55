"""torch.compile on xxnpu vs eager xxnpu and compiled CPU (docs/compile.md, "Cost").

Two workloads: an elementwise chain on 1M floats (one fused kernel) and an MLP step
(256 -> 1024 -> 256, batch 64, forward + backward). For each device: the first call's time
(compile included; a fresh Inductor cache per run, Dynamo/Inductor imported beforehand),
then the per-call time of eager and compiled code.

    bazel run --config=opt //benchmarks:compile_benchmark
"""
import os
import tempfile
import time

os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="xxnpu_compile_bench_")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch._inductor.compile_fx  # noqa: E402,F401  (imports outside the timed first call)
import torch_xxnpu  # noqa: E402,F401

from benchlib import per_call  # noqa: E402


def chain(x, y):
    return ((x + y) * 2).relu() - y.sigmoid()


def main():
    rows = []
    for dev in ("cpu", "xxnpu"):
        sync = torch.xxnpu.synchronize if dev == "xxnpu" else (lambda: None)
        torch._dynamo.reset()
        x, y = torch.randn(1_000_000, device=dev), torch.randn(1_000_000, device=dev)
        compiled = torch.compile(chain)
        t0 = time.perf_counter()
        compiled(x, y)
        sync()
        first = time.perf_counter() - t0
        rows.append((f"elementwise chain 1M, {dev}", first, per_call(lambda: chain(x, y), sync, 5, 7),
                     per_call(lambda: compiled(x, y), sync, 5, 7)))

        torch.manual_seed(0)
        mlp = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).to(dev)
        batch = torch.randn(64, 256, device=dev)
        cmlp = torch.compile(mlp)
        t0 = time.perf_counter()
        cmlp(batch).square().mean().backward()
        sync()
        first = time.perf_counter() - t0
        rows.append((f"MLP step, {dev}", first,
                     per_call(lambda: mlp(batch).square().mean().backward(), sync, 3, 7),
                     per_call(lambda: cmlp(batch).square().mean().backward(), sync, 3, 7)))
    print(f"{'workload':32s} {'first call s':>12s} {'eager ms':>10s} {'compiled ms':>12s} {'speedup':>8s}")
    for name, first, eager, comp in rows:
        print(f"{name:32s} {first:12.1f} {eager * 1e3:10.3f} {comp * 1e3:12.3f} {eager / comp:8.2f}")


if __name__ == "__main__":
    main()
