#include "device/clock.h"

#include <time.h>

#include <cmath>

namespace xxnpu {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

TraceClockPair MeasureTraceClockPair() {
#if XXNPU_TRACE_CLOCK_IS_TSC
  // A bracket is as wide as the NowNs() call plus whatever interrupted it; the narrowest
  // of a few bounds the pair's error by half its width (~10 ns when nothing interrupts).
  TraceClockPair best;
  int64_t best_width = -1;
  for (int i = 0; i < 16; ++i) {
    const int64_t before = TraceClockNow();
    const int64_t unix_ns = NowNs();
    const int64_t after = TraceClockNow();
    const int64_t width = after - before;
    if (best_width < 0 || width < best_width) {
      best_width = width;
      best = {before + width / 2, unix_ns};
    }
  }
  return best;
#else
  const int64_t now = NowNs();
  return {now, now};
#endif
}

namespace {

// A pair read when this library was loaded: a long baseline for the rate when a caller's
// pairs are close together (a short capture).
const TraceClockPair g_load_pair = MeasureTraceClockPair();

double Rate(const TraceClockPair& a, const TraceClockPair& b) {
  const int64_t dticks = b.ticks - a.ticks;
  const int64_t dns = b.unix_ns - a.unix_ns;
  return dticks > 0 && dns > 0 ? static_cast<double>(dns) / static_cast<double>(dticks) : 0.0;
}

}  // namespace

TraceClockToUnix::TraceClockToUnix(TraceClockPair first, TraceClockPair last) : origin_(last) {
  // Conversions mostly happen right after a capture, near the later pair: it is the origin.
  // Each pair is off by up to ~10 ns, so two pairs 1 ms apart fix the rate to ~2e-5 (20 ns
  // a millisecond away); closer pairs borrow the process's longer baseline.
  constexpr int64_t kShortNs = 10'000'000;
  double rate = Rate(first, last);
  if (last.unix_ns - first.unix_ns < kShortNs) {
    const double longer = Rate(g_load_pair, last);
    if (longer > 0 && last.unix_ns - g_load_pair.unix_ns > kShortNs) rate = longer;
  }
  // No usable rate (the identity clock of other architectures, or pairs read in one
  // nanosecond): 1 ns per tick, exact for the identity clock.
  ns_per_tick_ = rate > 0 ? rate : 1.0;
}

int64_t TraceClockToUnix::operator()(int64_t ticks) const {
  // Offsets from the origin stay small, so the double keeps nanosecond precision.
  return origin_.unix_ns + static_cast<int64_t>(std::llround(static_cast<double>(ticks - origin_.ticks) * ns_per_tick_));
}

}  // namespace xxnpu
