// torch_xxnpu._C bindings of the compile path: the launcher through which Inductor's
// generated C++ kernels run as xxnpu device kernels (python/torch_xxnpu/compiler/inductor.py;
// the launcher itself is ops/compiled_kernel_launch.cc, shared with the C++ wrappers).
//
// A generated kernel's Python binding packs its arguments (data pointers, sizes, scalars)
// as 64-bit words and calls the launcher through its address (no link-time dependency: the
// generated .so links neither torch nor this module).
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "ops/compiled_kernel_launch.h"
#include "python/csrc/bindings.h"

namespace xxnpu {

void InitCompilerBindings(pybind11::module_& m) {
  m.def(
      "_compiled_kernel_launcher",
      [] { return reinterpret_cast<uintptr_t>(GetCompiledKernelApi()->launch); },
      "Address of the launcher Inductor's generated xxnpu kernels call (launch ABI version 3).");
  m.def(
      "_compiled_kernel_name",
      [](const std::string& name) { return reinterpret_cast<uintptr_t>(InternKernelName(name.c_str())); },
      "Interns a compiled kernel's name (or its fused-node list) for the launcher; returns its address.");
}

}  // namespace xxnpu
