// Same-dtype binary math on xxnpu: fmod, remainder, floor_divide, atan2, logaddexp and pow:
// scalar expressions handed to ArithOut (pointwise_common.h); structured ops register
// `.out` only (see unary_ops.cc). maximum/minimum and the bitwise ops: minmax_bitwise_ops.cc.
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


// C's fmod: the result has the dividend's sign.
at::Tensor& FmodOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  auto iter = at::TensorIterator::borrowing_binary_op(out, self, other);
  TORCH_CHECK(!at::isComplexType(iter.common_dtype()), "fmod is not implemented for complex tensors");
  return ArithOut("xxnpu::fmod", iter, out, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (kIsFloat<T>) {
      return std::fmod(a, b);
    } else if constexpr (std::is_same_v<T, bool>) {
      return a;
    } else {
      TORCH_CHECK(b != 0, "ZeroDivisionError");  // a kernel fault, reported at the next sync
      return static_cast<T>(a % b);
    }
  });
}

// Python's %: the result has the divisor's sign.
at::Tensor& RemainderOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  auto iter = at::TensorIterator::borrowing_binary_op(out, self, other);
  TORCH_CHECK(!at::isComplexType(iter.common_dtype()), "remainder is not implemented for complex tensors");
  return ArithOut("xxnpu::remainder", iter, out, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (kIsFloat<T>) {
      T r = std::fmod(a, b);
      if (r != T(0) && ((r < T(0)) != (b < T(0)))) r += b;
      return r;
    } else if constexpr (std::is_same_v<T, bool>) {
      return a;
    } else {
      TORCH_CHECK(b != 0, "ZeroDivisionError");
      T r = static_cast<T>(a % b);
      if constexpr (std::is_signed_v<T>) {
        if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      }
      return r;
    }
  });
}

at::Tensor& FloorDivideOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  auto iter = at::TensorIterator::borrowing_binary_op(out, self, other);
  TORCH_CHECK(!at::isComplexType(iter.common_dtype()), "floor_divide is not implemented for complex tensors");
  ArithOut("xxnpu::floor_divide", iter, out, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (kIsFloat<T>) {
      if (b == T(0)) return a / b;
      // Python's floor division of floats: from fmod, so that a == b * q + r exactly.
      T mod = std::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
      if (div == T(0)) return std::copysign(T(0), a / b);
      T floordiv = std::floor(div);
      if (div - floordiv > T(0.5)) floordiv += T(1);
      return floordiv;
    } else if constexpr (std::is_same_v<T, bool>) {
      return a;
    } else {
      TORCH_CHECK(b != 0, "ZeroDivisionError");
      T q = static_cast<T>(a / b);
      if constexpr (std::is_signed_v<T>) {
        if ((a % b != 0) && ((a < 0) != (b < 0))) q = static_cast<T>(q - 1);
      }
      return q;
    }
  });
  return out;
}
at::Tensor FloorDivide(const at::Tensor& self, const at::Tensor& other) {
  const at::Tensor& like = self.device().is_privateuseone() ? self : other;
  at::Tensor out = at::empty({0}, like.options().dtype(at::result_type(self, other)));
  return FloorDivideOut(self, other, out);
}
at::Tensor& FloorDivideInplace(at::Tensor& self, const at::Tensor& other) { return FloorDivideOut(self, other, self); }

at::Tensor& Atan2Out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return ArithOut("xxnpu::atan2", at::TensorIterator::binary_float_op(out, self, other), out, [](auto a, auto b) {
    if constexpr (kIsFloat<decltype(a)>) {
      return std::atan2(a, b);
    } else {
      return a;
    }
  }, /*integers=*/false);
}

at::Tensor& LogaddexpOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  if (IsComplex(self) || IsComplex(other)) return FallbackFor<at::_ops::logaddexp_out>::call(self, other, out);
  return ArithOut("xxnpu::logaddexp", at::TensorIterator::borrowing_binary_op(out, self, other), out,
                  [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (kIsFloat<T>) {
      if (std::isinf(a) && a == b) return a;
      const T m = a > b ? a : b;
      return m + std::log1p(std::exp(-std::abs(a - b)));
    } else {
      return a;
    }
  }, /*integers=*/false);
}

// ---- pow. Floating dtypes run Sleef's pow through the vector kernels, as the CPU backend's
// dense loops do; a constant exponent of 0, 1, 2, 3, -2, 0.5, -0.5 or -1 takes the CPU's
// shortcuts (a fill, a copy, a square, sqrt...), exact where pow is not and much cheaper:
// x.square() and its backward (pow(x, 1)) ran std::pow per element, 0.69 ms for 1 MB
// floats against the CPU's 0.05.
template <typename T>
T IntPow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2 == 0) ? 1 : -1;
      return 0;
    }
  }
  T result = 1;
  while (exp) {
    if (exp & 1) result = static_cast<T>(result * base);
    exp = static_cast<T>(exp / 2);
    base = static_cast<T>(base * base);
  }
  return result;
}

#define XXNPU_POW_FLOAT_TYPES AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16

at::Tensor& PowLaunch(at::TensorIterator iter, at::Tensor& out) {
  if (at::isFloatingType(iter.common_dtype())) {
    AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_pow", AT_WRAP([&] {
      using opmath_t = at::opmath_type<scalar_t>;
      LaunchBinary<scalar_t>("xxnpu::pow", iter, [](opmath_t a, opmath_t b) { return std::pow(a, b); }, 1,
                             VecBinaryOp::kPow);
    }), XXNPU_POW_FLOAT_TYPES);
    return out;
  }
  return ArithOut("xxnpu::pow", iter, out, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else if constexpr (kIsFloat<T>) {
      return std::pow(a, b);  // unreachable: floating dtypes are dispatched above
    } else {
      return IntPow<T>(a, b);
    }
  });
}

// x ** c for a floating x and one of the CPU backend's shortcut exponents, on `iter` (out, x)
// with the constant removed. Returns false for any other exponent.
template <typename scalar_t>
bool PowShortcut(const at::TensorIteratorBase& iter, double c) {
  using opmath_t = at::opmath_type<scalar_t>;
  // Half gets only the exact square, as the CPU backend runs pow itself for Half.
  constexpr bool kAll = !std::is_same_v<scalar_t, c10::Half>;
  // The CPU rounds bfloat16 products to bfloat16 one multiplication at a time (its
  // Vectorized<BFloat16> operators do), so x * x * x is rounded twice there: here too.
  const auto round = [](opmath_t v) { return static_cast<opmath_t>(static_cast<scalar_t>(v)); };
  const char* name = "xxnpu::pow";
  if (c == 2) {
    LaunchUnary<scalar_t>(name, iter, [](opmath_t x) { return x * x; }, 1, VecUnaryOp::kSquare);
  } else if (kAll && c == 3) {
    LaunchUnary<scalar_t>(name, iter, [round](opmath_t x) { return round(x * x) * x; }, 2, VecUnaryOp::kCube);
  } else if (kAll && c == -2) {
    LaunchUnary<scalar_t>(name, iter, [round](opmath_t x) { return opmath_t(1) / round(x * x); }, 2,
                          VecUnaryOp::kReciprocalSquare);
  } else if (kAll && c == 0.5) {
    LaunchUnary<scalar_t>(name, iter, [](opmath_t x) { return std::sqrt(x); }, 1, VecUnaryOp::kSqrt);
  } else if (kAll && c == -0.5) {
    LaunchUnary<scalar_t>(name, iter, [](opmath_t x) { return 1 / std::sqrt(x); }, 2, VecUnaryOp::kRsqrt);
  } else if (kAll && c == -1) {
    LaunchUnary<scalar_t>(name, iter, [](opmath_t x) { return 1 / x; }, 1, VecUnaryOp::kReciprocal);
  } else {
    return false;
  }
  return true;
}

at::Tensor& PowTensorTensorOut(const at::Tensor& self, const at::Tensor& exponent, at::Tensor& out) {
  if (IsComplex(self) || IsComplex(exponent)) {
    return FallbackFor<at::_ops::pow_Tensor_Tensor_out>::call(self, exponent, out);
  }
  return PowLaunch(at::TensorIterator::borrowing_binary_op(out, self, exponent), out);
}

at::Tensor& PowTensorScalarOut(const at::Tensor& self, const at::Scalar& exponent, at::Tensor& out) {
  if (IsComplex(self) || exponent.isComplex()) {
    return FallbackFor<at::_ops::pow_Tensor_Scalar_out>::call(self, exponent, out);
  }
  TORCH_CHECK(!(at::isIntegralType(self.scalar_type(), true) && exponent.isIntegral(true) && exponent.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
  // The iterator resizes out and checks its dtype, as the CPU's meta function. A floating
  // result takes the iterator of a float function of self: what binary_op with a wrapped
  // scalar gives there, without the scalar's tensor (at 4 KB a shortcut's launch took
  // 2.8 us that way, exp's 1.6).
  const at::ScalarType dtype = at::result_type(self, exponent);
  const bool floating = at::isFloatingType(dtype);
  auto iter = floating ? at::TensorIterator::unary_float_op(out, self)
                       : at::TensorIterator::binary_op(out, self, WrapScalar(exponent));
  // As the CPU backend, for every dtype: x ** 0 is 1 (NaN included), x ** 1 is x.
  if (exponent.equal(0) || exponent.equal(false)) return out.fill_(1);
  if (exponent.equal(1) || exponent.equal(true)) return out.copy_(self);
  if (!floating) return PowLaunch(std::move(iter), out);
  // The CPU backend raises bfloat16 and half to the exponent rounded to their own dtype.
  double e = exponent.toDouble();
  if (dtype == at::kBFloat16) e = static_cast<double>(static_cast<c10::BFloat16>(e));
  if (dtype == at::kHalf) e = static_cast<double>(static_cast<c10::Half>(e));
  bool done = false;
  AT_DISPATCH_V2(dtype, "xxnpu_pow_shortcut", AT_WRAP([&] { done = PowShortcut<scalar_t>(iter, e); }),
                 XXNPU_POW_FLOAT_TYPES);
  if (done) return out;
  return PowLaunch(at::TensorIterator::binary_op(out, self, WrapScalar(e)), out);
}

at::Tensor& PowScalarOut(const at::Scalar& self, const at::Tensor& exponent, at::Tensor& out) {
  if (IsComplex(exponent) || self.isComplex()) return FallbackFor<at::_ops::pow_Scalar_out>::call(self, exponent, out);
  return PowLaunch(at::TensorIterator::binary_op(out, WrapScalar(self), exponent), out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fmod.Tensor_out", &FmodOut);
  m.impl("remainder.Tensor_out", &RemainderOut);
  m.impl("floor_divide", &FloorDivide);
  m.impl("floor_divide_.Tensor", &FloorDivideInplace);
  m.impl("floor_divide.out", &FloorDivideOut);
  m.impl("atan2.out", &Atan2Out);
  m.impl("logaddexp.out", &LogaddexpOut);
  m.impl("pow.Tensor_Tensor_out", &PowTensorTensorOut);
  m.impl("pow.Tensor_Scalar_out", &PowTensorScalarOut);
  m.impl("pow.Scalar_out", &PowScalarOut);
}

}  // namespace
}  // namespace xxnpu
