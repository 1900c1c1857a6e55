// ComputePool: every block runs exactly once, Run returns only after the last straggler has
// left the job (which lives on the launcher's stack), errors come back, and several
// launchers share one pool. Each case runs with spin_us = 0 (the launcher sleeps on the
// condition variable at once) and 50 (it polls first), the two ways a launcher waits.
#include "device/simulator/compute_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

class ComputePoolTest : public ::testing::TestWithParam<int> {};

TEST_P(ComputePoolTest, EveryBlockOnceAndNothingAfterRunReturns) {
  ComputePool pool(3, GetParam());
  for (int round = 0; round < 200; ++round) {
    const int64_t total = 1 + round % 37;
    std::vector<std::atomic<int>> hits(total);
    std::atomic<int64_t> running{0};
    const absl::Status s = pool.Run(total, true, 0, [&](BlockRange r) {
      running.fetch_add(1);
      // Some shares are slow, so that the launcher finishes its own first and must wait.
      if (r.begin % 5 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200));
      for (int64_t b = r.begin; b < r.end; ++b) hits[b].fetch_add(1);
      running.fetch_sub(1);
      return absl::OkStatus();
    });
    ASSERT_TRUE(s.ok()) << s;
    // Run has returned: no share may still be inside the body.
    ASSERT_EQ(running.load(), 0) << "round " << round;
    for (int64_t b = 0; b < total; ++b) ASSERT_EQ(hits[b].load(), 1) << "block " << b << " of " << total;
  }
}

TEST_P(ComputePoolTest, AFailingShareFailsTheRunAndTheRestStillRun) {
  ComputePool pool(2, GetParam());
  std::atomic<int64_t> blocks{0};
  const absl::Status s = pool.Run(64, true, 0, [&](BlockRange r) {
    blocks.fetch_add(r.end - r.begin);
    if (r.begin <= 40 && 40 < r.end) return absl::InternalError("block 40 failed");
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "block 40 failed");
  EXPECT_EQ(blocks.load(), 64);
}

TEST_P(ComputePoolTest, ConcurrentLaunchersShareThePool) {
  ComputePool pool(3, GetParam());
  std::vector<std::thread> launchers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 3; ++t) {
    launchers.emplace_back([&, t] {
      for (int round = 0; round < 100; ++round) {
        std::atomic<int64_t> sum{0};
        const absl::Status s = pool.Run(100, true, t, [&](BlockRange r) {
          for (int64_t b = r.begin; b < r.end; ++b) sum.fetch_add(b);
          return absl::OkStatus();
        });
        if (!s.ok() || sum.load() != 99 * 100 / 2) bad.fetch_add(1);
      }
    });
  }
  for (auto& l : launchers) l.join();
  EXPECT_EQ(bad.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(SpinUs, ComputePoolTest, ::testing::Values(0, 50));

}  // namespace
}  // namespace xxnpu
