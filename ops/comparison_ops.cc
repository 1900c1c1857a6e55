// Comparisons (eq/ne/lt/le/gt/ge: a bool result, or the out= tensor's dtype) and the
// logical ops (operands as truth values) on xxnpu: scalar expressions handed to
// LaunchBinary (ops/elementwise.h); structured ops register `.out` only (see unary_ops.cc).
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

// ---- comparisons: bool out (or the out= dtype).
template <typename Cmp>
at::Tensor& CompareOut(const char* name, const at::Tensor& self, const at::Tensor& other, at::Tensor& out, Cmp cmp,
                       VecBinaryOp vec = VecBinaryOp::kNone) {
  const c10::DeviceGuard guard(out.device());
  auto iter = at::TensorIterator::comparison_op(out, self, other);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_compare", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    LaunchBinary<scalar_t>(name, iter, [cmp](opmath_t a, opmath_t b) { return static_cast<opmath_t>(cmp(a, b)); }, 1,
                           vec);
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  return out;
}

// One functor type per comparison, shared by the Tensor and Scalar forms: each distinct
// callable instantiates LaunchBinary for every dtype, so sharing halves this file's
// template instantiations (and its compile time, which under ASan exceeded minutes).
#define XXNPU_COMPARISON(Name, op, expr, vec)                                                               \
  struct Name##Cmp {                                                                                      \
    template <typename T>                                                                                 \
    bool operator()(T a, T b) const {                                                                     \
      return expr;                                                                                        \
    }                                                                                                     \
  };                                                                                                      \
  at::Tensor& Name##TensorOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {         \
    if (IsComplex(self) || IsComplex(other)) {                                                            \
      return FallbackFor<at::_ops::op##_Tensor_out>::call(self, other, out);                              \
    }                                                                                                     \
    return CompareOut("xxnpu::" #op, self, other, out, Name##Cmp{}, VecBinaryOp::vec);                    \
  }                                                                                                       \
  at::Tensor& Name##ScalarOut(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) {         \
    if (IsComplex(self) || other.isComplex()) {                                                           \
      return FallbackFor<at::_ops::op##_Scalar_out>::call(self, other, out);                              \
    }                                                                                                     \
    return CompareOut("xxnpu::" #op, self, WrapScalar(other), out, Name##Cmp{}, VecBinaryOp::vec);        \
  }
XXNPU_COMPARISON(Eq, eq, a == b, kEq)
XXNPU_COMPARISON(Ne, ne, a != b, kNe)
XXNPU_COMPARISON(Lt, lt, a < b, kLt)
XXNPU_COMPARISON(Le, le, a <= b, kLe)
XXNPU_COMPARISON(Gt, gt, a > b, kGt)
XXNPU_COMPARISON(Ge, ge, a >= b, kGe)
#undef XXNPU_COMPARISON

// ---- logical ops: operands as truth values, bool out.
#define XXNPU_LOGICAL(Name, op, expr)                                                                    \
  at::Tensor& Name##Out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {              \
    if (IsComplex(self) || IsComplex(other)) return FallbackFor<at::_ops::op##_out>::call(self, other, out); \
    return CompareOut("xxnpu::" #op, self, other, out, [](auto a, auto b) {                              \
      const bool x = a != decltype(a)(0), y = b != decltype(b)(0);                                       \
      return expr;                                                                                       \
    });                                                                                                  \
  }
XXNPU_LOGICAL(LogicalAnd, logical_and, x && y)
XXNPU_LOGICAL(LogicalOr, logical_or, x || y)
XXNPU_LOGICAL(LogicalXor, logical_xor, x != y)
#undef XXNPU_LOGICAL

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("eq.Tensor_out", &EqTensorOut);
  m.impl("eq.Scalar_out", &EqScalarOut);
  m.impl("ne.Tensor_out", &NeTensorOut);
  m.impl("ne.Scalar_out", &NeScalarOut);
  m.impl("lt.Tensor_out", &LtTensorOut);
  m.impl("lt.Scalar_out", &LtScalarOut);
  m.impl("le.Tensor_out", &LeTensorOut);
  m.impl("le.Scalar_out", &LeScalarOut);
  m.impl("gt.Tensor_out", &GtTensorOut);
  m.impl("gt.Scalar_out", &GtScalarOut);
  m.impl("ge.Tensor_out", &GeTensorOut);
  m.impl("ge.Scalar_out", &GeScalarOut);
  m.impl("logical_and.out", &LogicalAndOut);
  m.impl("logical_or.out", &LogicalOrOut);
  m.impl("logical_xor.out", &LogicalXorOut);
}

}  // namespace
}  // namespace xxnpu
