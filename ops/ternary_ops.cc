// Elementwise ops of three operands (or a tensor and bounds) on xxnpu: clamp, addcmul,
// addcdiv, lerp, where and masked_fill, handed to LaunchNary/LaunchBinary
// (ops/elementwise.h). where and masked_fill are not structured: each form is registered.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Operators.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addr_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <type_traits>

#include "ops/cpu_fallback.h"
#include "ops/elementwise.h"
#include "ops/pointwise_common.h"

namespace xxnpu {
namespace {

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

// ---- addr: beta * self + alpha * outer(vec1, vec2) as one kernel over (self expanded,
// vec1 as a column, vec2 as a row), as the CPU backend's addr. Registered for the
// functional form too: torch's composite addr for other backends is two products and a
// sum, rounding each to float16 where the CPU rounds its own way (the sweep's addr float16
// row). The CPU computes in the dtype itself, its scalars converted to it first, so a
// half/bfloat16 result is rounded after every operation: here too. beta == 0 ignores self
// (NaN included).
// `out` undefined: the functional form (the iterator allocates the result, of the promoted
// dtype). Returns the result.
at::Tensor AddrInto(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2, const at::Scalar& beta,
                    const at::Scalar& alpha, at::Tensor out) {
  TORCH_CHECK(vec1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", vec1.dim(), "-D");
  TORCH_CHECK(vec2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  if (IsComplex(self) || IsComplex(vec1) || IsComplex(vec2) || self.scalar_type() == at::kBool ||
      vec1.scalar_type() == at::kBool || vec2.scalar_type() == at::kBool) {
    // torch's composite (products and a sum on the xxnpu kernels), as before this kernel.
    // Its functional form: math_addr_out calls at::addr, which is this op again.
    const at::Tensor r = at::native::math_addr(self, vec1, vec2, beta, alpha);
    if (!out.defined()) return r;
    TORCH_CHECK(at::canCast(r.scalar_type(), out.scalar_type()), "result type ", r.scalar_type(),
                " can't be cast to the desired output type ", out.scalar_type());
    at::native::resize_output(out, r.sizes());
    return out.copy_(r);
  }
  const c10::DeviceGuard guard(self.device().is_cpu() ? vec1.device() : self.device());
  const c10::MaybeOwned<at::Tensor> self_ = at::expand_size(self, {vec1.size(0), vec2.size(0)}, "addr");
  auto iter = TernaryIter(out, *self_, vec1.reshape({vec1.size(0), 1}), vec2);
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_addr", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const auto round = [](opmath_t v) { return static_cast<opmath_t>(static_cast<scalar_t>(v)); };
    const opmath_t b = static_cast<opmath_t>(beta.to<scalar_t>()), a = static_cast<opmath_t>(alpha.to<scalar_t>());
    if (b == opmath_t(0)) {
      LaunchNary<scalar_t, 3>("xxnpu::addr", iter, [a, round](opmath_t, opmath_t x, opmath_t y) {
        return round(a * x) * y;
      }, 2);
    } else {
      LaunchNary<scalar_t, 3>("xxnpu::addr", iter, [a, b, round](opmath_t s, opmath_t x, opmath_t y) {
        return round(b * s) + round(round(a * x) * y);
      }, 4);
    }
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16);
  return iter.output();
}
at::Tensor& AddrOut(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2, const at::Scalar& beta,
                    const at::Scalar& alpha, at::Tensor& out) {
  AddrInto(self, vec1, vec2, beta, alpha, out);
  return out;
}
at::Tensor Addr(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2, const at::Scalar& beta,
                const at::Scalar& alpha) {
  return AddrInto(self, vec1, vec2, beta, alpha, at::Tensor());
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
  // The CPU's lerp.Tensor meta: a default TensorIterator, so every operand (out too) has
  // one dtype ("Found dtype Double but expected Float"); lerp.Scalar casts into out.
  auto iter = at::TensorIteratorConfig()
                  .add_output(out)
                  .add_const_input(self)
                  .add_const_input(end)
                  .add_const_input(weight)
                  .build();
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_lerp", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    LaunchNary<scalar_t, 3>("xxnpu::lerp", iter, [](opmath_t a, opmath_t b, opmath_t w) { return Lerp(a, b, w); }, 3);
  }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return out;
}

// ---- where / masked_fill (not structured: each form registered).

// where's 2-D loop over (out, condition, x, y), all values of type T. Dense rows, with x or
// y dense or broadcast (a scalar), are select loops the compiler vectorizes: both values are
// loaded unconditionally (a load under the condition would be control flow) and selected as
// raw bits (half and bfloat16 as uint16_t, which the vectorizer knows). The rest (strided
// operands) reads element by element.
template <typename T>
void WhereLoop(char** d, const int64_t* s, int64_t n0, int64_t n1) {
  using Bits = std::conditional_t<std::is_arithmetic_v<T>, T, uint16_t>;
  static_assert(sizeof(Bits) == sizeof(T));
  constexpr int64_t kS = sizeof(T);
  const bool dense = s[0] == kS && s[1] == 1 && (s[2] == kS || s[2] == 0) && (s[3] == kS || s[3] == 0);
  for (int64_t j = 0; j < n1; ++j) {
    char* out_p = d[0] + j * s[4];
    const uint8_t* __restrict c = reinterpret_cast<const uint8_t*>(d[1] + j * s[5]);
    const char* xp = d[2] + j * s[6];
    const char* yp = d[3] + j * s[7];
    if (dense) {
      Bits* __restrict out = reinterpret_cast<Bits*>(out_p);
      const Bits* __restrict x = reinterpret_cast<const Bits*>(xp);
      const Bits* __restrict y = reinterpret_cast<const Bits*>(yp);
      if (s[2] != 0 && s[3] != 0) {
        for (int64_t i = 0; i < n0; ++i) {
          const Bits a = x[i], b = y[i];
          out[i] = c[i] != 0 ? a : b;
        }
      } else if (s[2] == 0 && s[3] != 0) {
        const Bits a = x[0];
        for (int64_t i = 0; i < n0; ++i) {
          const Bits b = y[i];
          out[i] = c[i] != 0 ? a : b;
        }
      } else if (s[2] != 0) {
        const Bits b = y[0];
        for (int64_t i = 0; i < n0; ++i) {
          const Bits a = x[i];
          out[i] = c[i] != 0 ? a : b;
        }
      } else {
        const Bits a = x[0], b = y[0];
        for (int64_t i = 0; i < n0; ++i) out[i] = c[i] != 0 ? a : b;
      }
      continue;
    }
    for (int64_t i = 0; i < n0; ++i) {
      const char* src = c[i * s[1]] != 0 ? xp + i * s[2] : yp + i * s[3];
      *reinterpret_cast<T*>(out_p + i * s[0]) = *reinterpret_cast<const T*>(src);
    }
  }
}

at::Tensor& WhereOut(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  TORCH_CHECK(condition.scalar_type() == at::kBool || condition.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              condition.scalar_type());
  const at::ScalarType dtype = at::result_type(self, other);
  // The CPU's where.self_out: out must have the promoted type (no casting into out).
  TORCH_CHECK(out.scalar_type() == dtype, "Expected out type to be ", dtype, " but got ", out.scalar_type());
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
  // Every value operand has out's dtype (converted above) and the condition is one byte
  // (bool or uint8), so the loop reads each operand as its own type: no dynamic casts.
  AT_DISPATCH_V2(dtype, "xxnpu_where", AT_WRAP([&] {
    LaunchTensorIterator("xxnpu::where", iter, [](char** d, const int64_t* s, int64_t n0, int64_t n1) {
      WhereLoop<scalar_t>(d, s, n0, n1);
    });
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
  m.impl("addr", &Addr);
  m.impl("addr.out", &AddrOut);
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
