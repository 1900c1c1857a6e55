// Unary elementwise ops on xxnpu: math functions, rounding, activations and their backward
// ops. Each is one scalar expression handed to LaunchUnary/LaunchBinary
// (ops/elementwise.h).
//
// Most of these ops are "structured" in ATen: registering the `.out` kernel is enough, the
// functional and in-place forms reach it through ATen's generic wrappers (which also run
// the op's shape/dtype checks). Dtypes a kernel does not cover (complex, mostly) go through
// the counted CPU fallback (ops/cpu_fallback.h), so they still run, visibly.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/Operators.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <type_traits>

#include "ops/cpu_fallback.h"
#include "ops/elementwise.h"

namespace xxnpu {
namespace {

bool IsComplex(const at::Tensor& t) { return t.defined() && at::isComplexType(t.scalar_type()); }

// A float function (exp, sin, ...): integer inputs are computed in float (unary_float_op).
template <typename F>
at::Tensor& FloatUnaryOut(const char* name, const at::Tensor& self, at::Tensor& out, F f, uint64_t flops = 1,
                          bool promote_to_float = true, VecUnaryOp vec = VecUnaryOp::kNone) {
  const c10::DeviceGuard guard(out.device());
  // The iterator the CPU's meta function builds: unary_float_op (integers promote, out
  // may be any dtype the result casts to) for exp-like ops, unary_op (out must have the
  // input's dtype) for frac, silu, gelu.
  auto iter = promote_to_float ? at::TensorIterator::unary_float_op(out, self) : at::TensorIterator::unary_op(out, self);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_float_unary", AT_WRAP([&] {
    LaunchUnary<scalar_t>(name, iter, f, flops, vec);
  }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

// Same dtype in and out, integers included.
template <typename F>
at::Tensor& SameTypeUnaryOut(const char* name, const at::Tensor& self, at::Tensor& out, F f,
                             VecUnaryOp vec = VecUnaryOp::kNone) {
  const c10::DeviceGuard guard(out.device());
  auto iter = at::TensorIterator::unary_op(out, self);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_unary", AT_WRAP([&] {
    LaunchUnary<scalar_t>(name, iter, [f](auto x) { return static_cast<decltype(x)>(f(x)); }, 1, vec);
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  return out;
}

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

// ---- float functions: `Name##Out` for aten::<op>.out, complex through the fallback. `vec`:
// the op's SIMD form for dense float32/bfloat16 (vec_kernels.h), or kNone.
#define XXNPU_FLOAT_UNARY(Name, op, expr, vec)                                                         \
  at::Tensor& Name##Out(const at::Tensor& self, at::Tensor& out) {                                     \
    if (IsComplex(self) || IsComplex(out)) return FallbackFor<at::_ops::op##_out>::call(self, out);   \
    return FloatUnaryOut("xxnpu::" #op, self, out, [](auto x) -> decltype(x) { return expr; }, 1, true, \
                         VecUnaryOp::vec);                                                              \
  }

XXNPU_FLOAT_UNARY(Exp, exp, std::exp(x), kExp)
XXNPU_FLOAT_UNARY(Exp2, exp2, std::exp2(x), kExp2)
XXNPU_FLOAT_UNARY(Expm1, expm1, std::expm1(x), kExpm1)
XXNPU_FLOAT_UNARY(Log, log, std::log(x), kLog)
XXNPU_FLOAT_UNARY(Log2, log2, std::log2(x), kLog2)
XXNPU_FLOAT_UNARY(Log10, log10, std::log10(x), kLog10)
XXNPU_FLOAT_UNARY(Log1p, log1p, std::log1p(x), kLog1p)
XXNPU_FLOAT_UNARY(Sqrt, sqrt, std::sqrt(x), kSqrt)
XXNPU_FLOAT_UNARY(Rsqrt, rsqrt, 1 / std::sqrt(x), kRsqrt)
XXNPU_FLOAT_UNARY(Reciprocal, reciprocal, 1 / x, kReciprocal)
XXNPU_FLOAT_UNARY(Sin, sin, std::sin(x), kSin)
XXNPU_FLOAT_UNARY(Cos, cos, std::cos(x), kCos)
XXNPU_FLOAT_UNARY(Tan, tan, std::tan(x), kTan)
XXNPU_FLOAT_UNARY(Asin, asin, std::asin(x), kAsin)
XXNPU_FLOAT_UNARY(Acos, acos, std::acos(x), kAcos)
XXNPU_FLOAT_UNARY(Atan, atan, std::atan(x), kAtan)
XXNPU_FLOAT_UNARY(Sinh, sinh, std::sinh(x), kNone)
XXNPU_FLOAT_UNARY(Cosh, cosh, std::cosh(x), kNone)
XXNPU_FLOAT_UNARY(Tanh, tanh, std::tanh(x), kTanh)
XXNPU_FLOAT_UNARY(Asinh, asinh, std::asinh(x), kNone)
XXNPU_FLOAT_UNARY(Acosh, acosh, std::acosh(x), kNone)
XXNPU_FLOAT_UNARY(Atanh, atanh, std::atanh(x), kNone)
XXNPU_FLOAT_UNARY(Sigmoid, sigmoid, 1 / (1 + std::exp(-x)), kSigmoid)
XXNPU_FLOAT_UNARY(Erf, erf, std::erf(x), kErf)
XXNPU_FLOAT_UNARY(Erfc, erfc, std::erfc(x), kErfc)
XXNPU_FLOAT_UNARY(Lgamma, lgamma, std::lgamma(x), kNone)
#undef XXNPU_FLOAT_UNARY

// ---- same-dtype ops.
at::Tensor& NegOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool,
              "Negation, the `-` operator, on a bool tensor is not supported. "
              "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
  if (IsComplex(self)) return FallbackFor<at::_ops::neg_out>::call(self, out);
  return SameTypeUnaryOut("xxnpu::neg", self, out, [](auto x) {
    if constexpr (std::is_same_v<decltype(x), bool>) {
      return x;  // unreachable: rejected above
    } else {
      return -x;
    }
  }, VecUnaryOp::kNeg);
}

at::Tensor& AbsOut(const at::Tensor& self, at::Tensor& out) {
  if (IsComplex(self)) return FallbackFor<at::_ops::abs_out>::call(self, out);
  return SameTypeUnaryOut("xxnpu::abs", self, out, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
      return x;
    } else if constexpr (kIsFloat<T>) {
      return std::abs(x);  // clears the sign: -0.0 -> +0.0, as the CPU backend
    } else {
      return x < T(0) ? T(-x) : x;
    }
  }, VecUnaryOp::kAbs);
}

at::Tensor& SignOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(!IsComplex(self), "Unlike NumPy, torch.sign is not intended to support complex numbers. "
                                "Please use torch.sgn instead.");
  return SameTypeUnaryOut("xxnpu::sign", self, out, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
      return static_cast<T>(x != T(0));
    } else {
      return static_cast<T>((T(0) < x) - (x < T(0)));
    }
  });
}

// Rounding: the identity on integers, as on CPU.
#define XXNPU_ROUNDING(Name, op, fn)                                                                 \
  at::Tensor& Name##Out(const at::Tensor& self, at::Tensor& out) {                                   \
    TORCH_CHECK(!IsComplex(self), #op " is not supported for complex inputs");                       \
    return SameTypeUnaryOut("xxnpu::" #op, self, out, [](auto x) {                                    \
      if constexpr (kIsFloat<decltype(x)>) {                                                          \
        return fn(x);                                                                                 \
      } else {                                                                                        \
        return x;                                                                                     \
      }                                                                                               \
    });                                                                                               \
  }
XXNPU_ROUNDING(Floor, floor, std::floor)
XXNPU_ROUNDING(Ceil, ceil, std::ceil)
XXNPU_ROUNDING(Trunc, trunc, std::trunc)
XXNPU_ROUNDING(Round, round, std::nearbyint)  // half to even, like torch.round
#undef XXNPU_ROUNDING

at::Tensor& SgnOut(const at::Tensor& self, at::Tensor& out) {
  if (IsComplex(self)) return FallbackFor<at::_ops::sgn_out>::call(self, out);
  return SignOut(self, out);  // for real numbers sgn is sign
}

// Float classification: bool out.
template <typename Pred>
at::Tensor& ClassifyOut(const char* name, const at::Tensor& self, at::Tensor& out, Pred pred) {
  TORCH_CHECK(out.scalar_type() == at::kBool, name, ": expected a bool out tensor, got ", out.scalar_type());
  const c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, self.sizes());
  auto iter = at::TensorIteratorConfig().check_all_same_dtype(false).add_output(out).add_const_input(self).build();
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_classify", AT_WRAP([&] {
    LaunchUnary<scalar_t>(name, iter, [pred](auto x) { return static_cast<decltype(x)>(pred(x)); });
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  return out;
}
at::Tensor& IsneginfOut(const at::Tensor& self, at::Tensor& out) {
  if (IsComplex(self)) return FallbackFor<at::_ops::isneginf_out>::call(self, out);
  return ClassifyOut("xxnpu::isneginf", self, out, [](auto x) {
    if constexpr (kIsFloat<decltype(x)>) {
      return std::isinf(x) && x < 0;
    } else {
      return false;
    }
  });
}
at::Tensor& IsposinfOut(const at::Tensor& self, at::Tensor& out) {
  if (IsComplex(self)) return FallbackFor<at::_ops::isposinf_out>::call(self, out);
  return ClassifyOut("xxnpu::isposinf", self, out, [](auto x) {
    if constexpr (kIsFloat<decltype(x)>) {
      return std::isinf(x) && x > 0;
    } else {
      return false;
    }
  });
}
at::Tensor Isnan(const at::Tensor& self) {
  if (IsComplex(self)) return FallbackFor<at::_ops::isnan>::call(self);
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(at::kBool));
  return ClassifyOut("xxnpu::isnan", self, out, [](auto x) {
    if constexpr (kIsFloat<decltype(x)>) {
      return std::isnan(x);
    } else {
      return false;
    }
  });
}

at::Tensor& FracOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "frac is only implemented for floating types, got ",
              self.scalar_type());
  return FloatUnaryOut("xxnpu::frac", self, out, [](auto x) -> decltype(x) { return x - std::trunc(x); }, 1, false);
}

at::Tensor& BitwiseNotOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(at::isIntegralType(self.scalar_type(), /*includeBool=*/true),
              "bitwise_not only supports integral and bool tensors, got ", self.scalar_type());
  return SameTypeUnaryOut("xxnpu::bitwise_not", self, out, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_same_v<T, bool>) {
      return !x;
    } else if constexpr (kIsFloat<T>) {
      return x;  // unreachable: rejected above
    } else {
      return static_cast<T>(~x);
    }
  });
}

// Any dtype in, bool (or the out= tensor's dtype) out.
at::Tensor& LogicalNotOut(const at::Tensor& self, at::Tensor& out) {
  if (IsComplex(self)) return FallbackFor<at::_ops::logical_not_out>::call(self, out);
  const c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, self.sizes());
  auto iter = at::TensorIteratorConfig().check_all_same_dtype(false).add_output(out).add_const_input(self).build();
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_logical_not", AT_WRAP([&] {
    LaunchUnary<scalar_t>("xxnpu::logical_not", iter, [](auto x) { return static_cast<decltype(x)>(!x); });
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  return out;
}

// ---- activations. relu is not structured: all three forms are registered.
at::Tensor& ReluOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return SameTypeUnaryOut("xxnpu::relu", self, out, [](auto x) {
    using T = decltype(x);
    // Only negatives become 0: NaN and -0.0 pass through, as the CPU's clamp_min(x, 0).
    return x < T(0) ? T(0) : x;
  }, VecUnaryOp::kRelu);
}
at::Tensor Relu(const at::Tensor& self) {
  at::Tensor out = at::empty_like(self);
  return ReluOut(self, out);
}
at::Tensor& ReluInplace(at::Tensor& self) { return ReluOut(self, self); }

at::Tensor& SiluOut(const at::Tensor& self, at::Tensor& out) {
  if (IsComplex(self)) return FallbackFor<at::_ops::silu_out>::call(self, out);
  return FloatUnaryOut("xxnpu::silu", self, out, [](auto x) -> decltype(x) { return x / (1 + std::exp(-x)); }, 4, false,
                       VecUnaryOp::kSilu);
}

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;

at::Tensor& GeluOut(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", "approximate argument must be either none or tanh, got ",
              approximate);
  if (approximate == "tanh") {
    return FloatUnaryOut("xxnpu::gelu_tanh", self, out, [](auto x) -> decltype(x) {
      using T = decltype(x);
      const T inner = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
      return T(0.5) * x * (T(1) + std::tanh(inner));
    }, 8, false, VecUnaryOp::kGeluTanh);
  }
  return FloatUnaryOut("xxnpu::gelu", self, out, [](auto x) -> decltype(x) {
    using T = decltype(x);
    return T(0.5) * x * (T(1) + std::erf(x * T(kSqrt1_2)));
  }, 5, false, VecUnaryOp::kGelu);
}

at::Tensor& LeakyReluOut(const at::Tensor& self, const at::Scalar& slope, at::Tensor& out) {
  const c10::DeviceGuard guard(out.device());
  auto iter = at::TensorIterator::unary_op(out, self);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_leaky_relu", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t a = slope.to<opmath_t>();
    LaunchUnary<scalar_t>("xxnpu::leaky_relu", iter, [a](opmath_t x) { return x > opmath_t(0) ? x : x * a; });
  }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

// ---- backward ops: (grad, saved) -> grad_input.
template <typename F>
at::Tensor& BackwardOut(const char* name, const at::Tensor& grad, const at::Tensor& saved, at::Tensor& grad_input,
                        F f, uint64_t flops, VecBinaryOp vec = VecBinaryOp::kNone, float vec_param = 0) {
  const c10::DeviceGuard guard(grad_input.device());
  auto iter = at::TensorIterator::borrowing_binary_op(grad_input, grad, saved);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_backward", AT_WRAP([&] {
    LaunchBinary<scalar_t>(name, iter, [f](auto g, auto s) -> decltype(g) { return f(g, s); }, flops, vec, vec_param);
  }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return grad_input;
}

at::Tensor& ThresholdBackwardOut(const at::Tensor& grad, const at::Tensor& self, const at::Scalar& threshold,
                                 at::Tensor& grad_input) {
  const double t = threshold.to<double>();
  if (!at::isFloatingType(grad.scalar_type())) {
    return FallbackFor<at::_ops::threshold_backward_grad_input>::call(grad, self, threshold, grad_input);
  }
  // The vector form compares in float: only for a threshold float represents exactly.
  const bool exact = static_cast<double>(static_cast<float>(t)) == t;
  return BackwardOut("xxnpu::threshold_backward", grad, self, grad_input,
                     [t](auto g, auto x) { return x <= t ? decltype(g)(0) : g; }, 1,
                     exact ? VecBinaryOp::kThresholdBackward : VecBinaryOp::kNone, static_cast<float>(t));
}

at::Tensor& SigmoidBackwardOut(const at::Tensor& grad, const at::Tensor& y, at::Tensor& grad_input) {
  if (IsComplex(grad)) return FallbackFor<at::_ops::sigmoid_backward_grad_input>::call(grad, y, grad_input);
  return BackwardOut("xxnpu::sigmoid_backward", grad, y, grad_input,
                     [](auto g, auto s) { return g * (1 - s) * s; }, 3, VecBinaryOp::kSigmoidBackward);
}

at::Tensor& TanhBackwardOut(const at::Tensor& grad, const at::Tensor& y, at::Tensor& grad_input) {
  if (IsComplex(grad)) return FallbackFor<at::_ops::tanh_backward_grad_input>::call(grad, y, grad_input);
  return BackwardOut("xxnpu::tanh_backward", grad, y, grad_input, [](auto g, auto t) { return g * (1 - t * t); }, 3,
                     VecBinaryOp::kTanhBackward);
}

at::Tensor& SiluBackwardOut(const at::Tensor& grad, const at::Tensor& x, at::Tensor& grad_input) {
  return BackwardOut("xxnpu::silu_backward", grad, x, grad_input, [](auto g, auto v) {
    const auto s = 1 / (1 + std::exp(-v));
    return g * s * (1 + v * (1 - s));
  }, 6, VecBinaryOp::kSiluBackward);
}

// The functional form too: its CompositeImplicitAutograd decomposition (sigmoid, mul,
// sub, add, fill: five kernels and as many temporaries) would otherwise win over the out=
// kernel on xxnpu, as it does for any backend without its own silu_backward.
at::Tensor SiluBackward(const at::Tensor& grad, const at::Tensor& x) {
  at::Tensor grad_input = at::empty({0}, grad.options().dtype(at::result_type(grad, x)));
  return SiluBackwardOut(grad, x, grad_input);
}

at::Tensor& GeluBackwardOut(const at::Tensor& grad, const at::Tensor& x, c10::string_view approximate,
                            at::Tensor& grad_input) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", "approximate argument must be either none or tanh, got ",
              approximate);
  if (approximate == "tanh") {
    return BackwardOut("xxnpu::gelu_tanh_backward", grad, x, grad_input, [](auto g, auto v) {
      using T = decltype(g);
      const T k = T(kSqrt2OverPi);
      const T inner = k * (v + T(0.044715) * v * v * v);
      const T t = std::tanh(inner);
      const T dinner = k * (T(1) + T(3) * T(0.044715) * v * v);
      return g * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * dinner);
    }, 14, VecBinaryOp::kGeluTanhBackward);
  }
  return BackwardOut("xxnpu::gelu_backward", grad, x, grad_input, [](auto g, auto v) {
    using T = decltype(g);
    const T cdf = T(0.5) * (T(1) + std::erf(v * T(kSqrt1_2)));
    const T pdf = std::exp(T(-0.5) * v * v) * T(kSqrt2OverPi * 0.5);
    return g * (cdf + v * pdf);
  }, 10, VecBinaryOp::kGeluBackward);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("exp.out", &ExpOut);
  m.impl("exp2.out", &Exp2Out);
  m.impl("expm1.out", &Expm1Out);
  m.impl("log.out", &LogOut);
  m.impl("log2.out", &Log2Out);
  m.impl("log10.out", &Log10Out);
  m.impl("log1p.out", &Log1pOut);
  m.impl("sqrt.out", &SqrtOut);
  m.impl("rsqrt.out", &RsqrtOut);
  m.impl("reciprocal.out", &ReciprocalOut);
  m.impl("sin.out", &SinOut);
  m.impl("cos.out", &CosOut);
  m.impl("tan.out", &TanOut);
  m.impl("asin.out", &AsinOut);
  m.impl("acos.out", &AcosOut);
  m.impl("atan.out", &AtanOut);
  m.impl("sinh.out", &SinhOut);
  m.impl("cosh.out", &CoshOut);
  m.impl("tanh.out", &TanhOut);
  m.impl("asinh.out", &AsinhOut);
  m.impl("acosh.out", &AcoshOut);
  m.impl("atanh.out", &AtanhOut);
  m.impl("sigmoid.out", &SigmoidOut);
  m.impl("erf.out", &ErfOut);
  m.impl("erfc.out", &ErfcOut);
  m.impl("lgamma.out", &LgammaOut);
  m.impl("neg.out", &NegOut);
  m.impl("abs.out", &AbsOut);
  m.impl("sign.out", &SignOut);
  m.impl("floor.out", &FloorOut);
  m.impl("ceil.out", &CeilOut);
  m.impl("trunc.out", &TruncOut);
  m.impl("round.out", &RoundOut);
  m.impl("frac.out", &FracOut);
  m.impl("sgn.out", &SgnOut);
  m.impl("isneginf.out", &IsneginfOut);
  m.impl("isposinf.out", &IsposinfOut);
  m.impl("isnan", &Isnan);
  m.impl("bitwise_not.out", &BitwiseNotOut);
  m.impl("logical_not.out", &LogicalNotOut);
  m.impl("relu", &Relu);
  m.impl("relu_", &ReluInplace);
  m.impl("silu.out", &SiluOut);
  m.impl("gelu.out", &GeluOut);
  m.impl("leaky_relu.out", &LeakyReluOut);
  m.impl("threshold_backward.grad_input", &ThresholdBackwardOut);
  m.impl("sigmoid_backward.grad_input", &SigmoidBackwardOut);
  m.impl("tanh_backward.grad_input", &TanhBackwardOut);
  m.impl("silu_backward.grad_input", &SiluBackwardOut);
  m.impl("silu_backward", &SiluBackward);
  m.impl("gelu_backward.grad_input", &GeluBackwardOut);
}

}  // namespace
}  // namespace xxnpu
