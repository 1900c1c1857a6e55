// Reductions on xxnpu: sum, mean, prod, amax/amin, max/min (with indices), argmax/argmin,
// var/std (+ mean), vector norms, all/any.
//
// One engine (LaunchReduce) serves them all. On the host, the input is described as
// "kept" dims (one output element each) and "reduced" dims, with adjacent dims merged
// where memory allows. On the device, each output is reduced with a small accumulator
// (Reducer) in float32 or wider, in chunks combined pairwise-ish (cascade) for accuracy.
// When there are few outputs but much to reduce (a full sum), the reduction itself is split
// across blocks into partial accumulators, finished by a second kernel on the same stream.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/amax_meta.h>
#include <ATen/ops/amin_meta.h>
#include <ATen/ops/argmax_meta.h>
#include <ATen/ops/argmin_meta.h>
#include <ATen/ops/linalg_vector_norm_meta.h>
#include <ATen/ops/max_meta.h>
#include <ATen/ops/min_meta.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/cpu_fallback.h"
#include "ops/out_checks.h"
#include "ops/vec_kernels.h"
#include "ops/xxnpu_tensor.h"

namespace xxnpu {
namespace {

// ---------------------------------------------------------------------------------------
// Geometry

struct Dims {
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> strides;  // [operand][dim], in elements
};

// Drops size-1 dims and merges dim i into i+1 when every operand steps through them as one.
void Coalesce(Dims& d) {
  Dims out;
  out.strides.resize(d.strides.size());
  for (size_t i = 0; i < d.sizes.size(); ++i) {
    if (d.sizes[i] == 1) continue;
    if (!out.sizes.empty()) {
      bool mergeable = true;
      for (size_t t = 0; t < d.strides.size(); ++t) {
        mergeable &= out.strides[t].back() == d.strides[t][i] * d.sizes[i];
      }
      if (mergeable) {
        out.sizes.back() *= d.sizes[i];
        for (size_t t = 0; t < d.strides.size(); ++t) out.strides[t].back() = d.strides[t][i];
        continue;
      }
    }
    out.sizes.push_back(d.sizes[i]);
    for (size_t t = 0; t < d.strides.size(); ++t) out.strides[t].push_back(d.strides[t][i]);
  }
  d = std::move(out);
}

// Where each output element and each reduced element lives.
struct ReduceGeometry {
  Dims kept;     // operands: input, value output, index output (if any)
  Dims reduced;  // operand: input
  int64_t num_outputs = 1;
  int64_t reduce_size = 1;
};

// `outs` have the input's rank (keepdim-shaped views), size 1 along reduced dims.
ReduceGeometry MakeGeometry(const at::Tensor& in, const std::vector<at::Tensor>& outs, const std::vector<bool>& mask) {
  ReduceGeometry g;
  g.kept.strides.resize(1 + outs.size());
  g.reduced.strides.resize(1);
  for (int64_t d = 0; d < in.dim(); ++d) {
    if (mask[d]) {
      g.reduced.sizes.push_back(in.size(d));
      g.reduced.strides[0].push_back(in.stride(d));
      g.reduce_size *= in.size(d);
    } else {
      g.kept.sizes.push_back(in.size(d));
      g.kept.strides[0].push_back(in.stride(d));
      for (size_t t = 0; t < outs.size(); ++t) g.kept.strides[t + 1].push_back(outs[t].stride(d));
      g.num_outputs *= in.size(d);
    }
  }
  Coalesce(g.kept);
  Coalesce(g.reduced);
  return g;
}

// Element offsets of operand `t` for linear index `i` over `d` (last dim fastest).
int64_t OffsetOf(const Dims& d, size_t t, int64_t i) {
  int64_t off = 0;
  for (size_t k = d.sizes.size(); k-- > 0;) {
    off += (i % d.sizes[k]) * d.strides[t][k];
    i /= d.sizes[k];
  }
  return off;
}

// ---------------------------------------------------------------------------------------
// Reducers: Init() -> acc; Step(acc, x, index); Combine(acc, other) (other covers later
// indices); Value(acc, n) -> opmath result; Index(acc) for the index ops.

template <typename T>
bool IsNan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

template <typename T>
struct SumReducer {
  using acc_t = T;
  acc_t Init() const { return T(0); }
  void Step(acc_t& a, T x, int64_t) const { a += x; }
  void Combine(acc_t& a, const acc_t& b) const { a += b; }
  T Value(const acc_t& a, int64_t) const { return a; }
};

template <typename T>
struct MeanReducer : SumReducer<T> {
  T Value(const T& a, int64_t n) const { return a / static_cast<T>(n); }
};

template <typename T>
struct ProdReducer {
  using acc_t = T;
  acc_t Init() const { return T(1); }
  void Step(acc_t& a, T x, int64_t) const { a *= x; }
  void Combine(acc_t& a, const acc_t& b) const { a *= b; }
  T Value(const acc_t& a, int64_t) const { return a; }
};

// amax/amin: NaN wins.
template <typename T, bool kMax>
struct ExtremumReducer {
  using acc_t = T;
  acc_t Init() const {
    if constexpr (std::is_same_v<T, bool>) {
      return !kMax;
    } else if constexpr (std::numeric_limits<T>::has_infinity) {
      return kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    } else {
      return kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    }
  }
  void Step(acc_t& a, T x, int64_t) const {
    if (IsNan(a)) return;
    if (IsNan(x) || (kMax ? x > a : x < a)) a = x;
  }
  void Combine(acc_t& a, const acc_t& b) const { Step(a, b, 0); }
  T Value(const acc_t& a, int64_t) const { return a; }
};

// max/min with indices, argmax/argmin: the first extreme (or first NaN) wins.
template <typename T, bool kMax>
struct ArgReducer {
  struct acc_t {
    T value;
    int64_t index;
  };
  acc_t Init() const { return {ExtremumReducer<T, kMax>().Init(), -1}; }
  void Step(acc_t& a, T x, int64_t i) const {
    if (a.index < 0) {
      a = {x, i};
      return;
    }
    if (IsNan(a.value)) return;
    if (IsNan(x) || (kMax ? x > a.value : x < a.value)) a = {x, i};
  }
  void Combine(acc_t& a, const acc_t& b) const {
    if (b.index >= 0) Step(a, b.value, b.index);
  }
  T Value(const acc_t& a, int64_t) const { return a.value; }
  int64_t Index(const acc_t& a) const { return a.index < 0 ? 0 : a.index; }
};

// Welford's running mean and M2, merged with Chan et al.'s formula.
template <typename T>
struct WelfordReducer {
  struct acc_t {
    T mean = 0;
    T m2 = 0;
    int64_t n = 0;
  };
  double correction = 1;
  bool take_sqrt = false;
  acc_t Init() const { return {}; }
  void Step(acc_t& a, T x, int64_t) const {
    ++a.n;
    const T delta = x - a.mean;
    a.mean += delta / static_cast<T>(a.n);
    a.m2 += delta * (x - a.mean);
  }
  void Combine(acc_t& a, const acc_t& b) const {
    if (b.n == 0) return;
    if (a.n == 0) {
      a = b;
      return;
    }
    const int64_t n = a.n + b.n;
    const T delta = b.mean - a.mean;
    const T nb_over_n = static_cast<T>(b.n) / static_cast<T>(n);
    a.mean += delta * nb_over_n;
    a.m2 += b.m2 + delta * delta * static_cast<T>(a.n) * nb_over_n;
    a.n = n;
  }
  T Value(const acc_t& a, int64_t) const {
    const T divisor = std::max(T(0), static_cast<T>(a.n) - static_cast<T>(correction));
    const T var = a.m2 / divisor;  // 0/0 = NaN for a single element with correction 1, as on CPU
    return take_sqrt ? std::sqrt(var) : var;
  }
  T Mean(const acc_t& a) const { return a.n == 0 ? std::numeric_limits<T>::quiet_NaN() : a.mean; }
};

// sum(|x|^p)^(1/p), with the special cases of p = 0, 1, 2, +-inf.
template <typename T>
struct NormReducer {
  using acc_t = T;
  double p = 2;
  acc_t Init() const { return std::isinf(p) && p < 0 ? std::numeric_limits<T>::infinity() : T(0); }
  void Step(acc_t& a, T x, int64_t) const {
    const T v = std::abs(x);
    if (p == 2) {
      a += v * v;
    } else if (p == 1) {
      a += v;
    } else if (p == 0) {
      a += v != T(0) ? T(1) : T(0);
    } else if (std::isinf(p)) {
      Combine(a, v);
    } else {
      a += std::pow(v, static_cast<T>(p));
    }
  }
  void Combine(acc_t& a, const acc_t& b) const {
    if (std::isinf(p)) {
      if (std::isnan(a)) return;
      if (std::isnan(b) || (p > 0 ? b > a : b < a)) a = b;
    } else {
      a += b;
    }
  }
  T Value(const acc_t& a, int64_t) const {
    if (p == 2) return std::sqrt(a);
    if (p == 1 || p == 0 || std::isinf(p)) return a;
    return std::pow(a, static_cast<T>(1.0 / p));
  }
};

template <bool kAll>
struct BoolReducer {
  using acc_t = bool;
  acc_t Init() const { return kAll; }
  void Step(acc_t& a, bool x, int64_t) const { a = kAll ? (a && x) : (a || x); }
  void Combine(acc_t& a, const acc_t& b) const { Step(a, b, 0); }
  bool Value(const acc_t& a, int64_t) const { return a; }
};

template <typename R, typename = void>
struct HasIndex : std::false_type {};
template <typename R>
struct HasIndex<R, std::void_t<decltype(std::declval<const R&>().Index(std::declval<const typename R::acc_t&>()))>>
    : std::true_type {};

// ---------------------------------------------------------------------------------------
// The engine

constexpr int64_t kChunk = 4096;            // elements folded into one accumulator before combining
constexpr int64_t kSplitThreshold = 1 << 16;  // split the reduction itself above this size...
constexpr int64_t kFewOutputs = 8;            // ...when there are at most this many outputs

// Reductions with a SIMD kernel for dense runs of float32/bfloat16 (accumulating in float).
enum class VecReduce { kNone, kSum, kMax };
template <typename scalar_t, typename R>
inline constexpr VecReduce kVecReduce = [] {
  if constexpr (!std::is_same_v<scalar_t, float> && !std::is_same_v<scalar_t, c10::BFloat16>) {
    return VecReduce::kNone;
  } else if constexpr (std::is_same_v<R, SumReducer<float>> || std::is_same_v<R, MeanReducer<float>>) {
    return VecReduce::kSum;
  } else if constexpr (std::is_same_v<R, ExtremumReducer<float, true>>) {
    return VecReduce::kMax;
  } else {
    return VecReduce::kNone;
  }
}();

// The 2-norm of float32/bfloat16 has a SIMD sum of squares (p is known at run time only).
template <typename scalar_t, typename R>
inline constexpr bool kIsVecNorm =
    (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, c10::BFloat16>) && std::is_same_v<R, NormReducer<float>>;

// argmax (and max.dim's indices) of float32/bfloat16 over a dense run: the SIMD max of
// each block of kArgBlock elements, the first block holding the largest (or the first
// NaN), then a scalar search of that block for the first element equal to it: the element
// the scalar fold would pick (the first extreme wins). A greedy decode step's argmax over
// a [4, 2048] logits row took 11 us on the device scalar, branching on every element;
// searching the whole run for the maximum took 5x the SIMD max itself.
template <typename scalar_t, typename R>
inline constexpr bool kIsVecArgMax = (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, c10::BFloat16>) &&
                                     std::is_same_v<R, ArgReducer<float, true>>;

constexpr int64_t kArgBlock = 512;

template <typename scalar_t>
int64_t FirstEqual(const scalar_t* p, int64_t n, float value) {
  if (value != value) {
    for (int64_t j = 0; j < n; ++j) {
      if (IsNan(static_cast<float>(p[j]))) return j;
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      if (static_cast<float>(p[j]) == value) return j;
    }
  }
  TORCH_INTERNAL_ASSERT(false, "argmax: the maximum ", value, " is not in its row");
}

// Folds reduced elements [begin, end) of output `o` (offset `in_off` into the input) into `acc`.
template <typename scalar_t, typename R>
void ReduceRange(const R& r, const scalar_t* in, const Dims& red, int64_t begin, int64_t end,
                 typename R::acc_t& acc) {
  using opmath_t = typename std::conditional_t<std::is_same_v<scalar_t, bool>, bool, at::opmath_type<scalar_t>>;
  const size_t nd = red.sizes.size();
  if (nd == 0) {
    if (begin < end) r.Step(acc, static_cast<opmath_t>(in[0]), 0);
    return;
  }
  const int64_t inner = red.sizes[nd - 1];
  const int64_t inner_stride = red.strides[0][nd - 1];
  int64_t i = begin;
  while (i < end) {
    // A run along the innermost reduced dim, folded in chunks.
    const int64_t pos = i % inner;
    const int64_t run = std::min(inner - pos, end - i);
    const scalar_t* p = in + OffsetOf(red, 0, i);
    if constexpr (kIsVecNorm<scalar_t, R>) {
      if (inner_stride == 1 && r.p == 2) {  // the 2-norm of a dense run: SIMD sum of squares
        const VecDtype dtype = std::is_same_v<scalar_t, float> ? VecDtype::kFloat : VecDtype::kBFloat16;
        r.Combine(acc, HostVecKernels().sum_squares(dtype, p, run));
        i += run;
        continue;
      }
    }
    if constexpr (kIsVecArgMax<scalar_t, R>) {
      if (inner_stride == 1) {
        const VecDtype dtype = std::is_same_v<scalar_t, float> ? VecDtype::kFloat : VecDtype::kBFloat16;
        const VecKernels& k = HostVecKernels();
        float best = 0;
        int64_t best_block = -1;
        for (int64_t b = 0; b < run; b += kArgBlock) {
          const float m = k.max(dtype, p + b, std::min(kArgBlock, run - b));
          if (best_block < 0 || m > best || (m != m)) {
            best = m;
            best_block = b;
            if (m != m) break;  // NaN wins over anything after it
          }
        }
        const int64_t n = std::min(kArgBlock, run - best_block);
        r.Combine(acc, typename R::acc_t{best, i + best_block + FirstEqual(p + best_block, n, best)});
        i += run;
        continue;
      }
    }
    if constexpr (kVecReduce<scalar_t, R> != VecReduce::kNone) {
      if (inner_stride == 1) {  // a dense run: the SIMD kernel (vec_kernels.h)
        const VecDtype dtype = std::is_same_v<scalar_t, float> ? VecDtype::kFloat : VecDtype::kBFloat16;
        const VecKernels& k = HostVecKernels();
        r.Combine(acc, kVecReduce<scalar_t, R> == VecReduce::kSum ? k.sum(dtype, p, run) : k.max(dtype, p, run));
        i += run;
        continue;
      }
    }
    for (int64_t c = 0; c < run; c += kChunk) {
      typename R::acc_t part = r.Init();
      const int64_t stop = std::min(run, c + kChunk);
      for (int64_t k = c; k < stop; ++k) r.Step(part, static_cast<opmath_t>(p[k * inner_stride]), i + k);
      r.Combine(acc, part);
    }
    i += run;
  }
}

template <typename scalar_t, typename R>
void Write(const R& r, const typename R::acc_t& acc, int64_t n, scalar_t* out, int64_t* index) {
  if (out != nullptr) *out = static_cast<scalar_t>(r.Value(acc, n));
  if constexpr (HasIndex<R>::value) {
    if (index != nullptr) *index = r.Index(acc);
  }
}

// Input elements one block of the one-accumulator-per-output form reduces.
constexpr int64_t kBlockElements = 1 << 14;

// A reduction over outer dims only (sum(0) of a row-major matrix): the input is contiguous
// along the innermost kept dim, and the reduced dims step over whole rows of it. Walking
// each output's column would read one element per cache line; instead each block keeps a
// tile of kOuterTile outputs as float accumulators and adds whole row segments into them
// (SIMD along the inner dim), down all the reduced rows.
constexpr int64_t kOuterTile = 256;
// Rows summed in float into a fresh partial tile before it is added to the total (in
// double): a long column keeps float's accuracy, as the CPU's cascade sum does.
constexpr int64_t kOuterChunkRows = 64;

bool ReducesOuterDims(const ReduceGeometry& g) {
  if (g.kept.sizes.empty() || g.reduced.sizes.empty() || g.reduce_size < 2) return false;
  return g.kept.strides[0].back() == 1 && g.reduced.strides[0].back() != 1;
}

template <typename scalar_t, typename R>
void LaunchOuterReduce(LaunchConfig cfg, xxnpuStream_t stream, const R& r, const ReduceGeometry& g,
                       const scalar_t* in_p, scalar_t* out_p) {
  constexpr bool kMax = kVecReduce<scalar_t, R> == VecReduce::kMax;
  const VecDtype dtype = std::is_same_v<scalar_t, float> ? VecDtype::kFloat : VecDtype::kBFloat16;
  const int64_t inner = g.kept.sizes.back(), outer = g.num_outputs / inner;
  const int64_t tiles = (inner + kOuterTile - 1) / kOuterTile, items = outer * tiles;
  const int64_t per_block = std::max<int64_t>(1, (int64_t{1} << 16) / (g.reduce_size * std::min(inner, kOuterTile)));
  cfg.grid = Dim3{static_cast<uint32_t>((items + per_block - 1) / per_block), 1, 1};
  const VecKernels* k = &HostVecKernels();
  CheckOk(xxnpuLaunchKernel(cfg, [r, g, in_p, out_p, k, dtype, inner, tiles, items, per_block](BlockRange br) {
    float part[kOuterTile];
    double total[kOuterTile];
    const int64_t out_stride = g.kept.strides[1].back();
    for (int64_t item = br.begin * per_block; item < std::min(items, br.end * per_block); ++item) {
      const int64_t o = item / tiles, j0 = (item % tiles) * kOuterTile, w = std::min(kOuterTile, inner - j0);
      const int64_t first = o * inner + j0;  // the tile's first output, linear
      const scalar_t* base = in_p + OffsetOf(g.kept, 0, first);
      std::fill(total, total + w, 0.0);
      // amax accumulates in `part` over all rows; sums restart it every chunk.
      if (kMax) std::fill(part, part + w, -std::numeric_limits<float>::infinity());
      for (int64_t c = 0; c < g.reduce_size; c += kOuterChunkRows) {
        const int64_t stop = std::min(g.reduce_size, c + kOuterChunkRows);
        float* acc = part;
        if (!kMax) std::fill(part, part + w, 0.0f);
        for (int64_t i = c; i < stop; ++i) {
          const scalar_t* row = base + OffsetOf(g.reduced, 0, i);
          if (kMax) {
            k->max_row(dtype, acc, row, w);
          } else {
            k->accumulate_row(dtype, acc, row, w);
          }
        }
        if (!kMax) {
          for (int64_t j = 0; j < w; ++j) total[j] += part[j];
        }
      }
      scalar_t* out = out_p + OffsetOf(g.kept, 1, first);
      for (int64_t j = 0; j < w; ++j) {
        const float value = kMax ? part[j] : static_cast<float>(total[j]);
        Write<scalar_t>(r, value, g.reduce_size, out + j * out_stride, nullptr);
      }
    }
    return absl::OkStatus();
  }, stream), cfg.name);
}

// Reduces `in` (on xxnpu) over the dims in `mask` into `out` (and `index`), both
// keepdim-shaped views; `out` may be undefined for index-only ops.
template <typename scalar_t, typename R>
void LaunchReduce(const char* name, const R& r, const at::Tensor& in, const at::Tensor& out,
                  const at::Tensor& index = at::Tensor()) {
  std::vector<at::Tensor> outs;
  const at::Tensor& value_out = out.defined() ? out : index;
  outs.push_back(value_out);
  if (index.defined()) outs.push_back(index);
  std::vector<bool> mask(in.dim());
  for (int64_t d = 0; d < in.dim(); ++d) mask[d] = value_out.size(d) == 1 && in.size(d) != 1;
  ReduceGeometry g = MakeGeometry(in, outs, mask);
  if (g.num_outputs == 0) return;
  const c10::DeviceIndex device = in.device().index();
  auto* in_p = static_cast<const scalar_t*>(DeviceView(in.const_data_ptr()));
  auto* out_p = out.defined() ? static_cast<scalar_t*>(DeviceView(out.data_ptr())) : nullptr;
  auto* idx_p = index.defined() ? static_cast<int64_t*>(DeviceView(index.data_ptr())) : nullptr;
  const size_t idx_operand = out.defined() ? 2 : 1;

  LaunchConfig cfg;
  cfg.name = name;
  cfg.bytes = static_cast<uint64_t>(in.numel()) * in.element_size() +
              static_cast<uint64_t>(g.num_outputs) * (out.defined() ? out.element_size() : 0) +
              static_cast<uint64_t>(g.num_outputs) * (index.defined() ? sizeof(int64_t) : 0);
  cfg.flops = static_cast<uint64_t>(in.numel());
  const xxnpuStream_t stream = CurrentXxnpuStreamHandle(device);

  if (g.num_outputs <= kFewOutputs && g.reduce_size >= kSplitThreshold) {
    // Split the reduction: partial accumulators per (output, chunk), then a finishing kernel.
    const int64_t chunks = (g.reduce_size + kSplitThreshold - 1) / kSplitThreshold;
    // An array, not std::vector (whose bool specialisation has no element references).
    const int64_t count = g.num_outputs * chunks;
    std::shared_ptr<typename R::acc_t[]> partials(new typename R::acc_t[count]);
    for (int64_t i = 0; i < count; ++i) partials[i] = r.Init();
    cfg.grid = Dim3{static_cast<uint32_t>(g.num_outputs * chunks), 1, 1};
    CheckOk(xxnpuLaunchKernel(cfg, [r, g, in_p, partials, chunks](BlockRange br) {
      for (int64_t b = br.begin; b < br.end; ++b) {
        const int64_t o = b / chunks, c = b % chunks;
        const int64_t begin = c * kSplitThreshold, end = std::min(g.reduce_size, begin + kSplitThreshold);
        ReduceRange<scalar_t>(r, in_p + OffsetOf(g.kept, 0, o), g.reduced, begin, end, partials[b]);
      }
      return absl::OkStatus();
    }, stream), name);
    LaunchConfig fin;
    fin.name = name;
    fin.grid = Dim3{1, 1, 1};
    CheckOk(xxnpuLaunchKernel(fin, [r, g, out_p, idx_p, idx_operand, partials, chunks](BlockRange) {
      for (int64_t o = 0; o < g.num_outputs; ++o) {
        typename R::acc_t acc = r.Init();
        for (int64_t c = 0; c < chunks; ++c) r.Combine(acc, partials[o * chunks + c]);
        Write<scalar_t>(r, acc, g.reduce_size, out_p ? out_p + OffsetOf(g.kept, 1, o) : nullptr,
                        idx_p ? idx_p + OffsetOf(g.kept, idx_operand, o) : nullptr);
      }
      return absl::OkStatus();
    }, stream), name);
    return;
  }

  if constexpr (kVecReduce<scalar_t, R> != VecReduce::kNone) {
    if (!index.defined() && ReducesOuterDims(g)) {
      LaunchOuterReduce<scalar_t>(cfg, stream, r, g, in_p, out_p);
      return;
    }
  }

  // One accumulator per output; outputs split across blocks of about kBlockElements, so
  // that even a few hundred rows keep every compute thread busy.
  const int64_t per_block = std::max<int64_t>(1, kBlockElements / std::max<int64_t>(1, g.reduce_size));
  cfg.grid = Dim3{static_cast<uint32_t>((g.num_outputs + per_block - 1) / per_block), 1, 1};
  CheckOk(xxnpuLaunchKernel(cfg, [r, g, in_p, out_p, idx_p, idx_operand, per_block](BlockRange br) {
    const int64_t first = br.begin * per_block, last = std::min(g.num_outputs, br.end * per_block);
    for (int64_t o = first; o < last; ++o) {
      typename R::acc_t acc = r.Init();
      ReduceRange<scalar_t>(r, in_p + OffsetOf(g.kept, 0, o), g.reduced, 0, g.reduce_size, acc);
      Write<scalar_t>(r, acc, g.reduce_size, out_p ? out_p + OffsetOf(g.kept, 1, o) : nullptr,
                      idx_p ? idx_p + OffsetOf(g.kept, idx_operand, o) : nullptr);
    }
    return absl::OkStatus();
  }, stream), name);
}

// ---------------------------------------------------------------------------------------
// Op plumbing

// The dims an op reduces: `dims` wrapped, or all of them when absent/empty (as ATen's
// reductions treat `dim=None` and `dim=[]`).
std::vector<bool> ReduceMask(const at::Tensor& self, at::OptionalIntArrayRef dims) {
  std::vector<bool> mask(self.dim(), false);
  if (!dims.has_value() || dims->empty()) {
    std::fill(mask.begin(), mask.end(), true);
    return mask;
  }
  const auto bits = at::dim_list_to_bitset(*dims, self.dim());
  for (int64_t d = 0; d < self.dim(); ++d) mask[d] = bits[d];
  return mask;
}

std::vector<int64_t> ReducedShape(const at::Tensor& self, const std::vector<bool>& mask, bool keepdim) {
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!mask[d]) {
      shape.push_back(self.size(d));
    } else if (keepdim) {
      shape.push_back(1);
    }
  }
  return shape;
}

// `out` resized to the result shape, returned as a keepdim-shaped view.
at::Tensor PrepareOut(at::Tensor& out, const at::Tensor& self, const std::vector<bool>& mask, bool keepdim) {
  at::native::resize_output(out, ReducedShape(self, mask, keepdim));
  at::Tensor view = out;
  if (!keepdim) {
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (mask[d]) view = view.unsqueeze(d);
    }
  }
  return view;
}

void CheckNonEmpty(const at::Tensor& self, const std::vector<bool>& mask, const char* op) {
  if (self.numel() != 0) return;
  for (int64_t d = 0; d < self.dim(); ++d) {
    TORCH_CHECK(!mask[d] || self.size(d) != 0, op, "(): Expected reduction dim ", d,
                " to have non-zero size.");
  }
}

// The input in the dtype the reduction computes in.
at::Tensor AsDtype(const at::Tensor& self, at::ScalarType dtype) {
  return self.scalar_type() == dtype ? self : self.to(dtype);
}

#define XXNPU_REDUCE_FLOAT_TYPES AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16
#define XXNPU_REDUCE_ALL_TYPES AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16

// sum / mean / prod output dtype: `dtype` if given, else integers (and bool) widen to int64.
at::ScalarType SumDtype(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (dtype) return *dtype;
  return at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type();
}

template <template <typename> class Reducer>
at::Tensor& SumLike(const char* name, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out, bool float_only) {
  CheckSameDevice(name, "out", out, self.device());
  const at::ScalarType t = dtype ? *dtype : out.scalar_type();
  TORCH_CHECK(!float_only || at::isFloatingType(t) || at::isComplexType(t), name,
              "(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
              "Got: ", self.scalar_type());
  const c10::DeviceGuard guard(self.device());
  const auto mask = ReduceMask(self, dim);
  at::Tensor view = PrepareOut(out, self, mask, keepdim);
  const at::Tensor in = AsDtype(self, t);
  AT_DISPATCH_V2(t, "xxnpu_sum", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    LaunchReduce<scalar_t>(name, Reducer<opmath_t>(), in, view);
  }), XXNPU_REDUCE_ALL_TYPES);
  return out;
}

at::Tensor& SumOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (at::isComplexType(self.scalar_type()) || at::isComplexType(out.scalar_type())) {
    return FallbackFor<at::_ops::sum_IntList_out>::call(self, dim, keepdim, dtype, out);
  }
  return SumLike<SumReducer>("xxnpu::sum", self, dim, keepdim, dtype, out, false);
}

at::Tensor& MeanOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<at::ScalarType> dtype, at::Tensor& out) {
  if (at::isComplexType(self.scalar_type()) || at::isComplexType(out.scalar_type())) {
    return FallbackFor<at::_ops::mean_out>::call(self, dim, keepdim, dtype, out);
  }
  return SumLike<MeanReducer>("xxnpu::mean", self, dim, keepdim, dtype, out, true);
}

at::Tensor& ProdIntOut(const at::Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype,
                       at::Tensor& out) {
  if (at::isComplexType(self.scalar_type())) {
    return FallbackFor<at::_ops::prod_int_out>::call(self, dim, keepdim, dtype, out);
  }
  return SumLike<ProdReducer>("xxnpu::prod", self, at::IntArrayRef{dim}, keepdim, dtype, out, false);
}

at::Tensor Prod(const at::Tensor& self, std::optional<at::ScalarType> dtype) {
  if (at::isComplexType(self.scalar_type())) return FallbackFor<at::_ops::prod>::call(self, dtype);
  at::Tensor out = at::empty({0}, self.options().dtype(SumDtype(self, dtype)));
  return SumLike<ProdReducer>("xxnpu::prod", self, std::nullopt, false, dtype, out, false);
}

template <bool kMax>
at::Tensor& AmaxOut(const at::Tensor& self, at::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  const char* name = kMax ? "xxnpu::amax" : "xxnpu::amin";
  if constexpr (kMax) {
    CheckOutWithMeta<at::meta::structured_amax>(out, self, dim, keepdim);
  } else {
    CheckOutWithMeta<at::meta::structured_amin>(out, self, dim, keepdim);
  }
  if (at::isComplexType(self.scalar_type())) {
    TORCH_CHECK(false, name, "(): not implemented for complex tensors");
  }
  const auto mask = ReduceMask(self, dim);
  CheckNonEmpty(self, mask, kMax ? "amax" : "amin");
  const c10::DeviceGuard guard(self.device());
  at::Tensor view = PrepareOut(out, self, mask, keepdim);
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_amax", AT_WRAP([&] {
    using opmath_t = std::conditional_t<std::is_same_v<scalar_t, bool>, bool, at::opmath_type<scalar_t>>;
    LaunchReduce<scalar_t>(name, ExtremumReducer<opmath_t, kMax>(), self, view);
  }), XXNPU_REDUCE_ALL_TYPES, at::kBool);
  return out;
}

// max.dim / min.dim and argmax / argmin.
template <bool kMax>
void ArgReduce(const char* name, const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
               at::Tensor* values, at::Tensor& indices) {
  TORCH_CHECK(!at::isComplexType(self.scalar_type()), name, "(): not implemented for complex tensors");
  std::vector<bool> mask;
  if (dim) {
    const int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    mask.assign(self.dim(), false);
    if (self.dim() > 0) mask[d] = true;
    TORCH_CHECK(self.dim() == 0 || self.size(d) != 0, name, "(): Expected reduction dim ", d,
                " to have non-zero size.");
  } else {
    TORCH_CHECK(self.numel() != 0, name, "(): Expected reduction dim to be specified for input.numel() == 0.");
    mask.assign(self.dim(), true);
  }
  const c10::DeviceGuard guard(self.device());
  // Without a dim, indices count in the flattened (row-major) tensor.
  const at::Tensor in = dim ? self : self.reshape({self.numel()});
  at::native::resize_output(indices, ReducedShape(self, mask, keepdim));
  const at::Tensor index_view = dim ? PrepareOut(indices, self, mask, keepdim) : indices.reshape({1});
  at::Tensor value_view;
  if (values != nullptr) value_view = PrepareOut(*values, self, mask, keepdim);
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_arg_reduce", AT_WRAP([&] {
    using opmath_t = std::conditional_t<std::is_same_v<scalar_t, bool>, bool, at::opmath_type<scalar_t>>;
    LaunchReduce<scalar_t>(name, ArgReducer<opmath_t, kMax>(), in, value_view, index_view);
  }), XXNPU_REDUCE_ALL_TYPES, at::kBool);
}

template <bool kMax>
std::tuple<at::Tensor&, at::Tensor&> MaxDimOut(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                                               at::Tensor& indices) {
  if constexpr (kMax) {
    CheckOutsWithMeta<at::meta::structured_max_dim>(values, indices, self, dim, keepdim);
  } else {
    CheckOutsWithMeta<at::meta::structured_min_dim>(values, indices, self, dim, keepdim);
  }
  ArgReduce<kMax>(kMax ? "xxnpu::max" : "xxnpu::min", self, dim, keepdim, &values, indices);
  return {values, indices};
}

template <bool kMax>
at::Tensor& ArgmaxOut(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim, at::Tensor& out) {
  if constexpr (kMax) {
    CheckOutWithMeta<at::meta::structured_argmax>(out, self, dim, keepdim);
  } else {
    CheckOutWithMeta<at::meta::structured_argmin>(out, self, dim, keepdim);
  }
  ArgReduce<kMax>(kMax ? "xxnpu::argmax" : "xxnpu::argmin", self, dim, keepdim, nullptr, out);
  return out;
}

template <bool kMax>
at::Tensor MaxAll(const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, kMax ? "max" : "min",
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the "
              "'dim' argument.");
  at::Tensor out = at::empty({}, self.options());
  return AmaxOut<kMax>(self, {}, false, out);
}

template <bool kMax>
at::Tensor& MaxAllOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(self.numel() > 0, kMax ? "max" : "min", "(): Expected reduction dim to be specified for input.numel() == 0.");
  // As the CPU's max_unary_out: same device, any dtype the input casts to.
  CheckOutDevice(out, self.device());
  CheckCastsToOut(self.scalar_type(), out);
  if (out.scalar_type() == self.scalar_type()) return AmaxOut<kMax>(self, {}, false, out);
  at::native::resize_output(out, {});
  at::Tensor value = at::empty({}, self.options());
  out.copy_(AmaxOut<kMax>(self, {}, false, value));
  return out;
}

// var / std (and with the mean).
void VarStd(const char* name, const at::Tensor& self, at::OptionalIntArrayRef dim,
            const std::optional<at::Scalar>& correction, bool keepdim, bool take_sqrt, at::Tensor& out,
            at::Tensor* mean_out) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), name, ": only supports floating-point dtypes, got ",
              self.scalar_type());
  CheckOutDevice(out, self.device());
  CheckCastsToOut(self.scalar_type(), out);
  if (mean_out != nullptr) CheckOutDevice(*mean_out, self.device());
  if (out.scalar_type() != self.scalar_type()) {
    // The kernel writes the input's dtype: compute into one, then cast into out.
    at::Tensor value = at::empty({0}, self.options());
    VarStd(name, self, dim, correction, keepdim, take_sqrt, value, mean_out);
    at::native::resize_output(out, value.sizes());
    out.copy_(value);
    return;
  }
  const c10::DeviceGuard guard(self.device());
  const auto mask = ReduceMask(self, dim);
  at::Tensor view = PrepareOut(out, self, mask, keepdim);
  at::Tensor mean_view;
  if (mean_out != nullptr) mean_view = PrepareOut(*mean_out, self, mask, keepdim);
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_var", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    WelfordReducer<opmath_t> r;
    r.correction = correction ? correction->toDouble() : 1.0;
    r.take_sqrt = take_sqrt;
    LaunchReduce<scalar_t>(name, r, self, view);
    if (mean_out != nullptr) LaunchReduce<scalar_t>("xxnpu::mean", MeanReducer<opmath_t>(), self, mean_view);
  }), XXNPU_REDUCE_FLOAT_TYPES);
}

at::Tensor Var(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
               bool keepdim) {
  if (at::isComplexType(self.scalar_type())) return FallbackFor<at::_ops::var_correction>::call(self, dim, correction, keepdim);
  at::Tensor out = at::empty({0}, self.options());
  VarStd("xxnpu::var", self, dim, correction, keepdim, false, out, nullptr);
  return out;
}
at::Tensor& VarOut(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                   bool keepdim, at::Tensor& out) {
  if (at::isComplexType(self.scalar_type())) {
    return FallbackFor<at::_ops::var_correction_out>::call(self, dim, correction, keepdim, out);
  }
  VarStd("xxnpu::var", self, dim, correction, keepdim, false, out, nullptr);
  return out;
}
at::Tensor Std(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
               bool keepdim) {
  if (at::isComplexType(self.scalar_type())) return FallbackFor<at::_ops::std_correction>::call(self, dim, correction, keepdim);
  at::Tensor out = at::empty({0}, self.options());
  VarStd("xxnpu::std", self, dim, correction, keepdim, true, out, nullptr);
  return out;
}
at::Tensor& StdOut(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<at::Scalar>& correction,
                   bool keepdim, at::Tensor& out) {
  if (at::isComplexType(self.scalar_type())) {
    return FallbackFor<at::_ops::std_correction_out>::call(self, dim, correction, keepdim, out);
  }
  VarStd("xxnpu::std", self, dim, correction, keepdim, true, out, nullptr);
  return out;
}
std::tuple<at::Tensor, at::Tensor> VarMean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                           const std::optional<at::Scalar>& correction, bool keepdim) {
  if (at::isComplexType(self.scalar_type())) {
    return FallbackFor<at::_ops::var_mean_correction>::call(self, dim, correction, keepdim);
  }
  at::Tensor var = at::empty({0}, self.options()), mean = at::empty({0}, self.options());
  VarStd("xxnpu::var", self, dim, correction, keepdim, false, var, &mean);
  return {var, mean};
}
std::tuple<at::Tensor, at::Tensor> StdMean(const at::Tensor& self, at::OptionalIntArrayRef dim,
                                           const std::optional<at::Scalar>& correction, bool keepdim) {
  if (at::isComplexType(self.scalar_type())) {
    return FallbackFor<at::_ops::std_mean_correction>::call(self, dim, correction, keepdim);
  }
  at::Tensor std = at::empty({0}, self.options()), mean = at::empty({0}, self.options());
  VarStd("xxnpu::std", self, dim, correction, keepdim, true, std, &mean);
  return {std, mean};
}

at::Tensor& VectorNormOut(const at::Tensor& self, const at::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const at::ScalarType t = dtype ? *dtype : out.scalar_type();
  if (at::isComplexType(self.scalar_type()) || !at::isFloatingType(t)) {
    return FallbackFor<at::_ops::linalg_vector_norm_out>::call(self, ord, dim, keepdim, dtype, out);
  }
  CheckOutWithMeta<at::meta::structured_linalg_vector_norm>(out, self, ord, dim, keepdim, dtype);
  const double p = ord.toDouble();
  const auto mask = ReduceMask(self, dim);
  if (p < 0 || std::isinf(p)) CheckNonEmpty(self, mask, "linalg.vector_norm");
  const c10::DeviceGuard guard(self.device());
  at::Tensor view = PrepareOut(out, self, mask, keepdim);
  const at::Tensor in = AsDtype(self, t);
  AT_DISPATCH_V2(t, "xxnpu_norm", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    NormReducer<opmath_t> r;
    r.p = p;
    LaunchReduce<scalar_t>("xxnpu::vector_norm", r, in, view);
  }), XXNPU_REDUCE_FLOAT_TYPES);
  return out;
}

template <bool kAll>
at::Tensor& AllAnyDimsOut(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, at::Tensor& out) {
  const char* name = kAll ? "xxnpu::all" : "xxnpu::any";
  CheckSameDevice(name, "out", out, self.device());
  TORCH_CHECK(out.scalar_type() == at::kBool || out.scalar_type() == at::kByte, name,
              ": expected a bool or uint8 out tensor, got ", out.scalar_type());
  if (at::isComplexType(self.scalar_type())) {
    return kAll ? FallbackFor<at::_ops::all_dims_out>::call(self, dim, keepdim, out)
                : FallbackFor<at::_ops::any_dims_out>::call(self, dim, keepdim, out);
  }
  const c10::DeviceGuard guard(self.device());
  const auto mask = ReduceMask(self, dim);
  at::Tensor view = PrepareOut(out, self, mask, keepdim);
  const at::Tensor in = AsDtype(self, at::kBool);
  if (out.scalar_type() == at::kBool) {
    LaunchReduce<bool>(name, BoolReducer<kAll>(), in, view);
  } else {
    at::Tensor tmp = at::empty(view.sizes(), out.options().dtype(at::kBool));
    LaunchReduce<bool>(name, BoolReducer<kAll>(), in, tmp);
    view.copy_(tmp);
  }
  return out;
}
template <bool kAll>
at::Tensor& AllAnyDimOut(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return AllAnyDimsOut<kAll>(self, at::IntArrayRef{dim}, keepdim, out);
}
template <bool kAll>
at::Tensor& AllAnyAllOut(const at::Tensor& self, at::Tensor& out) {
  return AllAnyDimsOut<kAll>(self, std::nullopt, false, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sum.IntList_out", &SumOut);
  m.impl("mean.out", &MeanOut);
  m.impl("prod.int_out", &ProdIntOut);
  m.impl("prod", &Prod);
  m.impl("amax.out", &AmaxOut<true>);
  m.impl("amin.out", &AmaxOut<false>);
  m.impl("max.dim_max", &MaxDimOut<true>);
  m.impl("min.dim_min", &MaxDimOut<false>);
  m.impl("max", &MaxAll<true>);
  m.impl("min", &MaxAll<false>);
  m.impl("max.unary_out", &MaxAllOut<true>);
  m.impl("min.unary_out", &MaxAllOut<false>);
  m.impl("argmax.out", &ArgmaxOut<true>);
  m.impl("argmin.out", &ArgmaxOut<false>);
  m.impl("var.correction", &Var);
  m.impl("var.correction_out", &VarOut);
  m.impl("std.correction", &Std);
  m.impl("std.correction_out", &StdOut);
  m.impl("var_mean.correction", &VarMean);
  m.impl("std_mean.correction", &StdMean);
  m.impl("linalg_vector_norm.out", &VectorNormOut);
  m.impl("all.dims_out", &AllAnyDimsOut<true>);
  m.impl("all.out", &AllAnyDimOut<true>);
  m.impl("all.all_out", &AllAnyAllOut<true>);
  m.impl("any.dims_out", &AllAnyDimsOut<false>);
  m.impl("any.out", &AllAnyDimOut<false>);
  m.impl("any.all_out", &AllAnyAllOut<false>);
}

}  // namespace
}  // namespace xxnpu
