// torch_xxnpu._C: the one extension module. It links every layer, so the device state,
// allocator and tracer exist once per process. Each layer adds its bindings here.
#include <pybind11/pybind11.h>
#include <torch/version.h>

#include "device/clock.h"
#include "python/csrc/bindings.h"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch-xxnpu native extension";

  // What this module was compiled against; the package refuses to load into another
  // torch, whose C++ ABI may differ.
  py::dict build;
  build["torch_version"] = TORCH_VERSION;
  build["cxx11_abi"] = static_cast<bool>(_GLIBCXX_USE_CXX11_ABI);
  build["cplusplus"] = static_cast<long>(__cplusplus);
  m.attr("_build_info") = build;

  m.def("_now_ns", &xxnpu::NowNs,
        "Device-runtime wall clock: Unix-epoch nanoseconds (CLOCK_REALTIME).");

  xxnpu::InitDeviceBindings(m);
  xxnpu::InitGraphBindings(m);
  xxnpu::InitIpcBindings(m);
  xxnpu::InitOpsBindings(m);
  xxnpu::InitProfilerBindings(m);
  xxnpu::InitDistributedBindings(m);
  xxnpu::InitCompilerBindings(m);
}
