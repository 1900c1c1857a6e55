// A C++ exception thrown by a kernel body, an inline kernel or a host function becomes
// its stream's sticky error naming it, like a returned error status; the process lives
// on and the device stays usable (before, it reached std::terminate on a device thread).
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

#include "device/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

using ::testing::HasSubstr;

// Not derived from std::exception: only `catch (...)` sees it.
struct NotAnException {
  int code;
};

// Enough declared work that the grid is spread over the pool's worker too.
LaunchConfig ParallelConfig(const char* name) {
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid.x = 64;
  cfg.bytes = uint64_t{1} << 30;
  return cfg;
}

// A kernel that works, to show that the device is usable after a fault.
void ExpectDeviceUsable(xxnpuStream_t stream) {
  int* d = static_cast<int*>(*xxnpuMalloc(64 * sizeof(int)));
  LaunchConfig cfg;
  cfg.name = "fill_after_fault";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [d](BlockRange) {
    int* v = DeviceView(d);
    for (int i = 0; i < 64; ++i) v[i] = i;
    return absl::OkStatus();
  }, stream).ok());
  int back[64] = {};
  ASSERT_TRUE(xxnpuStreamSynchronize(stream).ok());
  ASSERT_TRUE(xxnpuMemcpy(back, d, sizeof(back), MemcpyKind::kDeviceToHost).ok());
  for (int i = 0; i < 64; ++i) ASSERT_EQ(back[i], i);
  ASSERT_TRUE(xxnpuFree(d).ok());
}

TEST(KernelExceptionTest, BadAllocInEveryShareIsTheKernelsStickyError) {
  // Every share throws, so the pool worker's share does too (it has no caller to catch).
  KernelBody body = [](BlockRange) -> absl::Status { throw std::bad_alloc(); };
  ASSERT_TRUE(xxnpuLaunchKernel(ParallelConfig("throws_bad_alloc"), std::move(body), nullptr).ok());
  absl::Status s = xxnpuStreamSynchronize(nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 'throws_bad_alloc' failed on xxnpu:0 stream "));
  EXPECT_THAT(std::string(s.message()), HasSubstr("threw std::bad_alloc: std::bad_alloc"));
  EXPECT_TRUE(xxnpuStreamSynchronize(nullptr).ok());  // reported once
  ExpectDeviceUsable(nullptr);
}

TEST(KernelExceptionTest, NonStdExceptionIsNamedByItsType) {
  KernelBody body = [](BlockRange) -> absl::Status { throw NotAnException{7}; };
  ASSERT_TRUE(xxnpuLaunchKernel(ParallelConfig("throws_struct"), std::move(body), nullptr).ok());
  absl::Status s = xxnpuDeviceSynchronize();
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 'throws_struct' failed"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("NotAnException (not a std::exception)"));
  ExpectDeviceUsable(nullptr);
}

TEST(KernelExceptionTest, InlineKernelOnOneThreadAndWorkQueuedBehindIsSkipped) {
  auto stream = xxnpuStreamCreate(0);
  ASSERT_TRUE(stream.ok());
  LaunchConfig cfg;
  cfg.name = "inline_throws";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [](BlockRange) -> absl::Status { throw std::length_error("too long"); },
                                *stream).ok());
  bool ran = false;
  ASSERT_TRUE(xxnpuLaunchHostFunc(*stream, [&ran] { ran = true; }).ok());
  absl::Status s = xxnpuStreamSynchronize(*stream);
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 'inline_throws' failed"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("threw std::length_error: too long"));
  EXPECT_FALSE(ran);  // queued behind the fault before it was reported: skipped
  ExpectDeviceUsable(*stream);
  ASSERT_TRUE(xxnpuStreamDestroy(*stream).ok());
}

TEST(KernelExceptionTest, HostFunctionThatThrowsFailsItsStream) {
  ASSERT_TRUE(xxnpuLaunchHostFunc(nullptr, [] { throw std::runtime_error("host boom"); }).ok());
  absl::Status s = xxnpuStreamSynchronize(nullptr);
  EXPECT_THAT(std::string(s.message()), HasSubstr("host function (xxnpuLaunchHostFunc) failed on xxnpu:0"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("threw std::runtime_error: host boom"));
  ExpectDeviceUsable(nullptr);
}

}  // namespace
}  // namespace xxnpu

int main(int argc, char** argv) {
  // Two compute threads, so parallel kernels have a pool worker even on a 1-core runner.
  setenv("XXNPU_COMPUTE_THREADS", "2", 1);
  setenv("XXNPU_DEVICE_MEMORY", "64M", 1);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
