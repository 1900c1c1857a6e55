// The Kineto session against the real (simulated) runtime, without ATen: what torch's
// Kineto does around a capture, with a logger that records what it is handed.
#include "profiler/kineto_plugin.h"

#include <Config.h>
#include <GenericTraceActivity.h>
#include <ThreadUtil.h>
#include <output_base.h>

#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "device/clock.h"
#include "device/runtime.h"
#include "gtest/gtest.h"

namespace xxnpu::profiler {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;
using libkineto::ITraceActivity;

class RecordingLogger : public libkineto::ActivityLogger {
 public:
  void handleDeviceInfo(const libkineto::DeviceInfo& info, int64_t) override { devices.push_back(info.name); }
  void handleResourceInfo(const libkineto::ResourceInfo& info, int64_t) override { resources.push_back(info.name); }
  void handleOverheadInfo(const OverheadInfo&, int64_t) override {}
  void handleTraceSpan(const libkineto::TraceSpan&) override {}
  void handleActivity(const ITraceActivity& activity) override { activities.push_back(&activity); }
  void handleGenericActivity(const GenericTraceActivity& activity) override { activities.push_back(&activity); }
  void handleTraceStart(const std::unordered_map<std::string, std::string>&, const std::string&) override {}
  void finalizeMemoryTrace(const std::string&, const libkineto::Config&) override {}
  void finalizeTrace(const libkineto::Config&, std::unique_ptr<KINETO_NAMESPACE::ActivityBuffers> buffers, int64_t,
                     std::unordered_map<std::string, std::vector<std::string>>&) override {
    buffers.release();  // never called here; the type is incomplete in the public headers
  }

  std::vector<const ITraceActivity*> activities;
  std::vector<std::string> devices;
  std::vector<std::string> resources;
};

const std::set<ActivityType> kPrivateUse1Types = {
    ActivityType::CONCURRENT_KERNEL,   ActivityType::GPU_MEMCPY,          ActivityType::GPU_MEMSET,
    ActivityType::GPU_USER_ANNOTATION, ActivityType::PRIVATEUSE1_RUNTIME, ActivityType::PRIVATEUSE1_DRIVER};

void Launch(const char* name, xxnpuStream_t stream = nullptr) {
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid.x = 4;
  cfg.block.x = 128;
  cfg.bytes = 4096;
  cfg.flops = 512;
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [](BlockRange) { return absl::OkStatus(); }, stream).ok());
}

TEST(XxnpuActivityProfilerTest, ConfiguresOnlyWhenDeviceWorkIsRequested) {
  XxnpuActivityProfiler profiler;
  libkineto::Config config;
  EXPECT_EQ(profiler.name(), "xxnpu");
  EXPECT_EQ(profiler.configure({ActivityType::CPU_OP, ActivityType::PRIVATEUSE1_RUNTIME}, config), nullptr);
  EXPECT_NE(profiler.configure(kPrivateUse1Types, config), nullptr);
  EXPECT_NE(profiler.configure(0, 100, {ActivityType::CONCURRENT_KERNEL}, config), nullptr);
}

TEST(XxnpuActivityProfilerTest, SessionTurnsLaunchesIntoLinkedKernelsWithFlows) {
  XxnpuActivityProfiler profiler;
  libkineto::Config config;
  auto session = profiler.configure(kPrivateUse1Types, config);
  ASSERT_NE(session, nullptr);

  // Work before the capture must not show up.
  Launch("test::before");
  ASSERT_TRUE(xxnpuDeviceSynchronize().ok());

  const int64_t window_start = NowNs();
  session->start();
  EXPECT_TRUE(ActivityEnabled(ActivityKind::kKernel));
  libkineto::TraceSpan cpu_span(0, 0, "cpu");
  GenericTraceActivity op(cpu_span, ActivityType::CPU_OP, "aten::fake");
  op.id = 41;
  session->pushCorrelationId(41);
  Launch("test::kernel");
  std::vector<float> host(256, 1.0f);
  auto dev = xxnpuMalloc(host.size() * sizeof(float));
  ASSERT_TRUE(dev.ok());
  ASSERT_TRUE(xxnpuMemcpy(*dev, host.data(), host.size() * sizeof(float), MemcpyKind::kHostToDevice).ok());
  session->popCorrelationId();
  Launch("test::unlinked");
  ASSERT_TRUE(xxnpuDeviceSynchronize().ok());
  session->stop();
  const int64_t window_end = NowNs();
  EXPECT_FALSE(ActivityEnabled(ActivityKind::kKernel));
  Launch("test::after");
  ASSERT_TRUE(xxnpuDeviceSynchronize().ok());

  RecordingLogger logger;
  session->processTrace(
      logger, [&](int32_t id) -> const ITraceActivity* { return id == 41 ? &op : nullptr; }, window_start,
      window_end);
  EXPECT_TRUE(session->errors().empty());

  std::map<std::string, const ITraceActivity*> by_name;
  for (const ITraceActivity* a : logger.activities) {
    by_name[a->name()] = a;
    EXPECT_GE(a->timestamp(), window_start) << a->name();
    EXPECT_LE(a->timestamp() + a->duration(), window_end) << a->name();
  }
  EXPECT_EQ(by_name.count("test::before"), 0u);
  EXPECT_EQ(by_name.count("test::after"), 0u);
  ASSERT_EQ(by_name.count("test::kernel"), 1u);
  ASSERT_EQ(by_name.count("xxnpuLaunchKernel"), 1u);
  ASSERT_EQ(by_name.count("Memcpy HtoD"), 1u);
  ASSERT_EQ(by_name.count("test::unlinked"), 1u);
  ASSERT_EQ(by_name.count("xxnpuDeviceSynchronize (wait)"), 1u);

  const ITraceActivity* kernel = by_name["test::kernel"];
  EXPECT_EQ(kernel->type(), ActivityType::CONCURRENT_KERNEL);
  EXPECT_EQ(kernel->linkedActivity(), &op);
  EXPECT_EQ(kernel->correlationId(), 41);
  EXPECT_EQ(kernel->deviceId(), 0);
  EXPECT_GT(kernel->flowId(), 0);
  EXPECT_FALSE(kernel->flowStart());
  EXPECT_EQ(kernel->getMetadataValue("bytes"), "4096");
  // Its launch: same flow id and args.correlation, on this thread's row.
  const ITraceActivity* launch = nullptr;
  for (const ITraceActivity* a : logger.activities) {
    if (a->name() == "xxnpuLaunchKernel" && a->flowId() == kernel->flowId()) launch = a;
  }
  ASSERT_NE(launch, nullptr);
  EXPECT_TRUE(launch->flowStart());
  EXPECT_EQ(launch->getMetadataValue("correlation"), kernel->getMetadataValue("correlation"));
  EXPECT_EQ(launch->deviceId(), libkineto::processId());
  EXPECT_EQ(launch->resourceId(), libkineto::systemThreadId());
  EXPECT_LE(launch->timestamp(), kernel->timestamp());

  EXPECT_EQ(by_name["Memcpy HtoD"]->type(), ActivityType::GPU_MEMCPY);
  EXPECT_EQ(by_name["Memcpy HtoD"]->linkedActivity(), &op);
  EXPECT_EQ(by_name["test::unlinked"]->linkedActivity(), nullptr);
  // xxnpuMalloc's runtime event carries the segment's size.
  ASSERT_EQ(by_name.count("xxnpuMalloc"), 1u);
  EXPECT_EQ(by_name["xxnpuMalloc"]->getMetadataValue("bytes").empty(), false);

  auto device_info = session->getDeviceInfo();
  ASSERT_NE(device_info, nullptr);
  EXPECT_EQ(device_info->name, "xxnpu:0");
  EXPECT_EQ(device_info->id, 0);
  auto resources = session->getResourceInfos();
  ASSERT_FALSE(resources.empty());
  EXPECT_EQ(resources[0].deviceId, 0);
  EXPECT_EQ(resources[0].name, "stream " + std::to_string(resources[0].id));
  EXPECT_EQ(kernel->resourceId(), resources[0].id);

  auto buffer = session->getTraceBuffer();
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(buffer->activities.size(), logger.activities.size());
  EXPECT_EQ(session->getMetadata().at("xxnpu_dropped_records"), "0");
  ASSERT_TRUE(xxnpuFree(*dev).ok());
}

TEST(XxnpuActivityProfilerTest, DroppedRecordsAreReported) {
  XxnpuActivityProfiler profiler;
  libkineto::Config config;
  auto session = profiler.configure(kPrivateUse1Types, config);
  session->start();
  // A fresh thread gets a tiny ring (the size applies to rings created afterwards).
  ActivitySetBufferRecords(64);
  std::thread([] {
    for (int i = 0; i < 200; ++i) Launch("test::flood");
  }).join();
  ActivitySetBufferRecords(65536);
  ASSERT_TRUE(xxnpuDeviceSynchronize().ok());
  session->stop();
  RecordingLogger logger;
  session->processTrace(logger, nullptr, 0, 0);
  ASSERT_EQ(session->errors().size(), 1u);
  EXPECT_NE(session->errors()[0].find("dropped"), std::string::npos);
  EXPECT_NE(session->getMetadata().at("xxnpu_dropped_records"), "0");
  EXPECT_EQ(session->status(), libkineto::TraceStatus::WARNING);
}

TEST(XxnpuActivityProfilerTest, DestroyingARecordingSessionStopsTracing) {
  XxnpuActivityProfiler profiler;
  libkineto::Config config;
  {
    auto session = profiler.configure(kPrivateUse1Types, config);
    session->start();
    EXPECT_TRUE(ActivityEnabled(ActivityKind::kRuntime));
  }
  EXPECT_FALSE(ActivityEnabled(ActivityKind::kRuntime));
  EXPECT_FALSE(ActivityEnabled(ActivityKind::kKernel));
}

}  // namespace
}  // namespace xxnpu::profiler
