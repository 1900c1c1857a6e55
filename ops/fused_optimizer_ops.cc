// torch.optim's fused steps on xxnpu: _fused_adam_, _fused_adamw_ and _fused_sgd_ (and
// their tensor-lr overloads), each one device kernel over every parameter of the group
// (multi_tensor_apply.h), so `torch.optim.AdamW(params, fused=True)` runs as on CUDA.
//
// The kernels follow CUDA's semantics: the math in opmath (float for bfloat16/float16
// params), bias corrections from each parameter's step tensor read on the device, a tensor
// lr on the device read by the kernel (a CPU one read now), and GradScaler's contract: with
// grad_scale the gradients are unscaled and written back, with found_inf == 1 the whole step
// is skipped, on the device, without a host synchronisation.
//
// torch.optim allows fused=True on the PrivateUse1 backend in torch 2.13
// (torch/utils/_foreach_utils.py, _get_fused_kernels_supported_devices includes
// torch._C._get_privateuse1_backend_name()); nothing here patches torch.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/native/ForeachUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/multi_tensor_apply.h"
#include "ops/vec_optimizer.h"

namespace xxnpu {
namespace {

namespace mt = multi_tensor;

void CheckCount(const char* op, const char* what, at::TensorList list, size_t n) {
  TORCH_CHECK(list.size() == n, op, ": expected ", what, " to hold ", n, " tensors (one per param), got ",
              list.size());
}

// grad_scale / found_inf / a device lr: one float32 element on the params' device.
const float* DeviceFloat(const char* op, const char* what, const at::Tensor& t, c10::Device device) {
  TORCH_CHECK(t.device() == device, op, ": expected ", what, " on ", device, " (the params' device), got ",
              t.device());
  TORCH_CHECK(t.numel() == 1 && t.scalar_type() == at::kFloat, op, ": expected ", what,
              " to be a 1-element float32 tensor, got ", t.numel(), " elements of ", t.scalar_type());
  return static_cast<const float*>(DeviceView(t.const_data_ptr()));
}

const float* OptionalDeviceFloat(const char* op, const char* what, const std::optional<at::Tensor>& t,
                                 c10::Device device) {
  return t.has_value() && t->defined() ? DeviceFloat(op, what, *t, device) : nullptr;
}

// Every list on xxnpu in one floating dtype, strided, dense, list-mates of one size and
// strides: what one kernel over the storage spans needs (CUDA raises the same way).
void CheckLists(const char* op, const char* names, at::ArrayRef<at::TensorList> lists) {
  const at::Tensor& first = lists[0][0];
  TORCH_CHECK(first.device().is_privateuseone(), op, ": expected xxnpu tensors, got ", first.device());
  const at::ScalarType t = first.scalar_type();
  TORCH_CHECK(t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16, op,
              ": expected float32, float64, float16 or bfloat16 params, got ", t);
  TORCH_CHECK(at::native::check_fast_path_restrictions(lists), op, ": ", names,
              " must have the same dtype, device and layout (strided, dense, the same sizes and strides per param)");
}

// Each step: one float32 element on the params' device (fused optimizers keep it there).
std::vector<const float*> StepPointers(const char* op, at::TensorList steps, c10::Device device) {
  std::vector<const float*> p;
  p.reserve(steps.size());
  for (const at::Tensor& s : steps) p.push_back(DeviceFloat(op, "each state_step", s, device));
  return p;
}

// Device-side scalars of a step: what the kernel reads before any element.
struct StepScalars {
  const float* lr = nullptr;  // null: use the host lr
  const float* grad_scale = nullptr;
  const float* found_inf = nullptr;
};

// The gradient both optimizers start from: unscaled by GradScaler's scale (and written
// back when the step unscales in place, as the CPU's fused steps do), then negated for
// maximize. Inlined into each optimizer's loop, which stays branch-free.
template <bool kStoreGrad, typename scalar_t, typename opmath_t>
inline opmath_t ScaledGrad(scalar_t* grad, int64_t i, opmath_t scale, opmath_t sign) {
  const opmath_t g = static_cast<opmath_t>(grad[i]) / scale;
  if constexpr (kStoreGrad) grad[i] = static_cast<scalar_t>(g);
  return g * sign;
}

// ------------------------------------------------------------------ Adam / AdamW

template <typename opmath_t>
struct AdamConsts {
  opmath_t beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  opmath_t decay;  // AdamW: param *= 1 - lr * weight_decay; Adam: 1
  opmath_t l2;     // Adam: grad += weight_decay * param; AdamW: 0
  opmath_t sign;   // maximize: -1
  opmath_t scale;  // grad_scale (1 without)
  opmath_t step_size, bias_correction2_sqrt;
};

// One chunk of one parameter. kAmsgrad and kStoreGrad are template arguments so each loop
// is branch-free and vectorises; weight decay and maximize are arithmetic identities when off.
template <typename scalar_t, bool kAmsgrad, bool kStoreGrad>
void AdamSpan(char* const* p, int64_t n, const AdamConsts<at::opmath_type<scalar_t>>& c) {
  using opmath_t = at::opmath_type<scalar_t>;
  auto* param = reinterpret_cast<scalar_t*>(p[0]);
  auto* grad = reinterpret_cast<scalar_t*>(p[1]);
  auto* exp_avg = reinterpret_cast<scalar_t*>(p[2]);
  auto* exp_avg_sq = reinterpret_cast<scalar_t*>(p[3]);
  auto* max_exp_avg_sq = reinterpret_cast<scalar_t*>(p[4]);
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) {
    opmath_t g = ScaledGrad<kStoreGrad>(grad, i, c.scale, c.sign);
    opmath_t w = static_cast<opmath_t>(param[i]);
    // Skipped, not added as 0 * w, when off: an inf parameter would make the gradient NaN
    // (the CPU's fused step skips it too). Loop-invariant: the compiler unswitches it.
    if (c.l2 != 0) g = g + c.l2 * w;
    w = w * c.decay;
    const opmath_t m = c.beta1 * static_cast<opmath_t>(exp_avg[i]) + c.one_minus_beta1 * g;
    const opmath_t v = c.beta2 * static_cast<opmath_t>(exp_avg_sq[i]) + c.one_minus_beta2 * g * g;
    opmath_t vhat = v;
    if constexpr (kAmsgrad) {
      const opmath_t old = static_cast<opmath_t>(max_exp_avg_sq[i]);
      vhat = (old != old || old > v) ? old : v;
      max_exp_avg_sq[i] = static_cast<scalar_t>(vhat);
    }
    const opmath_t denom = std::sqrt(vhat) / c.bias_correction2_sqrt + c.eps;
    param[i] = static_cast<scalar_t>(w - c.step_size * m / denom);
    exp_avg[i] = static_cast<scalar_t>(m);
    exp_avg_sq[i] = static_cast<scalar_t>(v);
  }
}

struct AdamArgs {
  double lr, beta1, beta2, weight_decay, eps;
  bool amsgrad, maximize, adamw;
};

template <typename scalar_t>
void LaunchAdam(const char* name, std::array<at::TensorList, 5> lists, std::vector<const float*> steps,
                const AdamArgs& a, StepScalars s, c10::Device device) {
  using opmath_t = at::opmath_type<scalar_t>;
  mt::Plan<5> plan = mt::MakePlan(lists);
  const uint64_t numel = plan.numel;
  const bool store_grad = s.grad_scale != nullptr;
  // Reads param, grad, m, v (+ max); writes param, m, v (+ max, + grad when unscaling).
  const uint64_t accesses = 7 + (a.amsgrad ? 2 : 0) + (store_grad ? 1 : 0);
  mt::Launch(name, CurrentXxnpuStreamHandle(device.index()), std::move(plan), numel * sizeof(scalar_t) * accesses,
             numel * 16, [steps = std::move(steps), a, s, store_grad](char* const* p, int64_t n, int64_t t) {
               // GradScaler found an inf/NaN: the step is skipped (the host never looked).
               if (s.found_inf != nullptr && *s.found_inf == 1.0f) return;
               const double step = *steps[t];
               const double lr = s.lr != nullptr ? static_cast<double>(*s.lr) : a.lr;
               AdamConsts<opmath_t> c;
               c.beta1 = static_cast<opmath_t>(a.beta1);
               c.one_minus_beta1 = static_cast<opmath_t>(1 - a.beta1);
               c.beta2 = static_cast<opmath_t>(a.beta2);
               c.one_minus_beta2 = static_cast<opmath_t>(1 - a.beta2);
               c.eps = static_cast<opmath_t>(a.eps);
               c.decay = static_cast<opmath_t>(a.adamw ? 1 - lr * a.weight_decay : 1);
               c.l2 = static_cast<opmath_t>(a.adamw ? 0 : a.weight_decay);
               c.sign = static_cast<opmath_t>(a.maximize ? -1 : 1);
               c.scale = static_cast<opmath_t>(s.grad_scale != nullptr ? *s.grad_scale : 1.0f);
               c.step_size = static_cast<opmath_t>(lr / (1 - std::pow(a.beta1, step)));
               c.bias_correction2_sqrt = static_cast<opmath_t>(std::sqrt(1 - std::pow(a.beta2, step)));
               if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, at::BFloat16>) {
                 // The per-capability SIMD span (vec_optimizer.h): this file is built for the
                 // baseline ISA, where the loop below vectorises only to SSE width.
                 const VecAdamConsts vc{c.beta1, c.one_minus_beta1, c.beta2, c.one_minus_beta2,
                                        c.eps,   c.decay,           c.l2,    c.sign,
                                        c.scale, c.step_size,       c.bias_correction2_sqrt};
                 const VecDtype dtype = std::is_same_v<scalar_t, float> ? VecDtype::kFloat : VecDtype::kBFloat16;
                 HostVecOptimizerKernels().adam(dtype, a.amsgrad, store_grad, {p[0], p[1], p[2], p[3], p[4]}, n, vc);
               } else if (a.amsgrad) {
                 store_grad ? AdamSpan<scalar_t, true, true>(p, n, c) : AdamSpan<scalar_t, true, false>(p, n, c);
               } else {
                 store_grad ? AdamSpan<scalar_t, false, true>(p, n, c) : AdamSpan<scalar_t, false, false>(p, n, c);
               }
             });
}

void FusedAdam(const char* op, const char* kernel, at::TensorList params, at::TensorList grads,
               at::TensorList exp_avgs, at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs,
               at::TensorList state_steps, AdamArgs a, const at::Tensor* lr_tensor,
               const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  const size_t n = params.size();
  CheckCount(op, "grads", grads, n);
  CheckCount(op, "exp_avgs", exp_avgs, n);
  CheckCount(op, "exp_avg_sqs", exp_avg_sqs, n);
  CheckCount(op, "max_exp_avg_sqs", max_exp_avg_sqs, a.amsgrad ? n : 0);
  CheckCount(op, "state_steps", state_steps, n);
  if (n == 0) return;
  if (a.amsgrad) {
    CheckLists(op, "params, grads, exp_avgs, exp_avg_sqs and max_exp_avg_sqs",
               {params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs});
  } else {
    CheckLists(op, "params, grads, exp_avgs and exp_avg_sqs", {params, grads, exp_avgs, exp_avg_sqs});
  }
  const c10::Device device = params[0].device();
  c10::DeviceGuard guard(device);
  StepScalars s;
  s.grad_scale = OptionalDeviceFloat(op, "grad_scale", grad_scale, device);
  s.found_inf = OptionalDeviceFloat(op, "found_inf", found_inf, device);
  if (lr_tensor != nullptr) {
    // A CPU lr is a host value (CUDA reads it the same way); a device lr is read by the kernel.
    if (lr_tensor->device().is_cpu()) {
      a.lr = lr_tensor->item<double>();
    } else {
      s.lr = DeviceFloat(op, "lr", *lr_tensor, device);
    }
  }
  std::vector<const float*> steps = StepPointers(op, state_steps, device);
  // Without amsgrad the kernel never touches the fifth list: exp_avg_sqs stands in.
  const std::array<at::TensorList, 5> lists{params, grads, exp_avgs, exp_avg_sqs,
                                            a.amsgrad ? max_exp_avg_sqs : exp_avg_sqs};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, params[0].scalar_type(), "xxnpu_fused_adam", [&] {
    LaunchAdam<scalar_t>(kernel, lists, std::move(steps), a, s, device);
  });
}

#define XXNPU_ADAM_PARAMS                                                                              \
  at::TensorList params, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,    \
      at::TensorList max_exp_avg_sqs, at::TensorList state_steps
#define XXNPU_ADAM_HYPER                                                                               \
  double beta1, double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,             \
      const std::optional<at::Tensor>&grad_scale, const std::optional<at::Tensor>&found_inf

void FusedAdam_(XXNPU_ADAM_PARAMS, double lr, XXNPU_ADAM_HYPER) {
  FusedAdam("_fused_adam_", "xxnpu::fused_adam", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
            {lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, false}, nullptr, grad_scale, found_inf);
}
void FusedAdamTensorLr_(XXNPU_ADAM_PARAMS, const at::Tensor& lr, XXNPU_ADAM_HYPER) {
  FusedAdam("_fused_adam_", "xxnpu::fused_adam", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
            {0, beta1, beta2, weight_decay, eps, amsgrad, maximize, false}, &lr, grad_scale, found_inf);
}
void FusedAdamW_(XXNPU_ADAM_PARAMS, double lr, XXNPU_ADAM_HYPER) {
  FusedAdam("_fused_adamw_", "xxnpu::fused_adamw", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
            state_steps, {lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, true}, nullptr, grad_scale,
            found_inf);
}
void FusedAdamWTensorLr_(XXNPU_ADAM_PARAMS, const at::Tensor& lr, XXNPU_ADAM_HYPER) {
  FusedAdam("_fused_adamw_", "xxnpu::fused_adamw", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
            state_steps, {0, beta1, beta2, weight_decay, eps, amsgrad, maximize, true}, &lr, grad_scale, found_inf);
}

// ------------------------------------------------------------------ SGD

template <typename opmath_t>
struct SgdConsts {
  opmath_t lr, weight_decay, momentum, one_minus_dampening, sign, scale;
  bool nesterov, first_step;
};

template <typename scalar_t, bool kMomentum, bool kStoreGrad>
void SgdSpan(char* const* p, int64_t n, const SgdConsts<at::opmath_type<scalar_t>>& c) {
  using opmath_t = at::opmath_type<scalar_t>;
  auto* param = reinterpret_cast<scalar_t*>(p[0]);
  auto* grad = reinterpret_cast<scalar_t*>(p[1]);
  auto* buf = reinterpret_cast<scalar_t*>(p[2]);
  // nesterov and the first step are loop-invariant: the compiler unswitches them.
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) {
    opmath_t g = ScaledGrad<kStoreGrad>(grad, i, c.scale, c.sign);
    const opmath_t w = static_cast<opmath_t>(param[i]);
    if (c.weight_decay != 0) g = g + c.weight_decay * w;  // skipped when off: as AdamSpan's l2
    if constexpr (kMomentum) {
      // The first step's buffer is uninitialised memory (empty_like): never read it.
      const opmath_t b = c.first_step ? g : c.momentum * static_cast<opmath_t>(buf[i]) + c.one_minus_dampening * g;
      buf[i] = static_cast<scalar_t>(b);
      g = c.nesterov ? g + c.momentum * b : b;
    }
    param[i] = static_cast<scalar_t>(w - c.lr * g);
  }
}

struct SgdArgs {
  double weight_decay, momentum, lr, dampening;
  bool nesterov, maximize, is_first_step;
};

template <typename scalar_t>
void LaunchSgd(std::array<at::TensorList, 3> lists, const SgdArgs& a, bool momentum, StepScalars s,
               c10::Device device) {
  using opmath_t = at::opmath_type<scalar_t>;
  mt::Plan<3> plan = mt::MakePlan(lists);
  const uint64_t numel = plan.numel;
  const bool store_grad = s.grad_scale != nullptr;
  const uint64_t accesses = 3 + (momentum ? (a.is_first_step ? 1 : 2) : 0) + (store_grad ? 1 : 0);
  mt::Launch("xxnpu::fused_sgd", CurrentXxnpuStreamHandle(device.index()), std::move(plan),
             numel * sizeof(scalar_t) * accesses, numel * 8,
             [a, s, momentum, store_grad](char* const* p, int64_t n, int64_t) {
               if (s.found_inf != nullptr && *s.found_inf == 1.0f) return;
               SgdConsts<opmath_t> c;
               c.lr = static_cast<opmath_t>(s.lr != nullptr ? static_cast<double>(*s.lr) : a.lr);
               c.weight_decay = static_cast<opmath_t>(a.weight_decay);
               c.momentum = static_cast<opmath_t>(a.momentum);
               c.one_minus_dampening = static_cast<opmath_t>(1 - a.dampening);
               c.sign = static_cast<opmath_t>(a.maximize ? -1 : 1);
               c.scale = static_cast<opmath_t>(s.grad_scale != nullptr ? *s.grad_scale : 1.0f);
               c.nesterov = a.nesterov;
               c.first_step = a.is_first_step;
               if (momentum) {
                 store_grad ? SgdSpan<scalar_t, true, true>(p, n, c) : SgdSpan<scalar_t, true, false>(p, n, c);
               } else {
                 store_grad ? SgdSpan<scalar_t, false, true>(p, n, c) : SgdSpan<scalar_t, false, false>(p, n, c);
               }
             });
}

void FusedSgd(at::TensorList params, at::TensorList grads, at::TensorList bufs, SgdArgs a, const at::Tensor* lr_tensor,
              const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  constexpr const char* kOp = "_fused_sgd_";
  const size_t n = params.size();
  const bool momentum = a.momentum != 0;
  CheckCount(kOp, "grads", grads, n);
  // torch.optim passes no buffers exactly when momentum is 0 (as the CPU kernel checks).
  CheckCount(kOp, "momentum_buffer_list", bufs, momentum ? n : 0);
  if (n == 0) return;
  if (momentum) {
    CheckLists(kOp, "params, grads and momentum_buffer_list", {params, grads, bufs});
  } else {
    CheckLists(kOp, "params and grads", {params, grads});
  }
  const c10::Device device = params[0].device();
  c10::DeviceGuard guard(device);
  StepScalars s;
  s.grad_scale = OptionalDeviceFloat(kOp, "grad_scale", grad_scale, device);
  s.found_inf = OptionalDeviceFloat(kOp, "found_inf", found_inf, device);
  if (lr_tensor != nullptr) {
    if (lr_tensor->device().is_cpu()) {
      a.lr = lr_tensor->item<double>();
    } else {
      s.lr = DeviceFloat(kOp, "lr", *lr_tensor, device);
    }
  }
  const std::array<at::TensorList, 3> lists{params, grads, momentum ? bufs : grads};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, params[0].scalar_type(), "xxnpu_fused_sgd", [&] {
    LaunchSgd<scalar_t>(lists, a, momentum, s, device);
  });
}

void FusedSgd_(at::TensorList params, at::TensorList grads, at::TensorList bufs, double weight_decay, double momentum,
               double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
               const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  FusedSgd(params, grads, bufs, {weight_decay, momentum, lr, dampening, nesterov, maximize, is_first_step}, nullptr,
           grad_scale, found_inf);
}
void FusedSgdTensorLr_(at::TensorList params, at::TensorList grads, at::TensorList bufs, double weight_decay,
                       double momentum, const at::Tensor& lr, double dampening, bool nesterov, bool maximize,
                       bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                       const std::optional<at::Tensor>& found_inf) {
  FusedSgd(params, grads, bufs, {weight_decay, momentum, 0, dampening, nesterov, maximize, is_first_step}, &lr,
           grad_scale, found_inf);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", &FusedAdam_);
  m.impl("_fused_adam_.tensor_lr", &FusedAdamTensorLr_);
  m.impl("_fused_adamw_", &FusedAdamW_);
  m.impl("_fused_adamw_.tensor_lr", &FusedAdamWTensorLr_);
  m.impl("_fused_sgd_", &FusedSgd_);
  m.impl("_fused_sgd_.tensor_lr", &FusedSgdTensorLr_);
}

}  // namespace
}  // namespace xxnpu
