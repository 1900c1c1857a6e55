// Which conversion a capture's records go through: torch's converter when it agrees with
// the clocks, the fitted line otherwise.
#include "profiler/capture_clock.h"

#include <chrono>
#include <thread>

#include "device/clock.h"
#include "gtest/gtest.h"

namespace xxnpu::profiler {
namespace {

#if XXNPU_TRACE_CLOCK_IS_TSC
class CaptureClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = libkineto::get_time_converter();
    start_ = MeasureTraceClockPair();
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    stop_ = MeasureTraceClockPair();
  }
  void TearDown() override { libkineto::get_time_converter() = saved_; }

  std::function<int64_t(uint64_t)> saved_;
  TraceClockPair start_, stop_;
};

// Kineto's default converter is the identity (ticks taken for ns): far from the clocks,
// so the line is used, and it maps the capture's readings onto its wall times.
TEST_F(CaptureClockTest, KinetoIdentityConverterIsRefused) {
  libkineto::get_time_converter() = [](uint64_t t) { return static_cast<int64_t>(t); };
  const CaptureClock clock = ChooseCaptureClock(start_, stop_);
  EXPECT_EQ(clock.source, "fitted");
  EXPECT_EQ(clock.to_unix_ns(stop_.ticks), stop_.unix_ns);
  EXPECT_NEAR(clock.to_unix_ns(start_.ticks), start_.unix_ns, 1'000);
}

// A converter that agrees with the clocks (as torch's does) is used as is: its values,
// offset included, are what the records get, so they match torch's own events.
TEST_F(CaptureClockTest, AgreeingConverterIsUsedExactly) {
  const TraceClockToUnix line(start_, stop_);
  constexpr int64_t kOffset = 700;  // torch's conversion error: within the agreement
  libkineto::get_time_converter() = [line](uint64_t t) { return line(static_cast<int64_t>(t)) + kOffset; };
  const CaptureClock clock = ChooseCaptureClock(start_, stop_);
  EXPECT_EQ(clock.source, "torch.profiler");
  const int64_t mid = (start_.ticks + stop_.ticks) / 2;
  EXPECT_EQ(clock.to_unix_ns(mid), line(mid) + kOffset);
}

// One that is off by more than the agreement (a stale converter, Kineto's own rough one)
// is refused; so is an empty one, and one that maps before its origin to 0 (torch's does).
TEST_F(CaptureClockTest, DisagreeingOrEmptyConverterIsRefused) {
  const TraceClockToUnix line(start_, stop_);
  libkineto::get_time_converter() = [line](uint64_t t) { return line(static_cast<int64_t>(t)) + 100'000; };
  EXPECT_EQ(ChooseCaptureClock(start_, stop_).source, "fitted");
  libkineto::get_time_converter() = nullptr;
  EXPECT_EQ(ChooseCaptureClock(start_, stop_).source, "fitted");
  const int64_t origin = stop_.ticks;  // start_ precedes it: 0, as torch's converter does
  libkineto::get_time_converter() = [line, origin](uint64_t t) {
    return static_cast<int64_t>(t) > origin ? line(static_cast<int64_t>(t)) : 0;
  };
  EXPECT_EQ(ChooseCaptureClock(start_, stop_).source, "fitted");
}

TEST_F(CaptureClockTest, LastCaptureClockIsWhatWasSet) {
  SetLastCaptureClock({[](int64_t t) { return t * 2; }, "test"});
  const CaptureClock last = LastCaptureClock();
  EXPECT_EQ(last.source, "test");
  EXPECT_EQ(last.to_unix_ns(21), 42);
}
#endif

}  // namespace
}  // namespace xxnpu::profiler
