// Normalisation over the last dims on xxnpu: layer_norm (native_layer_norm and its
// backward) and rms_norm (torch 2.13's F.rms_norm calls aten::_fused_rms_norm, whose only
// kernel off CUDA is a composite of pow / mean / rsqrt / mul and, through autograd, a dozen
// more ops backward; registering it here gives xxnpu one kernel each way).
//
// The input is viewed as [M, N] rows (M = the leading dims, N = the normalized ones). Each
// float32/bfloat16 row is one pass of the SIMD row kernels (vec_kernels.h): the row is read
// from memory once and the later passes over it hit the cache; rows are split over the
// device's compute threads in blocks of about kElementsPerBlock elements. Backward, each block
// also sums its rows' weight/bias gradient terms into a float partial row of its own, and a
// second kernel adds the partial rows up column by column: no atomics, and the result does
// not depend on the thread count. Other dtypes (half, double) take plain scalar loops with
// float-or-wider statistics.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/_fused_rms_norm_compositeimplicitautograd_dispatch.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/cpu_fallback.h"
#include "ops/vec_kernels.h"
#include "ops/xxnpu_tensor.h"

namespace xxnpu {
namespace {

// Elements per grid block: enough to hide a block's overhead, few enough that a 256 KB
// tensor already spreads over the compute threads.
constexpr int64_t kElementsPerBlock = 16384;
// At most this many blocks carry partial weight-gradient rows: the partials' traffic
// (blocks x N floats) stays small next to the input's.
constexpr int64_t kMaxPartialBlocks = 64;
// Columns per block of the kernel adding the partial rows up.
constexpr int64_t kColumnsPerBlock = 4096;

// Launches body(block) for blocks [0, blocks) on `device`'s current stream; each block runs
// exactly once, on one compute thread. `body` returns nothing and captures values only.
template <typename F>
void LaunchBlocks(const char* name, c10::DeviceIndex device, int64_t blocks, uint64_t bytes, uint64_t flops, F body) {
  if (blocks == 0) return;
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid = Dim3{static_cast<uint32_t>(blocks), 1, 1};
  cfg.bytes = bytes;
  cfg.flops = flops;
  CheckOk(xxnpuLaunchKernel(cfg, [body](BlockRange r) {
    for (int64_t blk = r.begin; blk < r.end; ++blk) body(blk);
    return absl::OkStatus();
  }, CurrentXxnpuStreamHandle(device)), name);
}

template <typename T>
T* View(const at::Tensor& t) {
  return t.defined() ? static_cast<T*>(DeviceView(t.data_ptr())) : nullptr;
}
template <typename T>
const T* ConstView(const at::Tensor& t) {
  return t.defined() ? static_cast<const T*>(DeviceView(t.const_data_ptr())) : nullptr;
}

// How M rows are cut into blocks: `rows_per_block` rows each, `blocks` of them.
struct RowBlocks {
  int64_t rows_per_block = 1;
  int64_t blocks = 0;
};
RowBlocks SplitRows(int64_t m, int64_t n, int64_t max_blocks = std::numeric_limits<int64_t>::max()) {
  RowBlocks b;
  b.rows_per_block = std::max<int64_t>(1, kElementsPerBlock / std::max<int64_t>(1, n));
  b.rows_per_block = std::max(b.rows_per_block, (m + max_blocks - 1) / max_blocks);
  b.blocks = (m + b.rows_per_block - 1) / b.rows_per_block;
  return b;
}

template <typename T>
constexpr bool kVecDtype = std::is_same_v<T, float> || std::is_same_v<T, c10::BFloat16>;
template <typename T>
constexpr VecDtype VecDtypeOf() {
  return std::is_same_v<T, float> ? VecDtype::kFloat : VecDtype::kBFloat16;
}

// The CPU's message for an input whose trailing dims are not normalized_shape.
std::string ShapeMismatch(at::IntArrayRef nshape, const at::Tensor& input) {
  std::string s = absl::StrCat("Given normalized_shape=", c10::str(nshape), ", expected input with shape [*");
  for (const int64_t size : nshape) absl::StrAppend(&s, ", ", size);
  absl::StrAppend(&s, "], but got input of size", c10::str(input.sizes()));
  return s;
}

// [M, N] of an input normalized over its last `normalized_ndim` dims.
std::pair<int64_t, int64_t> RowsAndCols(const at::Tensor& input, int64_t normalized_ndim) {
  const int64_t axis = input.dim() - normalized_ndim;
  int64_t m = 1;
  for (int64_t d = 0; d < axis; ++d) m *= input.size(d);
  int64_t n = 1;
  for (int64_t d = axis; d < input.dim(); ++d) n *= input.size(d);
  return {m, n};
}

// The statistics' shape: the leading dims, then a 1 per normalized dim (as the CPU's).
std::vector<int64_t> StatShape(const at::Tensor& input, int64_t normalized_ndim) {
  const int64_t axis = input.dim() - normalized_ndim;
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().begin() + axis);
  shape.resize(input.dim(), 1);
  return shape;
}

// Adds the partial rows `partials` ([blocks, rows_of_partials, n], of type P) up into the
// non-null `outs`, in order: the i-th non-null output is the sum over blocks of partial row
// i, in out's dtype T.
template <typename T, typename P>
void ReducePartials(const char* name, c10::DeviceIndex device, const at::Tensor& partials, int64_t blocks, int64_t n,
                    std::array<T*, 2> outs) {
  const P* pp = ConstView<P>(partials);
  const int64_t stride = partials.size(1) * n;  // floats between one block's partials and the next
  const int64_t col_blocks = (n + kColumnsPerBlock - 1) / kColumnsPerBlock;
  LaunchBlocks(name, device, col_blocks, static_cast<uint64_t>(partials.nbytes()),
               static_cast<uint64_t>(blocks * partials.size(1) * n), [=](int64_t cb) {
    const int64_t begin = cb * kColumnsPerBlock, end = std::min(n, begin + kColumnsPerBlock);
    P acc[kColumnsPerBlock];
    int64_t slot = 0;
    for (T* out : outs) {
      if (out == nullptr) continue;
      std::fill(acc, acc + (end - begin), P(0));
      for (int64_t b = 0; b < blocks; ++b) {
        const P* row = pp + b * stride + slot * n;
        for (int64_t j = begin; j < end; ++j) acc[j - begin] += row[j];
      }
      for (int64_t j = begin; j < end; ++j) out[j] = static_cast<T>(acc[j - begin]);
      ++slot;
    }
  });
}

#define XXNPU_NORM_FLOAT_TYPES AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16

// ---- layer_norm

std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeLayerNorm(const at::Tensor& input,
                                                                c10::SymIntArrayRef normalized_shape,
                                                                const std::optional<at::Tensor>& weight_opt,
                                                                const std::optional<at::Tensor>& bias_opt, double eps) {
  const auto nshape = C10_AS_INTARRAYREF_SLOW(normalized_shape);
  const int64_t axis = input.dim() - static_cast<int64_t>(nshape.size());
  TORCH_CHECK(!nshape.empty(), "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
              "one element, but got normalized_shape = ", nshape);
  TORCH_CHECK(axis >= 0 && input.sizes().slice(axis).equals(nshape), ShapeMismatch(nshape, input));
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  TORCH_CHECK(!weight.defined() || weight.sizes().equals(nshape), "Expected weight to be of same shape as "
              "normalized_shape, but got weight of shape ", weight.sizes(), " and normalized_shape = ", nshape);
  TORCH_CHECK(!bias.defined() || bias.sizes().equals(nshape), "Expected bias to be of same shape as "
              "normalized_shape, but got bias of shape ", bias.sizes(), " and normalized_shape = ", nshape);
  if (!at::isFloatingType(input.scalar_type())) {
    return FallbackForSymInt<at::_ops::native_layer_norm>::call(input, normalized_shape, weight_opt, bias_opt, eps);
  }
  const c10::DeviceGuard guard(input.device());
  const at::Tensor x = input.contiguous();
  const at::Tensor w = weight.defined() ? weight.contiguous().to(input.scalar_type()) : weight;
  const at::Tensor b = bias.defined() ? bias.contiguous().to(input.scalar_type()) : bias;
  const auto [m, n] = RowsAndCols(input, static_cast<int64_t>(nshape.size()));
  at::Tensor y = at::empty(input.sizes(), x.options());
  const std::vector<int64_t> stat_shape = StatShape(input, static_cast<int64_t>(nshape.size()));
  at::Tensor mean = at::empty(stat_shape, x.options());
  at::Tensor rstd = at::empty(stat_shape, x.options());
  if (m == 0) return {y, mean, rstd};
  AT_DISPATCH_V2(x.scalar_type(), "xxnpu_layer_norm", AT_WRAP([&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* xp = ConstView<scalar_t>(x);
    const scalar_t* wp = ConstView<scalar_t>(w);
    const scalar_t* bp = ConstView<scalar_t>(b);
    scalar_t* yp = View<scalar_t>(y);
    scalar_t* mp = View<scalar_t>(mean);
    scalar_t* rp = View<scalar_t>(rstd);
    const RowBlocks rb = SplitRows(m, n);
    const uint64_t bytes = static_cast<uint64_t>(2 * x.nbytes()), flops = static_cast<uint64_t>(6 * x.numel());
    if constexpr (kVecDtype<scalar_t>) {
      const VecKernels* k = &HostVecKernels();
      const float e = static_cast<float>(eps);
      LaunchBlocks("xxnpu::layer_norm", x.device().index(), rb.blocks, bytes, flops, [=](int64_t blk) {
        const int64_t end = std::min(m, (blk + 1) * rb.rows_per_block);
        for (int64_t r = blk * rb.rows_per_block; r < end; ++r) {
          float mu = 0, inv = 0;
          k->layer_norm(VecDtypeOf<scalar_t>(), yp + r * n, xp + r * n, wp, bp, n, e, &mu, &inv);
          mp[r] = static_cast<scalar_t>(mu);
          rp[r] = static_cast<scalar_t>(inv);
        }
      });
    } else {
      const acc_t e = static_cast<acc_t>(eps);
      LaunchBlocks("xxnpu::layer_norm", x.device().index(), rb.blocks, bytes, flops, [=](int64_t blk) {
        const int64_t end = std::min(m, (blk + 1) * rb.rows_per_block);
        for (int64_t r = blk * rb.rows_per_block; r < end; ++r) {
          const scalar_t* xr = xp + r * n;
          acc_t sum = 0;
          for (int64_t j = 0; j < n; ++j) sum += static_cast<acc_t>(xr[j]);
          const acc_t mu = n > 0 ? sum / static_cast<acc_t>(n) : acc_t(0);
          acc_t sq = 0;
          for (int64_t j = 0; j < n; ++j) {
            const acc_t d = static_cast<acc_t>(xr[j]) - mu;
            sq += d * d;
          }
          const acc_t inv = 1 / std::sqrt((n > 0 ? sq / static_cast<acc_t>(n) : acc_t(0)) + e);
          for (int64_t j = 0; j < n; ++j) {
            acc_t v = (static_cast<acc_t>(xr[j]) - mu) * inv;
            if (wp != nullptr) v *= static_cast<acc_t>(wp[j]);
            if (bp != nullptr) v += static_cast<acc_t>(bp[j]);
            yp[r * n + j] = static_cast<scalar_t>(v);
          }
          mp[r] = static_cast<scalar_t>(mu);
          rp[r] = static_cast<scalar_t>(inv);
        }
      });
    }
  }), XXNPU_NORM_FLOAT_TYPES);
  return {y, mean, rstd};
}

// The backward of both norms over [M, N] rows of T: dx (when dxp) and the partial rows of
// the weight (and, for layer_norm, bias) gradients in T's opmath type (float, or double),
// one set per block of rows, reduced into dwp / dbp. mp is null for rms_norm (no centring).
template <typename T, typename S>
void NormBackward(const char* name, const char* reduce_name, c10::DeviceIndex dev, int64_t m, int64_t n, T* dxp,
                  const T* gp, const T* xp, const T* wp, const S* mp, const S* rp, T* dwp, T* dbp, uint64_t bytes) {
  using acc_t = at::opmath_type<T>;
  const int64_t sets = (dwp != nullptr ? 1 : 0) + (dbp != nullptr ? 1 : 0);
  const RowBlocks rb = SplitRows(m, n, sets > 0 ? kMaxPartialBlocks : std::numeric_limits<int64_t>::max());
  at::Tensor partials;
  acc_t* pp = nullptr;
  if (sets > 0) {
    partials = at::empty({rb.blocks, sets, n}, at::TensorOptions()
                                                    .device(c10::Device(c10::kPrivateUse1, dev))
                                                    .dtype(c10::CppTypeToScalarType<acc_t>::value));
    pp = View<acc_t>(partials);
  }
  acc_t* const pw = dwp != nullptr ? pp : nullptr;  // the block's partial rows: [dw][db]
  acc_t* const pb = dbp != nullptr ? pp + (dwp != nullptr ? n : 0) : nullptr;
  const int64_t pstride = sets * n;
  const bool centred = mp != nullptr;
  LaunchBlocks(name, dev, rb.blocks, bytes, static_cast<uint64_t>(8 * m * n), [=](int64_t blk) {
    acc_t* bw = pw != nullptr ? pw + blk * pstride : nullptr;
    acc_t* bb = pb != nullptr ? pb + blk * pstride : nullptr;
    if (bw != nullptr) std::fill(bw, bw + n, acc_t(0));
    if (bb != nullptr) std::fill(bb, bb + n, acc_t(0));
    const int64_t end = std::min(m, (blk + 1) * rb.rows_per_block);
    for (int64_t r = blk * rb.rows_per_block; r < end; ++r) {
      if constexpr (kVecDtype<T>) {  // acc_t is float
        const float mean_r = centred ? static_cast<float>(mp[r]) : 0.0f;
        const float rstd_r = static_cast<float>(rp[r]);
        const VecKernels& k = HostVecKernels();
        T* dxr = dxp != nullptr ? dxp + r * n : nullptr;
        if (centred) {
          k.layer_norm_backward(VecDtypeOf<T>(), dxr, gp + r * n, xp + r * n, wp, n, mean_r, rstd_r, bw, bb);
        } else {
          k.rms_norm_backward(VecDtypeOf<T>(), dxr, gp + r * n, xp + r * n, wp, n, rstd_r, bw);
        }
      } else {
        const acc_t mu = centred ? static_cast<acc_t>(mp[r]) : acc_t(0), rs = static_cast<acc_t>(rp[r]);
        const T* g = gp + r * n;
        const T* x = xp + r * n;
        acc_t sum_gw = 0, sum_gw_xhat = 0;
        for (int64_t j = 0; j < n; ++j) {
          const acc_t gv = static_cast<acc_t>(g[j]);
          const acc_t gw = gv * (wp != nullptr ? static_cast<acc_t>(wp[j]) : acc_t(1));
          const acc_t xhat = (static_cast<acc_t>(x[j]) - mu) * rs;
          sum_gw += gw;
          sum_gw_xhat += gw * xhat;
          if (bw != nullptr) bw[j] += gv * xhat;
          if (bb != nullptr) bb[j] += gv;
        }
        if (dxp == nullptr || n == 0) continue;
        const acc_t inv_n = acc_t(1) / static_cast<acc_t>(n);
        const acc_t mean_gw = centred ? sum_gw * inv_n : acc_t(0);
        for (int64_t j = 0; j < n; ++j) {
          const acc_t gw = static_cast<acc_t>(g[j]) * (wp != nullptr ? static_cast<acc_t>(wp[j]) : acc_t(1));
          const acc_t xhat = (static_cast<acc_t>(x[j]) - mu) * rs;
          dxp[r * n + j] = static_cast<T>(rs * (gw - mean_gw - xhat * sum_gw_xhat * inv_n));
        }
      }
    }
  });
  if (sets > 0) ReducePartials<T, acc_t>(reduce_name, dev, partials, rb.blocks, n, {dwp, dbp});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> NativeLayerNormBackward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight_opt, const std::optional<at::Tensor>& bias_opt,
    std::array<bool, 3> mask) {
  if (!at::isFloatingType(input.scalar_type())) {
    return FallbackForSymInt<at::_ops::native_layer_norm_backward>::call(grad_out, input, normalized_shape, mean, rstd,
                                                                         weight_opt, bias_opt, mask);
  }
  const c10::DeviceGuard guard(input.device());
  const auto nshape = C10_AS_INTARRAYREF_SLOW(normalized_shape);
  const auto [m, n] = RowsAndCols(input, static_cast<int64_t>(nshape.size()));
  const at::ScalarType t = input.scalar_type();
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  const at::Tensor bias = bias_opt.value_or(at::Tensor());
  const at::Tensor x = input.contiguous();
  const at::Tensor g = grad_out.contiguous().to(t);
  const at::Tensor mu = mean.contiguous().to(t);
  const at::Tensor rs = rstd.contiguous().to(t);
  const at::Tensor w = weight.defined() ? weight.contiguous().to(t) : weight;
  at::Tensor dx = mask[0] ? at::empty(input.sizes(), x.options()) : at::Tensor();
  // An empty input (M = 0) has zero parameter gradients, which no kernel writes.
  const bool empty = m == 0 || n == 0;
  auto param_grad = [&] { return empty ? at::zeros(nshape, x.options()) : at::empty(nshape, x.options()); };
  at::Tensor dw = mask[1] && weight.defined() ? param_grad() : at::Tensor();
  at::Tensor db = mask[2] && bias.defined() ? param_grad() : at::Tensor();
  if (!empty && (dx.defined() || dw.defined() || db.defined())) {
    AT_DISPATCH_V2(t, "xxnpu_layer_norm_backward", AT_WRAP([&] {
      NormBackward<scalar_t, scalar_t>("xxnpu::layer_norm_backward", "xxnpu::layer_norm_backward_params",
                                       x.device().index(), m, n, View<scalar_t>(dx), ConstView<scalar_t>(g),
                                       ConstView<scalar_t>(x), ConstView<scalar_t>(w), ConstView<scalar_t>(mu),
                                       ConstView<scalar_t>(rs), View<scalar_t>(dw), View<scalar_t>(db),
                                       static_cast<uint64_t>(3 * x.nbytes()));
    }), XXNPU_NORM_FLOAT_TYPES);
  }
  if (dw.defined() && weight.scalar_type() != t) dw = dw.to(weight.scalar_type());
  if (db.defined() && bias.scalar_type() != t) db = db.to(bias.scalar_type());
  return {dx, dw, db};
}

// ---- rms_norm: aten::_fused_rms_norm -> (y, rstd) and its backward.

// The dense float32/bfloat16 cases the row kernels take: weight (if any) of the input's
// dtype. Others (half, double, a float32 weight on a bfloat16 input) follow the composite
// exactly, op by op.
bool RmsNormIsNative(const at::Tensor& input, const at::Tensor& weight) {
  const at::ScalarType t = input.scalar_type();
  return (t == at::kFloat || t == at::kBFloat16) && (!weight.defined() || weight.scalar_type() == t);
}

// eps = None means the accumulation dtype's machine epsilon (float's for float32/bfloat16).
double RmsNormEps(const at::Tensor& input, std::optional<double> eps) {
  if (eps.has_value()) return *eps;
  return input.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                                            : std::numeric_limits<float>::epsilon();
}

void CheckRmsNormArgs(const at::Tensor& input, at::IntArrayRef nshape, const at::Tensor& weight) {
  TORCH_CHECK(!nshape.empty(), "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
              "one element, but got normalized_shape = ", nshape);
  TORCH_CHECK(!weight.defined() || weight.sizes().equals(nshape), "Expected weight to be of same shape as "
              "normalized_shape, but got weight of shape ", weight.sizes(), " and normalized_shape = ", nshape);
  const int64_t axis = input.dim() - static_cast<int64_t>(nshape.size());
  TORCH_CHECK_VALUE(axis >= 0 && input.sizes().slice(axis).equals(nshape), ShapeMismatch(nshape, input));
  TORCH_CHECK(!weight.defined() || weight.device() == input.device(), "rms_norm: expected weight on ",
              input.device(), ", got ", weight.device());
}

std::tuple<at::Tensor, at::Tensor> FusedRmsNorm(const at::Tensor& input, at::IntArrayRef normalized_shape,
                                                const std::optional<at::Tensor>& weight_opt,
                                                std::optional<double> eps) {
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  CheckRmsNormArgs(input, normalized_shape, weight);
  if (!RmsNormIsNative(input, weight)) {
    return at::compositeimplicitautograd::_fused_rms_norm(input, normalized_shape, weight_opt, eps);
  }
  const c10::DeviceGuard guard(input.device());
  const at::Tensor x = input.contiguous();
  const at::Tensor w = weight.defined() ? weight.contiguous() : weight;
  const auto [m, n] = RowsAndCols(input, static_cast<int64_t>(normalized_shape.size()));
  at::Tensor y = at::empty(input.sizes(), x.options());
  at::Tensor rstd = at::empty(StatShape(input, static_cast<int64_t>(normalized_shape.size())),
                              x.options().dtype(at::kFloat));
  if (m == 0) return {y, rstd};
  const float e = static_cast<float>(RmsNormEps(input, eps));
  AT_DISPATCH_V2(x.scalar_type(), "xxnpu_rms_norm", AT_WRAP([&] {
    if constexpr (kVecDtype<scalar_t>) {
      const scalar_t* xp = ConstView<scalar_t>(x);
      const scalar_t* wp = ConstView<scalar_t>(w);
      scalar_t* yp = View<scalar_t>(y);
      float* rp = View<float>(rstd);
      const VecKernels* k = &HostVecKernels();
      const RowBlocks rb = SplitRows(m, n);
      LaunchBlocks("xxnpu::rms_norm", x.device().index(), rb.blocks, static_cast<uint64_t>(2 * x.nbytes()),
                   static_cast<uint64_t>(4 * x.numel()), [=](int64_t blk) {
        const int64_t end = std::min(m, (blk + 1) * rb.rows_per_block);
        for (int64_t r = blk * rb.rows_per_block; r < end; ++r) {
          k->rms_norm(VecDtypeOf<scalar_t>(), yp + r * n, xp + r * n, wp, n, e, rp + r);
        }
      });
    }
  }), at::kFloat, at::kBFloat16);
  return {y, rstd};
}

// The composite's backward (torch/_decomp's _fused_rms_norm_backward), op by op, for the
// cases the row kernels do not take.
std::tuple<at::Tensor, at::Tensor> FusedRmsNormBackwardComposite(const at::Tensor& grad_out, const at::Tensor& input,
                                                                 at::IntArrayRef nshape, const at::Tensor& rstd,
                                                                 const at::Tensor& weight, std::array<bool, 2> mask) {
  const at::ScalarType ct = at::toOpMathType(input.scalar_type());
  const at::Tensor g = grad_out.to(ct).contiguous();
  const at::Tensor x = input.to(ct).contiguous();
  const int64_t axis = input.dim() - static_cast<int64_t>(nshape.size());
  std::vector<int64_t> inner, outer;
  for (int64_t d = 0; d < input.dim(); ++d) (d >= axis ? inner : outer).push_back(d);
  const at::Tensor gw = weight.defined() ? g * weight.to(ct) : g;
  const at::Tensor xhat = x * rstd;
  at::Tensor dx, dw;
  if (mask[0]) {
    const at::Tensor sum = (xhat * gw).sum(inner, /*keepdim=*/true);
    const double cols = static_cast<double>(c10::multiply_integers(nshape));
    dx = ((gw - (xhat / cols) * sum) * rstd).to(input.scalar_type());
  }
  if (mask[1] && weight.defined()) dw = (outer.empty() ? g * xhat : (g * xhat).sum(outer)).to(input.scalar_type());
  return {dx, dw};
}

std::tuple<at::Tensor, at::Tensor> FusedRmsNormBackward(const at::Tensor& grad_out, const at::Tensor& input,
                                                        at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                                                        const std::optional<at::Tensor>& weight_opt,
                                                        std::array<bool, 2> mask) {
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  CheckRmsNormArgs(input, normalized_shape, weight);
  TORCH_CHECK(grad_out.sizes().equals(input.sizes()), "rms_norm backward: expected grad_out of the input's shape ",
              input.sizes(), ", got ", grad_out.sizes());
  const c10::DeviceGuard guard(input.device());
  const auto [m, n] = RowsAndCols(input, static_cast<int64_t>(normalized_shape.size()));
  if (m == 0 || n == 0) {
    return {mask[0] ? at::zeros(input.sizes(), input.options()) : at::Tensor(),
            mask[1] && weight.defined() ? at::zeros(normalized_shape, input.options()) : at::Tensor()};
  }
  if (!RmsNormIsNative(input, weight) || rstd.scalar_type() != at::kFloat) {
    return FusedRmsNormBackwardComposite(grad_out, input, normalized_shape, rstd, weight, mask);
  }
  const at::ScalarType t = input.scalar_type();
  const at::Tensor x = input.contiguous();
  const at::Tensor g = grad_out.contiguous().to(t);
  const at::Tensor rs = rstd.contiguous();
  const at::Tensor w = weight.defined() ? weight.contiguous() : weight;
  at::Tensor dx = mask[0] ? at::empty(input.sizes(), x.options()) : at::Tensor();
  at::Tensor dw = mask[1] && weight.defined() ? at::empty(normalized_shape, x.options()) : at::Tensor();
  if (!dx.defined() && !dw.defined()) return {dx, dw};
  AT_DISPATCH_V2(t, "xxnpu_rms_norm_backward", AT_WRAP([&] {
    NormBackward<scalar_t, float>("xxnpu::rms_norm_backward", "xxnpu::rms_norm_backward_weight", x.device().index(), m,
                                  n, View<scalar_t>(dx), ConstView<scalar_t>(g), ConstView<scalar_t>(x),
                                  ConstView<scalar_t>(w), nullptr, ConstView<float>(rs), View<scalar_t>(dw), nullptr,
                                  static_cast<uint64_t>(3 * x.nbytes()));
  }), at::kFloat, at::kBFloat16);
  return {dx, dw};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", &NativeLayerNorm);
  m.impl("native_layer_norm_backward", &NativeLayerNormBackward);
  m.impl("_fused_rms_norm", &FusedRmsNorm);
  m.impl("_fused_rms_norm_backward", &FusedRmsNormBackward);
}

}  // namespace
}  // namespace xxnpu
