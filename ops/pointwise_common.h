// Helpers shared by the pointwise op files (comparison_ops.cc, binary_math_ops.cc,
// minmax_bitwise_ops.cc, ternary_ops.cc).
#ifndef TORCH_XXNPU_OPS_POINTWISE_COMMON_H_
#define TORCH_XXNPU_OPS_POINTWISE_COMMON_H_

#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>

#include <type_traits>

#include "ops/elementwise.h"

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

// Same-dtype binary ops over a dtype set: f(a, b) in opmath precision over every real dtype
// (integers only when `integers`); `vec`: the op's SIMD form (vec_kernels.h), if any.
template <typename F>
at::Tensor& ArithOut(const char* name, at::TensorIterator iter, at::Tensor& out, F f, bool integers = true,
                     VecBinaryOp vec = VecBinaryOp::kNone) {
  const c10::DeviceGuard guard(out.device());
  const at::ScalarType t = iter.common_dtype();
  TORCH_CHECK(integers || at::isFloatingType(t), name, " is only implemented for floating types, got ", t);
  AT_DISPATCH_V2(t, "xxnpu_arith", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    LaunchBinary<scalar_t>(name, iter, [f](opmath_t a, opmath_t b) { return static_cast<opmath_t>(f(a, b)); }, 1,
                           vec);
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  return out;
}

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_POINTWISE_COMMON_H_
