// The device runtime's clocks.
//
// NowNs(): nanoseconds since the Unix epoch from CLOCK_REALTIME, the clock torch stamps
// wall times with (c10::getTime()): for timeouts, event timestamps and memory history.
//
// TraceClockNow(): what activity records are stamped with (device/activity_trace.h). On
// x86-64 it is the time-stamp counter, the counter torch.profiler stamps its own op events
// with (c10::getApproximateTime()) and converts to Unix time when a capture ends. Records
// read from the same counter can be converted by the same function, so a runtime call
// lands exactly inside the op that made it. (Stamped with CLOCK_REALTIME instead, they
// disagreed with torch's converted op times by tens to hundreds of nanoseconds, so a
// launch could end "after" its op: a broken nesting in about one capture in five under
// load.) Elsewhere the trace clock is NowNs() and every conversion below is the identity.
#ifndef TORCH_XXNPU_DEVICE_CLOCK_H_
#define TORCH_XXNPU_DEVICE_CLOCK_H_

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#define XXNPU_TRACE_CLOCK_IS_TSC 1
#else
#define XXNPU_TRACE_CLOCK_IS_TSC 0
#endif

namespace xxnpu {

// Unix-epoch nanoseconds (CLOCK_REALTIME). Cheap: served from the vDSO, no syscall.
int64_t NowNs();

// The trace clock: TSC ticks on x86-64 (one instruction), NowNs() elsewhere. Monotonic
// across cores on the machines torch's own TSC stamps assume (constant, synchronised TSC).
inline int64_t TraceClockNow() {
#if XXNPU_TRACE_CLOCK_IS_TSC
  return static_cast<int64_t>(__rdtsc());
#else
  return NowNs();
#endif
}

// Both clocks read at (nearly) one instant: the trace clock is read on either side of
// NowNs() and `ticks` is the midpoint of the tightest of a few such brackets.
struct TraceClockPair {
  int64_t ticks = 0;
  int64_t unix_ns = 0;
};
TraceClockPair MeasureTraceClockPair();

// Trace-clock readings to Unix-epoch ns along the line through two pairs. Readings
// between the pairs are off by at most the pairs' own error (tens of ns); readings
// outside drift with the rate's error, so measure the pairs around what is converted.
class TraceClockToUnix {
 public:
  TraceClockToUnix(TraceClockPair first, TraceClockPair last);
  int64_t operator()(int64_t ticks) const;

 private:
  TraceClockPair origin_;
  double ns_per_tick_ = 1.0;
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_CLOCK_H_
