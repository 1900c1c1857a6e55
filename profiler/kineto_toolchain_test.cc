// Proves the profiler layer's toolchain: Kineto's headers from the torch wheel compile
// under C++20 with USE_KINETO and header-only fmt, and the out-of-line Kineto and
// PrivateUse1-registry symbols resolve from libtorch_cpu.so.
#include <memory>
#include <set>
#include <string>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <TraceSpan.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include "gtest/gtest.h"

namespace {

TEST(KinetoToolchainTest, GenericActivityCarriesKernelFields) {
  libkineto::TraceSpan span(100, 200, "span");
  libkineto::GenericTraceActivity kernel(span, libkineto::ActivityType::CONCURRENT_KERNEL, "xxnpu_add");
  kernel.startTime = 1'000;
  kernel.endTime = 1'750;
  kernel.id = 42;
  kernel.device = 1;
  kernel.resource = 7;
  kernel.addMetadata("stream", 7);
  kernel.addMetadataQuoted("kind", "elementwise");

  EXPECT_EQ(kernel.type(), libkineto::ActivityType::CONCURRENT_KERNEL);
  EXPECT_EQ(kernel.name(), "xxnpu_add");
  EXPECT_EQ(kernel.duration(), 750);
  EXPECT_EQ(kernel.correlationId(), 42);
  EXPECT_EQ(kernel.deviceId(), 1);
  EXPECT_EQ(kernel.resourceId(), 7);
  EXPECT_EQ(kernel.getMetadataValue("stream"), "7");
  EXPECT_EQ(kernel.metadataJson(), "\"kind\": \"elementwise\", \"stream\": 7");
}

// A do-nothing profiler: only here to check the registry links and accepts a factory.
class NullProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return types_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>&, const libkineto::Config&) override {
    return nullptr;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<libkineto::ActivityType>&, const libkineto::Config&) override {
    return nullptr;
  }

 private:
  std::string name_ = "null";
  std::set<libkineto::ActivityType> types_;
};

TEST(KinetoToolchainTest, PrivateUse1RegistryAcceptsAFactory) {
  auto& registry = torch::profiler::impl::PrivateUse1ProfilerRegistry::instance();
  EXPECT_FALSE(registry.hasFactory());
  registry.registerFactory([] { return std::make_unique<NullProfiler>(); });
  EXPECT_TRUE(registry.hasFactory());
}

}  // namespace
