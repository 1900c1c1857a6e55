// torch_xxnpu._C bindings of the profiler layer: marker ranges (torch.xxnpu.markers) and
// the trace clock (profiler/capture_clock.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "device/clock.h"
#include "profiler/capture_clock.h"
#include "profiler/markers.h"
#include "python/csrc/bindings.h"

namespace xxnpu {

void InitProfilerBindings(pybind11::module_& m) {
  m.def("_marker_range_push", [](const std::string& name) { return MarkerRangePush(name); });
  m.def("_marker_range_pop", [] { return MarkerRangePop(); });
  m.def("_marker_mark", [](const std::string& name) { MarkerMark(name); });

  m.def("_trace_clock_now", &TraceClockNow,
        "The clock the device runtime stamps activity records with (the TSC on x86-64).");
  m.def(
      "_trace_clock_to_unix_ns",
      [](const std::vector<int64_t>& ticks) {
        const profiler::CaptureClock clock = profiler::LastCaptureClock();
        std::vector<int64_t> out;
        out.reserve(ticks.size());
        for (int64_t t : ticks) out.push_back(clock.to_unix_ns(t));
        return out;
      },
      "Trace-clock readings to Unix-epoch ns, as the last profiler capture converted its records.");
  m.def("_trace_clock_source", [] { return profiler::LastCaptureClock().source; },
        "How the last capture converted its records: 'torch.profiler' or 'fitted'.");
}

}  // namespace xxnpu
