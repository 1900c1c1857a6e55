// Benchmarks of the caching allocator against the raw runtime: one alloc + free pair of
// 4 KiB, 1 MiB and 32 MiB on the default stream, through a CachingAllocator on the real
// (simulated) device versus xxnpuMalloc + xxnpuFree. The target is <= 200 ns per cached
// pair and >= 20x faster than uncached.
// Run (one line):
//   bazel run --config=opt //device:caching_allocator_benchmark --
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "device/caching_allocator.h"
#include "device/runtime.h"
#include "device/runtime_allocator_backend.h"
#include "device/test_util.h"

namespace xxnpu {
namespace {

using test_util::Check;

void* CheckPtr(absl::StatusOr<void*> p) {
  Check(p.status());
  return *p;
}

CachingAllocator& Allocator() {
  // One allocator for the process, as the framework has one per device. Leaked on
  // purpose: it must not outlive the runtime in static destruction.
  static CachingAllocator* alloc =
      new CachingAllocator(std::make_unique<RuntimeAllocatorBackend>(0));
  return *alloc;
}

// The steady state of a framework: the size was allocated before, the block is cached.
void BM_CachedAllocFree(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  CachingAllocator& alloc = Allocator();
  Check(alloc.Free(CheckPtr(alloc.Allocate(bytes))));  // warm the cache
  for (auto _ : state) {
    void* p = CheckPtr(alloc.Allocate(bytes));
    benchmark::DoNotOptimize(p);
    Check(alloc.Free(p));
  }
  state.SetLabel("caching allocator");
}
BENCHMARK(BM_CachedAllocFree)->Arg(4 << 10)->Arg(1 << 20)->Arg(32 << 20);

// Several blocks live at once (splits and merges of a busy small segment).
void BM_CachedAllocFreeBatch16(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  CachingAllocator& alloc = Allocator();
  void* ptrs[16];
  for (auto _ : state) {
    for (void*& p : ptrs) p = CheckPtr(alloc.Allocate(bytes));
    for (void* p : ptrs) Check(alloc.Free(p));
  }
  state.SetItemsProcessed(state.iterations() * 16);
}
BENCHMARK(BM_CachedAllocFreeBatch16)->Arg(4 << 10);

// The same pair through the runtime: a device allocation, and a free that waits for the
// device (as cudaFree does).
void BM_UncachedAllocFree(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = CheckPtr(xxnpuMalloc(bytes));
    benchmark::DoNotOptimize(p);
    Check(xxnpuFree(p));
  }
  state.SetLabel("xxnpuMalloc + xxnpuFree");
}
BENCHMARK(BM_UncachedAllocFree)->Arg(4 << 10)->Arg(1 << 20)->Arg(32 << 20);

// Four threads sharing one allocator (the mutex under contention), each on its own
// stream key.
void BM_CachedAllocFreeThreads(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  CachingAllocator& alloc = Allocator();
  xxnpuStream_t key = reinterpret_cast<xxnpuStream_t>(uintptr_t{0x1000} +
                                                      static_cast<uintptr_t>(state.thread_index()));
  // Fake stream keys are fine here: no RecordStream, so no marker is ever recorded on
  // them; they only select a pool.
  for (auto _ : state) {
    void* p = CheckPtr(alloc.Allocate(bytes, key));
    benchmark::DoNotOptimize(p);
    Check(alloc.Free(p));
  }
}
BENCHMARK(BM_CachedAllocFreeThreads)->Arg(4 << 10)->Threads(4)->UseRealTime();

}  // namespace
}  // namespace xxnpu
