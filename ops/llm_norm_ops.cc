// torch.ops.xxnpu.rms_norm and fused_add_rms_norm (vLLM's): an xxnpu kernel (one device
// kernel on the current stream), a CPU reference and a Meta kernel each; see llm_common.h
// and docs/llm-ops.md.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/c10/torch_status.h"
#include "device/runtime.h"
#include "ops/fast_math.h"
#include "ops/llm_common.h"

namespace xxnpu::llm {
namespace {

// ================================================================== rms_norm

void CheckRmsNormArgs(const char* op, const at::Tensor& x, const at::Tensor& weight) {
  CheckFloatDtype(op, "x", x);
  CheckSameDtype(op, "weight", weight, "x", x);
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least 1 dimension (the hidden size last), got a 0-dim tensor");
  CheckDim(op, "weight", weight, 1, "[hidden_size]");
  TORCH_CHECK(weight.sym_size(0) == x.sym_size(-1), op, ": weight has ", weight.sym_size(0),
              " elements but x's last dimension (hidden size) is ", x.sym_size(-1));
}

at::Tensor RmsNormCpu(const at::Tensor& x, const at::Tensor& weight, double eps) {
  CheckRmsNormArgs("xxnpu::rms_norm", x, weight);
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor inv = at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (xf * inv * weight.to(at::kFloat)).to(x.scalar_type()).contiguous();
}

at::Tensor RmsNormMeta(const at::Tensor& x, const at::Tensor& weight, double) {
  CheckRmsNormArgs("xxnpu::rms_norm", x, weight);
  return at::empty_symint(x.sym_sizes(), x.options());
}

at::Tensor RmsNormXxnpu(const at::Tensor& x_in, const at::Tensor& weight, double eps) {
  constexpr const char* kOp = "xxnpu::rms_norm";
  CheckRmsNormArgs(kOp, x_in, weight);
  CheckDevices(kOp, {{"x", &x_in}, {"weight", &weight}});
  const c10::DeviceGuard guard(x_in.device());
  const int64_t hidden = x_in.size(-1);
  at::Tensor out = at::empty(x_in.sizes(), x_in.options());
  if (out.numel() == 0) return out;
  // A view when the leading dims flatten; otherwise a (device) copy of the input.
  const at::Tensor x = x_in.reshape({-1, hidden});
  const int64_t rows = x.size(0), xs0 = x.stride(0), xs1 = x.stride(1), ws = weight.stride(0);
  const float feps = static_cast<float>(eps);
  DispatchFloat(x.scalar_type(), kOp, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.const_data_ptr<T>();
    const T* wp = weight.const_data_ptr<T>();
    T* op = out.data_ptr<T>();
    LaunchItems(kOp, x.device(), rows, hidden, (2 * rows * hidden + hidden) * sizeof(T), 4 * rows * hidden,
                [=](int64_t r0, int64_t r1) {
      const T* xv = DeviceView(xp);
      const T* wv = DeviceView(wp);
      T* ov = DeviceView(op);
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = xv + r * xs0;
        T* o = ov + r * hidden;
        if (xs1 == 1 && ws == 1) {
          const float inv = 1.0f / std::sqrt(SumSquares(hidden, [&](int64_t i) { return static_cast<float>(xr[i]); }) /
                                                 static_cast<float>(hidden) + feps);
          for (int64_t i = 0; i < hidden; ++i) {
            o[i] = static_cast<T>(static_cast<float>(xr[i]) * inv * static_cast<float>(wv[i]));
          }
        } else {
          const float inv =
              1.0f / std::sqrt(SumSquares(hidden, [&](int64_t i) { return static_cast<float>(xr[i * xs1]); }) /
                                   static_cast<float>(hidden) + feps);
          for (int64_t i = 0; i < hidden; ++i) {
            o[i] = static_cast<T>(static_cast<float>(xr[i * xs1]) * inv * static_cast<float>(wv[i * ws]));
          }
        }
      }
      return absl::OkStatus();
    });
  });
  return out;
}

// ================================================================== fused_add_rms_norm
// residual = x + residual; x = rms_norm(residual) * weight, both in place (vLLM's
// fused_add_rms_norm). The norm is taken of the residual as stored (rounded to its dtype),
// so the CPU reference is the two plain steps.

void CheckFusedAddRmsNormArgs(const char* op, const at::Tensor& x, const at::Tensor& residual,
                              const at::Tensor& weight) {
  CheckRmsNormArgs(op, x, weight);
  CheckSameDtype(op, "residual", residual, "x", x);
  TORCH_CHECK(residual.sym_sizes() == x.sym_sizes(), op, ": residual must have x's shape ", x.sym_sizes(), ", got ",
              residual.sym_sizes());
}

void FusedAddRmsNormCpu(at::Tensor& x, at::Tensor& residual, const at::Tensor& weight, double eps) {
  CheckFusedAddRmsNormArgs("xxnpu::fused_add_rms_norm", x, residual, weight);
  residual.add_(x);
  x.copy_(RmsNormCpu(residual, weight, eps));
}

void FusedAddRmsNormMeta(at::Tensor& x, at::Tensor& residual, const at::Tensor& weight, double) {
  CheckFusedAddRmsNormArgs("xxnpu::fused_add_rms_norm", x, residual, weight);
}

void FusedAddRmsNormXxnpu(at::Tensor& x, at::Tensor& residual, const at::Tensor& weight, double eps) {
  constexpr const char* kOp = "xxnpu::fused_add_rms_norm";
  CheckFusedAddRmsNormArgs(kOp, x, residual, weight);
  CheckDevices(kOp, {{"x", &x}, {"residual", &residual}, {"weight", &weight}});
  at::assert_no_overlap(x, residual);
  const c10::DeviceGuard guard(x.device());
  if (x.numel() == 0) return;
  const int64_t hidden = x.size(-1);
  // Written in place: the rows must be addressable without a copy.
  const auto xs = RowStrides(x, hidden);
  const auto rs = RowStrides(residual, hidden);
  TORCH_CHECK(xs && rs, kOp, ": x and residual are updated in place, so their leading dimensions must flatten "
              "into rows without a copy; got strides ", x.strides(), " and ", residual.strides(), " for shape ",
              x.sizes());
  const int64_t rows = x.numel() / hidden;
  const int64_t xs0 = (*xs)[0], xs1 = (*xs)[1], rs0 = (*rs)[0], rs1 = (*rs)[1], ws = weight.stride(0);
  const float feps = static_cast<float>(eps);
  DispatchFloat(x.scalar_type(), kOp, [&](auto tag) {
    using T = decltype(tag);
    T* xp = x.data_ptr<T>();
    T* rp = residual.data_ptr<T>();
    const T* wp = weight.const_data_ptr<T>();
    LaunchItems(kOp, x.device(), rows, hidden, (5 * rows * hidden + hidden) * sizeof(T), 6 * rows * hidden,
                [=](int64_t r0, int64_t r1) {
      T* xv = DeviceView(xp);
      T* rv = DeviceView(rp);
      const T* wv = DeviceView(wp);
      for (int64_t r = r0; r < r1; ++r) {
        T* xr = xv + r * xs0;
        T* rr = rv + r * rs0;
        if (xs1 == 1 && rs1 == 1 && ws == 1) {  // dense rows: loops the compiler vectorizes
          for (int64_t i = 0; i < hidden; ++i) {
            rr[i] = static_cast<T>(static_cast<float>(xr[i]) + static_cast<float>(rr[i]));
          }
          const float inv = 1.0f / std::sqrt(SumSquares(hidden, [&](int64_t i) { return static_cast<float>(rr[i]); }) /
                                                 static_cast<float>(hidden) + feps);
          for (int64_t i = 0; i < hidden; ++i) {
            xr[i] = static_cast<T>(static_cast<float>(rr[i]) * inv * static_cast<float>(wv[i]));
          }
          continue;
        }
        for (int64_t i = 0; i < hidden; ++i) {
          rr[i * rs1] = static_cast<T>(static_cast<float>(xr[i * xs1]) + static_cast<float>(rr[i * rs1]));
        }
        const float inv =
            1.0f / std::sqrt(SumSquares(hidden, [&](int64_t i) { return static_cast<float>(rr[i * rs1]); }) /
                                 static_cast<float>(hidden) + feps);
        for (int64_t i = 0; i < hidden; ++i) {
          xr[i * xs1] = static_cast<T>(static_cast<float>(rr[i * rs1]) * inv * static_cast<float>(wv[i * ws]));
        }
      }
      return absl::OkStatus();
    });
  });
}

TORCH_LIBRARY_FRAGMENT(xxnpu, m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("fused_add_rms_norm(Tensor(a!) x, Tensor(b!) residual, Tensor weight, float eps) -> ()");
}

TORCH_LIBRARY_IMPL(xxnpu, PrivateUse1, m) {
  m.impl("rms_norm", &RmsNormXxnpu);
  m.impl("fused_add_rms_norm", &FusedAddRmsNormXxnpu);
}

TORCH_LIBRARY_IMPL(xxnpu, CPU, m) {
  m.impl("rms_norm", &RmsNormCpu);
  m.impl("fused_add_rms_norm", &FusedAddRmsNormCpu);
}

TORCH_LIBRARY_IMPL(xxnpu, Meta, m) {
  m.impl("rms_norm", &RmsNormMeta);
  m.impl("fused_add_rms_norm", &FusedAddRmsNormMeta);
}

}  // namespace
}  // namespace xxnpu::llm
