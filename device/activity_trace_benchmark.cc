// Hot-path costs of device/activity_trace, which the runtime pays on every launch:
// an emit with the kind off (target ~1-2 ns) and on (target <= 100 ns), capturing the
// external correlation ids, and a push/pop pair around an op.
//
//   bazel run --config=opt //device:activity_trace_benchmark --
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//   (one command line)
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "device/activity_trace.h"

namespace xxnpu {
namespace {

ActivityRecord KernelRecord() {
  ActivityRecord r;
  r.kind = ActivityKind::kKernel;
  r.name = "bench_kernel";
  r.device = 0;
  r.stream = 1;
  r.grid[0] = 128;
  r.block[0] = 256;
  r.bytes = 1 << 20;
  return r;
}

void BM_EmitDisabled(benchmark::State& state) {
  ActivityDisableAll();
  ActivityRecord r = KernelRecord();
  int64_t t = 0;
  for (auto _ : state) {
    r.start_ns = ++t;
    ActivityRecordEmit(r);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_EmitDisabled);

void BM_EmitEnabled(benchmark::State& state) {
  // Emptied well before it fills, so every timed emit is a real write, never a drop.
  constexpr int64_t kRing = 65536;
  constexpr int64_t kClearEvery = kRing / 2;
  ActivitySetBufferRecords(kRing);
  ActivityDisableAll();
  ActivityClear();
  ActivityEnable(ActivityKind::kKernel);
  ActivityRecord r = KernelRecord();
  int64_t t = 0;
  int64_t since_clear = 0;
  for (auto _ : state) {
    r.start_ns = ++t;
    r.correlation_id = static_cast<uint64_t>(t);
    ActivityRecordEmit(r);
    benchmark::ClobberMemory();
    if (++since_clear == kClearEvery) {
      state.PauseTiming();
      ActivityClear();
      since_clear = 0;
      state.ResumeTiming();
    }
  }
  ActivityDisableAll();
  state.counters["dropped"] = static_cast<double>(ActivityTakeDroppedCount());
  ActivityClear();
}
BENCHMARK(BM_EmitEnabled);

void BM_CaptureExternalIds(benchmark::State& state) {
  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kDefault, 41);
  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kUser, 42);
  ActivityRecord r;
  for (auto _ : state) {
    ActivityCaptureExternalIds(&r);
    benchmark::DoNotOptimize(r.external_id);
    benchmark::ClobberMemory();
  }
  ActivityPopExternalCorrelationId(ExternalCorrelationKind::kUser);
  ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault);
}
BENCHMARK(BM_CaptureExternalIds);

void BM_PushPopExternalId(benchmark::State& state) {
  uint64_t id = 0;
  for (auto _ : state) {
    ActivityPushExternalCorrelationId(ExternalCorrelationKind::kDefault, ++id);
    benchmark::DoNotOptimize(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault));
  }
}
BENCHMARK(BM_PushPopExternalId);

}  // namespace
}  // namespace xxnpu
