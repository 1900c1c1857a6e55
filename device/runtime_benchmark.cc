// Benchmarks of the device runtime: launch enqueue cost, launch-to-start latency,
// empty-kernel throughput, copy bandwidth against plain memcpy, and what activity
// tracing adds per launch. Run: bazel run --config=opt //device:runtime_benchmark
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "device/activity_trace.h"
#include "device/clock.h"
#include "device/graph.h"
#include "device/runtime.h"
#include "device/test_util.h"

namespace xxnpu {
namespace {

using test_util::Check;

LaunchConfig EmptyConfig() {
  LaunchConfig cfg;
  cfg.name = "bench_empty";
  return cfg;
}

absl::Status EmptyBody(BlockRange) { return absl::OkStatus(); }

// Runs `step` once per benchmark iteration, draining the stream (untimed) every 4096
// steps so that launches never wait for a full ring.
template <typename Step>
void RunDrained(benchmark::State& state, xxnpuStream_t s, Step step) {
  int64_t n = 0;
  for (auto _ : state) {
    step();
    if (++n % 4096 == 0) {
      state.PauseTiming();
      Check(xxnpuStreamSynchronize(s));
      state.ResumeTiming();
    }
  }
  Check(xxnpuStreamSynchronize(s));
}

// Host-side cost of queueing one kernel (the device drains concurrently).
void BM_LaunchEnqueue(benchmark::State& state) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  const LaunchConfig cfg = EmptyConfig();
  RunDrained(state, s, [&] { Check(xxnpuLaunchKernel(cfg, EmptyBody, s)); });
  Check(xxnpuStreamDestroy(s));
}
BENCHMARK(BM_LaunchEnqueue);

// What a framework does around each launch, for the benchmark below: reference counting
// (atomic read-modify-writes, as on tensors' refcounts).
void FrameworkWork(std::atomic<int64_t>* refcounts) {
  for (int i = 0; i < 8; ++i) {
    refcounts[i].fetch_add(1, std::memory_order_relaxed);
    benchmark::DoNotOptimize(refcounts[i].fetch_sub(1, std::memory_order_acq_rel));
  }
}

// A launch between framework work (arg 1) or the framework work alone (arg 0): the
// difference is a launch's cost as a framework sees it. On x86 an atomic read-modify-
// write waits until the thread's earlier stores have reached the cache, so a launch whose
// stores miss (lines the device thread read) costs more here than in BM_LaunchEnqueue.
void BM_LaunchAmidHostWork(benchmark::State& state) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  const LaunchConfig cfg = EmptyConfig();
  std::atomic<int64_t> refcounts[8] = {};
  RunDrained(state, s, [&] {
    if (state.range(0)) Check(xxnpuLaunchKernel(cfg, EmptyBody, s));
    FrameworkWork(refcounts);
  });
  Check(xxnpuStreamDestroy(s));
}
BENCHMARK(BM_LaunchAmidHostWork)->Arg(0)->Arg(1);

// Same, with tracing on (arg: 1 = runtime calls, 2 = kernels, 3 = both, as a profiler
// does): the difference from BM_LaunchEnqueue is tracing's cost per launch.
void BM_LaunchEnqueueTraced(benchmark::State& state) {
  if (state.range(0) & 1) ActivityEnable(ActivityKind::kRuntime);
  if (state.range(0) & 2) ActivityEnable(ActivityKind::kKernel);
  xxnpuStream_t s = *xxnpuStreamCreate();
  const LaunchConfig cfg = EmptyConfig();
  std::vector<ActivityRecord> sink;
  int64_t n = 0;
  for (auto _ : state) {
    Check(xxnpuLaunchKernel(cfg, EmptyBody, s));
    if (++n % 4096 == 0) {
      state.PauseTiming();
      Check(xxnpuStreamSynchronize(s));
      sink.clear();
      ActivityCollect(&sink);
      state.ResumeTiming();
    }
  }
  Check(xxnpuStreamSynchronize(s));
  Check(xxnpuStreamDestroy(s));
  state.counters["dropped"] = static_cast<double>(ActivityTakeDroppedCount());
  ActivityDisableAll();
  ActivityClear();
}
BENCHMARK(BM_LaunchEnqueueTraced)->Arg(1)->Arg(2)->Arg(3);

// Time from the host's launch call to the kernel starting on an idle stream (the device
// thread asleep, as after any pause in launches).
void BM_LaunchToStart(benchmark::State& state) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  const LaunchConfig cfg = EmptyConfig();
  std::vector<double> latencies;
  for (auto _ : state) {
    std::atomic<int64_t> started{0};
    const int64_t t0 = NowNs();
    Check(xxnpuLaunchKernel(cfg, [&started](BlockRange) {
      started.store(NowNs());
      return absl::OkStatus();
    }, s));
    Check(xxnpuStreamSynchronize(s));
    latencies.push_back(static_cast<double>(started.load() - t0));
    state.SetIterationTime(static_cast<double>(started.load() - t0) * 1e-9);
  }
  std::sort(latencies.begin(), latencies.end());
  if (!latencies.empty()) {
    state.counters["p50_ns"] = latencies[latencies.size() / 2];
    state.counters["p90_ns"] = latencies[latencies.size() * 9 / 10];
  }
  Check(xxnpuStreamDestroy(s));
}
BENCHMARK(BM_LaunchToStart)->UseManualTime();

// Kernels completed per second, launch to completion, in batches of 1000.
void BM_EmptyKernelThroughput(benchmark::State& state) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  const LaunchConfig cfg = EmptyConfig();
  for (auto _ : state) {
    for (int i = 0; i < 1000; ++i) Check(xxnpuLaunchKernel(cfg, EmptyBody, s));
    Check(xxnpuStreamSynchronize(s));
  }
  state.SetItemsProcessed(state.iterations() * 1000);
  Check(xxnpuStreamDestroy(s));
}
BENCHMARK(BM_EmptyKernelThroughput);

// ---------------------------------------------------------------- graphs

// A graph of `nodes` empty kernels in a chain, captured on `s`.
xxnpuGraph_t CaptureEmptyChain(xxnpuStream_t s, int nodes) {
  const LaunchConfig cfg = EmptyConfig();
  Check(xxnpuStreamBeginCapture(s));
  for (int i = 0; i < nodes; ++i) Check(xxnpuLaunchKernel(cfg, EmptyBody, s));
  return *xxnpuStreamEndCapture(s);
}

// Host time of one xxnpuGraphLaunch of a graph of Arg nodes (the device draining
// concurrently): a replay is one submission whatever its size.
void BM_GraphLaunchEnqueue(benchmark::State& state) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  xxnpuGraph_t graph = CaptureEmptyChain(s, static_cast<int>(state.range(0)));
  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(graph);
  RunDrained(state, s, [&] { Check(xxnpuGraphLaunch(exec, s)); });
  Check(xxnpuGraphExecDestroy(exec));
  Check(xxnpuGraphDestroy(graph));
  Check(xxnpuStreamDestroy(s));
}
BENCHMARK(BM_GraphLaunchEnqueue)->Arg(1)->Arg(100);

// Nodes completed per second by replays of a 100-node graph, launch to completion, in
// batches of 10 replays (the eager counterpart is BM_EmptyKernelThroughput).
void BM_GraphReplayThroughput(benchmark::State& state) {
  constexpr int kNodes = 100;
  xxnpuStream_t s = *xxnpuStreamCreate();
  xxnpuGraph_t graph = CaptureEmptyChain(s, kNodes);
  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(graph);
  for (auto _ : state) {
    for (int i = 0; i < 10; ++i) Check(xxnpuGraphLaunch(exec, s));
    Check(xxnpuStreamSynchronize(s));
  }
  state.SetItemsProcessed(state.iterations() * 10 * kNodes);
  Check(xxnpuGraphExecDestroy(exec));
  Check(xxnpuGraphDestroy(graph));
  Check(xxnpuStreamDestroy(s));
}
BENCHMARK(BM_GraphReplayThroughput);

// Capturing 100 kernels into a graph and destroying it (per kernel: items).
void BM_GraphCapture100(benchmark::State& state) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  for (auto _ : state) Check(xxnpuGraphDestroy(CaptureEmptyChain(s, 100)));
  state.SetItemsProcessed(state.iterations() * 100);
  Check(xxnpuStreamDestroy(s));
}
BENCHMARK(BM_GraphCapture100);

// Instantiating a 100-node graph and destroying the executable.
void BM_GraphInstantiate(benchmark::State& state) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  xxnpuGraph_t graph = CaptureEmptyChain(s, 100);
  for (auto _ : state) Check(xxnpuGraphExecDestroy(*xxnpuGraphInstantiate(graph)));
  Check(xxnpuGraphDestroy(graph));
  Check(xxnpuStreamDestroy(s));
}
BENCHMARK(BM_GraphInstantiate);

constexpr int64_t kCopyBytes = int64_t{64} << 20;

// The machine's limit for the copies below: one memcpy of the same size between two
// host buffers that are already faulted in.
void BM_HostMemcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<char> a(n, 1), b(n, 2);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}
BENCHMARK(BM_HostMemcpy)->Arg(kCopyBytes)->UseRealTime();

// kind: 0 = HtoD from pinned, 1 = DtoH to pinned, 2 = DtoD.
void BM_DeviceCopy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  const int kind = static_cast<int>(state.range(1));
  char* pinned = static_cast<char*>(*xxnpuHostAlloc(n));
  void* d0 = *xxnpuMalloc(n);
  void* d1 = *xxnpuMalloc(n);
  std::memset(pinned, 1, n);
  Check(xxnpuMemcpy(d0, pinned, n, MemcpyKind::kHostToDevice));  // fault pages in
  Check(xxnpuMemcpy(d1, d0, n, MemcpyKind::kDeviceToDevice));
  for (auto _ : state) {
    if (kind == 0) Check(xxnpuMemcpyAsync(d0, pinned, n, MemcpyKind::kHostToDevice, nullptr));
    if (kind == 1) Check(xxnpuMemcpyAsync(pinned, d0, n, MemcpyKind::kDeviceToHost, nullptr));
    if (kind == 2) Check(xxnpuMemcpyAsync(d1, d0, n, MemcpyKind::kDeviceToDevice, nullptr));
    Check(xxnpuStreamSynchronize(nullptr));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
  state.SetLabel(kind == 0 ? "HtoD pinned" : kind == 1 ? "DtoH pinned" : "DtoD");
  Check(xxnpuFree(d0));
  Check(xxnpuFree(d1));
  Check(xxnpuFreeHost(pinned));
}
BENCHMARK(BM_DeviceCopy)->Args({kCopyBytes, 0})->Args({kCopyBytes, 1})->Args({kCopyBytes, 2})->UseRealTime();

// A kernel over 16 Mi floats (arg: 0 = memory-bound y = 2x + 1, 1 = compute-bound 32
// multiply-adds per element), for choosing XXNPU_COMPUTE_THREADS: run with 1 and 2.
void BM_KernelOverGrid(benchmark::State& state) {
  constexpr int64_t kN = int64_t{16} << 20;
  constexpr int64_t kBlock = 4096;
  const bool compute_bound = state.range(0) == 1;
  float* x = static_cast<float*>(*xxnpuMalloc(kN * sizeof(float)));
  float* y = static_cast<float*>(*xxnpuMalloc(kN * sizeof(float)));
  Check(xxnpuMemset(x, 0, kN * sizeof(float)));
  Check(xxnpuMemset(y, 0, kN * sizeof(float)));
  LaunchConfig cfg;
  cfg.name = compute_bound ? "bench_poly32" : "bench_axpb";
  cfg.grid = Dim3{static_cast<uint32_t>(kN / kBlock), 1, 1};
  cfg.bytes = 2 * kN * sizeof(float);
  cfg.flops = compute_bound ? 64 * kN : 2 * kN;
  for (auto _ : state) {
    Check(xxnpuLaunchKernel(cfg, [x, y, compute_bound](BlockRange r) {
      const float* in = DeviceView(x);
      float* out = DeviceView(y);
      for (int64_t i = r.begin * kBlock; i < r.end * kBlock; ++i) {
        float v = in[i];
        if (compute_bound) {
          float acc = v;
          for (int k = 0; k < 32; ++k) acc = acc * 0.999f + 0.5f;
          out[i] = acc;
        } else {
          out[i] = 2 * v + 1;
        }
      }
      return absl::OkStatus();
    }, nullptr));
    Check(xxnpuStreamSynchronize(nullptr));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(cfg.bytes));
  state.counters["compute_threads"] = xxnpuGetDeviceProperties(0)->compute_units;
  Check(xxnpuFree(x));
  Check(xxnpuFree(y));
}
BENCHMARK(BM_KernelOverGrid)->Arg(0)->Arg(1)->UseRealTime();

}  // namespace
}  // namespace xxnpu
