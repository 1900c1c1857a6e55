// What the runtime tells activity tracing: kernels, copies, sets, runtime calls, waits
// and allocations, linked by correlation ids and stamped on the profiler's clock.
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "device/activity_trace.h"
#include "device/clock.h"
#include "device/runtime.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

class RuntimeTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(xxnpuDeviceSynchronize().ok());
    ActivityClear();
    for (int k = 0; k < static_cast<int>(ActivityKind::kCount); ++k) ActivityEnable(static_cast<ActivityKind>(k));
  }
  void TearDown() override {
    ActivityDisableAll();
    ActivityClear();
  }
  std::vector<ActivityRecord> Collect() {
    std::vector<ActivityRecord> out;
    ActivityCollect(&out);
    return out;
  }
  std::vector<ActivityRecord> CollectTraceClock() {
    std::vector<ActivityRecord> out;
    ActivityCollectTraceClock(&out);
    return out;
  }
  static const ActivityRecord* Find(const std::vector<ActivityRecord>& rs, ActivityKind kind, const char* name) {
    for (const auto& r : rs) {
      if (r.kind == kind && r.name != nullptr && std::string(r.name) == name) return &r;
    }
    return nullptr;
  }
};

TEST_F(RuntimeTraceTest, KernelIsLinkedToItsLaunchAndToTheExternalOp) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  const int stream_id = *xxnpuStreamGetId(s);
  // A thread's first record allocates its record ring (~9 MB, milliseconds under ASan).
  // Warm both threads up first, so that neither allocation lands between the kernel's
  // end and the host's wait and the order checked below is the runtime's, not malloc's.
  ASSERT_TRUE(xxnpuLaunchKernel(LaunchConfig{}, [](BlockRange) { return absl::OkStatus(); }, s).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  (void)Collect();
  const TraceClockPair before = MeasureTraceClockPair();
  const int64_t t0 = TraceClockNow();
  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kDefault, 4242);
  LaunchConfig cfg;
  cfg.name = "trace_test_kernel";
  cfg.grid = Dim3{8, 2, 1};
  cfg.block = Dim3{128, 1, 1};
  cfg.bytes = 1000;
  cfg.flops = 500;
  cfg.fused_nodes = "add, mul, relu";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [](BlockRange) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return absl::OkStatus();
  }, s).ok());
  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault), 4242u);
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  const int64_t t1 = TraceClockNow();
  const TraceClockToUnix to_ns(before, MeasureTraceClockPair());
  auto rs = CollectTraceClock();  // as stamped: ordered against t0 and t1 exactly

  const ActivityRecord* k = Find(rs, ActivityKind::kKernel, "trace_test_kernel");
  const ActivityRecord* launch = Find(rs, ActivityKind::kRuntime, "xxnpuLaunchKernel");
  ASSERT_NE(k, nullptr);
  ASSERT_NE(launch, nullptr);
  EXPECT_NE(k->correlation_id, 0u);
  EXPECT_EQ(k->correlation_id, launch->correlation_id);
  EXPECT_EQ(k->external_id[0], 4242u);
  EXPECT_EQ(launch->external_id[0], 4242u);
  EXPECT_EQ(k->device, 0);
  EXPECT_EQ(k->stream, stream_id);
  EXPECT_EQ(launch->stream, stream_id);
  EXPECT_EQ(k->grid[0], 8u);
  EXPECT_EQ(k->grid[1], 2u);
  EXPECT_EQ(k->block[0], 128u);
  EXPECT_EQ(k->bytes, 1000);
  EXPECT_EQ(k->flops, 500u);
  EXPECT_STREQ(k->fused_nodes, "add, mul, relu");
  // The trace clock, in order: launch starts, then the kernel runs for >= 2 ms.
  EXPECT_GE(launch->start_ns, t0);
  EXPECT_LE(launch->start_ns, k->start_ns);
  EXPECT_GE(to_ns(k->end_ns) - to_ns(k->start_ns), 2'000'000);
  EXPECT_LE(k->end_ns, t1);
  EXPECT_EQ(launch->thread_id, CurrentThreadId());
  EXPECT_NE(k->thread_id, CurrentThreadId());  // ran on a device thread
  // The host's wait for it is visible as such.
  const ActivityRecord* wait = Find(rs, ActivityKind::kSynchronization, "xxnpuStreamSynchronize");
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->subkind, static_cast<uint8_t>(SyncKind::kStreamSynchronize));
  EXPECT_EQ(wait->stream, stream_id);
  EXPECT_LE(wait->start_ns, k->end_ns);
  EXPECT_GE(wait->end_ns, k->end_ns);
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

TEST_F(RuntimeTraceTest, CopiesSetsAndAllocations) {
  std::vector<char> host(1 << 16, 3);
  void* d = *xxnpuMalloc(host.size());
  ASSERT_TRUE(xxnpuMemcpy(d, host.data(), host.size(), MemcpyKind::kHostToDevice).ok());
  ASSERT_TRUE(xxnpuMemsetAsync(d, 0, 100, nullptr).ok());
  ASSERT_TRUE(xxnpuMemcpy(host.data(), d, 512, MemcpyKind::kDeviceToHost).ok());
  ASSERT_TRUE(xxnpuFree(d).ok());
  auto rs = Collect();

  const ActivityRecord* h2d = Find(rs, ActivityKind::kMemcpy, "Memcpy HtoD");
  const ActivityRecord* d2h = Find(rs, ActivityKind::kMemcpy, "Memcpy DtoH");
  const ActivityRecord* set = Find(rs, ActivityKind::kMemset, "Memset (Device)");
  ASSERT_NE(h2d, nullptr);
  ASSERT_NE(d2h, nullptr);
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(h2d->bytes, 1 << 16);
  EXPECT_EQ(h2d->subkind, static_cast<uint8_t>(MemcpyKind::kHostToDevice));
  EXPECT_EQ(d2h->bytes, 512);
  EXPECT_EQ(set->bytes, 100);
  const ActivityRecord* api = Find(rs, ActivityKind::kRuntime, "xxnpuMemcpy");
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->correlation_id, h2d->correlation_id);

  const ActivityRecord* alloc = Find(rs, ActivityKind::kMemory, "xxnpuMalloc");
  const ActivityRecord* free = Find(rs, ActivityKind::kMemory, "xxnpuFree");
  ASSERT_NE(alloc, nullptr);
  ASSERT_NE(free, nullptr);
  EXPECT_EQ(alloc->address, reinterpret_cast<uint64_t>(d));
  EXPECT_EQ(alloc->bytes, 1 << 16);
  EXPECT_EQ(free->bytes, -(1 << 16));
  EXPECT_GE(alloc->total_reserved, uint64_t{1} << 16);
  // Handed out in time order.
  EXPECT_TRUE(std::is_sorted(rs.begin(), rs.end(),
                             [](const ActivityRecord& a, const ActivityRecord& b) { return a.start_ns < b.start_ns; }));
}

// ActivityCollect hands out Unix-epoch ns (a C++ program embedding the runtime sees wall
// times), within the fitted line's error of NowNs() readings around the call.
TEST_F(RuntimeTraceTest, CollectConvertsToUnixNanoseconds) {
  const int64_t t0 = NowNs();
  LaunchConfig cfg;
  cfg.name = "wall_clock_kernel";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [](BlockRange) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    return absl::OkStatus();
  }, nullptr).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(nullptr).ok());
  const int64_t t1 = NowNs();
  auto rs = Collect();
  const ActivityRecord* launch = Find(rs, ActivityKind::kRuntime, "xxnpuLaunchKernel");
  const ActivityRecord* k = Find(rs, ActivityKind::kKernel, "wall_clock_kernel");
  ASSERT_NE(launch, nullptr);
  ASSERT_NE(k, nullptr);
  constexpr int64_t kLineErrorNs = 1'000;  // pairs are good to ~10 ns; generous
  EXPECT_GE(launch->start_ns, t0 - kLineErrorNs);
  EXPECT_LE(k->end_ns, t1 + kLineErrorNs);
  EXPECT_GE(k->end_ns - k->start_ns, 3'000'000 - kLineErrorNs);
  EXPECT_LE(k->end_ns - k->start_ns, t1 - t0 + kLineErrorNs);
}

TEST_F(RuntimeTraceTest, DisabledKindsRecordNothing) {
  ActivityDisableAll();
  LaunchConfig cfg;
  cfg.name = "untraced";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [](BlockRange) { return absl::OkStatus(); }, nullptr).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(nullptr).ok());
  EXPECT_TRUE(Collect().empty());
}

TEST_F(RuntimeTraceTest, StreamWaitingOnAnEventIsRecorded) {
  xxnpuStream_t a = *xxnpuStreamCreate();
  xxnpuStream_t b = *xxnpuStreamCreate();
  xxnpuEvent_t e = *xxnpuEventCreate();
  LaunchConfig cfg;
  cfg.name = "trace_sleep";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [](BlockRange) {
    // Long enough that stream b's thread (started by the wait below; slow under TSan)
    // is waiting well before the event completes.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return absl::OkStatus();
  }, a).ok());
  ASSERT_TRUE(xxnpuEventRecord(e, a).ok());
  ASSERT_TRUE(xxnpuStreamWaitEvent(b, e).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(b).ok());
  auto rs = Collect();
  const ActivityRecord* w = nullptr;
  for (const auto& r : rs) {
    if (r.kind == ActivityKind::kSynchronization && r.subkind == static_cast<uint8_t>(SyncKind::kStreamWaitEvent)) w = &r;
  }
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->stream, *xxnpuStreamGetId(b));
  EXPECT_GT(w->end_ns - w->start_ns, 1'000'000);
  // What the wait depended on: the stream the event was recorded on and the traced
  // xxnpuEventRecord call that recorded it (a runtime record of its own).
  EXPECT_EQ(w->wait_stream, *xxnpuStreamGetId(a));
  const ActivityRecord* record_call = Find(rs, ActivityKind::kRuntime, "xxnpuEventRecord");
  ASSERT_NE(record_call, nullptr);
  EXPECT_NE(record_call->correlation_id, 0u);
  EXPECT_EQ(w->wait_correlation_id, record_call->correlation_id);
  EXPECT_EQ(record_call->stream, *xxnpuStreamGetId(a));
  ASSERT_TRUE(xxnpuEventDestroy(e).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(a).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(b).ok());
}

}  // namespace
}  // namespace xxnpu
