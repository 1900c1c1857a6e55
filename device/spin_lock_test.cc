#include "device/spin_lock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace xxnpu {
namespace {

TEST(SpinLockTest, ExcludesOtherThreads) {
  // Unsynchronised read-modify-writes of a plain counter lose updates unless the lock
  // really excludes (ThreadSanitizer also reports a race if it does not).
  SpinLock lock;
  int64_t counter = 0;
  constexpr int kThreads = 4;
  constexpr int kIncrements = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        std::lock_guard<SpinLock> guard(lock);
        counter = counter + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, int64_t{kThreads} * kIncrements);
}

TEST(SpinLockTest, TryLockFailsWhileHeldAndSucceedsAfter) {
  SpinLock lock;
  ASSERT_TRUE(lock.try_lock());
  bool other = true;
  std::thread([&] { other = lock.try_lock(); }).join();
  EXPECT_FALSE(other);
  lock.unlock();
  std::thread([&] {
    other = lock.try_lock();
    if (other) lock.unlock();
  }).join();
  EXPECT_TRUE(other);
}

TEST(SpinLockTest, WaiterGetsTheLockFromAHolderThatSleeps) {
  // The holder blocks for a while (as the allocator does when it waits for the device):
  // the waiter must yield its way through, then get the lock.
  SpinLock lock;
  lock.lock();
  std::atomic<bool> acquired{false};
  std::thread waiter([&] {
    std::lock_guard<SpinLock> guard(lock);
    acquired.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(acquired.load());
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(acquired.load());
}

// SpinYielding: true once done() holds (set from another thread here), false at the
// deadline, and done() is asked before expired(), so a condition already met wins.
TEST(SpinYieldingTest, ReturnsWhenDoneOrExpired) {
  std::atomic<bool> flag{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    flag.store(true);
  });
  EXPECT_TRUE(SpinYielding([&] { return flag.load(); }, [] { return false; }));
  setter.join();

  int polls = 0;
  EXPECT_FALSE(SpinYielding([] { return false; }, [&] { return ++polls == 100; }));
  EXPECT_EQ(polls, 100);
  EXPECT_TRUE(SpinYielding([] { return true; }, [] { return true; }));
}

}  // namespace
}  // namespace xxnpu
