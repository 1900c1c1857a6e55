// Entry points of the binary kernels for other ops of this layer (custom ops).
#ifndef TORCH_XXNPU_OPS_BINARY_OPS_H_
#define TORCH_XXNPU_OPS_BINARY_OPS_H_

#include <ATen/core/Tensor.h>

namespace xxnpu {

// a + b on xxnpu (broadcasting, type promotion), as aten::add.Tensor with alpha = 1.
at::Tensor XxnpuAdd(const at::Tensor& a, const at::Tensor& b);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_BINARY_OPS_H_
