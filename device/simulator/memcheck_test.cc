// XXNPU_MEMCHECK=1: a kernel's device access outside its allocations is the kernel's
// sticky error naming the kernel and the allocation (address, size, how far outside),
// and the device stays usable; every other SIGSEGV still reaches the handler that was
// installed before the runtime's.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "device/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

using ::testing::HasSubstr;

std::string Hex(const void* p) { return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(p))); }

// Launches `body` over `blocks` blocks (spread over the pool when more than one) and
// returns what the stream reports.
template <typename Body>
absl::Status RunKernel(const char* name, Body body, uint32_t blocks = 1) {
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid.x = blocks;
  cfg.bytes = blocks > 1 ? uint64_t{1} << 30 : 0;
  absl::Status launched = xxnpuLaunchKernel(cfg, body, nullptr);
  if (!launched.ok()) return launched;
  return xxnpuStreamSynchronize(nullptr);
}

void ExpectDeviceUsable() {
  int* d = static_cast<int*>(*xxnpuMalloc(64 * sizeof(int)));
  ASSERT_TRUE(RunKernel("fill_after_fault", [d](BlockRange) {
    int* v = DeviceView(d);
    for (int i = 0; i < 64; ++i) v[i] = i;
    return absl::OkStatus();
  }).ok());
  int back[64] = {};
  ASSERT_TRUE(xxnpuMemcpy(back, d, sizeof(back), MemcpyKind::kDeviceToHost).ok());
  for (int i = 0; i < 64; ++i) ASSERT_EQ(back[i], i);
  ASSERT_TRUE(xxnpuFree(d).ok());
}

TEST(MemcheckTest, WriteOnePastTheEndNamesKernelAndAllocation) {
  float* d = static_cast<float*>(*xxnpuMalloc(1000 * sizeof(float)));  // 4000 bytes: not a page multiple
  absl::Status s = RunKernel("oob_write", [d](BlockRange) {
    float* v = DeviceView(d);
    for (int i = 0; i <= 1000; ++i) v[i] = 1.0f;  // one too many
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 'oob_write' failed on xxnpu:0 stream "));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("memcheck: invalid write at ", Hex(d + 1000), " on xxnpu:0: 0 bytes past the end of "
                                     "the allocation at ", Hex(d), " of 4000 bytes")));
  // The writes before the fault happened: the kernel stopped at the bad one.
  float back[1000];
  ASSERT_TRUE(xxnpuMemcpy(back, d, sizeof(back), MemcpyKind::kDeviceToHost).ok());
  EXPECT_EQ(back[999], 1.0f);
  ASSERT_TRUE(xxnpuFree(d).ok());
  ExpectDeviceUsable();
}

TEST(MemcheckTest, ReadPastTheEndOnAPoolWorker) {
  constexpr int kN = 64 * 1024;
  int32_t* d = static_cast<int32_t*>(*xxnpuMalloc(kN * sizeof(int32_t)));
  int32_t* out = static_cast<int32_t*>(*xxnpuMalloc(64 * sizeof(int32_t)));
  // 64 blocks over the stream thread and the pool worker; only the last block reads 5
  // elements (20 bytes) past the end.
  absl::Status s = RunKernel(
      "oob_read",
      [d, out](BlockRange r) {
        const volatile int32_t* v = DeviceView(d);
        int32_t* o = DeviceView(out);
        for (int64_t b = r.begin; b < r.end; ++b) o[b] = v[b == 63 ? kN + 5 : b];
        return absl::OkStatus();
      },
      64);
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 'oob_read' failed"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("invalid read at ", Hex(d + kN + 5), " on xxnpu:0: 20 bytes past the end of the "
                                     "allocation at ", Hex(d), " of ", kN * 4, " bytes")));
  ASSERT_TRUE(xxnpuFree(d).ok());
  ASSERT_TRUE(xxnpuFree(out).ok());
  ExpectDeviceUsable();
}

TEST(MemcheckTest, UnderrunIntoTheGuardPageBeforeAPageSizedAllocation) {
  char* d = static_cast<char*>(*xxnpuMalloc(4096));
  absl::Status s = RunKernel("underrun", [d](BlockRange) {
    DeviceView(d)[-1] = 7;
    return absl::OkStatus();
  });
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 'underrun' failed"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("invalid write at ", Hex(d - 1),
                                                               " on xxnpu:0: 1 bytes before the start of the "
                                                               "allocation at ", Hex(d), " of 4096 bytes")));
  ASSERT_TRUE(xxnpuFree(d).ok());
}

TEST(MemcheckTest, UnderrunIntoTheCanaryIsFoundAfterTheKernel) {
  char* d = static_cast<char*>(*xxnpuMalloc(100));  // 3996 bytes of canary before it
  absl::Status s = RunKernel("canary_write", [d](BlockRange) {
    DeviceView(d)[-3] = 7;
    return absl::OkStatus();
  });
  EXPECT_THAT(std::string(s.message()), HasSubstr("kernel 'canary_write' failed"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("memcheck: a write 3 bytes before the start of the "
                                                               "allocation at ", Hex(d), " of 100 bytes")));
  EXPECT_TRUE(RunKernel("next_kernel", [](BlockRange) { return absl::OkStatus(); }).ok());  // reported once
  ASSERT_TRUE(xxnpuFree(d).ok());
}

TEST(MemcheckTest, FreedMemoryIsInNoAllocation) {
  char* d = static_cast<char*>(*xxnpuMalloc(8192));
  ASSERT_TRUE(xxnpuFree(d).ok());
  absl::Status s = RunKernel("use_after_free", [d](BlockRange) {
    (void)*static_cast<volatile char*>(DeviceView(d));
    return absl::OkStatus();
  });
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("kernel 'use_after_free' failed on xxnpu:0 stream ")));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("invalid read at ", Hex(d), " on xxnpu:0: not inside any live allocation")));
  ExpectDeviceUsable();
}

TEST(MemcheckTest, InBoundsKernelsAndCopiesWork) {
  constexpr int kN = 333;  // an odd size: the allocation starts mid-page
  int* d = static_cast<int*>(*xxnpuMalloc(kN * sizeof(int)));
  int host[kN];
  for (int i = 0; i < kN; ++i) host[i] = i;
  ASSERT_TRUE(xxnpuMemcpy(d, host, sizeof(host), MemcpyKind::kHostToDevice).ok());
  ASSERT_TRUE(RunKernel("double", [d](BlockRange) {
    int* v = DeviceView(d);
    for (int i = 0; i < kN; ++i) v[i] *= 2;
    return absl::OkStatus();
  }).ok());
  ASSERT_TRUE(xxnpuMemcpy(host, d, sizeof(host), MemcpyKind::kDeviceToHost).ok());
  for (int i = 0; i < kN; ++i) ASSERT_EQ(host[i], 2 * i);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d + kN) % 4096, 0u);  // the end is flush against the guard
  ASSERT_TRUE(xxnpuFree(d).ok());
}

// Installed before the runtime's handler: a fault the runtime does not own must come here.
void PreviousHandler(int) { _exit(42); }

TEST(MemcheckDeathTest, OtherFaultsGoToThePreviousHandler) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_TRUE(xxnpuGetDeviceCount().ok());  // the runtime (and its handler) is up
  // A host thread's fault, even inside device memory's range: not a kernel's.
  char* d = static_cast<char*>(*xxnpuMalloc(100));
  EXPECT_EXIT({ *static_cast<volatile char*>(DeviceView(d) + 100) = 1; }, testing::ExitedWithCode(42), "");
  // And one outside it: an inaccessible page of our own (not a null store, which UBSan
  // reports before the fault happens).
  void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  EXPECT_EXIT({ *static_cast<volatile int*>(page) = 1; }, testing::ExitedWithCode(42), "");
  munmap(page, 4096);
  ASSERT_TRUE(xxnpuFree(d).ok());
}

}  // namespace
}  // namespace xxnpu

int main(int argc, char** argv) {
  setenv("XXNPU_MEMCHECK", "1", 1);
  setenv("XXNPU_COMPUTE_THREADS", "2", 1);
  setenv("XXNPU_DEVICE_MEMORY", "64M", 1);
  signal(SIGSEGV, xxnpu::PreviousHandler);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
