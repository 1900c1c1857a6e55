// torch_xxnpu._C bindings of the ops layer: what ran natively and what fell back to CPU.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "ops/cpu_fallback.h"
#include "python/csrc/bindings.h"

namespace xxnpu {

void InitOpsBindings(pybind11::module_& m) {
  m.def("_fallback_counts", &FallbackCounts);
  m.def("_reset_fallback_counts", &ResetFallbackCounts);
  m.def("_native_ops", &NativeOps);
}

}  // namespace xxnpu
