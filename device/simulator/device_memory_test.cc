// Device memory is host RAM: what happens when the host cannot back an allocation (the
// page commit fails, or the host has less RAM available than asked for), and how the
// default capacity follows the host (host_memory.h).
#include "device/simulator/device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "device/simulator/host_memory.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

using ::testing::HasSubstr;

constexpr size_t kMiB = size_t{1} << 20;

std::atomic<int> g_commits{0};
int g_commit_errno = 0;

// Fails like madvise(MADV_POPULATE_WRITE) with g_commit_errno.
int FailingCommit(void*, size_t) {
  ++g_commits;
  errno = g_commit_errno;
  return -1;
}

std::unique_ptr<DeviceMemory> Make(size_t capacity, bool memcheck = false) {
  auto m = DeviceMemory::Create(1, capacity, /*strict=*/false, memcheck);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

TEST(DeviceMemoryTest, FailedCommitIsOutOfMemoryAndGivesTheRangeBack) {
  for (bool memcheck : {false, true}) {
    auto m = Make(64 * kMiB, memcheck);
    g_commit_errno = ENOMEM;
    m->set_commit_for_testing(FailingCommit);
    auto p = m->Allocate(0, 8 * kMiB);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(p.status().message(), HasSubstr("xxnpu:0 out of memory: tried to allocate 8388608 bytes; the host could "
                                                "not back them with RAM (madvise(MADV_POPULATE_WRITE): Cannot allocate "
                                                "memory)"));
    EXPECT_EQ(m->FreeBytes(0), m->capacity());  // nothing kept
    g_commit_errno = EFAULT;
    EXPECT_EQ(m->Allocate(0, 4096).status().code(), absl::StatusCode::kResourceExhausted);
    // A commit that works again: the whole range is still there to allocate.
    m->set_commit_for_testing([](void* view, size_t length) { return madvise(view, length, MADV_POPULATE_WRITE); });
    auto q = m->Allocate(0, m->capacity() - (memcheck ? 2 * 4096 : 0));
    ASSERT_TRUE(q.ok()) << q.status();
    ASSERT_TRUE(m->Free(*q).ok());
  }
}

TEST(DeviceMemoryTest, KernelWithoutPopulateWriteFallsBackToFallocate) {
  auto m = Make(64 * kMiB);
  g_commits = 0;
  g_commit_errno = EINVAL;  // what a kernel before 5.14 says to MADV_POPULATE_WRITE
  m->set_commit_for_testing(FailingCommit);
  auto a = m->Allocate(0, 3 * kMiB);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = m->Allocate(0, kMiB);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(g_commits.load(), 1);  // asked once, then fallocate only
  // The memory is usable through the view.
  char* view = static_cast<char*>(*a) + m->view_offset();
  view[0] = 1;
  view[3 * kMiB - 1] = 2;
  EXPECT_EQ(view[3 * kMiB - 1], 2);
  ASSERT_TRUE(m->Free(*a).ok());
  ASSERT_TRUE(m->Free(*b).ok());
}

TEST(DeviceMemoryTest, AllocationBeyondTheHostsAvailableRamIsRefusedBeforeCommitting) {
  // An explicit capacity beyond what the (fake) host has available is kept. Not 1 TiB:
  // under TSan, whose shadow takes most of the address space, reserving it fails.
  auto m = Make(size_t{4} << 30);
  EXPECT_EQ(m->capacity(), size_t{4} << 30);
  g_commits = 0;
  m->set_commit_for_testing([](void* view, size_t length) {
    ++g_commits;
    return madvise(view, length, MADV_POPULATE_WRITE);
  });
  m->set_host_available_for_testing([] { return std::optional<uint64_t>(300 * kMiB); });
  auto big = m->Allocate(0, 64 * kMiB);  // 64 MiB + the 256 MiB kept for the host > 300 MiB
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.status().message(), HasSubstr("tried to allocate 67108864 bytes, but the host has only 314572800 "
                                                "bytes of RAM available"));
  EXPECT_EQ(g_commits.load(), 0);
  EXPECT_EQ(m->FreeBytes(0), m->capacity());
  auto fits = m->Allocate(0, 32 * kMiB);
  ASSERT_TRUE(fits.ok()) << fits.status();
  ASSERT_TRUE(m->Free(*fits).ok());
}

// A fake /proc and /sys under a temporary directory.
class FakeHost {
 public:
  FakeHost() : root_(std::string(testing::TempDir()) + "/fake_host_" + std::to_string(getpid()) + "_" +
                     std::to_string(counter_++)) {}
  ~FakeHost() { std::filesystem::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  const std::string& root() const { return root_; }

 private:
  static inline int counter_ = 0;
  std::string root_;
};

constexpr uint64_t kGiB = uint64_t{1} << 30;

TEST(HostMemoryTest, MeminfoAloneBoundsByPhysicalRam) {
  FakeHost host;
  host.Write("/proc/meminfo", "MemTotal:        4194304 kB\nMemFree:  1 kB\nMemAvailable:    3145728 kB\n");
  host.Write("/proc/self/cgroup", "0::/\n");
  HostMemory h = ReadHostMemory(host.root());
  EXPECT_EQ(h.physical, 4 * kGiB);
  EXPECT_EQ(h.available, 3 * kGiB);
  EXPECT_FALSE(h.cgroup_limit.has_value());
  EXPECT_EQ(DefaultDeviceCapacity(8 * kGiB, 2, h, std::nullopt), 4 * kGiB);
  EXPECT_EQ(DefaultDeviceCapacity(2 * kGiB, 2, h, std::nullopt), 2 * kGiB);  // below RAM: unchanged
}

TEST(HostMemoryTest, CgroupV1LimitOfAnAncestorAndItsHeadroom) {
  FakeHost host;
  host.Write("/proc/meminfo", "MemTotal: 16777216 kB\nMemAvailable: 12582912 kB\n");
  host.Write("/proc/self/cgroup", "5:cpu:/\n4:memory:/job/task\n0::/\n");
  host.Write("/sys/fs/cgroup/memory/job/task/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  host.Write("/sys/fs/cgroup/memory/job/memory.limit_in_bytes", std::to_string(2 * kGiB) + "\n");
  host.Write("/sys/fs/cgroup/memory/job/memory.usage_in_bytes", std::to_string(kGiB + kGiB / 2) + "\n");
  // 600 MiB of page cache, 100 MiB of it shmem (not reclaimable).
  host.Write("/sys/fs/cgroup/memory/job/memory.stat", "cache 1\ntotal_cache 629145600\ntotal_shmem 104857600\n");
  HostMemory h = ReadHostMemory(host.root());
  EXPECT_EQ(h.cgroup_limit, 2 * kGiB);
  EXPECT_EQ(h.available, 2 * kGiB - (kGiB + kGiB / 2) + 500 * kMiB);
  EXPECT_EQ(DefaultDeviceCapacity(8 * kGiB, 2, h, std::nullopt), 2 * kGiB);
}

TEST(HostMemoryTest, CgroupV2AndAddressSpaceLimit) {
  FakeHost host;
  host.Write("/proc/meminfo", "MemTotal: 16777216 kB\nMemAvailable: 12582912 kB\n");
  host.Write("/proc/self/cgroup", "0::/user/app\n");
  host.Write("/sys/fs/cgroup/user/app/memory.max", "max\n");
  host.Write("/sys/fs/cgroup/user/memory.max", std::to_string(3 * kGiB) + "\n");
  host.Write("/sys/fs/cgroup/user/memory.current", std::to_string(kGiB) + "\n");
  host.Write("/sys/fs/cgroup/user/memory.stat", "anon 1\nfile 0\nshmem 0\n");
  HostMemory h = ReadHostMemory(host.root());
  EXPECT_EQ(h.cgroup_limit, 3 * kGiB);
  EXPECT_EQ(h.available, 2 * kGiB);
  EXPECT_EQ(DefaultDeviceCapacity(8 * kGiB, 2, h, std::nullopt), 3 * kGiB);
  // 8 GiB of address space left, 2 devices: a quarter of it, split between them.
  EXPECT_EQ(DefaultDeviceCapacity(8 * kGiB, 2, h, 8 * kGiB), kGiB);
  EXPECT_EQ(DefaultDeviceCapacity(8 * kGiB, 1, h, 100), kMiB);  // never below 1 MiB
}

TEST(HostMemoryTest, NothingReadableMeansNoBound) {
  FakeHost host;
  HostMemory h = ReadHostMemory(host.root() + "/missing");
  EXPECT_EQ(h.physical, 0u);
  EXPECT_FALSE(h.available.has_value());
  EXPECT_EQ(DefaultDeviceCapacity(8 * kGiB, 2, h, std::nullopt), 8 * kGiB);
}

}  // namespace
}  // namespace xxnpu
