"""all_reduce bus bandwidth: xxccl on xxnpu tensors vs Gloo on CPU tensors of the same
sizes, in the same run and the same process group ("cpu:gloo,xxnpu:xxccl").

    bazel run --config=opt //benchmarks:allreduce_benchmark -- [--world 2] [--iters 20]
        [--sizes 4K,64K,1M,16M,64M] [--transport auto|gloo] [--staging] [--no-check-shapes]

Bus bandwidth as nccl-tests defines it: bytes * 2 (n - 1) / n / time. Each figure is
the median over iterations of one all_reduce each, timed from the call until the result
is usable on the host (xxnpu: after torch.xxnpu.synchronize()).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta

import torch.multiprocessing as mp


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def worker(rank, world, store_path, sizes, iters, queue):
    import torch
    import torch.distributed as dist

    import torch_xxnpu  # noqa: F401

    torch.xxnpu.set_device(0)
    store = dist.FileStore(store_path, world)
    dist.init_process_group("cpu:gloo,xxnpu:xxccl", store=store, rank=rank, world_size=world,
                            timeout=timedelta(seconds=120))
    rows = []
    for nbytes in sizes:
        n = nbytes // 4
        tensors = {"cpu": torch.ones(n), "xxnpu": torch.ones(n, device="xxnpu")}
        for t in tensors.values():
            for _ in range(2):  # warm-up: connections, allocator, first touch
                dist.all_reduce(t)
        torch.xxnpu.synchronize()
        samples = {"cpu": [], "xxnpu": []}
        for i in range(iters):
            # Interleaved, alternating which goes first: load from other processes on the
            # machine hits both backends alike.
            for device in ("cpu", "xxnpu") if i % 2 == 0 else ("xxnpu", "cpu"):
                dist.barrier(device_ids=[0])  # start together (same for both devices)
                start = time.perf_counter()
                dist.all_reduce(tensors[device])
                if device == "xxnpu":
                    torch.xxnpu.synchronize()
                samples[device].append(time.perf_counter() - start)
        rows.append((nbytes, statistics.median(samples["cpu"]), statistics.median(samples["xxnpu"])))
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--sizes", default="4K,64K,1M,16M,64M")
    ap.add_argument("--transport", default="auto", choices=["auto", "gloo"],
                    help="XXCCL_TRANSPORT: auto (shared memory between the ranks of this host) or gloo")
    ap.add_argument("--staging", action="store_true", help="XXCCL_STAGING=1: copy through host buffers")
    ap.add_argument("--no-check-shapes", action="store_true", help="XXCCL_CHECK_SHAPES=0")
    args = ap.parse_args()
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    os.environ["XXCCL_TRANSPORT"] = args.transport
    os.environ["XXCCL_STAGING"] = "1" if args.staging else "0"
    os.environ["XXCCL_CHECK_SHAPES"] = "0" if args.no_check_shapes else "1"
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(args.world, os.path.join(tmp, "store"), sizes, args.iters, queue),
                 nprocs=args.world, join=True)
    rows = queue.get()
    factor = 2 * (args.world - 1) / args.world
    print(f"all_reduce, {args.world} ranks, median of {args.iters}; transport={args.transport} "
          f"staging={args.staging} check_shapes={not args.no_check_shapes}")
    print(f"{'bytes':>10} {'gloo cpu us':>12} {'xxccl us':>10} {'gloo GB/s':>10} {'xxccl GB/s':>11} {'ratio':>6}")
    for nbytes, t_cpu, t_x in rows:
        bw_cpu, bw_x = nbytes * factor / t_cpu / 1e9, nbytes * factor / t_x / 1e9
        print(f"{nbytes:>10} {t_cpu * 1e6:>12.1f} {t_x * 1e6:>10.1f} {bw_cpu:>10.3f} {bw_x:>11.3f} {bw_x / bw_cpu:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
