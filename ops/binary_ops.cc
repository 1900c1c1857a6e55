// Binary arithmetic on xxnpu: add, sub, mul, div (with their functional, in-place and out=
// forms, which PrivateUse1 must register one by one). Each is one scalar lambda handed to
// LaunchBinary (ops/elementwise.h).
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/TensorIterator.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "ops/binary_ops.h"
#include "ops/elementwise.h"
#include "ops/xxnpu_tensor.h"

namespace xxnpu {
namespace {

#define XXNPU_ARITH_TYPES AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16

void AddKernel(at::TensorIteratorBase& iter, const at::Scalar& alpha) {
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_add", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t a = alpha.to<opmath_t>();
    if (a == opmath_t(1)) {
      LaunchBinary<scalar_t>("xxnpu::add", iter, [](opmath_t x, opmath_t y) { return x + y; }, 1, VecBinaryOp::kAdd, 1);
    } else {
      LaunchBinary<scalar_t>("xxnpu::add", iter, [a](opmath_t x, opmath_t y) { return x + a * y; }, 2,
                             VecBinaryOp::kAdd, elementwise_detail::VecConstant(a));
    }
  }), XXNPU_ARITH_TYPES, at::kBool);
}

void MulKernel(at::TensorIteratorBase& iter) {
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_mul", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    if constexpr (std::is_same_v<scalar_t, bool>) {
      LaunchBinary<scalar_t>("xxnpu::mul", iter, [](opmath_t x, opmath_t y) { return x && y; });
    } else {
      LaunchBinary<scalar_t>("xxnpu::mul", iter, [](opmath_t x, opmath_t y) { return x * y; }, 1, VecBinaryOp::kMul);
    }
  }), XXNPU_ARITH_TYPES, at::kBool);
}

void DivKernel(at::TensorIteratorBase& iter) {
  AT_DISPATCH_V2(iter.common_dtype(), "xxnpu_div", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    LaunchBinary<scalar_t>("xxnpu::div", iter, [](opmath_t x, opmath_t y) { return x / y; }, 1, VecBinaryOp::kDiv);
  }), AT_EXPAND(AT_FLOATING_TYPES), AT_EXPAND(AT_COMPLEX_TYPES), at::kHalf, at::kBFloat16);
}

void CheckSub(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.scalar_type() != at::kBool || other.scalar_type() != at::kBool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. "
              "Use the `^` or `logical_xor()` operator instead.");
}

// ---- the three forms of each op. The functional form allocates its result directly
// (AllocatingIterator); TensorIterator resizes and validates out=.

at::Tensor& AddOut(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  const c10::DeviceGuard guard(out.device());
  auto iter = at::TensorIterator::borrowing_binary_op(out, self, other);
  AddKernel(iter, alpha);
  return out;
}
at::Tensor Add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  const c10::DeviceGuard guard(self.device().is_cpu() ? other.device() : self.device());
  AllocatingIterator iter;
  iter.build_borrowing_binary_op(iter.maybe_get_output(0), self, other);
  AddKernel(iter, alpha);
  return iter.TakeOutput();
}
at::Tensor& AddInplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return AddOut(self, other, alpha, self);
}

at::Tensor& SubOut(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha, at::Tensor& out) {
  CheckSub(self, other);
  return AddOut(self, other, -alpha, out);
}
at::Tensor Sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  CheckSub(self, other);
  return Add(self, other, -alpha);
}
at::Tensor& SubInplace(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  CheckSub(self, other);
  return AddOut(self, other, -alpha, self);
}

at::Tensor& MulOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  const c10::DeviceGuard guard(out.device());
  auto iter = at::TensorIterator::borrowing_binary_op(out, self, other);
  MulKernel(iter);
  return out;
}
at::Tensor Mul(const at::Tensor& self, const at::Tensor& other) {
  const c10::DeviceGuard guard(self.device().is_cpu() ? other.device() : self.device());
  AllocatingIterator iter;
  iter.build_borrowing_binary_op(iter.maybe_get_output(0), self, other);
  MulKernel(iter);
  return iter.TakeOutput();
}
at::Tensor& MulInplace(at::Tensor& self, const at::Tensor& other) { return MulOut(self, other, self); }

at::Tensor& DivOut(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  const c10::DeviceGuard guard(out.device());
  auto iter = at::TensorIterator::binary_float_op(out, self, other);
  DivKernel(iter);
  return out;
}
at::Tensor Div(const at::Tensor& self, const at::Tensor& other) {
  const c10::DeviceGuard guard(self.device().is_cpu() ? other.device() : self.device());
  AllocatingIterator iter;
  iter.build_borrowing_binary_float_op(iter.maybe_get_output(0), self, other);
  DivKernel(iter);
  return iter.TakeOutput();
}
at::Tensor& DivInplace(at::Tensor& self, const at::Tensor& other) { return DivOut(self, other, self); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", &Add);
  m.impl("add_.Tensor", &AddInplace);
  m.impl("add.out", &AddOut);
  m.impl("sub.Tensor", &Sub);
  m.impl("sub_.Tensor", &SubInplace);
  m.impl("sub.out", &SubOut);
  m.impl("mul.Tensor", &Mul);
  m.impl("mul_.Tensor", &MulInplace);
  m.impl("mul.out", &MulOut);
  m.impl("div.Tensor", &Div);
  m.impl("div_.Tensor", &DivInplace);
  m.impl("div.out", &DivOut);
}

}  // namespace

at::Tensor XxnpuAdd(const at::Tensor& a, const at::Tensor& b) { return Add(a, b, 1); }

}  // namespace xxnpu
