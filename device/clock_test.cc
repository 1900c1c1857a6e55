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

TEST(TraceClockTest, AdvancesMonotonically) {
  int64_t last = TraceClockNow();
  for (int i = 0; i < 1000; ++i) {
    const int64_t t = TraceClockNow();
    EXPECT_GE(t, last);
    last = t;
  }
}

// A pair reads both clocks at one instant: its trace-clock reading lies between readings
// taken just before and after, and its wall time between NowNs() readings likewise.
TEST(TraceClockTest, PairIsReadAtOneInstant) {
  const int64_t ticks_before = TraceClockNow();
  const int64_t ns_before = NowNs();
  const TraceClockPair p = MeasureTraceClockPair();
  const int64_t ns_after = NowNs();
  const int64_t ticks_after = TraceClockNow();
  EXPECT_LE(ticks_before, p.ticks);
  EXPECT_LE(p.ticks, ticks_after);
  EXPECT_LE(ns_before, p.unix_ns);
  EXPECT_LE(p.unix_ns, ns_after);
}

// The line through two pairs maps them to themselves, readings in between to NowNs()
// readings around them, and keeps order (the profiler's nesting depends on it).
TEST(TraceClockTest, LineConvertsToUnixNanoseconds) {
  const TraceClockPair first = MeasureTraceClockPair();
  absl::SleepFor(absl::Milliseconds(20));
  const int64_t ns_before = NowNs();
  const int64_t middle = TraceClockNow();
  const int64_t ns_after = NowNs();
  absl::SleepFor(absl::Milliseconds(20));
  const TraceClockPair last = MeasureTraceClockPair();
  const TraceClockToUnix line(first, last);
  constexpr int64_t kPairErrorNs = 1'000;  // each pair is good to ~10 ns; generous
  EXPECT_NEAR(line(first.ticks), first.unix_ns, kPairErrorNs);
  EXPECT_EQ(line(last.ticks), last.unix_ns);  // the origin
  EXPECT_GE(line(middle), ns_before - kPairErrorNs);
  EXPECT_LE(line(middle), ns_after + kPairErrorNs);
  for (int64_t t = middle; t < middle + 1000; ++t) EXPECT_LE(line(t), line(t + 1));
  // Pairs read back to back give no rate of their own: the load-time reading's is used,
  // so a short span still converts at ~1 ns per ns.
  const TraceClockPair a = MeasureTraceClockPair();
  const TraceClockPair b = MeasureTraceClockPair();
  const TraceClockToUnix short_line(a, b);
  const int64_t span_ticks = last.ticks - first.ticks;
  const int64_t span_ns = short_line(b.ticks) - short_line(b.ticks - span_ticks);
  EXPECT_NEAR(span_ns, last.unix_ns - first.unix_ns, 50'000);  // 40 ms, to 0.1%
}

}  // namespace
}  // namespace xxnpu
