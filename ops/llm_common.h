// torch.ops.xxnpu.* for LLM inference, modelled on vLLM's custom ops, one file per family:
//   rms_norm, fused_add_rms_norm, rotary_embedding (+ in-place rotary_embedding_),
//   silu_and_mul, reshape_and_cache, paged_attention (llm_norm_ops.cc, llm_rotary_ops.cc,
//   llm_activation_ops.cc, llm_paged_attention_ops.cc). This header holds what they share.
//
// Each op has one schema and three kernels:
//   - xxnpu: validates on the host, then queues one device kernel (named "xxnpu::<op>" in
//     the profiler, with bytes/flops) on the current stream of the tensors' device. The
//     kernel body captures only device addresses, sizes and strides, never a tensor: it
//     runs later on a device thread, and stream order (not lifetime) protects the memory,
//     as on CUDA. It reaches memory only through DeviceView.
//   - CPU: the reference, written with plain ATen ops; tests compare the two.
//   - Meta: shapes only (fake tensors, torch.compile, opcheck).
// The argument checks (here) are shared by all three, so an error reads the same everywhere.
// float32, float16 and bfloat16; the device kernels accumulate in float32.
// Index values that live on the device (positions, slot_mapping, block_tables, seq_lens)
// cannot be checked on the host without a synchronisation: the kernel checks them and
// fails with kOutOfRange, which surfaces at the next synchronising call as an AcceleratorError
// naming the kernel and the bad value (as a CUDA device-side assert would, but with a
// message).
// paged_attention's dot products go through the BLAS torch links (sgemm_); silu_and_mul
// and the attention softmax use a vectorizable exp (ExpF). See docs/llm-ops.md.
#ifndef TORCH_XXNPU_OPS_LLM_COMMON_H_
#define TORCH_XXNPU_OPS_LLM_COMMON_H_

#include <ATen/ATen.h>
#include <ATen/TensorUtils.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/xxnpu_tensor.h"

namespace xxnpu::llm {

// Work per grid block (elements touched): large enough that a block's overhead vanishes,
// small enough that the blocks spread over the compute threads.
constexpr int64_t kElementsPerBlock = 16384;

// ------------------------------------------------------------------ argument checks
// Written with the sym_* size accessors: the Meta kernels run them on fake tensors whose
// sizes may be symbolic (torch.compile with dynamic shapes, opcheck's dynamic test).

inline void CheckFloatDtype(const char* op, const char* arg, const at::Tensor& t) {
  const auto s = t.scalar_type();
  TORCH_CHECK(s == at::kFloat || s == at::kHalf || s == at::kBFloat16, op, ": ", arg,
              " must be float32, float16 or bfloat16, got ", s);
}

inline void CheckSameDtype(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg,
                    const at::Tensor& ref) {
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), op, ": ", arg, " must have the dtype of ", ref_arg, " (",
              ref.scalar_type(), "), got ", t.scalar_type());
}

inline void CheckIndexDtype(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kInt || t.scalar_type() == at::kLong, op, ": ", arg,
              " must be int32 or int64, got ", t.scalar_type());
}

inline void CheckDim(const char* op, const char* arg, const at::Tensor& t, int64_t dim, const char* layout) {
  TORCH_CHECK(t.dim() == dim, op, ": ", arg, " must be ", dim, "-D ", layout, ", got shape ", t.sym_sizes());
}

// xxnpu kernels: every tensor on one xxnpu device, the first xxnpu argument's (the
// dispatcher picks the xxnpu kernel as soon as one argument is on xxnpu, so a CPU argument
// lands here), with CUDA's message (CheckSameDevice).
inline void CheckDevices(const char* op, std::initializer_list<std::pair<const char*, const at::Tensor*>> args) {
  const at::Tensor* anchor = nullptr;
  for (const auto& [name, t] : args) {
    if (t->device().is_privateuseone()) {
      anchor = t;
      break;
    }
  }
  TORCH_CHECK(anchor != nullptr, op, ": expected ", args.begin()->first, " on an xxnpu device, got ",
              args.begin()->second->device());
  for (const auto& [name, t] : args) CheckSameDevice(op, name, *t, anchor->device());
}

// A 2-D [rows, cols] description of `t` (which may have any number of leading dims) as a
// view, if its strides allow one without a copy.
inline std::optional<std::vector<int64_t>> RowStrides(const at::Tensor& t, int64_t cols) {
  const int64_t rows = cols == 0 ? 0 : t.numel() / cols;
  return at::detail::computeStride(t.sizes(), t.strides(), at::IntArrayRef{rows, cols});
}

// ------------------------------------------------------------------ device helpers

// Calls f(scalar_t{}) for the float dtypes the ops support.
template <typename F>
void DispatchFloat(at::ScalarType t, const char* op, F&& f) {
  switch (t) {
    case at::kFloat: f(float{}); break;
    case at::kHalf: f(c10::Half{}); break;
    case at::kBFloat16: f(c10::BFloat16{}); break;
    default: TORCH_CHECK(false, op, ": unsupported dtype ", t);
  }
}

// An int32/int64 index tensor as the kernel sees it: device address, width, stride.
struct IndexRef {
  const void* data = nullptr;
  bool is64 = false;
  int64_t stride = 1;  // elements (for 1-D: between entries; 2-D: see stride1)
  int64_t stride1 = 1;
  // On the device thread only.
  int64_t Load(int64_t i, int64_t j = 0) const {
    const int64_t off = i * stride + j * stride1;
    return is64 ? static_cast<const int64_t*>(DeviceView(data))[off]
                : static_cast<const int32_t*>(DeviceView(data))[off];
  }
};

inline IndexRef MakeIndexRef(const at::Tensor& t) {
  IndexRef r;
  r.data = t.const_data_ptr();
  r.is64 = t.scalar_type() == at::kLong;
  r.stride = t.dim() >= 1 ? t.stride(0) : 1;
  r.stride1 = t.dim() >= 2 ? t.stride(1) : 1;
  return r;
}

// Queues `name` on `device`'s current stream over `items` work items (rows, tokens,
// sequences...) of about `item_elems` elements each; body(begin, end) handles items
// [begin, end) and returns an error status to fail the kernel.
template <typename Body>
void LaunchItems(const char* name, c10::Device device, int64_t items, int64_t item_elems, uint64_t bytes,
                 uint64_t flops, Body body) {
  if (items == 0) return;
  const int64_t per_block = std::max<int64_t>(1, kElementsPerBlock / std::max<int64_t>(1, item_elems));
  const int64_t blocks = (items + per_block - 1) / per_block;
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid = Dim3{static_cast<uint32_t>(blocks), 1, 1};
  cfg.block = Dim3{static_cast<uint32_t>(std::min<int64_t>(per_block * std::max<int64_t>(1, item_elems), 1024)), 1,
                   1};
  cfg.bytes = bytes;
  cfg.flops = flops;
  CheckOk(xxnpuLaunchKernel(cfg, [body = std::move(body), per_block, items](BlockRange r) -> absl::Status {
    return body(r.begin * per_block, std::min(items, r.end * per_block));
  }, CurrentXxnpuStreamHandle(device.index())), name);
}

// Sum of squares of n floats read through `load(i)`; 8 partial sums so the contiguous
// case vectorizes (a float sum does not reassociate by itself).
template <typename Load>
float SumSquares(int64_t n, Load load) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      const float v = load(i + k);
      acc[k] += v * v;
    }
  }
  for (; i < n; ++i) {
    const float v = load(i);
    acc[0] += v * v;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// n elements (stride apart) of src as floats into dst; the dense case vectorizes.
template <typename T>
void LoadFloats(const T* src, int64_t stride, int64_t n, float* dst) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i * stride]);
  }
}


}  // namespace xxnpu::llm

#endif  // TORCH_XXNPU_OPS_LLM_COMMON_H_
