// The CPU's checks of out= tensors, for hand-written kernels (ops/out_checks.h).
#include "ops/out_checks.h"

#include <ATen/native/Resize.h>
#include <c10/core/ScalarTypeToTypeMeta.h>

namespace xxnpu {

void CheckOutDevice(const at::Tensor& out, c10::Device expected) {
  TORCH_CHECK(out.device() == expected, "Expected out tensor to have device ", expected, ", but got ", out.device(),
              " instead");
}

void CheckOutDtype(const at::Tensor& out, at::ScalarType expected) {
  TORCH_CHECK(out.scalar_type() == expected, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(expected),
              ", but got ", out.dtype(), " instead");
}

void CheckCastsToOut(at::ScalarType result, const at::Tensor& out) {
  TORCH_CHECK(c10::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
}

void ResizeOut(const at::Tensor& out, c10::IntArrayRef sizes, c10::IntArrayRef strides,
               const at::TensorOptions& options) {
  CheckOutDtype(out, options.dtype().toScalarType());
  CheckOutDevice(out, options.device());
  if (at::native::resize_output(out, sizes)) {
    // As the CPU: only a tensor that was resized takes the meta function's strides; an out
    // of the right shape keeps its own (the kernels handle any strides).
    if (!strides.empty()) {
      out.as_strided_(sizes, strides);
    } else if (options.memory_format_opt().has_value()) {
      out.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
    }
  }
}

}  // namespace xxnpu
