// Neural-network ops on xxnpu: softmax / log_softmax (+ backward), dropout, nll_loss
// (+ backward), embedding backward. (The SDPA backend choice and the fused attention
// kernels are in attention_ops.cc; layer_norm and rms_norm in norm_ops.cc.)
//
// The row ops view their input as [outer, dim, inner] (contiguous) and give each device
// block a range of rows; statistics are kept in float32 or wider.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_log_softmax_backward_data_meta.h>
#include <ATen/ops/_log_softmax_meta.h>
#include <ATen/ops/_softmax_backward_data_meta.h>
#include <ATen/ops/_softmax_meta.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/cpu_fallback.h"
#include "ops/out_checks.h"
#include "ops/vec_kernels.h"
#include "ops/xxnpu_tensor.h"

namespace xxnpu {
namespace {

// Launches `body(row_begin, row_end)` over `rows` rows of `row_elems` elements each, in
// blocks of about 16K elements: a 256 KB tensor already spreads over the compute threads.
// `body` must return absl::Status.
template <typename F>
void LaunchRows(const char* name, c10::DeviceIndex device, int64_t rows, int64_t row_elems, uint64_t bytes,
                uint64_t flops, F body) {
  if (rows == 0) return;
  const int64_t per_block = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, row_elems));
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid = Dim3{static_cast<uint32_t>((rows + per_block - 1) / per_block), 1, 1};
  cfg.bytes = bytes;
  cfg.flops = flops;
  CheckOk(xxnpuLaunchKernel(cfg, [body = std::move(body), rows, per_block](BlockRange r) {
    return body(r.begin * per_block, std::min(rows, r.end * per_block));
  }, CurrentXxnpuStreamHandle(device)), name);
}

template <typename T>
T* View(const at::Tensor& t) {
  return static_cast<T*>(DeviceView(t.data_ptr()));
}
template <typename T>
const T* ConstView(const at::Tensor& t) {
  return static_cast<const T*>(DeviceView(t.const_data_ptr()));
}

struct RowShape {
  int64_t outer = 1, dim = 1, inner = 1;
};
RowShape RowShapeOf(const at::Tensor& t, int64_t dim) {
  RowShape s;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim) s.outer *= t.size(d);
    if (d > dim) s.inner *= t.size(d);
  }
  s.dim = t.dim() == 0 ? 1 : t.size(dim);
  return s;
}

#define XXNPU_NN_FLOAT_TYPES AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16

// ---- softmax / log_softmax

template <bool kLog>
at::Tensor& SoftmaxOut(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  const char* name = kLog ? "xxnpu::log_softmax" : "xxnpu::softmax";
  TORCH_CHECK(!half_to_float || self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16, name,
              ": half_to_float is only for half/bfloat16 inputs");
  if (!at::isFloatingType(self.scalar_type())) {
    return kLog ? FallbackFor<at::_ops::_log_softmax_out>::call(self, dim, half_to_float, out)
                : FallbackFor<at::_ops::_softmax_out>::call(self, dim, half_to_float, out);
  }
  if constexpr (kLog) {
    CheckOutWithMeta<at::meta::structured__log_softmax>(out, self, dim, half_to_float);
  } else {
    CheckOutWithMeta<at::meta::structured__softmax>(out, self, dim, half_to_float);
  }
  const c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor in = self.contiguous();
  at::native::resize_output(out, self.sizes());
  const bool direct = out.is_contiguous();
  at::Tensor target = direct ? out : at::empty(self.sizes(), out.options());
  const RowShape rs = RowShapeOf(in, dim);
  const at::ScalarType out_t = target.scalar_type();
  AT_DISPATCH_V2(in.scalar_type(), "xxnpu_softmax", AT_WRAP([&] {
    using in_t = scalar_t;
    using acc_t = at::opmath_type<scalar_t>;
    if constexpr (std::is_same_v<in_t, float> || std::is_same_v<in_t, c10::BFloat16>) {
      // Softmax over contiguous rows of float32/bfloat16 into the same dtype: the SIMD row
      // kernel (vec_kernels.h: max, exp-sum, scale, each pass over a row in cache).
      if (rs.inner == 1 && out_t == in.scalar_type()) {
        const VecKernels* k = &HostVecKernels();
        const VecDtype vt = std::is_same_v<in_t, float> ? VecDtype::kFloat : VecDtype::kBFloat16;
        const in_t* x = ConstView<in_t>(in);
        in_t* y = View<in_t>(target);
        LaunchRows(name, in.device().index(), rs.outer, rs.dim, static_cast<uint64_t>(in.nbytes() + target.nbytes()),
                   static_cast<uint64_t>(4 * in.numel()), [k, vt, x, y, n = rs.dim](int64_t begin, int64_t end) {
          for (int64_t row = begin; row < end; ++row) k->softmax(kLog, vt, y + row * n, x + row * n, n);
          return absl::OkStatus();
        });
        return;
      }
    }
    auto run = [&](auto* out_p) {
      using out_elem = std::remove_pointer_t<decltype(out_p)>;
      const in_t* x = ConstView<in_t>(in);
      LaunchRows(name, in.device().index(), rs.outer * rs.inner, rs.dim,
                 static_cast<uint64_t>(in.nbytes() + target.nbytes()), static_cast<uint64_t>(4 * in.numel()),
                 [x, out_p, rs](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const int64_t o = row / rs.inner, i = row % rs.inner;
          const in_t* xr = x + o * rs.dim * rs.inner + i;
          out_elem* yr = out_p + o * rs.dim * rs.inner + i;
          acc_t mx = -std::numeric_limits<acc_t>::infinity();
          for (int64_t d = 0; d < rs.dim; ++d) mx = std::max(mx, static_cast<acc_t>(xr[d * rs.inner]));
          acc_t sum = 0;
          for (int64_t d = 0; d < rs.dim; ++d) sum += std::exp(static_cast<acc_t>(xr[d * rs.inner]) - mx);
          if constexpr (kLog) {
            // (x - max) - log(sum), not x - (max + log(sum)): see vec_kernels_impl.cc.
            const acc_t log_sum = std::log(sum);
            for (int64_t d = 0; d < rs.dim; ++d) {
              yr[d * rs.inner] = static_cast<out_elem>((static_cast<acc_t>(xr[d * rs.inner]) - mx) - log_sum);
            }
          } else {
            for (int64_t d = 0; d < rs.dim; ++d) {
              yr[d * rs.inner] = static_cast<out_elem>(std::exp(static_cast<acc_t>(xr[d * rs.inner]) - mx) / sum);
            }
          }
        }
        return absl::OkStatus();
      });
    };
    if (out_t == in.scalar_type()) {
      run(View<in_t>(target));
    } else {
      TORCH_CHECK(out_t == at::kFloat, name, ": expected a float32 or ", in.scalar_type(), " result, got ", out_t);
      run(View<float>(target));
    }
  }), XXNPU_NN_FLOAT_TYPES);
  if (!direct) out.copy_(target);
  return out;
}

// grad_input = y * (g - sum(g * y)) for softmax; g - exp(y) * sum(g) for log_softmax.
template <bool kLog>
at::Tensor& SoftmaxBackwardOut(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                               at::ScalarType input_dtype, at::Tensor& grad_input) {
  const char* name = kLog ? "xxnpu::log_softmax_backward" : "xxnpu::softmax_backward";
  if (!at::isFloatingType(output.scalar_type())) {
    return kLog ? FallbackFor<at::_ops::_log_softmax_backward_data_out>::call(grad, output, dim, input_dtype, grad_input)
                : FallbackFor<at::_ops::_softmax_backward_data_out>::call(grad, output, dim, input_dtype, grad_input);
  }
  CheckSameDevice(name, "grad_output", grad, output.device());
  // The CPU kernel reads grad_output as output's dtype (its data_ptr check).
  TORCH_CHECK(grad.scalar_type() == output.scalar_type(), "expected scalar type ", output.scalar_type(),
              " but found ", grad.scalar_type());
  if constexpr (kLog) {
    CheckOutWithMeta<at::meta::structured__log_softmax_backward_data>(grad_input, grad, output, dim, input_dtype);
  } else {
    CheckOutWithMeta<at::meta::structured__softmax_backward_data>(grad_input, grad, output, dim, input_dtype);
  }
  const c10::DeviceGuard guard(output.device());
  dim = at::maybe_wrap_dim(dim, output.dim());
  const at::Tensor g = grad.contiguous().to(output.scalar_type());
  const at::Tensor y = output.contiguous();
  at::native::resize_output(grad_input, output.sizes());
  at::Tensor target = at::empty(output.sizes(), output.options());
  const RowShape rs = RowShapeOf(y, dim);
  AT_DISPATCH_V2(y.scalar_type(), "xxnpu_softmax_backward", AT_WRAP([&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* gp = ConstView<scalar_t>(g);
    const scalar_t* yp = ConstView<scalar_t>(y);
    scalar_t* dx = View<scalar_t>(target);
    LaunchRows(name, y.device().index(), rs.outer * rs.inner, rs.dim, static_cast<uint64_t>(3 * y.nbytes()),
               static_cast<uint64_t>(3 * y.numel()), [gp, yp, dx, rs](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t base = (row / rs.inner) * rs.dim * rs.inner + row % rs.inner;
        acc_t sum = 0;
        for (int64_t d = 0; d < rs.dim; ++d) {
          const int64_t k = base + d * rs.inner;
          sum += kLog ? static_cast<acc_t>(gp[k]) : static_cast<acc_t>(gp[k]) * static_cast<acc_t>(yp[k]);
        }
        for (int64_t d = 0; d < rs.dim; ++d) {
          const int64_t k = base + d * rs.inner;
          const acc_t gv = gp[k], yv = yp[k];
          dx[k] = static_cast<scalar_t>(kLog ? gv - std::exp(yv) * sum : yv * (gv - sum));
        }
      }
      return absl::OkStatus();
    });
  }), XXNPU_NN_FLOAT_TYPES);
  grad_input.copy_(target.to(grad_input.scalar_type()));
  return grad_input;
}

// ---- dropout: a keep mask from the device generator (uniform_), then a scaled multiply.

std::tuple<at::Tensor, at::Tensor> NativeDropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  const c10::DeviceGuard guard(input.device());
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  if (p == 1) return {at::zeros_like(input), at::zeros_like(input, input.options().dtype(at::kBool))};
  const at::Tensor noise = at::empty_like(input, input.options().dtype(at::kFloat)).uniform_(0, 1);
  const at::Tensor mask = noise.ge(p);
  const at::Tensor out = input.mul(mask).mul_(1.0 / (1.0 - p));
  return {out, mask};
}

at::Tensor NativeDropoutBackward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  if (!at::isFloatingType(grad.scalar_type())) {
    return FallbackFor<at::_ops::native_dropout_backward>::call(grad, mask, scale);
  }
  return grad.mul(mask).mul_(scale);
}

// ---- nll_loss: input [N, C] or [C] log-probabilities, target [N] or [] class indices.

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

void CheckNll(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  const int64_t n = self.dim() == 1 ? 1 : self.size(0);
  TORCH_CHECK(self.dim() == 1 ? target.numel() == 1 || target.dim() == 0 : target.size(0) == n,
              "size mismatch (got input: ", self.sizes(), ", target: ", target.sizes(), ")");
  TORCH_CHECK(at::isIntegralType(target.scalar_type(), false), "expected target of an integer dtype, got ",
              target.scalar_type());
  const int64_t c = self.size(-1);
  TORCH_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == c),
              "weight tensor should be defined either for all ", c, " classes or no classes but got weight tensor of "
              "shape: ", weight.sizes());
}

std::tuple<at::Tensor, at::Tensor> NllLossForward(const at::Tensor& self, const at::Tensor& target,
                                                  const std::optional<at::Tensor>& weight_opt, int64_t reduction,
                                                  int64_t ignore_index) {
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  CheckNll(self, target, weight);
  if (!at::isFloatingType(self.scalar_type())) {
    return FallbackFor<at::_ops::nll_loss_forward>::call(self, target, weight_opt, reduction, ignore_index);
  }
  const c10::DeviceGuard guard(self.device());
  const at::Tensor x = self.contiguous();
  const at::Tensor t = target.to(self.device(), at::kLong).contiguous();
  const at::Tensor w = weight.defined() ? weight.to(self.device(), self.scalar_type()).contiguous() : weight;
  const int64_t n = self.dim() == 1 ? 1 : self.size(0), c = self.size(-1);
  at::Tensor output = reduction == kNone && self.dim() == 2 ? at::empty({n}, x.options()) : at::empty({}, x.options());
  at::Tensor total_weight = at::empty({}, x.options());
  AT_DISPATCH_V2(x.scalar_type(), "xxnpu_nll_loss", AT_WRAP([&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* xp = ConstView<scalar_t>(x);
    const int64_t* tp = ConstView<int64_t>(t);
    const scalar_t* wp = w.defined() ? ConstView<scalar_t>(w) : nullptr;
    scalar_t* op = View<scalar_t>(output);
    scalar_t* twp = View<scalar_t>(total_weight);
    const bool per_sample = reduction == kNone && self.dim() == 2;
    LaunchRows("xxnpu::nll_loss", x.device().index(), 1, n * c, static_cast<uint64_t>(n * (8 + x.element_size())),
               static_cast<uint64_t>(2 * n), [=](int64_t, int64_t) {
      acc_t sum = 0, wsum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t cls = tp[i];
        if (cls == ignore_index) {
          if (per_sample) op[i] = scalar_t(0);
          continue;
        }
        if (cls < 0 || cls >= c) return IndexOutOfRange("nll_loss: Target " + std::to_string(cls) +
                                                              " is out of bounds.");
        const acc_t wv = wp ? static_cast<acc_t>(wp[cls]) : acc_t(1);
        const acc_t loss = -static_cast<acc_t>(xp[i * c + cls]) * wv;
        if (per_sample) op[i] = static_cast<scalar_t>(loss);
        sum += loss;
        wsum += wv;
      }
      if (!per_sample) op[0] = static_cast<scalar_t>(reduction == kMean ? sum / wsum : sum);
      *twp = static_cast<scalar_t>(wsum);
      return absl::OkStatus();
    });
  }), XXNPU_NN_FLOAT_TYPES);
  return {output, total_weight};
}

at::Tensor NllLossBackward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                           const std::optional<at::Tensor>& weight_opt, int64_t reduction, int64_t ignore_index,
                           const at::Tensor& total_weight) {
  const at::Tensor weight = weight_opt.value_or(at::Tensor());
  CheckNll(self, target, weight);
  if (!at::isFloatingType(self.scalar_type())) {
    return FallbackFor<at::_ops::nll_loss_backward>::call(grad_output, self, target, weight_opt, reduction,
                                                          ignore_index, total_weight);
  }
  const c10::DeviceGuard guard(self.device());
  const at::Tensor t = target.to(self.device(), at::kLong).contiguous();
  const at::Tensor w = weight.defined() ? weight.to(self.device(), self.scalar_type()).contiguous() : weight;
  const at::Tensor g = grad_output.to(self.scalar_type()).contiguous();
  const at::Tensor tw = total_weight.to(self.scalar_type());
  const int64_t n = self.dim() == 1 ? 1 : self.size(0), c = self.size(-1);
  at::Tensor grad_input = at::zeros(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_nll_loss_backward", AT_WRAP([&] {
    using acc_t = at::opmath_type<scalar_t>;
    const int64_t* tp = ConstView<int64_t>(t);
    const scalar_t* wp = w.defined() ? ConstView<scalar_t>(w) : nullptr;
    const scalar_t* gp = ConstView<scalar_t>(g);
    const scalar_t* twp = ConstView<scalar_t>(tw);
    scalar_t* dx = View<scalar_t>(grad_input);
    const bool per_sample = reduction == kNone && self.dim() == 2;
    LaunchRows("xxnpu::nll_loss_backward", self.device().index(), n, 1, static_cast<uint64_t>(n * 24),
               static_cast<uint64_t>(2 * n), [=](int64_t begin, int64_t end) {
      const acc_t scale = reduction == kMean ? acc_t(1) / static_cast<acc_t>(*twp) : acc_t(1);
      for (int64_t i = begin; i < end; ++i) {
        const int64_t cls = tp[i];
        if (cls == ignore_index) continue;
        if (cls < 0 || cls >= c) return IndexOutOfRange("nll_loss_backward: Target " + std::to_string(cls) +
                                                              " is out of bounds.");
        const acc_t wv = wp ? static_cast<acc_t>(wp[cls]) : acc_t(1);
        const acc_t gv = per_sample ? static_cast<acc_t>(gp[i]) : static_cast<acc_t>(gp[0]);
        dx[i * c + cls] = static_cast<scalar_t>(-wv * gv * scale);
      }
      return absl::OkStatus();
    });
  }), XXNPU_NN_FLOAT_TYPES);
  return grad_input;
}

// ---- embedding backward: rows of grad summed into [num_weights, D].
//
// Blocks own ranges of weight rows. Each scans the indices in order and adds the grad rows
// that land in its range, whole rows at a time (SIMD for float32/bfloat16), so every
// weight row sums its contributions in index order whatever the thread count: as the CPU
// backend does, and deterministic. Every block reports the first bad index the same way.

// Grad elements per block, roughly (its share of the table); the index scan is repeated
// per block, so blocks stay few.
constexpr int64_t kEmbeddingElementsPerBlock = 1 << 16;

// float -> bfloat16, rounding to nearest even (NaN stays a quiet NaN), as c10::BFloat16's
// constructor does; written on the bits so that the loop vectorizes (the constructor
// call per element made the write-out the slowest part of a bfloat16 backward).
void FloatToBFloat16Row(const float* in, c10::BFloat16* out, int64_t n) {
  uint16_t* o = reinterpret_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, in + i, sizeof(bits));
    const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    o[i] = in[i] != in[i] ? uint16_t{0x7fc0} : static_cast<uint16_t>(rounded);
  }
}
constexpr int64_t kEmbeddingMaxBlocks = 64;

at::Tensor EmbeddingDenseBackward(const at::Tensor& grad_output, const at::Tensor& indices, c10::SymInt num_weights_s,
                                  c10::SymInt padding_idx_s, bool scale_grad_by_freq) {
  const int64_t num_weights = num_weights_s.expect_int();
  const int64_t padding_idx = padding_idx_s.expect_int();
  if (scale_grad_by_freq || !at::isFloatingType(grad_output.scalar_type())) {
    return FallbackForSymInt<at::_ops::embedding_dense_backward>::call(grad_output, indices, num_weights_s, padding_idx_s,
                                                                 scale_grad_by_freq);
  }
  const c10::DeviceGuard guard(grad_output.device());
  const int64_t d = grad_output.size(-1);
  const at::Tensor idx = indices.to(grad_output.device(), at::kLong).contiguous().view(-1);
  const int64_t n = idx.numel();
  const at::Tensor g = grad_output.contiguous().view({n, d});
  // Every element is written by the kernel (zeros where no index lands).
  at::Tensor out = at::empty({num_weights, d}, grad_output.options());
  if (out.numel() == 0) return out;
  const int64_t blocks =
      std::clamp<int64_t>(n * d / kEmbeddingElementsPerBlock, 1, std::min(num_weights, kEmbeddingMaxBlocks));
  const int64_t rows_per_block = (num_weights + blocks - 1) / blocks;
  AT_DISPATCH_V2(g.scalar_type(), "xxnpu_embedding_backward", AT_WRAP([&] {
    using acc_t = at::opmath_type<scalar_t>;
    const int64_t* ip = ConstView<int64_t>(idx);
    const scalar_t* gp = ConstView<scalar_t>(g);
    scalar_t* op = View<scalar_t>(out);
    const VecKernels* k = nullptr;
    VecDtype vt = VecDtype::kFloat;
    if constexpr (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, c10::BFloat16>) {
      k = &HostVecKernels();
      vt = std::is_same_v<scalar_t, float> ? VecDtype::kFloat : VecDtype::kBFloat16;
    }
    LaunchConfig cfg;
    cfg.name = "xxnpu::embedding_backward";
    cfg.grid = Dim3{static_cast<uint32_t>((num_weights + rows_per_block - 1) / rows_per_block), 1, 1};
    cfg.bytes = static_cast<uint64_t>(g.nbytes() + out.nbytes());
    cfg.flops = static_cast<uint64_t>(g.numel());
    auto body = [=](int64_t w0, int64_t w1) -> absl::Status {
      // float32 accumulates in the output itself; other dtypes in an acc_t copy of the range.
      constexpr bool kInPlace = std::is_same_v<scalar_t, acc_t>;
      // The buffer is kept per compute thread: a fresh one of this size per block would be
      // mmap'ed and page-faulted in by every call.
      static thread_local std::vector<acc_t> buffer;
      if (!kInPlace && buffer.size() < static_cast<size_t>((w1 - w0) * d)) buffer.resize((w1 - w0) * d);
      acc_t* acc = kInPlace ? reinterpret_cast<acc_t*>(op + w0 * d) : buffer.data();
      std::fill(acc, acc + (w1 - w0) * d, acc_t(0));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t row = ip[i];
        if (row < 0 || row >= num_weights) {
          return absl::OutOfRangeError("embedding_backward: index " + std::to_string(row) + " out of range [0, " +
                                       std::to_string(num_weights) + ")");
        }
        if (row == padding_idx || row < w0 || row >= w1) continue;
        acc_t* dst = acc + (row - w0) * d;
        const scalar_t* src = gp + i * d;
        if constexpr (std::is_same_v<acc_t, float>) {
          if (k != nullptr) {
            k->accumulate_row(vt, reinterpret_cast<float*>(dst), src, d);  // acc_t is float here
            continue;
          }
        }
        for (int64_t j = 0; j < d; ++j) dst[j] += static_cast<acc_t>(src[j]);
      }
      if constexpr (std::is_same_v<scalar_t, c10::BFloat16>) {
        FloatToBFloat16Row(reinterpret_cast<const float*>(acc), reinterpret_cast<c10::BFloat16*>(op + w0 * d),
                           (w1 - w0) * d);
      } else if constexpr (!kInPlace) {
        for (int64_t j = 0; j < (w1 - w0) * d; ++j) op[w0 * d + j] = static_cast<scalar_t>(acc[j]);
      }
      return absl::OkStatus();
    };
    CheckOk(xxnpuLaunchKernel(cfg, [body, num_weights, rows_per_block](BlockRange r) -> absl::Status {
      for (int64_t b = r.begin; b < r.end; ++b) {
        const absl::Status s = body(b * rows_per_block, std::min(num_weights, (b + 1) * rows_per_block));
        if (!s.ok()) return s;
      }
      return absl::OkStatus();
    }, CurrentXxnpuStreamHandle(g.device().index())), cfg.name);
  }), XXNPU_NN_FLOAT_TYPES);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax.out", &SoftmaxOut<false>);
  m.impl("_log_softmax.out", &SoftmaxOut<true>);
  m.impl("_softmax_backward_data.out", &SoftmaxBackwardOut<false>);
  m.impl("_log_softmax_backward_data.out", &SoftmaxBackwardOut<true>);
  m.impl("native_dropout", &NativeDropout);
  m.impl("native_dropout_backward", &NativeDropoutBackward);
  m.impl("nll_loss_forward", &NllLossForward);
  m.impl("nll_loss_backward", &NllLossBackward);
  m.impl("embedding_dense_backward", &EmbeddingDenseBackward);
}

}  // namespace
}  // namespace xxnpu
