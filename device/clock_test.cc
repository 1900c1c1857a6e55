#include "device/clock.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

// Same epoch and unit as abseil's wall clock: the two readings bracket each other.
TEST(ClockTest, MatchesUnixEpochNanoseconds) {
  const int64_t before = absl::GetCurrentTimeNanos();
  const int64_t now = NowNs();
  const int64_t after = absl::GetCurrentTimeNanos();
  EXPECT_LE(before, now);
  EXPECT_LE(now, after);
}

TEST(ClockTest, AdvancesMonotonicallyOverShortIntervals) {
  int64_t last = NowNs();
  for (int i = 0; i < 1000; ++i) {
    const int64_t t = NowNs();
    EXPECT_GE(t, last);
    last = t;
  }
}

}  // namespace
}  // namespace xxnpu
