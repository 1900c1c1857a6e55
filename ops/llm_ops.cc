// torch.ops.xxnpu.* for LLM inference, modelled on vLLM's custom ops:
//   rms_norm, fused_add_rms_norm, rotary_embedding (+ in-place rotary_embedding_),
//   silu_and_mul, reshape_and_cache, paged_attention.
//
// Each op has one schema and three kernels:
//   - xxnpu: validates on the host, then queues one device kernel (named "xxnpu::<op>" in
//     the profiler, with bytes/flops) on the current stream of the tensors' device. The
//     kernel body captures only device addresses, sizes and strides, never a tensor: it
//     runs later on a device thread, and stream order (not lifetime) protects the memory,
//     as on CUDA. It reaches memory only through DeviceView.
//   - CPU: the reference, written with plain ATen ops; tests compare the two.
//   - Meta: shapes only (fake tensors, torch.compile, opcheck).
// The argument checks are shared by all three, so an error reads the same everywhere.
// float32, float16 and bfloat16; the device kernels accumulate in float32.
// Index values that live on the device (positions, slot_mapping, block_tables, seq_lens)
// cannot be checked on the host without a synchronisation: the kernel checks them and
// fails with kOutOfRange, which surfaces at the next synchronising call as an AcceleratorError
// naming the kernel and the bad value (as a CUDA device-side assert would, but with a
// message).
// paged_attention's dot products go through the BLAS torch links (sgemm_); silu_and_mul
// and the attention softmax use a vectorizable exp (ExpF). See docs/llm-ops.md.
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
#include "ops/device_loop.h"
#include "ops/fast_math.h"

extern "C" {
// BLAS (Fortran ABI), exported by libtorch_cpu.
void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const float* alpha,
            const float* a, const int* lda, const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc);
}

namespace xxnpu {
namespace {

// Work per grid block (elements touched): large enough that a block's overhead vanishes,
// small enough that the blocks spread over the compute threads.
constexpr int64_t kElementsPerBlock = 16384;

// ------------------------------------------------------------------ argument checks
// Written with the sym_* size accessors: the Meta kernels run them on fake tensors whose
// sizes may be symbolic (torch.compile with dynamic shapes, opcheck's dynamic test).

void CheckFloatDtype(const char* op, const char* arg, const at::Tensor& t) {
  const auto s = t.scalar_type();
  TORCH_CHECK(s == at::kFloat || s == at::kHalf || s == at::kBFloat16, op, ": ", arg,
              " must be float32, float16 or bfloat16, got ", s);
}

void CheckSameDtype(const char* op, const char* arg, const at::Tensor& t, const char* ref_arg,
                    const at::Tensor& ref) {
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), op, ": ", arg, " must have the dtype of ", ref_arg, " (",
              ref.scalar_type(), "), got ", t.scalar_type());
}

void CheckIndexDtype(const char* op, const char* arg, const at::Tensor& t) {
  TORCH_CHECK(t.scalar_type() == at::kInt || t.scalar_type() == at::kLong, op, ": ", arg,
              " must be int32 or int64, got ", t.scalar_type());
}

void CheckDim(const char* op, const char* arg, const at::Tensor& t, int64_t dim, const char* layout) {
  TORCH_CHECK(t.dim() == dim, op, ": ", arg, " must be ", dim, "-D ", layout, ", got shape ", t.sym_sizes());
}

// xxnpu kernels: every tensor on the first one's xxnpu device (the dispatcher picks the
// xxnpu kernel as soon as one argument is on xxnpu, so a CPU argument lands here).
void CheckDevices(const char* op, std::initializer_list<std::pair<const char*, const at::Tensor*>> args) {
  const auto& [first_name, first] = *args.begin();
  TORCH_CHECK(first->device().is_privateuseone(), op, ": ", first_name, " must be on an xxnpu device, got ",
              first->device());
  for (const auto& [name, t] : args) {
    TORCH_CHECK(t->device() == first->device(), op, ": expected all tensors on ", first->device(), " (where ",
                first_name, " is), but ", name, " is on ", t->device());
  }
}

// A 2-D [rows, cols] description of `t` (which may have any number of leading dims) as a
// view, if its strides allow one without a copy.
std::optional<std::vector<int64_t>> RowStrides(const at::Tensor& t, int64_t cols) {
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

IndexRef MakeIndexRef(const at::Tensor& t) {
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

// ================================================================== rotary_embedding
// vLLM's layout: positions [*P] (int32/int64); query [*P, num_heads * head_size] or
// [*P, num_heads, head_size]; key likewise with its own head count; cos_sin_cache
// [max_position, rot_dim] = [cos | sin], rot_dim even and <= head_size (dims past rot_dim
// pass through). is_neox rotates the pairs (i, i + rot_dim/2); otherwise (GPT-J) the
// pairs (2i, 2i + 1). The cache may be float32 or the query's dtype.

struct RopeGeom {
  int64_t tokens = 0, head_size = 0, rot_dim = 0, max_pos = 0;
};

void CheckRopeArgs(const char* op, const at::Tensor& positions, const at::Tensor& query, const at::Tensor& key,
                   int64_t head_size, const at::Tensor& cache) {
  CheckIndexDtype(op, "positions", positions);
  CheckFloatDtype(op, "query", query);
  CheckSameDtype(op, "key", key, "query", query);
  CheckFloatDtype(op, "cos_sin_cache", cache);
  TORCH_CHECK(cache.scalar_type() == query.scalar_type() || cache.scalar_type() == at::kFloat, op,
              ": cos_sin_cache must be float32 or the query's dtype (", query.scalar_type(), "), got ",
              cache.scalar_type());
  TORCH_CHECK(head_size > 0, op, ": head_size must be positive, got ", head_size);
  CheckDim(op, "cos_sin_cache", cache, 2, "[max_position, rot_dim]");
  const c10::SymInt rot_dim = cache.sym_size(1);
  TORCH_CHECK(rot_dim % 2 == 0 && rot_dim > 0 && rot_dim <= head_size, op,
              ": cos_sin_cache's last dimension (rot_dim) must be even and in (0, head_size=", head_size, "], got ",
              rot_dim);
  const int64_t pd = positions.dim();
  const std::array<std::pair<const char*, const at::Tensor*>, 2> operands{{{"query", &query}, {"key", &key}}};
  for (const auto& [name, t] : operands) {
    TORCH_CHECK(t->dim() == pd + 1 || t->dim() == pd + 2, op, ": ", name, " must be positions.shape + [num_heads * ",
                "head_size] or + [num_heads, head_size]; positions has shape ", positions.sym_sizes(), ", ", name,
                " has shape ", t->sym_sizes());
    TORCH_CHECK(t->sym_sizes().slice(0, pd) == positions.sym_sizes(), op, ": ", name, "'s leading dimensions ",
                t->sym_sizes().slice(0, pd), " must match positions' shape ", positions.sym_sizes());
    c10::SymInt per_token = 1;
    for (int64_t d = pd; d < t->dim(); ++d) per_token = per_token * t->sym_size(d);
    TORCH_CHECK(per_token % head_size == 0 && (t->dim() == pd + 1 || t->sym_size(-1) == head_size), op, ": ", name,
                "'s per-token shape ", t->sym_sizes().slice(pd), " is not a whole number of heads of head_size ",
                head_size);
  }
}

// The concrete geometry (CPU and xxnpu kernels, after CheckRopeArgs).
RopeGeom MakeRopeGeom(const at::Tensor& positions, int64_t head_size, const at::Tensor& cache) {
  RopeGeom g;
  g.tokens = positions.numel();
  g.head_size = head_size;
  g.rot_dim = cache.size(1);
  g.max_pos = cache.size(0);
  return g;
}

// Reference rotation (float32) of x viewed as [tokens, heads, head_size]; returns x's
// shape and dtype.
at::Tensor RopeRef(const at::Tensor& positions, const at::Tensor& x, const RopeGeom& g, const at::Tensor& cache,
                   bool is_neox) {
  const at::Tensor xf = x.reshape({g.tokens, -1, g.head_size}).to(at::kFloat);
  const int64_t half = g.rot_dim / 2;
  const at::Tensor cs = cache.index_select(0, positions.reshape(-1)).to(at::kFloat);
  const at::Tensor cos = cs.slice(1, 0, half).unsqueeze(1);
  const at::Tensor sin = cs.slice(1, half, g.rot_dim).unsqueeze(1);
  const at::Tensor rot = xf.slice(-1, 0, g.rot_dim);
  const at::Tensor pass = xf.slice(-1, g.rot_dim, g.head_size);
  at::Tensor rotated;
  if (is_neox) {
    const at::Tensor x1 = rot.slice(-1, 0, half), x2 = rot.slice(-1, half, g.rot_dim);
    rotated = at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
  } else {
    const at::Tensor x1 = rot.slice(-1, 0, g.rot_dim, 2), x2 = rot.slice(-1, 1, g.rot_dim, 2);
    rotated = at::stack({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1).flatten(-2);
  }
  return at::cat({rotated, pass}, -1).to(x.scalar_type()).reshape(x.sizes()).contiguous();
}

void CheckRopePositionsCpu(const char* op, const at::Tensor& positions, const RopeGeom& g) {
  if (positions.numel() == 0) return;
  const int64_t lo = positions.min().item<int64_t>(), hi = positions.max().item<int64_t>();
  TORCH_CHECK(lo >= 0 && hi < g.max_pos, op, ": positions must be in [0, ", g.max_pos,
              ") (the cos_sin_cache's rows), got values in [", lo, ", ", hi, "]");
}

std::tuple<at::Tensor, at::Tensor> RopeCpu(const at::Tensor& positions, const at::Tensor& query,
                                           const at::Tensor& key, int64_t head_size, const at::Tensor& cache,
                                           bool is_neox) {
  constexpr const char* kOp = "xxnpu::rotary_embedding";
  CheckRopeArgs(kOp, positions, query, key, head_size, cache);
  const RopeGeom g = MakeRopeGeom(positions, head_size, cache);
  CheckRopePositionsCpu(kOp, positions, g);
  return {RopeRef(positions, query, g, cache, is_neox), RopeRef(positions, key, g, cache, is_neox)};
}

std::tuple<at::Tensor, at::Tensor> RopeMeta(const at::Tensor& positions, const at::Tensor& query,
                                            const at::Tensor& key, int64_t head_size, const at::Tensor& cache, bool) {
  CheckRopeArgs("xxnpu::rotary_embedding", positions, query, key, head_size, cache);
  return {at::empty_symint(query.sym_sizes(), query.options()), at::empty_symint(key.sym_sizes(), key.options())};
}

void RopeInplaceCpu(const at::Tensor& positions, at::Tensor& query, at::Tensor& key, int64_t head_size,
                    const at::Tensor& cache, bool is_neox) {
  constexpr const char* kOp = "xxnpu::rotary_embedding_";
  CheckRopeArgs(kOp, positions, query, key, head_size, cache);
  const RopeGeom g = MakeRopeGeom(positions, head_size, cache);
  CheckRopePositionsCpu(kOp, positions, g);
  query.copy_(RopeRef(positions, query, g, cache, is_neox));
  key.copy_(RopeRef(positions, key, g, cache, is_neox));
}

void RopeInplaceMeta(const at::Tensor& positions, at::Tensor& query, at::Tensor& key, int64_t head_size,
                     const at::Tensor& cache, bool) {
  CheckRopeArgs("xxnpu::rotary_embedding_", positions, query, key, head_size, cache);
}

// One operand of the device kernel: [tokens, heads, head_size] with element strides.
struct RopeOperand {
  const void* in = nullptr;
  void* out = nullptr;
  int64_t heads = 0;
  int64_t in_s[3] = {0, 0, 0};
  int64_t out_s[3] = {0, 0, 0};
};

// Strides of x as [tokens, heads, head_size] if a view allows it.
std::optional<std::vector<int64_t>> TokenHeadStrides(const at::Tensor& x, const RopeGeom& g) {
  const int64_t heads = g.tokens == 0 ? 0 : x.numel() / (g.tokens * g.head_size);
  return at::detail::computeStride(x.sizes(), x.strides(), at::IntArrayRef{g.tokens, heads, g.head_size});
}

template <typename T, typename C>
void RopeRow(const RopeOperand& o, int64_t t, const C* c, int64_t cs1, int64_t half, int64_t rot_dim,
             int64_t head_size, bool is_neox, bool copy_pass) {
  const T* in = static_cast<const T*>(DeviceView(o.in));
  T* out = static_cast<T*>(DeviceView(o.out));
  for (int64_t h = 0; h < o.heads; ++h) {
    const T* xi = in + t * o.in_s[0] + h * o.in_s[1];
    T* xo = out + t * o.out_s[0] + h * o.out_s[1];
    if (is_neox && o.in_s[2] == 1 && o.out_s[2] == 1 && cs1 == 1) {  // dense: vectorizes
      for (int64_t i = 0; i < half; ++i) {
        const float cos = static_cast<float>(c[i]), sin = static_cast<float>(c[half + i]);
        const float x1 = static_cast<float>(xi[i]), x2 = static_cast<float>(xi[half + i]);
        xo[i] = static_cast<T>(x1 * cos - x2 * sin);
        xo[half + i] = static_cast<T>(x2 * cos + x1 * sin);
      }
      if (copy_pass) {
        for (int64_t i = rot_dim; i < head_size; ++i) xo[i] = xi[i];
      }
      continue;
    }
    for (int64_t i = 0; i < half; ++i) {
      const int64_t i1 = is_neox ? i : 2 * i;
      const int64_t i2 = is_neox ? i + half : 2 * i + 1;
      const float cos = static_cast<float>(c[i * cs1]), sin = static_cast<float>(c[(half + i) * cs1]);
      const float x1 = static_cast<float>(xi[i1 * o.in_s[2]]), x2 = static_cast<float>(xi[i2 * o.in_s[2]]);
      xo[i1 * o.out_s[2]] = static_cast<T>(x1 * cos - x2 * sin);
      xo[i2 * o.out_s[2]] = static_cast<T>(x2 * cos + x1 * sin);
    }
    if (copy_pass) {
      for (int64_t i = rot_dim; i < head_size; ++i) xo[i * o.out_s[2]] = xi[i * o.in_s[2]];
    }
  }
}

// Rotates query/key (in: `q_in`, `k_in`) into `q_out`, `k_out` (the same tensors when in place).
void LaunchRope(const char* op, const at::Tensor& positions, const at::Tensor& q_in, const at::Tensor& k_in,
                const at::Tensor& q_out, const at::Tensor& k_out, const RopeGeom& g, const at::Tensor& cache,
                bool is_neox) {
  if (g.tokens == 0) return;
  auto make = [&](const at::Tensor& in, const at::Tensor& out) {
    const auto si = TokenHeadStrides(in, g);
    const auto so = TokenHeadStrides(out, g);
    TORCH_CHECK(si && so, op, ": query and key are rotated in place, so they must be viewable as [tokens, heads, ",
                "head_size] without a copy; got shape ", in.sizes(), " with strides ", in.strides());
    RopeOperand o;
    o.in = in.const_data_ptr();
    o.out = out.data_ptr();
    o.heads = in.numel() / (g.tokens * g.head_size);
    for (int d = 0; d < 3; ++d) {
      o.in_s[d] = (*si)[d];
      o.out_s[d] = (*so)[d];
    }
    return o;
  };
  const RopeOperand q = make(q_in, q_out), k = make(k_in, k_out);
  const at::Tensor pos = positions.reshape(-1);
  const IndexRef pref = MakeIndexRef(pos);
  const bool copy_pass = !q_in.is_same(q_out);
  const int64_t half = g.rot_dim / 2, rot_dim = g.rot_dim, head_size = g.head_size, max_pos = g.max_pos;
  const int64_t cs0 = cache.stride(0), cs1 = cache.stride(1);
  const int64_t heads = q.heads + k.heads;
  const int64_t elems = g.tokens * heads * head_size;
  DispatchFloat(q_in.scalar_type(), op, [&](auto qtag) {
    using T = decltype(qtag);
    DispatchFloat(cache.scalar_type(), op, [&](auto ctag) {
      using C = decltype(ctag);
      if constexpr (std::is_same_v<C, float> || std::is_same_v<C, T>) {
        const C* cp = cache.const_data_ptr<C>();
        const uint64_t bytes = 2 * elems * sizeof(T) + g.tokens * (rot_dim * sizeof(C) + (pref.is64 ? 8 : 4));
        LaunchItems(op, q_in.device(), g.tokens, heads * head_size, bytes, 3 * g.tokens * heads * rot_dim,
                    [=](int64_t t0, int64_t t1) -> absl::Status {
          const C* cv = DeviceView(cp);
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t p = pref.Load(t);
            if (p < 0 || p >= max_pos) {
              return absl::OutOfRangeError(absl::StrCat(op, ": positions[", t, "] = ", p,
                                                        " is outside the cos_sin_cache's rows [0, ", max_pos, ")"));
            }
            const C* c = cv + p * cs0;
            RopeRow<T>(q, t, c, cs1, half, rot_dim, head_size, is_neox, copy_pass);
            RopeRow<T>(k, t, c, cs1, half, rot_dim, head_size, is_neox, copy_pass);
          }
          return absl::OkStatus();
        });
      }
    });
  });
}

std::tuple<at::Tensor, at::Tensor> RopeXxnpu(const at::Tensor& positions, const at::Tensor& query,
                                             const at::Tensor& key, int64_t head_size, const at::Tensor& cache,
                                             bool is_neox) {
  constexpr const char* kOp = "xxnpu::rotary_embedding";
  CheckRopeArgs(kOp, positions, query, key, head_size, cache);
  const RopeGeom g = MakeRopeGeom(positions, head_size, cache);
  CheckDevices(kOp, {{"query", &query}, {"key", &key}, {"positions", &positions}, {"cos_sin_cache", &cache}});
  const c10::DeviceGuard guard(query.device());
  at::Tensor q_out = at::empty(query.sizes(), query.options());
  at::Tensor k_out = at::empty(key.sizes(), key.options());
  // Inputs that do not view as [tokens, heads, head_size] are first copied (on the device).
  const at::Tensor q_in = TokenHeadStrides(query, g) ? query : query.contiguous();
  const at::Tensor k_in = TokenHeadStrides(key, g) ? key : key.contiguous();
  LaunchRope(kOp, positions, q_in, k_in, q_out, k_out, g, cache, is_neox);
  return {q_out, k_out};
}

void RopeInplaceXxnpu(const at::Tensor& positions, at::Tensor& query, at::Tensor& key, int64_t head_size,
                      const at::Tensor& cache, bool is_neox) {
  constexpr const char* kOp = "xxnpu::rotary_embedding_";
  CheckRopeArgs(kOp, positions, query, key, head_size, cache);
  const RopeGeom g = MakeRopeGeom(positions, head_size, cache);
  CheckDevices(kOp, {{"query", &query}, {"key", &key}, {"positions", &positions}, {"cos_sin_cache", &cache}});
  at::assert_no_overlap(query, key);
  const c10::DeviceGuard guard(query.device());
  LaunchRope(kOp, positions, query, key, query, key, g, cache, is_neox);
}

// ================================================================== silu_and_mul
// x [..., 2d] -> silu(x[..., :d]) * x[..., d:]  ([..., d]), computed in float32.

void CheckSiluAndMulArgs(const char* op, const at::Tensor& x) {
  CheckFloatDtype(op, "x", x);
  TORCH_CHECK(x.dim() >= 1 && x.sym_size(-1) % 2 == 0, op,
              ": x's last dimension must be even (gate and up halves), got shape ", x.sym_sizes());
}

std::vector<c10::SymInt> HalfLastDim(const at::Tensor& x) {
  std::vector<c10::SymInt> s(x.sym_sizes().begin(), x.sym_sizes().end());
  s.back() = s.back() / 2;
  return s;
}

at::Tensor SiluAndMulCpu(const at::Tensor& x) {
  CheckSiluAndMulArgs("xxnpu::silu_and_mul", x);
  const int64_t d = x.size(-1) / 2;
  const at::Tensor xf = x.to(at::kFloat);
  return (at::silu(xf.slice(-1, 0, d)) * xf.slice(-1, d, 2 * d)).to(x.scalar_type()).contiguous();
}

at::Tensor SiluAndMulMeta(const at::Tensor& x) {
  CheckSiluAndMulArgs("xxnpu::silu_and_mul", x);
  return at::empty_symint(HalfLastDim(x), x.options());
}

at::Tensor SiluAndMulXxnpu(const at::Tensor& x_in) {
  constexpr const char* kOp = "xxnpu::silu_and_mul";
  CheckSiluAndMulArgs(kOp, x_in);
  CheckDevices(kOp, {{"x", &x_in}});
  const c10::DeviceGuard guard(x_in.device());
  at::Tensor out = at::empty_symint(HalfLastDim(x_in), x_in.options());
  if (out.numel() == 0) return out;
  const int64_t d = x_in.size(-1) / 2;
  const at::Tensor x = x_in.reshape({-1, 2 * d});
  const int64_t rows = x.size(0), xs0 = x.stride(0), xs1 = x.stride(1);
  DispatchFloat(x.scalar_type(), kOp, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.const_data_ptr<T>();
    T* op = out.data_ptr<T>();
    LaunchItems(kOp, x.device(), rows, 2 * d, 3 * rows * d * sizeof(T), 5 * rows * d, [=](int64_t r0, int64_t r1) {
      const T* xv = DeviceView(xp);
      T* ov = DeviceView(op);
      for (int64_t r = r0; r < r1; ++r) {
        const T* a = xv + r * xs0;
        const T* b = a + d * xs1;
        T* o = ov + r * d;
        if (xs1 == 1) {
          for (int64_t i = 0; i < d; ++i) {
            const float av = static_cast<float>(a[i]);
            o[i] = static_cast<T>(av / (1.0f + ExpF(-av)) * static_cast<float>(b[i]));
          }
        } else {
          for (int64_t i = 0; i < d; ++i) {
            const float av = static_cast<float>(a[i * xs1]);
            o[i] = static_cast<T>(av / (1.0f + ExpF(-av)) * static_cast<float>(b[i * xs1]));
          }
        }
      }
      return absl::OkStatus();
    });
  });
  return out;
}

// ================================================================== reshape_and_cache
// key, value [num_tokens, num_kv_heads, head_size] are written into key_cache, value_cache
// [num_blocks, block_size, num_kv_heads, head_size] (vLLM's flash layout) at the slots
// slot_mapping [num_tokens] gives (slot = block * block_size + offset). A negative slot
// skips its token (padding), as in vLLM.

void CheckReshapeAndCacheArgs(const char* op, const at::Tensor& key, const at::Tensor& value,
                              const at::Tensor& key_cache, const at::Tensor& value_cache,
                              const at::Tensor& slot_mapping) {
  CheckFloatDtype(op, "key", key);
  CheckSameDtype(op, "value", value, "key", key);
  CheckSameDtype(op, "key_cache", key_cache, "key", key);
  CheckSameDtype(op, "value_cache", value_cache, "key", key);
  CheckIndexDtype(op, "slot_mapping", slot_mapping);
  CheckDim(op, "key", key, 3, "[num_tokens, num_kv_heads, head_size]");
  TORCH_CHECK(value.sym_sizes() == key.sym_sizes(), op, ": value must have key's shape ", key.sym_sizes(), ", got ",
              value.sym_sizes());
  CheckDim(op, "key_cache", key_cache, 4, "[num_blocks, block_size, num_kv_heads, head_size]");
  TORCH_CHECK(value_cache.sym_sizes() == key_cache.sym_sizes(), op, ": value_cache must have key_cache's shape ",
              key_cache.sym_sizes(), ", got ", value_cache.sym_sizes());
  TORCH_CHECK(key_cache.sym_size(2) == key.sym_size(1) && key_cache.sym_size(3) == key.sym_size(2), op,
              ": key_cache's [num_kv_heads, head_size] = ", key_cache.sym_sizes().slice(2), " must match key's ",
              key.sym_sizes().slice(1));
  CheckDim(op, "slot_mapping", slot_mapping, 1, "[num_tokens]");
  TORCH_CHECK(slot_mapping.sym_size(0) == key.sym_size(0), op, ": slot_mapping has ", slot_mapping.sym_size(0),
              " entries for ", key.sym_size(0), " tokens");
}

void ReshapeAndCacheCpu(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                        at::Tensor& value_cache, const at::Tensor& slot_mapping) {
  constexpr const char* kOp = "xxnpu::reshape_and_cache";
  CheckReshapeAndCacheArgs(kOp, key, value, key_cache, value_cache, slot_mapping);
  const int64_t block_size = key_cache.size(1), slots = key_cache.size(0) * block_size;
  const at::Tensor keep = (slot_mapping >= 0).nonzero().squeeze(1);
  const at::Tensor s = slot_mapping.index_select(0, keep).to(at::kLong);
  if (s.numel() == 0) return;
  const int64_t hi = s.max().item<int64_t>();
  TORCH_CHECK(hi < slots, kOp, ": slot_mapping holds slot ", hi, ", outside the cache's ", slots,
              " slots (num_blocks ", key_cache.size(0), " x block_size ", block_size, ")");
  c10::List<std::optional<at::Tensor>> idx;
  idx.push_back(s.div(block_size, "floor"));
  idx.push_back(s.remainder(block_size));
  key_cache.index_put_(idx, key.index_select(0, keep));
  value_cache.index_put_(idx, value.index_select(0, keep));
}

void ReshapeAndCacheMeta(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                         at::Tensor& value_cache, const at::Tensor& slot_mapping) {
  CheckReshapeAndCacheArgs("xxnpu::reshape_and_cache", key, value, key_cache, value_cache, slot_mapping);
}

void ReshapeAndCacheXxnpu(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                          at::Tensor& value_cache, const at::Tensor& slot_mapping) {
  constexpr const char* kOp = "xxnpu::reshape_and_cache";
  CheckReshapeAndCacheArgs(kOp, key, value, key_cache, value_cache, slot_mapping);
  CheckDevices(kOp, {{"key", &key}, {"value", &value}, {"key_cache", &key_cache}, {"value_cache", &value_cache},
                     {"slot_mapping", &slot_mapping}});
  at::assert_no_overlap(key_cache, value_cache);
  const c10::DeviceGuard guard(key.device());
  const int64_t tokens = key.size(0), heads = key.size(1), hs = key.size(2);
  const int64_t num_blocks = key_cache.size(0), block_size = key_cache.size(1);
  const IndexRef sref = MakeIndexRef(slot_mapping);
  const std::array<int64_t, 3> ks{key.stride(0), key.stride(1), key.stride(2)};
  const std::array<int64_t, 3> vs{value.stride(0), value.stride(1), value.stride(2)};
  const std::array<int64_t, 4> kcs{key_cache.stride(0), key_cache.stride(1), key_cache.stride(2), key_cache.stride(3)};
  const std::array<int64_t, 4> vcs{value_cache.stride(0), value_cache.stride(1), value_cache.stride(2),
                                   value_cache.stride(3)};
  DispatchFloat(key.scalar_type(), kOp, [&](auto tag) {
    using T = decltype(tag);
    const T* kp = key.const_data_ptr<T>();
    const T* vp = value.const_data_ptr<T>();
    T* kcp = key_cache.data_ptr<T>();
    T* vcp = value_cache.data_ptr<T>();
    LaunchItems(kOp, key.device(), tokens, 2 * heads * hs, 4 * tokens * heads * hs * sizeof(T), 0,
                [=](int64_t t0, int64_t t1) -> absl::Status {
      const T* kv = DeviceView(kp);
      const T* vv = DeviceView(vp);
      T* kcv = DeviceView(kcp);
      T* vcv = DeviceView(vcp);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t slot = sref.Load(t);
        if (slot < 0) continue;
        if (slot >= num_blocks * block_size) {
          return absl::OutOfRangeError(absl::StrCat(kOp, ": slot_mapping[", t, "] = ", slot,
                                                    " is outside the cache's ", num_blocks * block_size,
                                                    " slots (num_blocks ", num_blocks, " x block_size ", block_size,
                                                    ")"));
        }
        const int64_t b = slot / block_size, off = slot % block_size;
        for (int64_t h = 0; h < heads; ++h) {
          const T* ki = kv + t * ks[0] + h * ks[1];
          const T* vi = vv + t * vs[0] + h * vs[1];
          T* ko = kcv + b * kcs[0] + off * kcs[1] + h * kcs[2];
          T* vo = vcv + b * vcs[0] + off * vcs[1] + h * vcs[2];
          for (int64_t i = 0; i < hs; ++i) {
            ko[i * kcs[3]] = ki[i * ks[2]];
            vo[i * vcs[3]] = vi[i * vs[2]];
          }
        }
      }
      return absl::OkStatus();
    });
  });
}

// ================================================================== paged_attention

// Column-major single-precision GEMM, C = alpha * op(A) op(B) + beta * C, from the BLAS
// torch's CPU build links and exports (MKL in the pip wheel; the Fortran entry point):
// the attention's dot products run the code the CPU backend's matmul runs, ~20-40x a
// plain loop (which gets no wider than SSE2 in a portable build).
void Sgemm(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  const int ilda = static_cast<int>(lda), ildb = static_cast<int>(ldb), ildc = static_cast<int>(ldc);
  sgemm_(&transa, &transb, &im, &in, &ik, &alpha, a, &ilda, b, &ildb, &beta, c, &ildc);
}

// The n rows (tokens) of one cache block for one kv head, row stride `row_stride`,
// element stride `elem_stride`, as a float32 matrix with dense rows for Sgemm: the cache
// memory itself when it already is one, else converted into `scratch`. Returns the
// matrix and its leading dimension.
template <typename T>
std::pair<const float*, int64_t> BlockAsFloat(const T* p, int64_t n, int64_t D, int64_t row_stride,
                                              int64_t elem_stride, std::vector<float>& scratch) {
  if constexpr (std::is_same_v<T, float>) {
    if (elem_stride == 1 && row_stride >= D && row_stride <= INT_MAX) return {p, row_stride};
  }
  scratch.resize(n * D);
  for (int64_t t = 0; t < n; ++t) LoadFloats(p + t * row_stride, elem_stride, D, &scratch[t * D]);
  return {scratch.data(), D};
}
// Decode attention: query [num_seqs, num_heads, head_size] attends, per sequence s, to the
// first seq_lens[s] tokens of its paged K/V: token t lives in block block_tables[s][t /
// block_size], at offset t % block_size, of key_cache/value_cache [num_blocks, block_size,
// num_kv_heads, head_size]. Grouped-query heads: query head h reads kv head
// h / (num_heads / num_kv_heads). out = softmax(q . k * scale) @ v; a sequence of length 0
// gives zeros. A prefill is the same op with one "sequence" per prompt token (seq_lens
// 1..n over the same block table): causal attention.

struct PagedGeom {
  int64_t seqs = 0, heads = 0, kv_heads = 0, head_size = 0, num_blocks = 0, block_size = 0, max_blocks = 0;
};

void CheckPagedAttentionArgs(const char* op, const at::Tensor& query, const at::Tensor& key_cache,
                                  const at::Tensor& value_cache, const at::Tensor& block_tables,
                                  const at::Tensor& seq_lens) {
  CheckFloatDtype(op, "query", query);
  CheckSameDtype(op, "key_cache", key_cache, "query", query);
  CheckSameDtype(op, "value_cache", value_cache, "query", query);
  CheckIndexDtype(op, "block_tables", block_tables);
  CheckIndexDtype(op, "seq_lens", seq_lens);
  CheckDim(op, "query", query, 3, "[num_seqs, num_heads, head_size]");
  CheckDim(op, "key_cache", key_cache, 4, "[num_blocks, block_size, num_kv_heads, head_size]");
  TORCH_CHECK(value_cache.sym_sizes() == key_cache.sym_sizes(), op, ": value_cache must have key_cache's shape ",
              key_cache.sym_sizes(), ", got ", value_cache.sym_sizes());
  const c10::SymInt seqs = query.sym_size(0), heads = query.sym_size(1), kv_heads = key_cache.sym_size(2);
  TORCH_CHECK(key_cache.sym_size(3) == query.sym_size(2), op, ": key_cache's head_size ", key_cache.sym_size(3),
              " differs from query's ", query.sym_size(2));
  TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0, op, ": query's ", heads,
              " heads must be a multiple of the cache's ", kv_heads, " kv heads (grouped-query attention)");
  CheckDim(op, "block_tables", block_tables, 2, "[num_seqs, max_blocks_per_seq]");
  TORCH_CHECK(block_tables.sym_size(0) == seqs, op, ": block_tables has ", block_tables.sym_size(0), " rows for ",
              seqs, " sequences");
  CheckDim(op, "seq_lens", seq_lens, 1, "[num_seqs]");
  TORCH_CHECK(seq_lens.sym_size(0) == seqs, op, ": seq_lens has ", seq_lens.sym_size(0), " entries for ", seqs,
              " sequences");
}

PagedGeom MakePagedGeom(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& block_tables) {
  PagedGeom g;
  g.seqs = query.size(0);
  g.heads = query.size(1);
  g.head_size = query.size(2);
  g.num_blocks = key_cache.size(0);
  g.block_size = key_cache.size(1);
  g.kv_heads = key_cache.size(2);
  g.max_blocks = block_tables.size(1);
  return g;
}

// Batched over the sequences (a handful of ATen ops whatever their number): every
// sequence's table is gathered to its full max_blocks * block_size tokens and the tokens
// past its length are masked out of the softmax.
at::Tensor PagedAttentionCpu(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                             const at::Tensor& block_tables, const at::Tensor& seq_lens, double scale) {
  constexpr const char* kOp = "xxnpu::paged_attention";
  CheckPagedAttentionArgs(kOp, query, key_cache, value_cache, block_tables, seq_lens);
  const PagedGeom g = MakePagedGeom(query, key_cache, block_tables);
  if (query.numel() == 0) return at::zeros(query.sizes(), query.options());
  const int64_t max_len = g.max_blocks * g.block_size, group = g.heads / g.kv_heads;
  const at::Tensor lens = seq_lens.to(at::kLong);
  const at::Tensor tables = block_tables.to(at::kLong);
  for (int64_t s = 0; s < g.seqs; ++s) {
    const int64_t len = lens[s].item<int64_t>();
    TORCH_CHECK(len >= 0 && len <= max_len, kOp, ": seq_lens[", s, "] = ", len, " does not fit the block table's ",
                g.max_blocks, " blocks of ", g.block_size, " tokens");
  }
  // Only the blocks a sequence uses must be valid (the rest of its row may be padding).
  const at::Tensor used = at::arange(g.max_blocks, lens.options()).mul(g.block_size).unsqueeze(0) <
                          lens.unsqueeze(1);                                    // [S, M]
  const at::Tensor bad = used & ((tables < 0) | (tables >= g.num_blocks));
  if (bad.any().item<bool>()) {
    const at::Tensor where = bad.nonzero()[0];
    const int64_t s = where[0].item<int64_t>(), j = where[1].item<int64_t>();
    TORCH_CHECK(false, kOp, ": block_tables[", s, "][", j, "] = ", tables[s][j].item<int64_t>(),
                " is outside the cache's ", g.num_blocks, " blocks");
  }
  const at::Tensor safe = at::where(used, tables, at::zeros_like(tables)).flatten();
  // [S * M, BS, KVH, D] -> [S, KVH, max_len, D] in float32.
  auto gather = [&](const at::Tensor& cache) {
    return cache.index_select(0, safe).to(at::kFloat).view({g.seqs, max_len, g.kv_heads, g.head_size})
        .permute({0, 2, 1, 3});
  };
  const at::Tensor k = gather(key_cache), v = gather(value_cache);
  // Query heads kvh * group + j read kv head kvh: [S, KVH, group, D].
  const at::Tensor q = query.to(at::kFloat).reshape({g.seqs, g.kv_heads, group, g.head_size});
  const at::Tensor past = at::arange(max_len, lens.options()).view({1, 1, 1, max_len}) >=
                          lens.view({g.seqs, 1, 1, 1});
  const at::Tensor scores = at::matmul(q, k.transpose(2, 3)).mul(scale).masked_fill(past, -INFINITY);
  // A sequence of length 0 has no keys: its row is all -inf (softmax NaN); it gives zeros.
  const at::Tensor p = at::softmax(scores, -1).masked_fill((lens == 0).view({g.seqs, 1, 1, 1}), 0.0);
  return at::matmul(p, v).reshape({g.seqs, g.heads, g.head_size}).to(query.scalar_type());
}

at::Tensor PagedAttentionMeta(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                              const at::Tensor& block_tables, const at::Tensor& seq_lens, double) {
  CheckPagedAttentionArgs("xxnpu::paged_attention", query, key_cache, value_cache, block_tables, seq_lens);
  return at::empty_symint(query.sym_sizes(), query.options());
}

at::Tensor PagedAttentionXxnpu(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                               const at::Tensor& block_tables, const at::Tensor& seq_lens, double scale) {
  constexpr const char* kOp = "xxnpu::paged_attention";
  CheckPagedAttentionArgs(kOp, query, key_cache, value_cache, block_tables, seq_lens);
  const PagedGeom g = MakePagedGeom(query, key_cache, block_tables);
  CheckDevices(kOp, {{"query", &query}, {"key_cache", &key_cache}, {"value_cache", &value_cache},
                     {"block_tables", &block_tables}, {"seq_lens", &seq_lens}});
  const c10::DeviceGuard guard(query.device());
  at::Tensor out = at::empty(query.sizes(), query.options());
  if (out.numel() == 0) return out;
  const IndexRef bt = MakeIndexRef(block_tables);
  const IndexRef sl = MakeIndexRef(seq_lens);
  const std::array<int64_t, 3> qs{query.stride(0), query.stride(1), query.stride(2)};
  const std::array<int64_t, 4> kcs{key_cache.stride(0), key_cache.stride(1), key_cache.stride(2), key_cache.stride(3)};
  const std::array<int64_t, 4> vcs{value_cache.stride(0), value_cache.stride(1), value_cache.stride(2),
                                   value_cache.stride(3)};
  const float fscale = static_cast<float>(scale);
  TORCH_CHECK(g.max_blocks * g.block_size * std::max<int64_t>(1, g.heads) <= INT_MAX, kOp,
              ": a sequence's ", g.max_blocks * g.block_size, " tokens x ", g.heads,
              " heads exceed the BLAS's 32-bit sizes");
  // Work item: one (sequence, kv head), so each K/V row is read once for its query group.
  // The cost figures assume full block tables (the lengths are on the device).
  const int64_t items = g.seqs * g.kv_heads;
  const int64_t max_len = g.max_blocks * g.block_size;
  const uint64_t flops = 4ull * g.seqs * g.heads * max_len * g.head_size;
  DispatchFloat(query.scalar_type(), kOp, [&](auto tag) {
    using T = decltype(tag);
    const uint64_t bytes = (2ull * g.seqs * g.heads * g.head_size + 2ull * items * max_len * g.head_size) * sizeof(T);
    const T* qp = query.const_data_ptr<T>();
    const T* kp = key_cache.const_data_ptr<T>();
    const T* vp = value_cache.const_data_ptr<T>();
    T* op = out.data_ptr<T>();
    LaunchItems(kOp, query.device(), items, max_len * g.head_size * (g.heads / g.kv_heads), bytes, flops,
                [=](int64_t i0, int64_t i1) -> absl::Status {
      const T* qv = DeviceView(qp);
      const T* kv = DeviceView(kp);
      const T* vv = DeviceView(vp);
      T* ov = DeviceView(op);
      const int64_t D = g.head_size, group = g.heads / g.kv_heads;
      // Scratch of this compute thread (a GPU block's shared memory).
      thread_local std::vector<float> qf, block, scores, acc;
      qf.resize(group * D);
      acc.resize(group * D);
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t s = item / g.kv_heads, kvh = item % g.kv_heads;
        const int64_t len = sl.Load(s);
        if (len < 0 || len > max_len) {
          return absl::OutOfRangeError(absl::StrCat(kOp, ": seq_lens[", s, "] = ", len,
                                                    " does not fit the block table's ", g.max_blocks, " blocks of ",
                                                    g.block_size, " tokens"));
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        scores.resize(std::max<int64_t>(1, group * len));
        for (int64_t j = 0; j < group; ++j) {
          const T* q = qv + s * qs[0] + (kvh * group + j) * qs[1];
          for (int64_t d = 0; d < D; ++d) qf[j * D + d] = static_cast<float>(q[d * qs[2]]) * fscale;
        }
        // Pass 1, block by block: scores[j][t] = (q_j * scale) . k_t for the group's heads:
        // column-major S^T (n x group, ld len) = K_block (n x D) . Q^T (D x group).
        for (int64_t bi = 0; bi * g.block_size < len; ++bi) {
          const int64_t b = bt.Load(s, bi);
          if (b < 0 || b >= g.num_blocks) {
            return absl::OutOfRangeError(absl::StrCat(kOp, ": block_tables[", s, "][", bi, "] = ", b,
                                                      " is outside the cache's ", g.num_blocks, " blocks"));
          }
          const int64_t t0 = bi * g.block_size, n = std::min(g.block_size, len - t0);
          const auto [kp, ldk] = BlockAsFloat(kv + b * kcs[0] + kvh * kcs[2], n, D, kcs[1], kcs[3], block);
          Sgemm('T', 'N', n, group, D, 1.0f, kp, ldk, qf.data(), D, 0.0f, &scores[t0], len);
        }
        // Softmax per head, in place.
        for (int64_t j = 0; j < group && len > 0; ++j) {
          float* sc = &scores[j * len];
          const float m = *std::max_element(sc, sc + len);
          float sum = 0.0f;
          for (int64_t t = 0; t < len; ++t) {
            sc[t] = ExpF(sc[t] - m);
            sum += sc[t];
          }
          const float inv = 1.0f / sum;
          for (int64_t t = 0; t < len; ++t) sc[t] *= inv;
        }
        // Pass 2 (the block table was validated in pass 1): acc_j += sum_t p_j[t] v_t:
        // column-major acc^T (D x group) += V_block^T (D x n) . P^T (n x group, ld len).
        for (int64_t bi = 0; bi * g.block_size < len; ++bi) {
          const int64_t b = bt.Load(s, bi);
          const int64_t t0 = bi * g.block_size, n = std::min(g.block_size, len - t0);
          const auto [vp, ldv] = BlockAsFloat(vv + b * vcs[0] + kvh * vcs[2], n, D, vcs[1], vcs[3], block);
          Sgemm('N', 'N', D, group, n, 1.0f, vp, ldv, &scores[t0], len, 1.0f, acc.data(), D);
        }
        for (int64_t j = 0; j < group; ++j) {
          T* o = ov + (s * g.heads + kvh * group + j) * D;
          for (int64_t d = 0; d < D; ++d) o[d] = static_cast<T>(acc[j * D + d]);
        }
      }
      return absl::OkStatus();
    });
  });
  return out;
}

// ================================================================== registration

TORCH_LIBRARY_FRAGMENT(xxnpu, m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("fused_add_rms_norm(Tensor(a!) x, Tensor(b!) residual, Tensor weight, float eps) -> ()");
  m.def("rotary_embedding(Tensor positions, Tensor query, Tensor key, int head_size, Tensor cos_sin_cache, "
        "bool is_neox) -> (Tensor, Tensor)");
  m.def("rotary_embedding_(Tensor positions, Tensor(a!) query, Tensor(b!) key, int head_size, "
        "Tensor cos_sin_cache, bool is_neox) -> ()");
  m.def("silu_and_mul(Tensor x) -> Tensor");
  m.def("reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
        "Tensor slot_mapping) -> ()");
  m.def("paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_tables, "
        "Tensor seq_lens, float scale) -> Tensor");
}

TORCH_LIBRARY_IMPL(xxnpu, PrivateUse1, m) {
  m.impl("rms_norm", &RmsNormXxnpu);
  m.impl("fused_add_rms_norm", &FusedAddRmsNormXxnpu);
  m.impl("rotary_embedding", &RopeXxnpu);
  m.impl("rotary_embedding_", &RopeInplaceXxnpu);
  m.impl("silu_and_mul", &SiluAndMulXxnpu);
  m.impl("reshape_and_cache", &ReshapeAndCacheXxnpu);
  m.impl("paged_attention", &PagedAttentionXxnpu);
}

TORCH_LIBRARY_IMPL(xxnpu, CPU, m) {
  m.impl("rms_norm", &RmsNormCpu);
  m.impl("fused_add_rms_norm", &FusedAddRmsNormCpu);
  m.impl("rotary_embedding", &RopeCpu);
  m.impl("rotary_embedding_", &RopeInplaceCpu);
  m.impl("silu_and_mul", &SiluAndMulCpu);
  m.impl("reshape_and_cache", &ReshapeAndCacheCpu);
  m.impl("paged_attention", &PagedAttentionCpu);
}

TORCH_LIBRARY_IMPL(xxnpu, Meta, m) {
  m.impl("rms_norm", &RmsNormMeta);
  m.impl("fused_add_rms_norm", &FusedAddRmsNormMeta);
  m.impl("rotary_embedding", &RopeMeta);
  m.impl("rotary_embedding_", &RopeInplaceMeta);
  m.impl("silu_and_mul", &SiluAndMulMeta);
  m.impl("reshape_and_cache", &ReshapeAndCacheMeta);
  m.impl("paged_attention", &PagedAttentionMeta);
}

}  // namespace
}  // namespace xxnpu
