// torch_xxnpu._C bindings of the profiler layer: marker ranges (torch.xxnpu.markers).
#include <pybind11/pybind11.h>

#include <string>

#include "profiler/markers.h"
#include "python/csrc/bindings.h"

namespace xxnpu {

void InitProfilerBindings(pybind11::module_& m) {
  m.def("_marker_range_push", [](const std::string& name) { return MarkerRangePush(name); });
  m.def("_marker_range_pop", [] { return MarkerRangePop(); });
  m.def("_marker_mark", [](const std::string& name) { MarkerMark(name); });
}

}  // namespace xxnpu
