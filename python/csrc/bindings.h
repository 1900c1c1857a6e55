// Each layer's part of torch_xxnpu._C; module.cc calls them in layer order.
#ifndef TORCH_XXNPU_PYTHON_CSRC_BINDINGS_H_
#define TORCH_XXNPU_PYTHON_CSRC_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace xxnpu {

void InitDeviceBindings(pybind11::module_& m);
void InitGraphBindings(pybind11::module_& m);
void InitIpcBindings(pybind11::module_& m);
void InitOpsBindings(pybind11::module_& m);
void InitProfilerBindings(pybind11::module_& m);
void InitDistributedBindings(pybind11::module_& m);
void InitCompilerBindings(pybind11::module_& m);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_PYTHON_CSRC_BINDINGS_H_
