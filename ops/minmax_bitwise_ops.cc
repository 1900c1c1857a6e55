// maximum/minimum (NaN-propagating) and the bitwise and/or/xor on xxnpu: scalar
// expressions handed to ArithOut (pointwise_common.h); structured ops register `.out` only.
// A file of their own so that no pointwise file dominates a build's compile time.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <optional>
#include <type_traits>

#include "ops/cpu_fallback.h"
#include "ops/elementwise.h"
#include "ops/pointwise_common.h"

namespace xxnpu {
namespace {

at::Tensor& MaximumOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  TORCH_CHECK(!IsComplex(self) && !IsComplex(other), "maximum not implemented for complex tensors.");
  return ArithOut("xxnpu::maximum", at::TensorIterator::borrowing_binary_op(out, self, other), out, [](auto a, auto b) {
    if constexpr (kIsFloat<decltype(a)>) {
      if (std::isnan(a) || std::isnan(b)) return a + b;  // NaN propagates
    }
    return a > b ? a : b;
  }, true, VecBinaryOp::kMaximum);
}

at::Tensor& MinimumOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  TORCH_CHECK(!IsComplex(self) && !IsComplex(other), "minimum not implemented for complex tensors.");
  return ArithOut("xxnpu::minimum", at::TensorIterator::borrowing_binary_op(out, self, other), out, [](auto a, auto b) {
    if constexpr (kIsFloat<decltype(a)>) {
      if (std::isnan(a) || std::isnan(b)) return a + b;
    }
    return a < b ? a : b;
  }, true, VecBinaryOp::kMinimum);
}

#define XXNPU_BITWISE(Name, op, sym)                                                                         \
  at::Tensor& Name##Out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {                  \
    auto iter = at::TensorIterator::borrowing_binary_op(out, self, other);                                   \
    TORCH_CHECK(at::isIntegralType(iter.common_dtype(), /*includeBool=*/true), #op                            \
                " is only implemented for integral and bool tensors, got ", iter.common_dtype());            \
    return ArithOut("xxnpu::" #op, iter, out, [](auto a, auto b) {                                           \
      using T = decltype(a);                                                                                 \
      if constexpr (kIsFloat<T>) {                                                                           \
        return a; /* unreachable: checked above */                                                           \
      } else {                                                                                               \
        return static_cast<T>(a sym b);                                                                      \
      }                                                                                                      \
    });                                                                                                      \
  }
XXNPU_BITWISE(BitwiseAnd, bitwise_and, &)
XXNPU_BITWISE(BitwiseOr, bitwise_or, |)
XXNPU_BITWISE(BitwiseXor, bitwise_xor, ^)
#undef XXNPU_BITWISE

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("maximum.out", &MaximumOut);
  m.impl("minimum.out", &MinimumOut);
  m.impl("bitwise_and.Tensor_out", &BitwiseAndOut);
  m.impl("bitwise_or.Tensor_out", &BitwiseOrOut);
  m.impl("bitwise_xor.Tensor_out", &BitwiseXorOut);
}

}  // namespace
}  // namespace xxnpu
