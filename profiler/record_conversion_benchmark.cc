// What the plugin's side of a capture's stop costs: converting runtime records into Kineto
// activities, and the metadata text torch asks each activity for once when it takes the
// trace over (TransferEvents::lookup) and again at export.
//
//   bazel run --config=opt //profiler:record_conversion_benchmark
//
// BM_ConvertLaunchKernelPairs: N ops' records (a launch on the host, its kernel on a
// stream, linked to an op), as a loop of small adds leaves them; items = activities.
// BM_KernelMetadata<...>: a kernel's fields added and its metadataJson() read once, with
// this plugin's TraceActivity and with Kineto's GenericTraceActivity (what it replaced).
#include <benchmark/benchmark.h>

#include <GenericTraceActivity.h>

#include <vector>

#include "profiler/record_conversion.h"
#include "profiler/trace_activity.h"

namespace xxnpu::profiler {
namespace {

std::vector<ActivityRecord> LaunchKernelPairs(int ops) {
  std::vector<ActivityRecord> records;
  records.reserve(2 * ops);
  for (int i = 0; i < ops; ++i) {
    const int64_t t = 1'000'000 + 2'000 * static_cast<int64_t>(i);
    ActivityRecord launch;
    launch.kind = ActivityKind::kRuntime;
    launch.name = "xxnpuLaunchKernel";
    launch.start_ns = t;
    launch.end_ns = t + 300;
    launch.correlation_id = 1 + i;
    launch.external_id[0] = 1 + i;
    launch.device = 0;
    launch.stream = 1;
    launch.thread_id = 77;
    ActivityRecord kernel = launch;
    kernel.kind = ActivityKind::kKernel;
    kernel.name = "xxnpu::add";
    kernel.start_ns = t + 800;
    kernel.end_ns = t + 1'100;
    kernel.thread_id = 1000;
    kernel.grid[0] = kernel.block[0] = 1;
    kernel.grid[1] = kernel.grid[2] = kernel.block[1] = kernel.block[2] = 1;
    kernel.bytes = 768;
    kernel.flops = 64;
    records.push_back(launch);
    records.push_back(kernel);
  }
  return records;
}

void BM_ConvertLaunchKernelPairs(benchmark::State& state) {
  const std::vector<ActivityRecord> records = LaunchKernelPairs(static_cast<int>(state.range(0)));
  libkineto::TraceSpan span(0, 0, "cpu");
  libkineto::GenericTraceActivity op(span, libkineto::ActivityType::CPU_OP, "aten::add");
  const LinkedActivityFn linked = [&op](int32_t) -> const libkineto::ITraceActivity* { return &op; };
  ConversionOptions options;
  size_t activities = 0;
  for (auto _ : state) {
    libkineto::CpuTraceBuffer buffer;
    activities += ConvertRecords(records, options, linked, &buffer).activities;
    benchmark::DoNotOptimize(buffer.activities.back().get());
    state.PauseTiming();  // freeing the buffer is torch's business, later
    buffer.activities.clear();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<int64_t>(activities));
}
BENCHMARK(BM_ConvertLaunchKernelPairs)->Arg(2000)->Arg(20000)->Unit(benchmark::kMicrosecond);

template <typename Activity>
void AddKernelFields(Activity& a);

template <>
void AddKernelFields(TraceActivity& a) {
  a.Add("device", int32_t{0});
  a.Add("stream", int32_t{1});
  a.Add("correlation", uint64_t{123456});
  a.AddJson("grid", "[1, 1, 1]");
  a.AddJson("block", "[1, 1, 1]");
  a.Add("bytes", int64_t{768});
  a.Add("flops", uint64_t{64});
  a.Add("achieved GB/s", 2.56);
  a.Add("achieved GFLOP/s", 0.213);
}

template <>
void AddKernelFields(libkineto::GenericTraceActivity& a) {
  a.addMetadata("device", 0);
  a.addMetadata("stream", 1);
  a.addMetadata("correlation", 123456);
  a.addMetadata("grid", "[1, 1, 1]");
  a.addMetadata("block", "[1, 1, 1]");
  a.addMetadata("bytes", 768);
  a.addMetadata("flops", 64);
  a.addMetadata("achieved GB/s", 2.56);
  a.addMetadata("achieved GFLOP/s", 0.213);
}

template <typename Activity>
void BM_KernelMetadata(benchmark::State& state) {
  libkineto::TraceSpan span(0, 0, "xxnpu");
  for (auto _ : state) {
    Activity a(span, libkineto::ActivityType::CONCURRENT_KERNEL, "xxnpu::add");
    AddKernelFields(a);
    const libkineto::ITraceActivity& base = a;
    std::string json = base.metadataJson();  // torch's TransferEvents::lookup
    benchmark::DoNotOptimize(json.data());
    benchmark::DoNotOptimize(base.getMetadataValue("hidden"));  // torch's isHiddenEvent
  }
}
BENCHMARK(BM_KernelMetadata<TraceActivity>);
BENCHMARK(BM_KernelMetadata<libkineto::GenericTraceActivity>);

}  // namespace
}  // namespace xxnpu::profiler
