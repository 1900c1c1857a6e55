"""xxnpu op throughput against the CPU backend, measured in the same run.

    bazel run --config=opt //benchmarks:ops_benchmark -- [--reps 7]
    python benchmarks/ops_benchmark.py [--reps 7]   # with torch_xxnpu importable: the
                                                    # demo's .venv, or an installed wheel

Reports medians:
- the seed's add on [2560, 16, 8, 128] float32 (torch.ops.xxnpu.add vs CPU torch.add), also
  as a fraction of the machine's memory bandwidth measured here (a large tensor copy);
- a small-op loop (host-bound): 2000 adds of 64-element tensors, launches per second;
  eager on both backends, and on xxnpu also captured once as a graph and replayed
  (torch.xxnpu.graph: one submission per loop);
- a float32 1024x1024 matmul (both backends reach the same BLAS; xxnpu from its device thread).
Both backends use the same number of threads (torch.get_num_threads() for the CPU,
XXNPU_COMPUTE_THREADS, default: hardware threads, for the device).
"""
import argparse
import statistics
import time

import torch
import torch_xxnpu  # noqa: F401


def median_time(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=7)
    args = p.parse_args()
    shape = (2560, 16, 8, 128)
    nbytes = 4 * 2560 * 16 * 8 * 128

    a_cpu, b_cpu = torch.randn(shape), torch.randn(shape)
    out_cpu = torch.empty(shape)
    a, b = a_cpu.to("xxnpu"), b_cpu.to("xxnpu")
    out = torch.empty(shape, device="xxnpu")
    # Warm up: fault in the pages of every buffer on both sides.
    torch.add(a_cpu, b_cpu, out=out_cpu)
    torch.add(a, b, out=out)
    torch.ops.xxnpu.add(a, b)
    torch.xxnpu.synchronize()

    def cpu_add():
        torch.add(a_cpu, b_cpu, out=out_cpu)

    def xxnpu_add():
        torch.ops.xxnpu.add(a, b)
        torch.xxnpu.synchronize()

    def copy_bw():
        out_cpu.copy_(a_cpu)

    t_cpu = median_time(cpu_add, args.reps)
    t_dev = median_time(xxnpu_add, args.reps)
    t_copy = median_time(copy_bw, args.reps)
    bandwidth = 2 * nbytes / t_copy  # a copy reads and writes
    moved = 3 * nbytes  # add reads two tensors and writes one
    print(f"threads: cpu {torch.get_num_threads()}, xxnpu {torch.xxnpu.get_device_properties(0).multi_processor_count}")
    print(f"seed add {list(shape)} f32: cpu {t_cpu*1e3:.1f} ms, xxnpu {t_dev*1e3:.1f} ms, "
          f"xxnpu/cpu throughput {t_cpu / t_dev:.2f}x")
    print(f"  memory bandwidth (copy, this run): {bandwidth/1e9:.2f} GB/s; "
          f"xxnpu add achieves {moved / t_dev / 1e9:.2f} GB/s = {moved / t_dev / bandwidth:.2f} of it, "
          f"cpu add {moved / t_cpu / bandwidth:.2f}")

    n = 2000
    xs_cpu, ys_cpu = torch.randn(64), torch.randn(64)
    xs, ys = xs_cpu.to("xxnpu"), ys_cpu.to("xxnpu")

    def cpu_loop():
        for _ in range(n):
            torch.add(xs_cpu, ys_cpu)

    def dev_loop():
        for _ in range(n):
            torch.add(xs, ys)
        torch.xxnpu.synchronize()

    dev_loop()
    l_cpu = median_time(cpu_loop, args.reps)
    l_dev = median_time(dev_loop, args.reps)
    print(f"small-op loop ({n} x add of 64 floats): cpu {n/l_cpu/1e3:.1f} k ops/s, xxnpu {n/l_dev/1e3:.1f} k ops/s, "
          f"xxnpu/cpu {l_cpu / l_dev:.2f}x")

    # The same loop captured once; a replay queues all 2000 kernels as one command.
    graph = torch.xxnpu.XXNPUGraph()
    with torch.xxnpu.graph(graph):
        for _ in range(n):
            torch.add(xs, ys)

    def replay_loop():
        graph.replay()
        torch.xxnpu.synchronize()

    replay_loop()
    l_graph = median_time(replay_loop, args.reps)
    print(f"small-op loop graphed (1 replay of {n} adds): {n/l_graph/1e3:.1f} k ops/s, "
          f"{l_dev / l_graph:.2f}x eager xxnpu, {l_cpu / l_graph:.2f}x eager cpu")
    graph.reset()

    m_cpu, n_cpu = torch.randn(1024, 1024), torch.randn(1024, 1024)
    m_dev, n_dev = m_cpu.to("xxnpu"), n_cpu.to("xxnpu")
    r_cpu, r_dev = torch.empty(1024, 1024), torch.empty(1024, 1024, device="xxnpu")

    def cpu_mm():
        torch.mm(m_cpu, n_cpu, out=r_cpu)

    def dev_mm():
        torch.mm(m_dev, n_dev, out=r_dev)
        torch.xxnpu.synchronize()

    cpu_mm()
    dev_mm()
    mm_cpu = median_time(cpu_mm, args.reps)
    mm_dev = median_time(dev_mm, args.reps)
    flops = 2 * 1024**3
    print(f"matmul 1024x1024 f32: cpu {flops/mm_cpu/1e9:.1f} GFLOP/s, xxnpu {flops/mm_dev/1e9:.1f} GFLOP/s, "
          f"xxnpu/cpu {mm_cpu / mm_dev:.2f}x")


if __name__ == "__main__":
    main()
