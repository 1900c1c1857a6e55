// The runtime's activity records, and the Kineto activities converted from them, against
// what the kernels themselves observe: the C++ half of testing/profiler/accuracy_test.py
// (which measures the whole path through torch's trace and key_averages).
//
// A kernel body here writes its own stamps into host memory, read from the records' clock
// (TraceClockNow): the simulator runs bodies in this process, as a real chip's kernel could
// write a mapped host buffer. Those stamps are the truth; the records are what the profiler
// shows. Both are converted to ns by one monotonic function, as the plugin converts a
// capture, so every order below holds in ns exactly when it holds in ticks.
//
// What must hold exactly, being causal order on one clock:
//   record start <= body start <= body end <= record end                  (kernels)
//   activity == record to the nanosecond, on the (device, stream) row      (conversion)
//   A's body end <= copy start, copy end <= B's body start  (a copy between stamped kernels)
//   A's body end <= wait end <= B's body start              (a stream waiting for A's event)
// and, with room for a loaded shared machine, the dispatch into a body is small.
#include <GenericTraceActivity.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "device/activity_trace.h"
#include "device/clock.h"
#include "device/runtime.h"
#include "gtest/gtest.h"
#include "profiler/record_conversion.h"

namespace xxnpu::profiler {
namespace {

using libkineto::ActivityType;

constexpr const char* kTimed = "accuracy::timed";

struct Stamps {
  int64_t start = 0;
  int64_t end = 0;
};

// Kernel `index` (carried in LaunchConfig::bytes, which the record keeps, so its record
// can be found) spins for spin_ns and stamps its body's start and end.
void LaunchTimed(xxnpuStream_t stream, uint64_t index, int64_t spin_ns, Stamps* out) {
  LaunchConfig cfg;
  cfg.name = kTimed;
  cfg.bytes = index;  // far below the parallel threshold: one block on one thread
  ASSERT_TRUE(xxnpuLaunchKernel(
                  cfg,
                  [out, spin_ns](BlockRange) {
                    const int64_t start = TraceClockNow();
                    const int64_t start_ns = NowNs();
                    while (NowNs() - start_ns < spin_ns) {
                    }
                    out->start = start;
                    out->end = TraceClockNow();
                    return absl::OkStatus();
                  },
                  stream)
                  .ok());
}

// A kernel that holds its stream until the host opens the gate: a wait that the other
// stream must really do, whatever the scheduling.
void LaunchGate(xxnpuStream_t stream, const std::atomic<bool>* open) {
  LaunchConfig cfg;
  cfg.name = "accuracy::gate";
  ASSERT_TRUE(xxnpuLaunchKernel(
                  cfg,
                  [open](BlockRange) {
                    while (!open->load()) std::this_thread::sleep_for(std::chrono::microseconds(20));
                    return absl::OkStatus();
                  },
                  stream)
                  .ok());
}

int64_t Median(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(ProfilerAccuracyTest, RecordsBracketWhatKernelsObserveAndConversionKeepsEveryNanosecond) {
  ASSERT_GE(*xxnpuGetDeviceCount(), 2);
  constexpr int kPerDevice = 40;
  constexpr size_t kCopyBytes = 1 << 20;
  std::vector<Stamps> stamps(2 * kPerDevice + 3);  // indices 1..2*kPerDevice, then A and B
  std::vector<void*> buffers;
  std::vector<xxnpuStream_t> side(2);
  for (int d = 0; d < 2; ++d) {
    ASSERT_TRUE(xxnpuSetDevice(d).ok());
    side[d] = *xxnpuStreamCreate();
    for (int i = 0; i < 2; ++i) buffers.push_back(*xxnpuMalloc(kCopyBytes));
  }
  // Stream threads start at their first command: not inside the measurement.
  for (int d = 0; d < 2; ++d) {
    ASSERT_TRUE(xxnpuSetDevice(d).ok());
    Stamps warm;
    LaunchTimed(nullptr, 0, 0, &warm);
    LaunchTimed(side[d], 0, 0, &warm);
    ASSERT_TRUE(xxnpuDeviceSynchronize().ok());
  }

  const std::vector<ActivityKind> kinds = {ActivityKind::kKernel, ActivityKind::kMemcpy, ActivityKind::kRuntime,
                                           ActivityKind::kSynchronization};
  ActivityClear();
  for (ActivityKind k : kinds) ActivityEnable(k);
  const TraceClockPair window_start_clock = MeasureTraceClockPair();

  // Timed kernels of 20-200 us on both devices' default streams; every fifth pair has a
  // device-to-device copy between its two kernels.
  uint64_t seed = 12345;
  auto spin = [&seed] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int64_t>(20'000 + (seed >> 33) % 180'000);
  };
  struct Bracket {
    uint64_t a, b;  // the kernels before and after (indices)
  };
  std::vector<Bracket> copies;
  uint64_t index = 1;
  for (int i = 0; i < kPerDevice; ++i) {
    for (int d = 0; d < 2; ++d) {
      ASSERT_TRUE(xxnpuSetDevice(d).ok());
      LaunchTimed(nullptr, index, spin(), &stamps[index]);
      if (i % 5 == 1) {
        copies.push_back({index, index + 2});  // the next kernel on this device follows it
        ASSERT_TRUE(xxnpuMemcpyAsync(buffers[2 * d + 1], buffers[2 * d], kCopyBytes, MemcpyKind::kDeviceToDevice,
                                     nullptr)
                        .ok());
      }
      ++index;
    }
  }
  ASSERT_TRUE(xxnpuSetDevice(0).ok());
  ASSERT_TRUE(xxnpuDeviceSynchronize().ok());
  ASSERT_TRUE(xxnpuSetDevice(1).ok());
  ASSERT_TRUE(xxnpuDeviceSynchronize().ok());

  // A cross-device wait: A (on xxnpu:1, held by a gate) records an event that xxnpu:0's
  // side stream waits for before B. The host opens the gate only once the side stream has
  // passed the event just before its wait, and 2 ms later (its thread may lose its core in
  // between on a busy machine), so the wait is really done.
  std::atomic<bool> open{false};
  const uint64_t a = index++, b = index++;
  ASSERT_TRUE(xxnpuSetDevice(1).ok());
  xxnpuEvent_t after_a = *xxnpuEventCreate();
  LaunchGate(side[1], &open);
  LaunchTimed(side[1], a, 100'000, &stamps[a]);
  ASSERT_TRUE(xxnpuEventRecord(after_a, side[1]).ok());
  ASSERT_TRUE(xxnpuSetDevice(0).ok());
  xxnpuEvent_t reached = *xxnpuEventCreate();
  ASSERT_TRUE(xxnpuEventRecord(reached, side[0]).ok());
  ASSERT_TRUE(xxnpuStreamWaitEvent(side[0], after_a).ok());
  LaunchTimed(side[0], b, 50'000, &stamps[b]);
  ASSERT_TRUE(xxnpuEventSynchronize(reached).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  open.store(true);
  ASSERT_TRUE(xxnpuStreamSynchronize(side[0]).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(side[1]).ok());

  for (ActivityKind k : kinds) ActivityDisable(k);
  const TraceClockPair window_end_clock = MeasureTraceClockPair();
  std::vector<ActivityRecord> records;
  ActivityCollectTraceClock(&records);
  EXPECT_EQ(ActivityTakeDroppedCount(), 0u);
  // Records and stamps to ns through one line, as the plugin converts a capture.
  const TraceClockToUnix to_ns(window_start_clock, window_end_clock);
  for (ActivityRecord& r : records) {
    r.start_ns = to_ns(r.start_ns);
    r.end_ns = to_ns(r.end_ns);
  }
  for (Stamps& s : stamps) {
    if (s.start == 0) continue;  // slot 0 and kernels that did not run (checked below)
    s.start = to_ns(s.start);
    s.end = to_ns(s.end);
  }
  const int64_t window_start = to_ns(window_start_clock.ticks), window_end = to_ns(window_end_clock.ticks);

  // ---- records against the bodies
  std::map<uint64_t, const ActivityRecord*> kernel;  // by index
  std::vector<const ActivityRecord*> memcpys, waits;
  for (const ActivityRecord& r : records) {
    if (r.kind == ActivityKind::kKernel && std::string_view(r.name) == kTimed) kernel[r.bytes] = &r;
    if (r.kind == ActivityKind::kMemcpy) memcpys.push_back(&r);
    if (r.kind == ActivityKind::kSynchronization && r.subkind == static_cast<uint8_t>(SyncKind::kStreamWaitEvent)) {
      waits.push_back(&r);
    }
  }
  ASSERT_EQ(kernel.size(), index - 1);
  std::vector<int64_t> dispatch, completion;
  for (const auto& [i, r] : kernel) {
    const Stamps& s = stamps[i];
    ASSERT_GT(s.start, 0) << "kernel " << i << " did not run";
    EXPECT_LE(r->start_ns, s.start) << i;
    EXPECT_LE(s.end, r->end_ns) << i;
    dispatch.push_back(s.start - r->start_ns);
    completion.push_back(r->end_ns - s.end);
  }
  // Medians: a thread can lose its core between the two clock reads on a busy machine.
  EXPECT_LT(Median(dispatch), 5'000);
  EXPECT_LT(Median(completion), 5'000);

  ASSERT_FALSE(copies.empty());
  for (const Bracket& c : copies) {
    const int64_t lo = stamps[c.a].end, hi = stamps[c.b].start;
    const auto inside = std::count_if(memcpys.begin(), memcpys.end(), [&](const ActivityRecord* m) {
      return m->device == kernel[c.a]->device && m->stream == kernel[c.a]->stream && m->start_ns >= lo &&
             m->end_ns <= hi && m->bytes == static_cast<int64_t>(kCopyBytes);
    });
    EXPECT_EQ(inside, 1) << "copy between kernels " << c.a << " and " << c.b;
  }
  EXPECT_EQ(memcpys.size(), copies.size());

  ASSERT_EQ(waits.size(), 1u);
  const ActivityRecord& wait = *waits[0];
  EXPECT_EQ(wait.device, 0);
  EXPECT_EQ(wait.stream, kernel[b]->stream);
  EXPECT_LE(stamps[a].end, wait.end_ns);
  EXPECT_LE(wait.end_ns, stamps[b].start);
  EXPECT_LE(wait.start_ns, stamps[a].start);  // it began before A could run (gate)

  // ---- conversion: every device record becomes an activity with the very same times,
  // on its device's row and its stream's.
  ConversionOptions options;
  options.window_start_ns = window_start;
  options.window_end_ns = window_end;
  libkineto::CpuTraceBuffer buffer;
  const ConversionResult result = ConvertRecords(records, options, {}, &buffer);
  EXPECT_EQ(result.out_of_window, 0u);
  EXPECT_EQ(result.devices, (std::set<int32_t>{0, 1}));
  std::map<uint32_t, const ActivityRecord*> device_record;  // by flow id (correlation id)
  for (const ActivityRecord& r : records) {
    if (r.kind == ActivityKind::kKernel || r.kind == ActivityKind::kMemcpy) {
      device_record[static_cast<uint32_t>(r.correlation_id)] = &r;
    }
  }
  size_t compared = 0;
  for (const auto& act : buffer.activities) {
    const ActivityType t = act->type();
    if (t == ActivityType::CUDA_SYNC) {
      EXPECT_EQ(act->startTime, wait.start_ns);
      EXPECT_EQ(act->endTime, wait.end_ns);
      EXPECT_EQ(act->device, 0);
      EXPECT_EQ(act->resource, wait.stream);
      continue;
    }
    if (t != ActivityType::CONCURRENT_KERNEL && t != ActivityType::GPU_MEMCPY) continue;
    ASSERT_NE(act->flow.id, 0u) << act->name() << ": no launch flow";
    const ActivityRecord& r = *device_record.at(act->flow.id);
    EXPECT_EQ(act->startTime, r.start_ns) << act->name();
    EXPECT_EQ(act->endTime, r.end_ns) << act->name();
    EXPECT_EQ(act->device, r.device) << act->name();
    EXPECT_EQ(act->resource, r.stream) << act->name();
    EXPECT_EQ(act->threadId, r.stream) << act->name();
    ++compared;
  }
  EXPECT_EQ(compared, device_record.size());

  ASSERT_TRUE(xxnpuEventDestroy(after_a).ok());
  ASSERT_TRUE(xxnpuEventDestroy(reached).ok());
  for (int d = 0; d < 2; ++d) {
    ASSERT_TRUE(xxnpuSetDevice(d).ok());
    ASSERT_TRUE(xxnpuStreamDestroy(side[d]).ok());
  }
  for (void* p : buffers) ASSERT_TRUE(xxnpuFree(p).ok());
}

}  // namespace
}  // namespace xxnpu::profiler
