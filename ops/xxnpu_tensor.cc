// Allocation straight from the xxnpu allocator, and the shared device check.
#include "ops/xxnpu_tensor.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/DispatchKeySet.h>

namespace xxnpu {

void CheckSameDevice(const char* op, const char* arg, const at::Tensor& t, c10::Device expected) {
  TORCH_CHECK(!t.defined() || t.device() == expected,
              "Expected all tensors to be on the same device, but found at least two devices, ", expected, " and ",
              t.device(), "! (when checking argument for argument ", arg, " in method ", op, ")");
}

at::Tensor NewXxnpuTensor(c10::IntArrayRef sizes, std::optional<c10::IntArrayRef> strides, at::ScalarType dtype,
                          std::optional<at::MemoryFormat> memory_format) {
  constexpr c10::DispatchKeySet kKeys(c10::DispatchKey::PrivateUse1);
  c10::Allocator* allocator = c10::GetAllocator(c10::DeviceType::PrivateUse1);
  return strides ? at::detail::empty_strided_generic(sizes, *strides, allocator, kKeys, dtype)
                 : at::detail::empty_generic(sizes, allocator, kKeys, dtype, memory_format);
}

void AllocatingIterator::set_output_raw_strided(int64_t output_idx, c10::IntArrayRef sizes,
                                                c10::IntArrayRef strides, at::TensorOptions options) {
  at::Tensor& out = outputs_.at(output_idx);
  if (!out.defined()) {
    // TensorIterator passes no strides when the output may be contiguous.
    out = NewXxnpuTensor(sizes, strides.empty() ? std::nullopt : std::optional<c10::IntArrayRef>(strides),
                         options.dtype().toScalarType(), options.memory_format_opt());
  }
  at::TensorIteratorBase::set_output_raw_strided(output_idx, sizes, strides, options);
}

}  // namespace xxnpu
