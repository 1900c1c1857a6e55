// A tour of the torch-free xxnpu runtime (//device targets only): allocate device
// memory, copy to it, launch a kernel on a stream, time it with events, copy back, and
// print the activity records a profiler would receive.
//
//   bazel run //examples:device_runtime_tour
#include <cstdio>
#include <vector>

#include "device/activity_trace.h"
#include "device/runtime.h"

namespace {

#define CHECK_OK(expr)                                                        \
  do {                                                                        \
    absl::Status s_ = (expr);                                                 \
    if (!s_.ok()) {                                                           \
      std::fprintf(stderr, "%s failed: %s\n", #expr, s_.ToString().c_str()); \
      return 1;                                                               \
    }                                                                         \
  } while (0)

}  // namespace

int main() {
  using namespace xxnpu;
  for (ActivityKind k : {ActivityKind::kKernel, ActivityKind::kMemcpy, ActivityKind::kRuntime,
                         ActivityKind::kSynchronization, ActivityKind::kMemory}) {
    ActivityEnable(k);
  }
  auto props = xxnpuGetDeviceProperties(0);
  CHECK_OK(props.status());
  std::printf("device 0: %s, %zu MiB, %d compute threads\n", props->name.c_str(), props->total_memory >> 20,
              props->compute_units);

  constexpr int kN = 1 << 20;
  std::vector<float> x(kN), y(kN);
  for (int i = 0; i < kN; ++i) x[i] = static_cast<float>(i);

  auto dx = xxnpuMalloc(kN * sizeof(float));
  auto dy = xxnpuMalloc(kN * sizeof(float));
  CHECK_OK(dx.status());
  CHECK_OK(dy.status());
  auto stream = xxnpuStreamCreate();
  auto start = xxnpuEventCreate();
  auto stop = xxnpuEventCreate();
  CHECK_OK(stream.status());
  CHECK_OK(start.status());
  CHECK_OK(stop.status());

  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kDefault, 1);  // "op 1"
  CHECK_OK(xxnpuMemcpyAsync(*dx, x.data(), kN * sizeof(float), MemcpyKind::kHostToDevice, *stream));
  CHECK_OK(xxnpuEventRecord(*start, *stream));
  // y = 2x + 1, 256 elements per block; the device splits the blocks over its threads.
  LaunchConfig cfg;
  cfg.name = "axpb_f32";
  cfg.grid = Dim3{kN / 256, 1, 1};
  cfg.block = Dim3{256, 1, 1};
  cfg.bytes = 2 * kN * sizeof(float);
  cfg.flops = 2 * kN;
  const float* in = static_cast<const float*>(*dx);
  float* out = static_cast<float*>(*dy);
  CHECK_OK(xxnpuLaunchKernel(cfg, [in, out](BlockRange r) {
    const float* src = DeviceView(in);
    float* dst = DeviceView(out);
    for (int64_t i = r.begin * 256; i < r.end * 256; ++i) dst[i] = 2 * src[i] + 1;
    return absl::OkStatus();
  }, *stream));
  CHECK_OK(xxnpuEventRecord(*stop, *stream));
  CHECK_OK(xxnpuMemcpyAsync(y.data(), *dy, kN * sizeof(float), MemcpyKind::kDeviceToHost, *stream));
  ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault);
  CHECK_OK(xxnpuStreamSynchronize(*stream));

  for (int i = 0; i < kN; ++i) {
    if (y[i] != 2 * x[i] + 1) {
      std::fprintf(stderr, "wrong result at %d: %f\n", i, y[i]);
      return 1;
    }
  }
  auto ms = xxnpuEventElapsedTime(*start, *stop);
  CHECK_OK(ms.status());
  std::printf("axpb_f32 over %d floats: %.3f ms (device events), result ok\n", kN, *ms);

  CHECK_OK(xxnpuFree(*dx));
  CHECK_OK(xxnpuFree(*dy));
  CHECK_OK(xxnpuEventDestroy(*start));
  CHECK_OK(xxnpuEventDestroy(*stop));
  CHECK_OK(xxnpuStreamDestroy(*stream));

  std::vector<ActivityRecord> records;
  ActivityCollect(&records);
  std::printf("%zu activity records:\n", records.size());
  const int64_t t0 = records.empty() ? 0 : records.front().start_ns;
  for (const auto& r : records) {
    std::printf("  %-15s %-26s +%9.3f us  dur %8.3f us  dev %2d stream %2d corr %3llu op %llu",
                ActivityKindName(r.kind), r.name, (r.start_ns - t0) / 1e3, (r.end_ns - r.start_ns) / 1e3, r.device,
                r.stream, static_cast<unsigned long long>(r.correlation_id),
                static_cast<unsigned long long>(r.external_id[0]));
    if (r.bytes != 0) std::printf("  bytes %lld", static_cast<long long>(r.bytes));
    std::printf("\n");
  }
  return 0;
}
