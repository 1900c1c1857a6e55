// torch.ops.xxnpu.*: the backend's own operators. Each has a schema, the xxnpu kernel, a
// CPU reference kernel (what correctness checks compare against) and a Meta kernel (shape
// inference for torch.compile / fake tensors / opcheck). Autograd formulas are
// registered from Python (torch_xxnpu/ops.py) with torch.library.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "ops/binary_ops.h"

namespace xxnpu {
namespace {

// The seed's op: elementwise a + b with broadcasting and type promotion.
at::Tensor AddCpu(const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }
at::Tensor AddMeta(const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }

TORCH_LIBRARY(xxnpu, m) {
  m.def("add(Tensor a, Tensor b) -> Tensor");
}

TORCH_LIBRARY_IMPL(xxnpu, PrivateUse1, m) { m.impl("add", &XxnpuAdd); }
TORCH_LIBRARY_IMPL(xxnpu, CPU, m) { m.impl("add", &AddCpu); }
TORCH_LIBRARY_IMPL(xxnpu, Meta, m) { m.impl("add", &AddMeta); }

}  // namespace
}  // namespace xxnpu
