// Helpers shared by the pointwise op files (comparison_ops.cc, binary_math_ops.cc,
// ternary_ops.cc).
#ifndef TORCH_XXNPU_OPS_POINTWISE_COMMON_H_
#define TORCH_XXNPU_OPS_POINTWISE_COMMON_H_

#include <ATen/core/Tensor.h>

#include <type_traits>

namespace xxnpu {

inline bool IsComplex(const at::Tensor& t) { return t.defined() && at::isComplexType(t.scalar_type()); }

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

// CUDA accepts CPU 0-dim tensors next to device tensors in these ops; the device cannot
// read host memory, so such a scalar is copied over first (a tiny async copy).
inline at::Tensor OnDeviceOf(const at::Tensor& t, const at::Tensor& like) {
  if (t.defined() && t.device().is_cpu() && t.dim() == 0 && like.device().is_privateuseone()) {
    return t.to(like.device(), /*non_blocking=*/true);
  }
  return t;
}

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_POINTWISE_COMMON_H_
