// The two ops torch.amp.GradScaler("xxnpu") calls each step, as device kernels (without
// them every fp16 training step ran them on the CPU through the fallback, copying every
// gradient off the device and back):
//   _amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale): grads *=
//     inv_scale; found_inf = 1 if any gradient holds an inf or a NaN. One kernel per dtype
//     over all contiguous gradients (CUDA's multi-tensor apply), one per strided gradient.
//   _amp_update_scale_(scale, growth_tracker, found_inf, growth, backoff, interval): the
//     scale's backoff/growth schedule, one single-thread kernel.
// found_inf, inv_scale, scale and growth_tracker stay on the device and are read by the
// kernels: a step never synchronises the host, as on CUDA.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <atomic>
#include <cmath>
#include <vector>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/device_loop.h"
#include "ops/xxnpu_tensor.h"

namespace xxnpu {
namespace {

constexpr int64_t kChunk = 64 * 1024;  // elements per block of the multi-tensor kernel

void CheckScalarFloatOperand(const char* op, const char* arg, const at::Tensor& t, c10::Device device) {
  CheckSameDevice(op, arg, t, device);
  TORCH_CHECK(t.numel() == 1, op, ": ", arg, " must be a 1-element tensor, got ", t.numel(), " elements");
  TORCH_CHECK(t.scalar_type() == at::kFloat, op, ": ", arg, " must be a float tensor, got ", t.scalar_type());
}

// Marks a non-finite value; racing blocks all store the same 1.0f.
inline void FlagInf(float* found_inf) {
  std::atomic_ref<float>(*found_inf).store(1.0f, std::memory_order_relaxed);
}

template <typename scalar_t>
bool UnscaleSpan(scalar_t* p, int64_t n, float inv_scale) {
  using opmath_t = at::opmath_type<scalar_t>;
  bool non_finite = false;
  for (int64_t i = 0; i < n; ++i) {
    const opmath_t v = static_cast<opmath_t>(p[i]);
    non_finite |= !std::isfinite(v);
    p[i] = static_cast<scalar_t>(v * static_cast<opmath_t>(inv_scale));
  }
  return non_finite;
}

// Every contiguous gradient of one dtype in one kernel: a block is a chunk of one tensor.
template <typename scalar_t>
void LaunchMultiTensorUnscale(const std::vector<at::Tensor>& grads, float* found_inf, const float* inv_scale,
                              xxnpuStream_t stream) {
  struct Chunk {
    scalar_t* data;
    int64_t n;
  };
  std::vector<Chunk> chunks;
  uint64_t bytes = 0;
  for (const at::Tensor& g : grads) {
    auto* base = static_cast<scalar_t*>(DeviceView(g.data_ptr()));
    for (int64_t off = 0; off < g.numel(); off += kChunk) {
      chunks.push_back({base + off, std::min(kChunk, g.numel() - off)});
    }
    bytes += 2 * static_cast<uint64_t>(g.numel()) * sizeof(scalar_t);
  }
  if (chunks.empty()) return;
  LaunchConfig cfg;
  cfg.name = "xxnpu::amp_non_finite_check_and_unscale";
  cfg.grid = Dim3{static_cast<uint32_t>(chunks.size()), 1, 1};
  cfg.bytes = bytes;
  CheckOk(xxnpuLaunchKernel(cfg, [chunks = std::move(chunks), found_inf, inv_scale](BlockRange r) {
    const float inv = *inv_scale;
    bool non_finite = false;
    for (int64_t b = r.begin; b < r.end; ++b) non_finite |= UnscaleSpan(chunks[b].data, chunks[b].n, inv);
    if (non_finite) FlagInf(found_inf);
    return absl::OkStatus();
  }, stream), cfg.name);
}

void NonFiniteCheckAndUnscale(at::TensorList grads, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  constexpr const char* kOp = "_amp_foreach_non_finite_check_and_unscale_";
  if (grads.empty()) return;
  const c10::Device device = found_inf.device();
  TORCH_CHECK(device.is_privateuseone(), kOp, ": found_inf must be an xxnpu tensor, got ", device);
  CheckScalarFloatOperand(kOp, "found_inf", found_inf, device);
  CheckScalarFloatOperand(kOp, "inv_scale", inv_scale, device);
  for (const at::Tensor& g : grads) {
    CheckSameDevice(kOp, "scaled_grads", g, device);
    TORCH_CHECK(g.layout() == at::kStrided, kOp, ": scaled_grads must be strided tensors, got ", g.layout());
    TORCH_CHECK(at::isFloatingType(g.scalar_type()), kOp,
                ": scaled_grads must be floating-point tensors, got ", g.scalar_type());
  }
  c10::DeviceGuard guard(device);
  const xxnpuStream_t stream = CurrentXxnpuStreamHandle(device.index());
  auto* found_p = static_cast<float*>(DeviceView(found_inf.data_ptr()));
  const auto* inv_p = static_cast<const float*>(DeviceView(inv_scale.const_data_ptr()));

  std::vector<at::Tensor> by_dtype[static_cast<int>(at::ScalarType::NumOptions)];
  for (const at::Tensor& g : grads) {
    if (g.numel() == 0) continue;
    if (g.is_non_overlapping_and_dense()) {
      by_dtype[static_cast<int>(g.scalar_type())].push_back(g);
      continue;
    }
    // A strided gradient (rare: a view's grad): its own elementwise kernel.
    auto iter = at::TensorIteratorConfig().add_output(g).add_const_input(g).build();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, g.scalar_type(), "xxnpu_amp_unscale_strided", [&] {
      LaunchTensorIterator("xxnpu::amp_non_finite_check_and_unscale", iter,
                           [found_p, inv_p](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
        using opmath_t = at::opmath_type<scalar_t>;
        const opmath_t inv = static_cast<opmath_t>(*inv_p);
        bool non_finite = false;
        for (int64_t j = 0; j < n1; ++j) {
          for (int64_t i = 0; i < n0; ++i) {
            auto* out = reinterpret_cast<scalar_t*>(data[0] + j * strides[2] + i * strides[0]);
            const opmath_t v = static_cast<opmath_t>(
                *reinterpret_cast<const scalar_t*>(data[1] + j * strides[3] + i * strides[1]));
            non_finite |= !std::isfinite(v);
            *out = static_cast<scalar_t>(v * inv);
          }
        }
        if (non_finite) FlagInf(found_p);
      });
    });
  }
  for (int t = 0; t < static_cast<int>(at::ScalarType::NumOptions); ++t) {
    if (by_dtype[t].empty()) continue;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, static_cast<at::ScalarType>(t),
                                    "xxnpu_amp_unscale", [&] {
      LaunchMultiTensorUnscale<scalar_t>(by_dtype[t], found_p, inv_p, stream);
    });
  }
}

at::Tensor& UpdateScale(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                        double growth_factor, double backoff_factor, int64_t growth_interval) {
  constexpr const char* kOp = "_amp_update_scale_";
  const c10::Device device = scale.device();
  TORCH_CHECK(device.is_privateuseone(), kOp, ": scale must be an xxnpu tensor, got ", device);
  CheckScalarFloatOperand(kOp, "current_scale", scale, device);
  CheckScalarFloatOperand(kOp, "found_inf", found_inf, device);
  CheckSameDevice(kOp, "growth_tracker", growth_tracker, device);
  TORCH_CHECK(growth_tracker.numel() == 1, kOp, ": growth_tracker must be a 1-element tensor, got ",
              growth_tracker.numel(), " elements");
  TORCH_CHECK(growth_tracker.scalar_type() == at::kInt, kOp, ": growth_tracker must be an int tensor, got ",
              growth_tracker.scalar_type());
  c10::DeviceGuard guard(device);
  auto* scale_p = static_cast<float*>(DeviceView(scale.data_ptr()));
  auto* tracker_p = static_cast<int32_t*>(DeviceView(growth_tracker.data_ptr()));
  const auto* found_p = static_cast<const float*>(DeviceView(found_inf.const_data_ptr()));
  const float growth = static_cast<float>(growth_factor), backoff = static_cast<float>(backoff_factor);
  const int32_t interval = static_cast<int32_t>(growth_interval);
  LaunchConfig cfg;
  cfg.name = "xxnpu::amp_update_scale";
  cfg.bytes = 2 * sizeof(float) + 2 * sizeof(int32_t) + sizeof(float);
  CheckOk(xxnpuLaunchKernel(cfg, [scale_p, tracker_p, found_p, growth, backoff, interval](BlockRange) {
    // The schedule CUDA's and the CPU's kernels implement: back off on an overflow, grow
    // after `interval` clean steps in a row (unless that would overflow float).
    if (*found_p != 0.0f) {
      *scale_p *= backoff;
      *tracker_p = 0;
    } else {
      const int32_t successful = *tracker_p + 1;
      if (successful == interval) {
        const float grown = *scale_p * growth;
        if (std::isfinite(grown)) *scale_p = grown;
        *tracker_p = 0;
      } else {
        *tracker_p = successful;
      }
    }
    return absl::OkStatus();
  }, CurrentXxnpuStreamHandle(device.index())), cfg.name);
  return scale;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", &NonFiniteCheckAndUnscale);
  m.impl("_amp_update_scale_", &UpdateScale);
}

}  // namespace
}  // namespace xxnpu
