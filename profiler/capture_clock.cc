#include "profiler/capture_clock.h"

#include <cstdlib>
#include <mutex>
#include <utility>

namespace xxnpu::profiler {
namespace {

// How far torch's converter may be from our own readings and still be taken. Its own
// error is well under a microsecond; Kineto's identity default is off by decades and a
// stale converter from another capture drifts by its rate's error.
constexpr int64_t kAgreementNs = 20'000;

std::mutex g_last_mu;
CaptureClock* g_last = nullptr;  // guarded by g_last_mu; leaked, read at exit by nobody

CaptureClock Fitted(TraceClockPair start, TraceClockPair stop) {
  const TraceClockToUnix line(start, stop);
  return {[line](int64_t ticks) { return line(ticks); }, "fitted"};
}

}  // namespace

CaptureClock ChooseCaptureClock(TraceClockPair start, TraceClockPair stop) {
#if XXNPU_TRACE_CLOCK_IS_TSC
  std::function<int64_t(uint64_t)> torch_converter = libkineto::get_time_converter();  // a copy
  auto agrees = [&](const TraceClockPair& p) {
    if (!torch_converter) return false;
    const int64_t t = torch_converter(static_cast<uint64_t>(p.ticks));
    return t > 0 && std::llabs(t - p.unix_ns) <= kAgreementNs;
  };
  if (agrees(start) && agrees(stop)) {
    return {[f = std::move(torch_converter)](int64_t ticks) { return f(static_cast<uint64_t>(ticks)); },
            "torch.profiler"};
  }
#endif
  return Fitted(start, stop);
}

void SetLastCaptureClock(CaptureClock clock) {
  std::lock_guard<std::mutex> lock(g_last_mu);
  if (g_last == nullptr) g_last = new CaptureClock();
  *g_last = std::move(clock);
}

CaptureClock LastCaptureClock() {
  {
    std::lock_guard<std::mutex> lock(g_last_mu);
    if (g_last != nullptr) return *g_last;
  }
  const TraceClockPair now = MeasureTraceClockPair();
  return Fitted(now, now);  // the rate comes from the load-time reading (device/clock.h)
}

}  // namespace xxnpu::profiler
