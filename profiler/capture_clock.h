// How a capture's activity records get from the trace clock (device/clock.h) to the Unix
// time of the trace.
//
// torch.profiler stamps its own op events with the same counter and, when a capture ends,
// converts them with a function it builds from clock readings taken at the capture's start
// and end; it installs that function as Kineto's time converter just before it collects the
// device plugins' activities. Converting our records with that very function puts both
// sides of the trace on one clock, to the tick: a runtime call nests inside the op that made
// it however loaded the machine. When torch's function is absent or disagrees with the
// clocks (Kineto's identity default outside torch.profiler, a converter left by another
// capture), records are converted along a line fitted through our own readings at the
// capture's start and stop instead (off by tens of ns at most).
#ifndef TORCH_XXNPU_PROFILER_CAPTURE_CLOCK_H_
#define TORCH_XXNPU_PROFILER_CAPTURE_CLOCK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "device/clock.h"

#if XXNPU_TRACE_CLOCK_IS_TSC
// libkineto's time converter (declared in kineto's ApproximateClock.h, a header torch does
// not ship; the function is exported by libtorch_cpu). torch.profiler assigns it the
// converter of its own events in finalizeTrace(), before it stops Kineto and so before a
// plugin's processTrace() runs. approx_time_t is uint64_t where the counter is the TSC.
namespace libkineto {
std::function<int64_t(uint64_t)>& get_time_converter();
}  // namespace libkineto
#endif

namespace xxnpu::profiler {

struct CaptureClock {
  std::function<int64_t(int64_t)> to_unix_ns;
  // "torch.profiler" (torch's own converter) or "fitted" (our line).
  std::string source;
};

// The conversion for a capture whose clocks were read at `start` and `stop`.
CaptureClock ChooseCaptureClock(TraceClockPair start, TraceClockPair stop);

// The conversion the last converted capture used, for tools that stamp with the trace clock
// themselves (the accuracy test's kernel bodies) and compare with that capture's trace.
// Before any capture: a line through the clocks read at load and now.
void SetLastCaptureClock(CaptureClock clock);
CaptureClock LastCaptureClock();

}  // namespace xxnpu::profiler

#endif  // TORCH_XXNPU_PROFILER_CAPTURE_CLOCK_H_
