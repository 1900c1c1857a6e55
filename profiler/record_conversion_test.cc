// Record -> Kineto activity conversion, with hand-made runtime records.
#include "profiler/record_conversion.h"

#include <GenericTraceActivity.h>
#include <TraceSpan.h>

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace xxnpu::profiler {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;

constexpr int32_t kHostPid = 4242;
constexpr int32_t kHostTid = 77;

ActivityRecord Runtime(const char* name, int64_t start, int64_t end, uint64_t corr, uint64_t op) {
  ActivityRecord r;
  r.kind = ActivityKind::kRuntime;
  r.name = name;
  r.start_ns = start;
  r.end_ns = end;
  r.correlation_id = corr;
  r.external_id[0] = op;
  r.device = 0;
  r.stream = 3;
  r.thread_id = kHostTid;
  return r;
}

ActivityRecord Device(ActivityKind kind, const char* name, int64_t start, int64_t end, uint64_t corr, uint64_t op,
                      uint64_t user = 0) {
  ActivityRecord r;
  r.kind = kind;
  r.name = name;
  r.start_ns = start;
  r.end_ns = end;
  r.correlation_id = corr;
  r.external_id[0] = op;
  r.external_id[1] = user;
  r.device = 1;
  r.stream = 3;
  r.thread_id = 9999;  // the stream's device thread
  return r;
}

class ConversionTest : public ::testing::Test {
 protected:
  ConversionTest() : span_(0, 0, "cpu"), op_(span_, ActivityType::CPU_OP, "aten::add"),
                     range_(span_, ActivityType::USER_ANNOTATION, "my_range") {
    op_.id = 11;
    range_.id = 12;
    options_.host_pid = kHostPid;
  }

  ConversionResult Convert(const std::vector<ActivityRecord>& records) {
    return ConvertRecords(records, options_, [this](int32_t id) -> const libkineto::ITraceActivity* {
      if (id == 11) return &op_;
      if (id == 12) return &range_;
      return nullptr;
    }, &buffer_);
  }

  const GenericTraceActivity& At(size_t i) { return *buffer_.activities.at(i); }

  libkineto::TraceSpan span_;
  GenericTraceActivity op_;
  GenericTraceActivity range_;
  ConversionOptions options_;
  libkineto::CpuTraceBuffer buffer_;
};

TEST_F(ConversionTest, KernelLaunchPairIsLinkedAndFlowConnected) {
  ActivityRecord kernel = Device(ActivityKind::kKernel, "xxnpu::add", 2'000, 3'000, 5, 11);
  kernel.grid[0] = 64;
  kernel.grid[1] = kernel.grid[2] = 1;
  kernel.block[0] = 256;
  kernel.block[1] = kernel.block[2] = 1;
  kernel.bytes = 3'000;  // 3 bytes/ns over 1000 ns = 3 GB/s
  kernel.flops = 1'000;
  ConversionResult res = Convert({Runtime("xxnpuLaunchKernel", 1'000, 1'200, 5, 11), kernel});

  ASSERT_EQ(res.activities, 2u);
  EXPECT_EQ(res.flows, 1u);
  EXPECT_EQ(res.device_unlinked, 0u);
  EXPECT_EQ(res.devices, (std::set<int32_t>{1}));
  EXPECT_EQ(res.streams, (std::set<std::pair<int32_t, int32_t>>{{1, 3}}));

  const GenericTraceActivity& launch = At(0);
  EXPECT_EQ(launch.type(), ActivityType::PRIVATEUSE1_RUNTIME);
  EXPECT_EQ(launch.name(), "xxnpuLaunchKernel");
  EXPECT_EQ(launch.deviceId(), kHostPid);
  EXPECT_EQ(launch.resourceId(), kHostTid);
  EXPECT_EQ(launch.getThreadId(), kHostTid);
  EXPECT_EQ(launch.correlationId(), 11);
  EXPECT_EQ(launch.linkedActivity(), &op_);
  EXPECT_EQ(launch.flowId(), 5);
  EXPECT_EQ(launch.flowType(), static_cast<int>(libkineto::kLinkAsyncCpuGpu));
  EXPECT_TRUE(launch.flowStart());
  EXPECT_EQ(launch.getMetadataValue("correlation"), "5");
  // Host events never carry args.stream (Kineto's runtime events do not; HTA would take
  // the launch for device work): the stream it queued on is "target stream".
  EXPECT_EQ(launch.getMetadataValue("stream"), "");
  EXPECT_EQ(launch.getMetadataValue("target stream"), "3");

  const GenericTraceActivity& k = At(1);
  EXPECT_EQ(k.type(), ActivityType::CONCURRENT_KERNEL);
  EXPECT_EQ(k.name(), "xxnpu::add");
  EXPECT_EQ(k.timestamp(), 2'000);  // nanoseconds, untouched
  EXPECT_EQ(k.duration(), 1'000);
  EXPECT_EQ(k.deviceId(), 1);
  EXPECT_EQ(k.resourceId(), 3);
  EXPECT_EQ(k.correlationId(), 11);
  EXPECT_EQ(k.linkedActivity(), &op_);
  EXPECT_EQ(k.flowId(), 5);
  EXPECT_FALSE(k.flowStart());
  EXPECT_EQ(k.getMetadataValue("stream"), "3");
  EXPECT_EQ(k.getMetadataValue("device"), "1");
  EXPECT_EQ(k.getMetadataValue("correlation"), "5");
  EXPECT_EQ(k.getMetadataValue("grid"), "[64, 1, 1]");
  EXPECT_EQ(k.getMetadataValue("block"), "[256, 1, 1]");
  EXPECT_EQ(k.getMetadataValue("bytes"), "3000");
  EXPECT_EQ(k.getMetadataValue("flops"), "1000");
  EXPECT_EQ(k.getMetadataValue("achieved GB/s"), "3");
  EXPECT_EQ(k.getMetadataValue("achieved GFLOP/s"), "1");
  EXPECT_EQ(k.getMetadataValue("fused nodes"), "");  // a hand-written kernel names none
  EXPECT_EQ(k.traceSpan(), &buffer_.span);
}

TEST_F(ConversionTest, GeneratedKernelNamesItsFusedNodes) {
  ActivityRecord kernel = Device(ActivityKind::kKernel, "cpp_fused_add_mul_relu_0", 2'000, 3'000, 5, 11);
  kernel.fused_nodes = "add, mul, relu";
  ConversionResult res = Convert({Runtime("xxnpuLaunchKernel", 1'000, 1'200, 5, 11), kernel});
  ASSERT_EQ(res.activities, 2u);
  EXPECT_EQ(At(1).getMetadataValue("fused nodes"), "add, mul, relu");
  EXPECT_NE(At(1).metadataJson().find(R"("fused nodes": "add, mul, relu")"), std::string::npos)
      << At(1).metadataJson();
}

TEST_F(ConversionTest, CopiesAndSetsGetTheirTypes) {
  ConversionResult res = Convert({
      Runtime("xxnpuMemcpyAsync", 100, 150, 7, 11),
      Device(ActivityKind::kMemcpy, "Memcpy HtoD", 200, 400, 7, 11),
      Runtime("xxnpuMemsetAsync", 500, 550, 8, 0),
      Device(ActivityKind::kMemset, "Memset (Device)", 600, 700, 8, 0),
  });
  ASSERT_EQ(res.activities, 4u);
  EXPECT_EQ(At(1).type(), ActivityType::GPU_MEMCPY);
  EXPECT_EQ(At(1).linkedActivity(), &op_);
  EXPECT_EQ(At(3).type(), ActivityType::GPU_MEMSET);
  // No op around the memset: id 0, nothing linked, counted.
  EXPECT_EQ(At(3).correlationId(), 0);
  EXPECT_EQ(At(3).linkedActivity(), nullptr);
  EXPECT_EQ(res.device_unlinked, 1u);
  EXPECT_EQ(res.flows, 2u);
}

TEST_F(ConversionTest, GraphWorkCarriesItsGraphAndNodeIds) {
  ActivityRecord node = Device(ActivityKind::kKernel, "add_kernel", 200, 300, 7, 11);
  node.graph_id = 5;
  node.graph_node_id = 3;
  ConversionResult res = Convert({
      Runtime("xxnpuGraphLaunch", 100, 150, 7, 11),
      node,
      Device(ActivityKind::kKernel, "eager_kernel", 400, 500, 8, 11),
  });
  ASSERT_EQ(res.activities, 3u);
  EXPECT_EQ(At(1).getMetadataValue("graph id"), "5");
  EXPECT_EQ(At(1).getMetadataValue("graph node id"), "3");
  // Eager work has neither (its union slot may hold something else).
  EXPECT_EQ(At(2).getMetadataValue("graph id"), "");
  EXPECT_EQ(At(2).getMetadataValue("graph node id"), "");
}

TEST_F(ConversionTest, RecordsOutsideTheWindowAreDroppedAndFlowsStayPaired) {
  options_.window_start_ns = 1'000;
  options_.window_end_ns = 5'000;
  ConversionResult res = Convert({
      Runtime("xxnpuLaunchKernel", 900, 950, 1, 11),                   // before the window
      Device(ActivityKind::kKernel, "early", 1'100, 1'200, 1, 11),     // its launch is gone
      Runtime("xxnpuLaunchKernel", 4'000, 4'100, 2, 11),
      Device(ActivityKind::kKernel, "late", 4'900, 5'100, 2, 11),      // ends after the window
  });
  EXPECT_EQ(res.out_of_window, 2u);
  ASSERT_EQ(res.activities, 2u);
  EXPECT_EQ(At(0).name(), "early");
  EXPECT_EQ(At(0).flowId(), 0);  // no launch in the trace: no dangling arrow
  EXPECT_EQ(At(1).name(), "xxnpuLaunchKernel");
  EXPECT_EQ(At(1).flowId(), 0);  // its kernel is gone
  EXPECT_EQ(res.flows, 0u);
}

TEST_F(ConversionTest, OptionsSelectKinds) {
  options_.runtime = false;
  options_.memcpy = false;
  ConversionResult res = Convert({
      Runtime("xxnpuLaunchKernel", 100, 150, 1, 11),
      Device(ActivityKind::kKernel, "k", 200, 300, 1, 11),
      Device(ActivityKind::kMemcpy, "Memcpy DtoD", 400, 500, 2, 11),
  });
  ASSERT_EQ(res.activities, 1u);
  EXPECT_EQ(At(0).name(), "k");
  EXPECT_EQ(At(0).flowId(), 0);
}

TEST_F(ConversionTest, HostWaitsAreRuntimeEventsOnTheThreadRow) {
  ActivityRecord wait;
  wait.kind = ActivityKind::kSynchronization;
  wait.subkind = static_cast<uint8_t>(SyncKind::kStreamSynchronize);
  wait.name = "xxnpuStreamSynchronize";
  wait.start_ns = 120;
  wait.end_ns = 180;
  wait.device = 0;
  wait.stream = 3;
  wait.thread_id = kHostTid;
  wait.external_id[0] = 11;
  ConversionResult res = Convert({Runtime("xxnpuStreamSynchronize", 100, 200, 4, 11), wait});
  ASSERT_EQ(res.activities, 2u);
  const GenericTraceActivity& w = At(1);
  EXPECT_EQ(w.type(), ActivityType::PRIVATEUSE1_RUNTIME);
  EXPECT_EQ(w.name(), "xxnpuStreamSynchronize (wait)");
  EXPECT_EQ(w.deviceId(), kHostPid);
  EXPECT_EQ(w.resourceId(), kHostTid);
  EXPECT_EQ(w.getMetadataValue("wait"), "stream");
  EXPECT_EQ(w.getMetadataValue("stream"), "");
  EXPECT_EQ(w.getMetadataValue("target stream"), "3");
  EXPECT_EQ(w.linkedActivity(), &op_);
  EXPECT_TRUE(res.devices.empty());
}

TEST_F(ConversionTest, DeviceStreamWaitIsSyncOnTheStreamRowAndUnlinked) {
  ActivityRecord wait = Device(ActivityKind::kSynchronization, "xxnpuStreamWaitEvent", 100, 300, 6, 11);
  wait.subkind = static_cast<uint8_t>(SyncKind::kStreamWaitEvent);
  wait.wait_stream = 5;
  wait.wait_correlation_id = 4;
  ConversionResult res = Convert({wait});
  ASSERT_EQ(res.activities, 1u);
  EXPECT_EQ(At(0).type(), ActivityType::CUDA_SYNC);
  EXPECT_EQ(At(0).deviceId(), 1);
  EXPECT_EQ(At(0).resourceId(), 3);
  EXPECT_EQ(At(0).linkedActivity(), nullptr);
  EXPECT_EQ(At(0).correlationId(), 0);
  // Kineto's CUDA_SYNC for a stream waiting on an event: named by the sync kind, with the
  // stream and the record call the wait depends on.
  EXPECT_EQ(At(0).name(), "Stream Wait Event");
  EXPECT_EQ(At(0).getMetadataValue("cuda_sync_kind"), "Stream Wait Event");
  EXPECT_EQ(At(0).getMetadataValue("stream"), "3");
  EXPECT_EQ(At(0).getMetadataValue("correlation"), "6");
  EXPECT_EQ(At(0).getMetadataValue("wait_on_stream"), "5");
  EXPECT_EQ(At(0).getMetadataValue("wait_on_cuda_event_record_corr_id"), "4");
}

TEST_F(ConversionTest, StreamWaitOnAnUntracedRecordSaysSo) {
  ActivityRecord wait = Device(ActivityKind::kSynchronization, "xxnpuStreamWaitEvent", 100, 300, 6, 0);
  wait.subkind = static_cast<uint8_t>(SyncKind::kStreamWaitEvent);
  Convert({wait});
  EXPECT_EQ(At(0).getMetadataValue("wait_on_stream"), "-1");
  EXPECT_EQ(At(0).getMetadataValue("wait_on_cuda_event_record_corr_id"), "-1");
}

TEST_F(ConversionTest, RuntimeSegmentAllocationAnnotatesItsCall) {
  ActivityRecord mem;
  mem.kind = ActivityKind::kMemory;
  mem.subkind = 0;
  mem.name = "xxnpuMalloc";
  mem.start_ns = mem.end_ns = 150;
  mem.thread_id = kHostTid;
  mem.device = 0;
  mem.bytes = 2 << 20;
  mem.address = 0x1000;
  mem.total_reserved = 4 << 20;
  ActivityRecord cached = mem;
  cached.kind = ActivityKind::kCachingAllocator;  // reaches torch through reportMemoryUsageToProfiler
  cached.subkind = 1;
  ConversionResult res = Convert({Runtime("xxnpuMalloc", 100, 200, 9, 11), mem, cached});
  ASSERT_EQ(res.activities, 1u);
  EXPECT_EQ(At(0).getMetadataValue("bytes"), std::to_string(2 << 20));
  EXPECT_EQ(At(0).getMetadataValue("address"), "0x1000");
  EXPECT_EQ(At(0).getMetadataValue("total reserved"), std::to_string(4 << 20));
}

TEST_F(ConversionTest, UserAnnotationsSpanTheirDeviceWorkPerStream) {
  options_.user_annotations = true;
  ConversionResult res = Convert({
      Device(ActivityKind::kKernel, "a", 100, 200, 1, 11, 12),
      Device(ActivityKind::kKernel, "b", 300, 450, 2, 11, 12),
      Device(ActivityKind::kKernel, "c", 500, 600, 3, 11, 99),  // range not in the trace
  });
  ASSERT_EQ(res.activities, 4u);
  const GenericTraceActivity& span = At(3);
  EXPECT_EQ(span.type(), ActivityType::GPU_USER_ANNOTATION);
  EXPECT_EQ(span.name(), "my_range");
  EXPECT_EQ(span.timestamp(), 100);
  EXPECT_EQ(span.duration(), 350);
  EXPECT_EQ(span.correlationId(), 12);
  EXPECT_EQ(span.deviceId(), 1);
  EXPECT_EQ(span.resourceId(), 3);
  // On the stream's row, but not device work: no args.stream (as Kineto's own).
  EXPECT_EQ(span.getMetadataValue("stream"), "");
}

// A graph replay called inside record_function but outside any op: the launch and the
// kernels it ran belong to the range (its device time), not to nothing.
TEST_F(ConversionTest, WorkOutsideAnyOpIsLinkedToItsUserRange) {
  ActivityRecord launch = Runtime("xxnpuGraphLaunch", 1'000, 1'100, 7, 0);
  launch.external_id[1] = 12;
  ActivityRecord k1 = Device(ActivityKind::kKernel, "xxnpu::add", 2'000, 2'500, 7, 0, 12);
  ActivityRecord k2 = Device(ActivityKind::kKernel, "xxnpu::mul", 2'500, 2'900, 7, 0, 12);
  k1.graph_id = k2.graph_id = 3;
  k2.graph_node_id = 1;
  ActivityRecord both = Device(ActivityKind::kKernel, "xxnpu::sub", 3'000, 3'100, 8, 11, 12);
  ConversionResult res = Convert({launch, k1, k2, both});
  ASSERT_EQ(res.activities, 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(At(i).linkedActivity(), &range_) << At(i).name();
    EXPECT_EQ(At(i).correlationId(), 12) << At(i).name();
  }
  EXPECT_EQ(At(3).linkedActivity(), &op_);  // an op, when there is one, wins
  EXPECT_EQ(res.device_unlinked, 0u);
}

ActivityRecord Marker(const char* name, int64_t start, int64_t end, uint8_t subkind = 0, int32_t tid = kHostTid) {
  ActivityRecord r;
  r.kind = ActivityKind::kMarker;
  r.subkind = subkind;  // 0: range, 1: mark (profiler/markers.cc)
  r.name = name;
  r.start_ns = start;
  r.end_ns = end;
  r.device = 0;
  r.thread_id = tid;
  return r;
}

std::vector<const GenericTraceActivity*> OfType(const libkineto::CpuTraceBuffer& buffer, ActivityType type) {
  std::vector<const GenericTraceActivity*> out;
  for (const auto& a : buffer.activities) {
    if (a->type() == type) out.push_back(a.get());
  }
  return out;
}

TEST_F(ConversionTest, MarkerRangesAndMarksAreHostEventsOnTheThreadRow) {
  ConversionResult res = Convert({
      Marker("phase1", 100, 900),
      Marker("tick", 400, 400, /*subkind=*/1),
  });
  ASSERT_EQ(res.activities, 2u);
  EXPECT_EQ(res.markers, 2u);
  const GenericTraceActivity& range = At(0);
  // Not USER_ANNOTATION: torch drops those from a child profiler (see the header).
  EXPECT_EQ(range.type(), ActivityType::PRIVATEUSE1_RUNTIME);
  EXPECT_EQ(range.name(), "phase1");
  EXPECT_EQ(range.timestamp(), 100);
  EXPECT_EQ(range.duration(), 800);
  EXPECT_EQ(range.deviceId(), kHostPid);
  EXPECT_EQ(range.resourceId(), kHostTid);
  EXPECT_EQ(range.getThreadId(), kHostTid);
  EXPECT_EQ(range.getMetadataValue("marker"), "range");
  EXPECT_EQ(range.getMetadataValue("device"), "0");
  EXPECT_EQ(range.correlationId(), 0);
  EXPECT_EQ(range.linkedActivity(), nullptr);
  const GenericTraceActivity& mark = At(1);
  EXPECT_EQ(mark.type(), ActivityType::PRIVATEUSE1_RUNTIME);
  EXPECT_EQ(mark.name(), "tick");
  EXPECT_EQ(mark.timestamp(), 400);
  EXPECT_EQ(mark.duration(), 0);
  EXPECT_EQ(mark.getMetadataValue("marker"), "mark");
  EXPECT_TRUE(res.devices.empty());
}

TEST_F(ConversionTest, MarkerRangesAreClippedToTheWindowStartAndOtherMarkersDropped) {
  options_.window_start_ns = 1'000;
  options_.window_end_ns = 5'000;
  ConversionResult res = Convert({
      Marker("spans_start", 500, 2'000),   // pushed before the capture: clipped
      Marker("before", 100, 900),          // over before the capture
      Marker("early_mark", 900, 900, 1),
      Marker("after", 4'000, 6'000),       // popped after the window (cannot happen live)
      Marker("inside", 2'000, 3'000),
  });
  EXPECT_EQ(res.out_of_window, 3u);
  ASSERT_EQ(res.activities, 2u);
  EXPECT_EQ(At(0).name(), "spans_start");
  EXPECT_EQ(At(0).timestamp(), 1'000);
  EXPECT_EQ(At(0).duration(), 1'000);
  EXPECT_EQ(At(1).name(), "inside");
}

TEST_F(ConversionTest, MarkersCanBeTurnedOffAndUnknownSubkindsAreIgnored) {
  ConversionResult res = Convert({Marker("odd", 100, 200, /*subkind=*/7)});
  EXPECT_EQ(res.activities, 0u);
  options_.markers = false;
  res = Convert({Marker("phase1", 100, 900)});
  EXPECT_EQ(res.activities, 0u);
}

// Device work launched by a thread inside its (nested) marker ranges: every enclosing
// range gets a GPU_USER_ANNOTATION over that work, per stream.
TEST_F(ConversionTest, MarkerRangesProjectOntoTheStreamsOfTheirLaunches) {
  options_.user_annotations = true;
  ActivityRecord other_stream = Device(ActivityKind::kKernel, "k3", 1'000, 1'200, 3, 0);
  other_stream.stream = 5;
  ActivityRecord other_thread_launch = Runtime("xxnpuLaunchKernel", 450, 460, 4, 0);
  other_thread_launch.thread_id = kHostTid + 1;
  ConversionResult res = Convert({
      Marker("outer", 100, 900),
      Runtime("xxnpuLaunchKernel", 200, 210, 1, 0),   // inside outer only
      Device(ActivityKind::kKernel, "k1", 300, 400, 1, 0),
      Marker("inner", 500, 800),
      other_thread_launch,                            // another thread: no range of its own
      Device(ActivityKind::kKernel, "k4", 470, 480, 4, 0),
      Runtime("xxnpuLaunchKernel", 600, 610, 2, 0),   // inside inner (and outer)
      Device(ActivityKind::kKernel, "k2", 700, 950, 2, 0),  // runs after the range ended
      Runtime("xxnpuLaunchKernel", 650, 660, 3, 0),   // inside inner, on stream 5
      other_stream,
      Runtime("xxnpuLaunchKernel", 920, 930, 5, 0),   // after both ranges
      Device(ActivityKind::kKernel, "k5", 960, 990, 5, 0),
  });
  std::map<std::pair<std::string, int>, std::pair<int64_t, int64_t>> spans;
  for (const GenericTraceActivity* a : OfType(buffer_, ActivityType::GPU_USER_ANNOTATION)) {
    EXPECT_EQ(a->getMetadataValue("marker"), "range");
    EXPECT_EQ(a->deviceId(), 1);
    spans[{a->name(), static_cast<int>(a->resourceId())}] = {a->timestamp(), a->timestamp() + a->duration()};
  }
  using Spans = std::map<std::pair<std::string, int>, std::pair<int64_t, int64_t>>;
  EXPECT_EQ(spans, (Spans{{{"outer", 3}, {300, 950}},
                          {{"outer", 5}, {1'000, 1'200}},
                          {{"inner", 3}, {700, 950}},
                          {{"inner", 5}, {1'000, 1'200}}}));
  EXPECT_EQ(res.markers, 2u);
}

TEST_F(ConversionTest, MarkerRangesAreNotProjectedWithoutGpuUserAnnotations) {
  options_.user_annotations = false;
  ConversionResult res = Convert({
      Marker("outer", 100, 900),
      Runtime("xxnpuLaunchKernel", 200, 210, 1, 0),
      Device(ActivityKind::kKernel, "k1", 300, 400, 1, 0),
  });
  EXPECT_EQ(res.activities, 3u);
  EXPECT_TRUE(OfType(buffer_, ActivityType::GPU_USER_ANNOTATION).empty());
}

// Many sibling ranges (emit_xxnpu: one per op) with one launch each: each launch lands in
// exactly its own range.
TEST_F(ConversionTest, ManySiblingRangesEachGetTheirOwnKernel) {
  options_.user_annotations = true;
  std::vector<ActivityRecord> records;
  std::vector<std::string> names;
  constexpr int kOps = 2'000;
  names.reserve(kOps);
  for (int i = 0; i < kOps; ++i) names.push_back("op" + std::to_string(i));
  for (int i = 0; i < kOps; ++i) {
    const int64_t t = 10'000 + i * 100;
    records.push_back(Marker(names[i].c_str(), t, t + 50));
    records.push_back(Runtime("xxnpuLaunchKernel", t + 10, t + 20, i + 1, 0));
    records.push_back(Device(ActivityKind::kKernel, "k", t + 60, t + 90, i + 1, 0));
  }
  Convert(records);
  auto spans = OfType(buffer_, ActivityType::GPU_USER_ANNOTATION);
  ASSERT_EQ(spans.size(), static_cast<size_t>(kOps));
  for (const GenericTraceActivity* a : spans) {
    const int i = std::stoi(a->name().substr(2));
    EXPECT_EQ(a->timestamp(), 10'000 + i * 100 + 60) << a->name();
    EXPECT_EQ(a->duration(), 30) << a->name();
  }
}

}  // namespace
}  // namespace xxnpu::profiler
