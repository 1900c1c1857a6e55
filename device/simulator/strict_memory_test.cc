// XXNPU_STRICT_MEMORY=1: a host dereference of device memory faults at once, while the
// device's own accesses (copies, kernels through DeviceView) work.
#include <cstdlib>
#include <cstring>

#include "device/runtime.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

TEST(StrictMemoryTest, DeviceAccessWorks) {
  ASSERT_TRUE(xxnpuGetDeviceProperties(0)->strict_memory);
  int* d = static_cast<int*>(*xxnpuMalloc(64 * sizeof(int)));
  int host[64];
  for (int i = 0; i < 64; ++i) host[i] = i;
  ASSERT_TRUE(xxnpuMemcpy(d, host, sizeof(host), MemcpyKind::kHostToDevice).ok());
  LaunchConfig cfg;
  cfg.name = "test_double";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [d](BlockRange) {
    int* v = DeviceView(d);
    for (int i = 0; i < 64; ++i) v[i] *= 2;
    return absl::OkStatus();
  }, nullptr).ok());
  int back[64];
  ASSERT_TRUE(xxnpuMemcpy(back, d, sizeof(back), MemcpyKind::kDeviceToHost).ok());
  for (int i = 0; i < 64; ++i) EXPECT_EQ(back[i], 2 * i);
  ASSERT_TRUE(xxnpuFree(d).ok());
}

TEST(StrictMemoryDeathTest, HostReadOfDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int* d = static_cast<int*>(*xxnpuMalloc(4096));
  EXPECT_DEATH({ volatile int x = *d; (void)x; }, "");
  ASSERT_TRUE(xxnpuFree(d).ok());
}

TEST(StrictMemoryDeathTest, HostWriteOfDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  char* d = static_cast<char*>(*xxnpuMalloc(4096));
  EXPECT_DEATH(std::memset(d, 0, 16), "");
  ASSERT_TRUE(xxnpuFree(d).ok());
}

}  // namespace
}  // namespace xxnpu

int main(int argc, char** argv) {
  setenv("XXNPU_STRICT_MEMORY", "1", 1);
  setenv("XXNPU_DEVICE_MEMORY", "64M", 1);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
