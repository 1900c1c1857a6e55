// The c10 allocator's per-device allocators under concurrent first use (issue 21: the
// per-op path read a device's allocator without synchronisation while another thread
// could be creating it). A binary of its own so that every device really is touched
// first by the racing threads; the race is what ThreadSanitizer sees
// (bazel test --config=tsan //device/c10:xxnpu_allocator_test), and in any build the
// threads must agree on one allocator per device and allocate from it.
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "device/c10/xxnpu_allocator.h"
#include "device/runtime.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

constexpr int kDevices = 4;
constexpr int kThreads = 16;

TEST(XxnpuAllocatorTest, ManyThreadsTouchingADeviceFirstShareOneAllocator) {
  XxnpuDeviceAllocator* allocator = GetXxnpuAllocator();
  for (int d = 0; d < kDevices; ++d) {
    ASSERT_FALSE(allocator->HasDevice(d)) << "device " << d << " was used before the race";
  }
  for (int d = 0; d < kDevices; ++d) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<CachingAllocator*> seen(kThreads, nullptr);
    std::vector<int> allocated(kThreads, 0);  // not vector<bool>: its bits share words
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        ASSERT_TRUE(xxnpuSetDevice(d).ok());
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        // Half the threads come through the per-op path (allocate on the current
        // device), half through ForDevice: both read the device's slot.
        if (t % 2 == 0) {
          c10::DataPtr p = allocator->allocate(4096);
          allocated[t] = p.get() != nullptr && DeviceOfPointer(p.get()) == d;
        } else {
          allocated[t] = 1;
        }
        seen[t] = &allocator->ForDevice(static_cast<c10::DeviceIndex>(d));
      });
    }
    while (ready.load() < kThreads) std::this_thread::yield();
    go.store(true, std::memory_order_release);
    for (std::thread& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_EQ(seen[t], seen[0]) << "device " << d << ": thread " << t << " got another allocator";
      EXPECT_TRUE(allocated[t]) << "device " << d << ": thread " << t;
    }
    ASSERT_NE(seen[0], nullptr);
    EXPECT_EQ(seen[0]->device(), d);
    EXPECT_TRUE(allocator->HasDevice(d));
    // Every block went back to the one allocator the threads shared.
    EXPECT_EQ(seen[0]->GetStats().allocation[0].current, 0);
    EXPECT_EQ(seen[0]->GetStats().allocation[0].allocated, kThreads / 2);
  }
}

}  // namespace
}  // namespace xxnpu

int main(int argc, char** argv) {
  // Before the runtime's first use: enough devices for several first touches.
  setenv("XXNPU_DEVICE_COUNT", "4", 1);
  setenv("XXNPU_DEVICE_MEMORY", "64M", 1);
  setenv("XXNPU_COMPUTE_THREADS", "1", 1);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
