// Elementwise ops of two or more operands on xxnpu: comparisons, maximum/minimum, pow,
// clamp, logical and bitwise ops, fmod/remainder/atan2/floor_divide, lerp,
// addcmul/addcdiv, where, masked_fill. Each is a scalar expression handed to
// LaunchBinary/LaunchNary (ops/elementwise.h); structured ops register `.out` only (see
// unary_ops.cc).
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

namespace xxnpu {
namespace {

bool IsComplex(const at::Tensor& t) { return t.defined() && at::isComplexType(t.scalar_type()); }

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

// CUDA accepts CPU 0-dim tensors next to device tensors in these ops; the device cannot
// read host memory, so such a scalar is copied over first (a tiny async copy).
at::Tensor OnDeviceOf(const at::Tensor& t, const at::Tensor& like) {
  if (t.defined() && t.device().is_cpu() && t.dim() == 0 && like.device().is_privateuseone()) {
    return t.to(like.device(), /*non_blocking=*/true);
  }
  return t;
}

// ---- comparisons: bool out (or the out= dtype).
template <typename Cmp>
at::Tensor& CompareOut(const char* name, const at::Tensor& self, const at::Tensor& other, at::Tensor& out, Cmp cmp) {
  const c10::DeviceGuard guard(out.device());
  auto iter = at::TensorIterator::comparison_op(out, self, other);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_compare", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    LaunchBinary<scalar_t>(name, iter, [cmp](opmath_t a, opmath_t b) { return static_cast<opmath_t>(cmp(a, b)); });
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  return out;
}

#define XXNPU_COMPARISON(Name, op, expr)                                                                  \
  at::Tensor& Name##TensorOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {         \
    if (IsComplex(self) || IsComplex(other)) {                                                            \
      return FallbackFor<at::_ops::op##_Tensor_out>::call(self, other, out);                              \
    }                                                                                                     \
    return CompareOut("xxnpu::" #op, self, other, out, [](auto a, auto b) { return expr; });              \
  }                                                                                                       \
  at::Tensor& Name##ScalarOut(const at::Tensor& self, const at::Scalar& other, at::Tensor& out) {         \
    if (IsComplex(self) || other.isComplex()) {                                                           \
      return FallbackFor<at::_ops::op##_Scalar_out>::call(self, other, out);                              \
    }                                                                                                     \
    return CompareOut("xxnpu::" #op, self, WrapScalar(other), out, [](auto a, auto b) { return expr; });  \
  }
XXNPU_COMPARISON(Eq, eq, a == b)
XXNPU_COMPARISON(Ne, ne, a != b)
XXNPU_COMPARISON(Lt, lt, a < b)
XXNPU_COMPARISON(Le, le, a <= b)
XXNPU_COMPARISON(Gt, gt, a > b)
XXNPU_COMPARISON(Ge, ge, a >= b)
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

// ---- same-dtype binary ops over a dtype set.
template <typename F>
at::Tensor& ArithOut(const char* name, at::TensorIterator iter, at::Tensor& out, F f, bool integers = true) {
  const c10::DeviceGuard guard(out.device());
  const at::ScalarType t = iter.common_dtype();
  TORCH_CHECK(integers || at::isFloatingType(t), name, " is only implemented for floating types, got ", t);
  AT_DISPATCH_V2(t, "xxnpu_arith", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    LaunchBinary<scalar_t>(name, iter, [f](opmath_t a, opmath_t b) { return static_cast<opmath_t>(f(a, b)); });
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  return out;
}

at::Tensor& MaximumOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  TORCH_CHECK(!IsComplex(self) && !IsComplex(other), "maximum not implemented for complex tensors.");
  return ArithOut("xxnpu::maximum", at::TensorIterator::borrowing_binary_op(out, self, other), out, [](auto a, auto b) {
    if constexpr (kIsFloat<decltype(a)>) {
      if (std::isnan(a) || std::isnan(b)) return a + b;  // NaN propagates
    }
    return a > b ? a : b;
  });
}

at::Tensor& MinimumOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  TORCH_CHECK(!IsComplex(self) && !IsComplex(other), "minimum not implemented for complex tensors.");
  return ArithOut("xxnpu::minimum", at::TensorIterator::borrowing_binary_op(out, self, other), out, [](auto a, auto b) {
    if constexpr (kIsFloat<decltype(a)>) {
      if (std::isnan(a) || std::isnan(b)) return a + b;
    }
    return a < b ? a : b;
  });
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

// ---- pow: exponent 2 and 0.5 are exact shortcuts, as on CPU.
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

at::Tensor& PowLaunch(at::TensorIterator iter, at::Tensor& out) {
  return ArithOut("xxnpu::pow", iter, out, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (kIsFloat<T>) {
      if (b == T(2)) return a * a;
      if (b == T(0.5)) return std::sqrt(a);
      return std::pow(a, b);
    } else if constexpr (std::is_same_v<T, bool>) {
      return a || !b;
    } else {
      return IntPow<T>(a, b);
    }
  });
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
  return PowLaunch(at::TensorIterator::binary_op(out, self, WrapScalar(exponent)), out);
}

at::Tensor& PowScalarOut(const at::Scalar& self, const at::Tensor& exponent, at::Tensor& out) {
  if (IsComplex(exponent) || self.isComplex()) return FallbackFor<at::_ops::pow_Scalar_out>::call(self, exponent, out);
  return PowLaunch(at::TensorIterator::binary_op(out, WrapScalar(self), exponent), out);
}

// ---- clamp. The bounds take part in type promotion (clamp(int_tensor, 0.5) is float).
at::Tensor& ClampScalarOut(const char* name, const at::Tensor& self, const std::optional<at::Scalar>& min,
                           const std::optional<at::Scalar>& max, at::Tensor& out) {
  TORCH_CHECK(min || max, "torch.clamp: At least one of 'min' or 'max' must not be None");
  TORCH_CHECK(!IsComplex(self), "clamp is not supported for complex types");
  const c10::DeviceGuard guard(out.device());
  at::ScalarType dtype = self.scalar_type();
  if (min) dtype = at::promote_types(dtype, at::result_type(self, *min));
  if (max) dtype = at::promote_types(dtype, at::result_type(self, *max));
  const at::Tensor input = self.scalar_type() == dtype ? self : self.to(dtype);
  auto iter = at::TensorIterator::unary_op(out, input);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_clamp", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const bool has_lo = min.has_value(), has_hi = max.has_value();
    const opmath_t lo = has_lo ? min->to<opmath_t>() : opmath_t(0);
    const opmath_t hi = has_hi ? max->to<opmath_t>() : opmath_t(0);
    LaunchUnary<scalar_t>(name, iter, [=](opmath_t x) {
      if constexpr (kIsFloat<opmath_t>) {
        if (std::isnan(x)) return x;
        if (has_lo && std::isnan(lo)) return lo;
        if (has_hi && std::isnan(hi)) return hi;
      }
      if (has_lo && x < lo) x = lo;
      if (has_hi && x > hi) x = hi;  // min > max gives max, as on CPU
      return x;
    }, 2);
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

at::Tensor& ClampOut(const at::Tensor& self, const std::optional<at::Scalar>& min,
                     const std::optional<at::Scalar>& max, at::Tensor& out) {
  return ClampScalarOut("xxnpu::clamp", self, min, max, out);
}
at::Tensor& ClampMinOut(const at::Tensor& self, const at::Scalar& min, at::Tensor& out) {
  return ClampScalarOut("xxnpu::clamp_min", self, min, std::nullopt, out);
}
at::Tensor& ClampMaxOut(const at::Tensor& self, const at::Scalar& max, at::Tensor& out) {
  return ClampScalarOut("xxnpu::clamp_max", self, std::nullopt, max, out);
}

// ---- ternary ops.
at::TensorIterator TernaryIter(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  return at::TensorIteratorConfig()
      .add_output(out)
      .add_owned_const_input(OnDeviceOf(a, out.defined() ? out : b))
      .add_owned_const_input(OnDeviceOf(b, out.defined() ? out : a))
      .add_owned_const_input(OnDeviceOf(c, out.defined() ? out : a))
      .promote_inputs_to_common_dtype(true)
      .cast_common_dtype_to_outputs(true)
      .enforce_safe_casting_to_output(true)
      .build();
}

at::Tensor& AddcmulOut(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& value,
                       at::Tensor& out) {
  if (IsComplex(self) || IsComplex(t1) || IsComplex(t2)) {
    return FallbackFor<at::_ops::addcmul_out>::call(self, t1, t2, value, out);
  }
  const c10::DeviceGuard guard(out.device());
  auto iter = TernaryIter(out, self, t1, t2);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_addcmul", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t v = value.to<opmath_t>();
    LaunchNary<scalar_t, 3>("xxnpu::addcmul", iter, [v](opmath_t s, opmath_t a, opmath_t b) {
      return static_cast<opmath_t>(s + v * a * b);
    }, 3);
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

at::Tensor& AddcdivOut(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const at::Scalar& value,
                       at::Tensor& out) {
  TORCH_CHECK(!(at::isIntegralType(t1.scalar_type(), true) && at::isIntegralType(t2.scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform "
              "a true division of tensor1 and tensor2. Use at::true_divide or torch.true_divide for true division.");
  if (IsComplex(self) || IsComplex(t1) || IsComplex(t2)) {
    return FallbackFor<at::_ops::addcdiv_out>::call(self, t1, t2, value, out);
  }
  const c10::DeviceGuard guard(out.device());
  auto iter = TernaryIter(out, self, t1, t2);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_addcdiv", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t v = value.to<opmath_t>();
    LaunchNary<scalar_t, 3>("xxnpu::addcdiv", iter, [v](opmath_t s, opmath_t a, opmath_t b) {
      return static_cast<opmath_t>(s + v * (a / b));
    }, 3);
  }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

// weight < 0.5: start + w * (end - start); else end - (end - start) * (1 - w): exact at both ends.
template <typename T>
T Lerp(T start, T end, T w) {
  const T diff = end - start;
  return std::abs(w) < T(0.5) ? start + w * diff : end - diff * (T(1) - w);
}

at::Tensor& LerpScalarOut(const at::Tensor& self, const at::Tensor& end, const at::Scalar& weight, at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end` but got dtype ", end.scalar_type());
  if (IsComplex(self)) return FallbackFor<at::_ops::lerp_Scalar_out>::call(self, end, weight, out);
  const c10::DeviceGuard guard(out.device());
  auto iter = at::TensorIterator::borrowing_binary_op(out, self, end);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_lerp", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t w = weight.to<opmath_t>();
    LaunchBinary<scalar_t>("xxnpu::lerp", iter, [w](opmath_t a, opmath_t b) { return Lerp(a, b, w); }, 3);
  }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

at::Tensor& LerpTensorOut(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end` but got dtype ", end.scalar_type());
  TORCH_CHECK(self.scalar_type() == weight.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `weight` but got dtype ", weight.scalar_type());
  if (IsComplex(self)) return FallbackFor<at::_ops::lerp_Tensor_out>::call(self, end, weight, out);
  const c10::DeviceGuard guard(out.device());
  auto iter = TernaryIter(out, self, end, weight);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_lerp", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    LaunchNary<scalar_t, 3>("xxnpu::lerp", iter, [](opmath_t a, opmath_t b, opmath_t w) { return Lerp(a, b, w); }, 3);
  }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

// ---- where / masked_fill (not structured: each form registered).
at::Tensor& WhereOut(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  TORCH_CHECK(condition.scalar_type() == at::kBool || condition.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              condition.scalar_type());
  const at::ScalarType dtype = at::result_type(self, other);
  if (at::isComplexType(dtype)) return FallbackFor<at::_ops::where_self_out>::call(condition, self, other, out);
  const at::Tensor& like = self.device().is_privateuseone() ? self : other;
  const c10::DeviceGuard guard(like.device());
  const at::Tensor a = OnDeviceOf(self.scalar_type() == dtype ? self : self.to(dtype), like);
  const at::Tensor b = OnDeviceOf(other.scalar_type() == dtype ? other : other.to(dtype), like);
  const at::Tensor c = OnDeviceOf(condition, like);
  auto iter = at::TensorIteratorConfig()
                  .check_all_same_dtype(false)
                  .add_output(out)
                  .add_const_input(c)
                  .add_const_input(a)
                  .add_const_input(b)
                  .build();
  AT_DISPATCH_V2(dtype, "xxnpu_where", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    LaunchNary<scalar_t, 3>("xxnpu::where", iter, [](opmath_t cond, opmath_t x, opmath_t y) {
      return cond != opmath_t(0) ? x : y;
    }, 0);
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  return out;
}
at::Tensor Where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  const at::Tensor& like = self.device().is_privateuseone() ? self : other;
  at::Tensor out = at::empty({0}, like.options().dtype(at::result_type(self, other)));
  return WhereOut(condition, self, other, out);
}

at::Tensor& MaskedFillScalar(at::Tensor& self, const at::Tensor& mask, const at::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  if (IsComplex(self)) return FallbackFor<at::_ops::masked_fill__Scalar>::call(self, mask, value);
  if (self.numel() == 0) return self;
  const c10::DeviceGuard guard(self.device());
  const at::Tensor m = OnDeviceOf(mask, self).expand(self.sizes());
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(false)
                  .check_all_same_dtype(false)
                  .resize_outputs(false)
                  .add_output(self)
                  .add_const_input(self)
                  .add_const_input(m)
                  .build();
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_masked_fill", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t v = value.to<scalar_t>();
    LaunchNary<scalar_t, 2>("xxnpu::masked_fill", iter, [v](opmath_t x, opmath_t keep_mask) {
      return keep_mask != opmath_t(0) ? v : x;
    }, 0);
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  return self;
}

at::Tensor& MaskedFillTensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return MaskedFillScalar(self, mask, value.item());  // item() synchronizes for a device value, as on CUDA
}

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
  m.impl("maximum.out", &MaximumOut);
  m.impl("minimum.out", &MinimumOut);
  m.impl("bitwise_and.Tensor_out", &BitwiseAndOut);
  m.impl("bitwise_or.Tensor_out", &BitwiseOrOut);
  m.impl("bitwise_xor.Tensor_out", &BitwiseXorOut);
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
  m.impl("clamp.out", &ClampOut);
  m.impl("clamp_min.out", &ClampMinOut);
  m.impl("clamp_max.out", &ClampMaxOut);
  m.impl("addcmul.out", &AddcmulOut);
  m.impl("addcdiv.out", &AddcdivOut);
  m.impl("lerp.Scalar_out", &LerpScalarOut);
  m.impl("lerp.Tensor_out", &LerpTensorOut);
  m.impl("where.self_out", &WhereOut);
  m.impl("where.self", &Where);
  m.impl("masked_fill_.Scalar", &MaskedFillScalar);
  m.impl("masked_fill_.Tensor", &MaskedFillTensor);
}

}  // namespace
}  // namespace xxnpu
