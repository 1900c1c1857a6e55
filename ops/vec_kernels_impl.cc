// The SIMD inner loops behind vec_kernels.h. This file is compiled once per CPU capability
// (DEFAULT, AVX2, AVX512: xxnpu_cpu_kernels in bazel/xxnpu.bzl), each time with torch's
// CPU_CAPABILITY macros and flags, so at::vec::Vectorized<float> is 8 or 16 lanes wide
// (and Sleef-backed) or the portable form. Only inner loops live here: everything compiled
// in this file is compiled three times.
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "ops/vec_io.h"
#include "ops/vec_kernels.h"

#ifndef CPU_CAPABILITY
#error "vec_kernels_impl.cc is built by xxnpu_cpu_kernels, which defines CPU_CAPABILITY"
#endif

namespace xxnpu {
namespace CPU_CAPABILITY {
namespace {

using vec_io::BFloat16;
using vec_io::Io;
using vec_io::Vec;

// Calls body(i, count) for each vector step of a row of `n` elements of T: count is a
// whole step except at the row's tail, where Io's partial loads and stores take over.
template <typename T, typename Body>
void ForChunks(int64_t n, Body body) {
  constexpr int64_t kStep = Io<T>::kStep;
  for (int64_t i = 0; i < n; i += kStep) body(i, std::min(kStep, n - i));
}

template <typename T, typename F>
void Map1(void* out_p, const void* in_p, int64_t n, F f) {
  T* out = static_cast<T*>(out_p);
  const T* in = static_cast<const T*>(in_p);
  ForChunks<T>(n, [&](int64_t i, int64_t c) {
    Vec v[Io<T>::kParts];
    Io<T>::Load(in + i, c, v);
    for (auto& x : v) x = f(x);
    Io<T>::Store(out + i, c, v);
  });
}

template <typename T>
void LoadOperand(const VecOperand& o, int64_t i, int64_t c, Vec* v) {
  if (o.data == nullptr) {
    for (int k = 0; k < Io<T>::kParts; ++k) v[k] = Vec(o.scalar);
  } else {
    Io<T>::Load(static_cast<const T*>(o.data) + i, c, v);
  }
}

template <typename T, typename F>
void Map2(void* out_p, VecOperand a, VecOperand b, int64_t n, F f) {
  T* out = static_cast<T*>(out_p);
  ForChunks<T>(n, [&](int64_t i, int64_t c) {
    Vec va[Io<T>::kParts], vb[Io<T>::kParts];
    LoadOperand<T>(a, i, c, va);
    LoadOperand<T>(b, i, c, vb);
    for (int k = 0; k < Io<T>::kParts; ++k) va[k] = f(va[k], vb[k]);
    Io<T>::Store(out + i, c, va);
  });
}

// A comparison: `f` returns 1.0f / 0.0f lanes (Vectorized's eq/lt/...), stored as bool.
template <typename T, typename F>
void Compare(void* out_p, VecOperand a, VecOperand b, int64_t n, F f) {
  bool* out = static_cast<bool*>(out_p);
  ForChunks<T>(n, [&](int64_t i, int64_t c) {
    Vec va[Io<T>::kParts], vb[Io<T>::kParts];
    LoadOperand<T>(a, i, c, va);
    LoadOperand<T>(b, i, c, vb);
    float r[Io<T>::kStep];
    for (int k = 0; k < Io<T>::kParts; ++k) f(va[k], vb[k]).store(r + k * Vec::size());
    for (int64_t j = 0; j < c; ++j) out[i + j] = r[j] != 0.0f;
  });
}

constexpr float kSqrt1_2 = 0.70710678118654752440f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;  // the normal pdf's 1/sqrt(2 pi)
constexpr float kGeluTanhCoeff = 0.044715f;

// A lambda, so that Map1 gets a callable it can inline rather than a function pointer.
constexpr auto Sigmoid = [](const Vec& x) {
  const Vec one(1.0f);
  return one / (one + x.neg().exp());
};

// The normal distribution's cdf Phi(x) = (1 + erf(x / sqrt 2)) / 2, and exp(-x^2 / 2) (the
// pdf's exponential) as a by-product, for gelu and its backward.
//
// erfc(|z|) ~ t * P(t) * exp(-z^2) with t = 1 / (1 + p |z|) and P a quartic (Abramowitz &
// Stegun 7.1.26, absolute error below 1.5e-7): the form Vectorized::erf uses too, but with
// exp_u20 (about 20 ulp, inline) for Sleef's exp_u10 (a call): gelu of 1 M floats on one
// thread 400 -> 350 us. The erfc term is below 1, so that adds at most ~2.5e-6 of absolute
// error. For x < 0, Phi(x) = erfc(|z|) / 2 is taken as it is, not as 1 + erf(z), which would
// cancel. The backward reuses the exponential instead of a second exp.
// NaN propagates (through t); Phi(+inf) = 1 and Phi(-inf) = 0.
inline Vec NormalCdf(const Vec& x, Vec* gauss) {
  const Vec z = x * Vec(kSqrt1_2);
  const Vec t = Vec(1.0f) / at::vec::fmadd(Vec(0.3275911f), z.abs(), Vec(1.0f));
  Vec poly = at::vec::fmadd(Vec(1.061405429f), t, Vec(-1.453152027f));
  poly = at::vec::fmadd(poly, t, Vec(1.421413741f));
  poly = at::vec::fmadd(poly, t, Vec(-0.284496736f));
  poly = at::vec::fmadd(poly, t, Vec(0.254829592f));
  *gauss = (z * z).neg().exp_u20();
  const Vec half_tail = Vec(0.5f) * t * poly * *gauss;  // erfc(|z|) / 2
  return Vec::blendv(Vec(1.0f) - half_tail, half_tail, x < Vec(0.0f));
}

Vec GeluTanhInner(const Vec& x) { return Vec(kSqrt2OverPi) * (x + Vec(kGeluTanhCoeff) * x * x * x); }

template <typename T>
void Unary(VecUnaryOp op, void* out, const void* in, int64_t n) {
  switch (op) {
    case VecUnaryOp::kExp:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.exp(); });
    case VecUnaryOp::kExp2:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.exp2(); });
    case VecUnaryOp::kExpm1:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.expm1(); });
    case VecUnaryOp::kLog:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.log(); });
    case VecUnaryOp::kLog2:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.log2(); });
    case VecUnaryOp::kLog10:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.log10(); });
    case VecUnaryOp::kLog1p:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.log1p(); });
    case VecUnaryOp::kSqrt:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.sqrt(); });
    case VecUnaryOp::kRsqrt:
      return Map1<T>(out, in, n, [](const Vec& x) { return Vec(1.0f) / x.sqrt(); });
    case VecUnaryOp::kReciprocal:
      return Map1<T>(out, in, n, [](const Vec& x) { return Vec(1.0f) / x; });
    case VecUnaryOp::kSin:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.sin(); });
    case VecUnaryOp::kCos:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.cos(); });
    case VecUnaryOp::kTan:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.tan(); });
    case VecUnaryOp::kTanh:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.tanh(); });
    case VecUnaryOp::kSigmoid:
      return Map1<T>(out, in, n, Sigmoid);
    case VecUnaryOp::kErf:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.erf(); });
    case VecUnaryOp::kErfc:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.erfc(); });
    case VecUnaryOp::kAsin:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.asin(); });
    case VecUnaryOp::kAcos:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.acos(); });
    case VecUnaryOp::kAtan:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.atan(); });
    case VecUnaryOp::kSilu:
      return Map1<T>(out, in, n, [](const Vec& x) { return x / (Vec(1.0f) + x.neg().exp()); });
    case VecUnaryOp::kGelu:
      return Map1<T>(out, in, n, [](const Vec& x) {
        Vec gauss;
        return x * NormalCdf(x, &gauss);
      });
    case VecUnaryOp::kGeluTanh:
      return Map1<T>(out, in, n, [](const Vec& x) { return Vec(0.5f) * x * (Vec(1.0f) + GeluTanhInner(x).tanh()); });
    case VecUnaryOp::kAbs:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.abs(); });
    case VecUnaryOp::kNeg:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.neg(); });
    case VecUnaryOp::kRelu:
      return Map1<T>(out, in, n, [](const Vec& x) { return Vec::blendv(x, Vec(0.0f), x < Vec(0.0f)); });
    case VecUnaryOp::kSquare:
      return Map1<T>(out, in, n, [](const Vec& x) { return x * x; });
    // The CPU backend rounds a bfloat16 product to bfloat16 before the next operation
    // (its Vectorized<BFloat16> operators do): so do these, to give its results.
    case VecUnaryOp::kCube:
      return Map1<T>(out, in, n, [](const Vec& x) { return Io<T>::Round(x * x) * x; });
    case VecUnaryOp::kReciprocalSquare:
      return Map1<T>(out, in, n, [](const Vec& x) { return Vec(1.0f) / Io<T>::Round(x * x); });
    case VecUnaryOp::kNone:
      break;
  }
}

template <typename T>
void Binary(VecBinaryOp op, void* out, VecOperand a, VecOperand b, int64_t n, float param) {
  switch (op) {
    case VecBinaryOp::kAdd:
      if (param == 1.0f) return Map2<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x + y; });
      return Map2<T>(out, a, b, n, [alpha = Vec(param)](const Vec& x, const Vec& y) {
        return at::vec::fmadd(y, alpha, x);
      });
    case VecBinaryOp::kMul:
      return Map2<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x * y; });
    case VecBinaryOp::kDiv:
      return Map2<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x / y; });
    case VecBinaryOp::kMaximum:
      return Map2<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return at::vec::maximum(x, y); });
    case VecBinaryOp::kMinimum:
      return Map2<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return at::vec::minimum(x, y); });
    case VecBinaryOp::kEq:
      return Compare<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x.eq(y); });
    case VecBinaryOp::kNe:
      return Compare<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x.ne(y); });
    case VecBinaryOp::kLt:
      return Compare<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x.lt(y); });
    case VecBinaryOp::kLe:
      return Compare<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x.le(y); });
    case VecBinaryOp::kGt:
      return Compare<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x.gt(y); });
    case VecBinaryOp::kGe:
      return Compare<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x.ge(y); });
    case VecBinaryOp::kThresholdBackward:
      return Map2<T>(out, a, b, n, [t = Vec(param)](const Vec& g, const Vec& x) {
        return Vec::blendv(g, Vec(0.0f), x <= t);
      });
    case VecBinaryOp::kSigmoidBackward:
      return Map2<T>(out, a, b, n, [](const Vec& g, const Vec& s) { return g * (Vec(1.0f) - s) * s; });
    case VecBinaryOp::kTanhBackward:
      return Map2<T>(out, a, b, n, [](const Vec& g, const Vec& t) { return g * (Vec(1.0f) - t * t); });
    case VecBinaryOp::kSiluBackward:
      return Map2<T>(out, a, b, n, [](const Vec& g, const Vec& x) {
        const Vec s = Sigmoid(x);
        return g * s * (Vec(1.0f) + x * (Vec(1.0f) - s));
      });
    case VecBinaryOp::kGeluBackward:
      return Map2<T>(out, a, b, n, [](const Vec& g, const Vec& x) {
        Vec gauss;  // exp(-x^2 / 2): the cdf's exponential is the pdf's
        const Vec cdf = NormalCdf(x, &gauss);
        return g * at::vec::fmadd(x * Vec(kInvSqrt2Pi), gauss, cdf);
      });
    case VecBinaryOp::kGeluTanhBackward:
      return Map2<T>(out, a, b, n, [](const Vec& g, const Vec& x) {
        const Vec t = GeluTanhInner(x).tanh();
        const Vec dinner = Vec(kSqrt2OverPi) * (Vec(1.0f) + Vec(3.0f * kGeluTanhCoeff) * x * x);
        return g * (Vec(0.5f) * (Vec(1.0f) + t) + Vec(0.5f) * x * (Vec(1.0f) - t * t) * dinner);
      });
    case VecBinaryOp::kSiluMul:
      return Map2<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x / (Vec(1.0f) + x.neg().exp()) * y; });
    case VecBinaryOp::kPow:
      return Map2<T>(out, a, b, n, [](const Vec& x, const Vec& y) { return x.pow(y); });
    case VecBinaryOp::kNone:
      break;
  }
}

// The lanes' total (through memory: torch's vec_reduce_all trips GCC 12's
// -Wmaybe-uninitialized on AVX-512's shuffles).
float AddLanes(const Vec& v) {
  float lanes[Vec::size()];
  v.store(lanes);
  float r = 0;
  for (int64_t k = 0; k < Vec::size(); ++k) r += lanes[k];
  return r;
}

// Software prefetch for the read-only streams of the reductions: each loop iteration asks
// for the cache lines it will read kPrefetchAhead bytes later (past a row's end too; the
// next row usually follows, and a prefetch never faults). The hardware prefetcher alone
// left a one-thread amax(-1) of 64 MB at ~80% of the CPU's rate on these hosts.
constexpr int64_t kPrefetchAhead = 1024;
template <int64_t kBytes>
inline void PrefetchAhead(const void* p) {
  for (int64_t o = 0; o < kBytes; o += 64) __builtin_prefetch(static_cast<const char*>(p) + kPrefetchAhead + o);
}

// Elements per block of a sum: its vector lanes accumulate a few dozen elements each in
// float; block totals are added in double, so a long row loses no more than a short one.
constexpr int64_t kSumBlock = 4096;

template <typename T>
float Sum(const void* in_p, int64_t n) {
  const T* in = static_cast<const T*>(in_p);
  constexpr int64_t kStep = Io<T>::kStep;
  double total = 0;
  for (int64_t begin = 0; begin < n; begin += kSumBlock) {
    const int64_t end = std::min(n, begin + kSumBlock);
    Vec acc[2 * Io<T>::kParts] = {};  // two interleaved sets: independent add chains
    int64_t i = begin;
    for (; i + 2 * kStep <= end; i += 2 * kStep) {
      Vec v[2 * Io<T>::kParts];
      PrefetchAhead<2 * kStep * sizeof(T)>(in + i);
      Io<T>::Load(in + i, kStep, v);
      Io<T>::Load(in + i + kStep, kStep, v + Io<T>::kParts);
      for (int k = 0; k < 2 * Io<T>::kParts; ++k) acc[k] = acc[k] + v[k];
    }
    for (; i < end; i += kStep) {
      Vec v[Io<T>::kParts];
      Io<T>::Load(in + i, std::min(kStep, end - i), v);  // a partial load zero-fills
      for (int k = 0; k < Io<T>::kParts; ++k) acc[k] = acc[k] + v[k];
    }
    Vec s = acc[0];
    for (int k = 1; k < 2 * Io<T>::kParts; ++k) s = s + acc[k];
    total += static_cast<double>(AddLanes(s));
  }
  return static_cast<float>(total);
}

template <typename T>
float Max(const void* in_p, int64_t n) {
  const T* in = static_cast<const T*>(in_p);
  constexpr int64_t kStep = Io<T>::kStep;
  constexpr int kParts = Io<T>::kParts;
  // Four independent chains of whole vectors: a NaN-propagating maximum is a few dependent
  // instructions, and with one chain amax over 1024-wide rows ran at a quarter of the
  // CPU's speed, waiting on its own latency.
  constexpr int kChains = 4;
  const Vec lowest(-std::numeric_limits<float>::infinity());
  Vec acc[kChains * kParts];
  for (auto& a : acc) a = lowest;
  int64_t i = 0;
  for (; i + kChains * kStep <= n; i += kChains * kStep) {
    Vec v[kChains * kParts];
    PrefetchAhead<kChains * kStep * sizeof(T)>(in + i);
    for (int c = 0; c < kChains; ++c) Io<T>::Load(in + i + c * kStep, kStep, v + c * kParts);
    for (int k = 0; k < kChains * kParts; ++k) acc[k] = at::vec::maximum(acc[k], v[k]);  // NaN propagates
  }
  for (; i < n; i += kStep) {
    const int64_t c = std::min(kStep, n - i);
    Vec v[kParts];
    Io<T>::Load(in + i, c, v);
    for (int k = 0; k < kParts; ++k) {
      // A partial load's zero lanes must not count: -inf there instead.
      const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
      const Vec x = valid == Vec::size() ? v[k] : Vec::set(lowest, v[k], valid);
      acc[k] = at::vec::maximum(acc[k], x);
    }
  }
  Vec m = acc[0];
  for (int k = 1; k < kChains * kParts; ++k) m = at::vec::maximum(m, acc[k]);
  float lanes[Vec::size()];
  m.store(lanes);
  // The lanes' maximum without a branch per lane, then NaN once: a data-dependent branch
  // per lane mispredicted about half the time on random data, ~60 ns a row, which held
  // amax(-1) over 1024-wide rows to 70% of the CPU's speed.
  float r = lanes[0];
  bool nan = std::isnan(r);
  for (int64_t k = 1; k < Vec::size(); ++k) {
    nan |= std::isnan(lanes[k]);
    r = std::max(r, lanes[k]);
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : r;
}

// bfloat16 rows up to this long keep exp(x - max) in a float row of the compute thread's
// (256 KB at most); longer ones compute it twice rather than hold more per thread.
constexpr int64_t kSoftmaxKeepMax = int64_t{1} << 16;

// One row's softmax (or log_softmax) in three passes: the max, the exp-sum, the scale.
// exp is exp_u20 (about 20 ulp, inline) rather than Sleef's exp_u10 (a call), as the CPU's
// own softmax does: the outputs are at most 1, so that is ~2.5e-6 of absolute error.
template <typename T>
void Softmax(bool log, void* out_p, const void* in_p, int64_t n) {
  const float mx = Max<T>(in_p, n);
  const T* in = static_cast<const T*>(in_p);
  T* out = static_cast<T*>(out_p);
  constexpr int64_t kStep = Io<T>::kStep;
  constexpr int kParts = Io<T>::kParts;
  const Vec vmx(mx);
  // Where pass 2 keeps exp(x - max) for pass 3: float32 in `out` itself; bfloat16 in a
  // float row (a bfloat16 out would round it twice). Before, bfloat16 recomputed it, and
  // its softmax ran at 0.55-0.65x of the CPU's on one thread.
  float* keep = nullptr;
  if (!log) {
    if constexpr (std::is_same_v<T, float>) {
      keep = out;
    } else if (n <= kSoftmaxKeepMax) {
      thread_local std::vector<float> row;
      if (static_cast<int64_t>(row.size()) < n) row.resize(static_cast<size_t>(n));
      keep = row.data();
    }
  }
  Vec acc[kParts] = {};
  for (int64_t i = 0; i < n; i += kStep) {
    const int64_t c = std::min(kStep, n - i);
    Vec v[kParts];
    Io<T>::Load(in + i, c, v);
    for (int k = 0; k < kParts; ++k) {
      const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
      if (valid == 0) break;
      v[k] = (v[k] - vmx).exp_u20();
      if (valid == Vec::size()) {
        acc[k] = acc[k] + v[k];
        if (keep != nullptr) v[k].store(keep + i + k * Vec::size());
      } else {
        acc[k] = acc[k] + Vec::set(Vec(0.0f), v[k], valid);
        if (keep != nullptr) v[k].store(keep + i + k * Vec::size(), static_cast<int>(valid));
      }
    }
  }
  Vec s = acc[0];
  for (int k = 1; k < kParts; ++k) s = s + acc[k];
  const float sum = AddLanes(s);
  // Pass 3: the scale.
  if (log) {
    // (x - max) - log(sum), as the CPU backend: folding max + log(sum) into one shift first
    // loses log(sum) against a large max (a row of equal values -1e8 gave 0, not -log(n)).
    const Vec max_v(mx), log_sum(std::log(sum));
    Map1<T>(out, in, n, [max_v, log_sum](const Vec& x) { return (x - max_v) - log_sum; });
  } else if (keep != nullptr) {
    const Vec scale(1.0f / sum);
    ForChunks<T>(n, [&](int64_t i, int64_t c) {
      Vec v[kParts];
      for (int k = 0; k < kParts; ++k) {
        const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
        const float* p = keep + i + k * Vec::size();
        v[k] = valid == Vec::size() ? Vec::loadu(p) : valid > 0 ? Vec::loadu(p, valid) : Vec(0.0f);
        v[k] = v[k] * scale;
      }
      Io<T>::Store(out + i, c, v);
    });
  } else {
    const Vec scale(1.0f / sum);
    Map1<T>(out, in, n, [vmx, scale](const Vec& x) { return (x - vmx).exp_u20() * scale; });
  }
}

void UnaryEntry(VecUnaryOp op, VecDtype dtype, void* out, const void* in, int64_t n) {
  if (dtype == VecDtype::kFloat) return Unary<float>(op, out, in, n);
  return Unary<BFloat16>(op, out, in, n);
}
void BinaryEntry(VecBinaryOp op, VecDtype dtype, void* out, VecOperand a, VecOperand b, int64_t n, float param) {
  if (dtype == VecDtype::kFloat) return Binary<float>(op, out, a, b, n, param);
  return Binary<BFloat16>(op, out, a, b, n, param);
}
float SumEntry(VecDtype dtype, const void* in, int64_t n) {
  return dtype == VecDtype::kFloat ? Sum<float>(in, n) : Sum<BFloat16>(in, n);
}
float MaxEntry(VecDtype dtype, const void* in, int64_t n) {
  return dtype == VecDtype::kFloat ? Max<float>(in, n) : Max<BFloat16>(in, n);
}
void SoftmaxEntry(bool log, VecDtype dtype, void* out, const void* in, int64_t n) {
  if (dtype == VecDtype::kFloat) return Softmax<float>(log, out, in, n);
  return Softmax<BFloat16>(log, out, in, n);
}

// ---- Index ops and outer-dim reductions.

// acc[j] = f(acc[j], in[j]) over a dense row of T, acc in float: one row of a reduction
// over an outer dim, SIMD along the inner dim. Only the row's own lanes of acc are touched.
template <typename T, typename F>
void CombineIntoRow(float* acc, const void* in_p, int64_t n, F f) {
  const T* in = static_cast<const T*>(in_p);
  ForChunks<T>(n, [&](int64_t i, int64_t c) {
    Vec v[Io<T>::kParts];
    Io<T>::Load(in + i, c, v);
    for (int k = 0; k < Io<T>::kParts; ++k) {
      const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
      if (valid == 0) break;
      float* a = acc + i + k * Vec::size();
      if (valid == Vec::size()) {
        f(Vec::loadu(a), v[k]).store(a);
      } else {
        f(Vec::loadu(a, valid), v[k]).store(a, static_cast<int>(valid));
      }
    }
  });
}

template <typename T>
void AccumulateRow(float* acc, const void* in, int64_t n) {
  CombineIntoRow<T>(acc, in, n, [](const Vec& a, const Vec& x) { return a + x; });
}

template <typename T>
void MaxRow(float* acc, const void* in, int64_t n) {
  // NaN propagates.
  CombineIntoRow<T>(acc, in, n, [](const Vec& a, const Vec& x) { return at::vec::maximum(a, x); });
}

template <typename T>
float SumSquares(const void* in_p, int64_t n) {
  const T* in = static_cast<const T*>(in_p);
  constexpr int64_t kStep = Io<T>::kStep;
  double total = 0;
  for (int64_t begin = 0; begin < n; begin += kSumBlock) {
    const int64_t end = std::min(n, begin + kSumBlock);
    Vec acc[2 * Io<T>::kParts] = {};  // two interleaved sets: independent chains
    int64_t i = begin;
    for (; i + 2 * kStep <= end; i += 2 * kStep) {
      Vec v[2 * Io<T>::kParts];
      PrefetchAhead<2 * kStep * sizeof(T)>(in + i);
      Io<T>::Load(in + i, kStep, v);
      Io<T>::Load(in + i + kStep, kStep, v + Io<T>::kParts);
      for (int k = 0; k < 2 * Io<T>::kParts; ++k) acc[k] = at::vec::fmadd(v[k], v[k], acc[k]);
    }
    for (; i < end; i += kStep) {
      Vec v[Io<T>::kParts];
      Io<T>::Load(in + i, std::min(kStep, end - i), v);  // a partial load zero-fills
      for (int k = 0; k < Io<T>::kParts; ++k) acc[k] = at::vec::fmadd(v[k], v[k], acc[k]);
    }
    Vec s = acc[0];
    for (int k = 1; k < 2 * Io<T>::kParts; ++k) s = s + acc[k];
    total += static_cast<double>(AddLanes(s));
  }
  return static_cast<float>(total);
}

void AccumulateRowEntry(VecDtype dtype, float* acc, const void* in, int64_t n) {
  if (dtype == VecDtype::kFloat) return AccumulateRow<float>(acc, in, n);
  return AccumulateRow<BFloat16>(acc, in, n);
}
void MaxRowEntry(VecDtype dtype, float* acc, const void* in, int64_t n) {
  if (dtype == VecDtype::kFloat) return MaxRow<float>(acc, in, n);
  return MaxRow<BFloat16>(acc, in, n);
}
float SumSquaresEntry(VecDtype dtype, const void* in, int64_t n) {
  return dtype == VecDtype::kFloat ? SumSquares<float>(in, n) : SumSquares<BFloat16>(in, n);
}

// ---- Normalisation rows and their backward.

// v[k] with the lanes past a row's end (a partial step of `c` elements) set to `fill`: a
// partial load zero-fills them, which is wrong for terms like (x - mean)^2.
template <typename T>
void FillPastEnd(Vec* v, int64_t c, const Vec& fill) {
  for (int k = 0; k < Io<T>::kParts; ++k) {
    const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
    if (valid != Vec::size()) v[k] = Vec::set(fill, v[k], valid);
  }
}

// One step (`c` elements) of a float row as kParts vectors (a partial step zero-fills),
// for the float partial sums of weight gradients next to a row of T.
template <typename T>
void LoadFloatStep(const float* p, int64_t c, Vec* v) {
  for (int k = 0; k < Io<T>::kParts; ++k) {
    const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
    v[k] = valid == Vec::size() ? Vec::loadu(p + k * Vec::size())
                                : (valid > 0 ? Vec::loadu(p + k * Vec::size(), valid) : Vec(0.0f));
  }
}
template <typename T>
void StoreFloatStep(float* p, int64_t c, const Vec* v) {
  for (int k = 0; k < Io<T>::kParts; ++k) {
    const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
    if (valid == Vec::size()) {
      v[k].store(p + k * Vec::size());
    } else if (valid > 0) {
      v[k].store(p + k * Vec::size(), static_cast<int>(valid));
    }
  }
}

// kSums row totals: step(i, c, acc) adds the terms of elements [i, i + c) into acc[s][k]
// (float vectors); each kSumBlock-element block's totals are added in double, so a long row
// keeps float's accuracy (as Sum).
template <typename T, int kSums, typename Step>
void RowSums(int64_t n, float* totals, Step step) {
  constexpr int64_t kStep = Io<T>::kStep;
  double sums[kSums] = {};
  for (int64_t begin = 0; begin < n; begin += kSumBlock) {
    const int64_t end = std::min(n, begin + kSumBlock);
    Vec acc[kSums][Io<T>::kParts];
    for (int64_t i = begin; i < end; i += kStep) step(i, std::min(kStep, end - i), acc);
    for (int s = 0; s < kSums; ++s) {
      Vec t = acc[s][0];
      for (int k = 1; k < Io<T>::kParts; ++k) t = t + acc[s][k];
      sums[s] += static_cast<double>(AddLanes(t));
    }
  }
  for (int s = 0; s < kSums; ++s) totals[s] = static_cast<float>(sums[s]);
}

// The row's affine output y = (x - mean) * scale [* w] [+ b], in float, rounded on store.
// (Centred first: x equal to the mean gives exactly 0, as on the CPU, however large rstd.)
template <typename T>
void AffineRow(T* y, const T* x, const T* w, const T* b, int64_t n, float mean, float scale) {
  constexpr int64_t kStep = Io<T>::kStep;
  constexpr int kP = Io<T>::kParts;
  const Vec vm(mean), vs(scale);
  for (int64_t i = 0; i < n; i += kStep) {
    const int64_t c = std::min(kStep, n - i);
    Vec v[kP], wv[kP], bv[kP];
    Io<T>::Load(x + i, c, v);
    for (int k = 0; k < kP; ++k) v[k] = (v[k] - vm) * vs;
    if (w != nullptr) {
      Io<T>::Load(w + i, c, wv);
      for (int k = 0; k < kP; ++k) v[k] = v[k] * wv[k];
    }
    if (b != nullptr) {
      Io<T>::Load(b + i, c, bv);
      for (int k = 0; k < kP; ++k) v[k] = v[k] + bv[k];
    }
    Io<T>::Store(y + i, c, v);
  }
}

template <typename T>
void LayerNormRow(void* y_p, const void* x_p, const void* w_p, const void* b_p, int64_t n, float eps, float* mean_out,
                  float* rstd_out) {
  const T* x = static_cast<const T*>(x_p);
  const float mean = n > 0 ? Sum<T>(x, n) / static_cast<float>(n) : 0.0f;
  const Vec vm(mean);
  float sq = 0;
  RowSums<T, 1>(n, &sq, [&](int64_t i, int64_t c, Vec (*acc)[Io<T>::kParts]) {
    Vec v[Io<T>::kParts];
    Io<T>::Load(x + i, c, v);
    if (c != Io<T>::kStep) FillPastEnd<T>(v, c, vm);
    for (int k = 0; k < Io<T>::kParts; ++k) {
      const Vec d = v[k] - vm;
      acc[0][k] = at::vec::fmadd(d, d, acc[0][k]);
    }
  });
  const float var = n > 0 ? sq / static_cast<float>(n) : 0.0f;
  const float rstd = 1.0f / std::sqrt(std::max(var, 0.0f) + eps);
  *mean_out = mean;
  *rstd_out = rstd;
  AffineRow<T>(static_cast<T*>(y_p), x, static_cast<const T*>(w_p), static_cast<const T*>(b_p), n, mean, rstd);
}

template <typename T>
void RmsNormRow(void* y_p, const void* x_p, const void* w_p, int64_t n, float eps, float* rstd_out) {
  const T* x = static_cast<const T*>(x_p);
  float sq = 0;
  RowSums<T, 1>(n, &sq, [&](int64_t i, int64_t c, Vec (*acc)[Io<T>::kParts]) {
    Vec v[Io<T>::kParts];
    Io<T>::Load(x + i, c, v);  // zero-filled past the end: adds nothing
    for (int k = 0; k < Io<T>::kParts; ++k) acc[0][k] = at::vec::fmadd(v[k], v[k], acc[0][k]);
  });
  const float rstd = 1.0f / std::sqrt((n > 0 ? sq / static_cast<float>(n) : 0.0f) + eps);
  *rstd_out = rstd;
  // x * rstd, then * w: the composite's order of roundings.
  AffineRow<T>(static_cast<T*>(y_p), x, static_cast<const T*>(w_p), nullptr, n, 0.0f, rstd);
}

// Both backward rows: xhat = (x - mean) * rstd (mean 0 for rms_norm), gw = dy * w.
// Pass 1 sums gw and gw * xhat and adds the weight-gradient terms; pass 2 (row in cache)
// writes dx = rstd * (gw - [mean(gw)] - xhat * mean(gw * xhat)).
template <typename T, bool kCentred>
void NormBackwardRow(void* dx_p, const void* dy_p, const void* x_p, const void* w_p, int64_t n, float mean,
                     float rstd, float* dw, float* db) {
  constexpr int kP = Io<T>::kParts;
  const T* dy = static_cast<const T*>(dy_p);
  const T* x = static_cast<const T*>(x_p);
  const T* w = static_cast<const T*>(w_p);
  const Vec vm(mean), vr(rstd);
  // Past the row's end every loaded lane is 0: dy = 0 there, so every term vanishes.
  auto load = [&](int64_t i, int64_t c, Vec* g, Vec* xh, Vec* gw) {
    Vec xv[kP];
    Io<T>::Load(dy + i, c, g);
    Io<T>::Load(x + i, c, xv);
    for (int k = 0; k < kP; ++k) xh[k] = kCentred ? (xv[k] - vm) * vr : xv[k] * vr;
    if (w != nullptr) {
      Vec wv[kP];
      Io<T>::Load(w + i, c, wv);
      for (int k = 0; k < kP; ++k) gw[k] = g[k] * wv[k];
    } else {
      for (int k = 0; k < kP; ++k) gw[k] = g[k];
    }
  };
  float sums[2] = {0, 0};  // sum(gw), sum(gw * xhat)
  RowSums<T, 2>(n, sums, [&](int64_t i, int64_t c, Vec (*acc)[kP]) {
    Vec g[kP], xh[kP], gw[kP];
    load(i, c, g, xh, gw);
    for (int k = 0; k < kP; ++k) {
      acc[0][k] = acc[0][k] + gw[k];
      acc[1][k] = at::vec::fmadd(gw[k], xh[k], acc[1][k]);
    }
    if (dw != nullptr) {
      Vec p[kP];
      LoadFloatStep<T>(dw + i, c, p);
      for (int k = 0; k < kP; ++k) p[k] = at::vec::fmadd(g[k], xh[k], p[k]);
      StoreFloatStep<T>(dw + i, c, p);
    }
    if (db != nullptr) {
      Vec p[kP];
      LoadFloatStep<T>(db + i, c, p);
      for (int k = 0; k < kP; ++k) p[k] = p[k] + g[k];
      StoreFloatStep<T>(db + i, c, p);
    }
  });
  if (dx_p == nullptr || n == 0) return;
  T* dx = static_cast<T*>(dx_p);
  const float inv_n = 1.0f / static_cast<float>(n);
  const Vec mean_gw(kCentred ? sums[0] * inv_n : 0.0f), mean_gwx(sums[1] * inv_n);
  constexpr int64_t kStep = Io<T>::kStep;
  for (int64_t i = 0; i < n; i += kStep) {
    const int64_t c = std::min(kStep, n - i);
    Vec g[kP], xh[kP], gw[kP];
    load(i, c, g, xh, gw);
    for (int k = 0; k < kP; ++k) g[k] = vr * (gw[k] - mean_gw - xh[k] * mean_gwx);
    Io<T>::Store(dx + i, c, g);
  }
}

void LayerNormEntry(VecDtype dtype, void* y, const void* x, const void* w, const void* b, int64_t n, float eps,
                    float* mean, float* rstd) {
  if (dtype == VecDtype::kFloat) return LayerNormRow<float>(y, x, w, b, n, eps, mean, rstd);
  return LayerNormRow<BFloat16>(y, x, w, b, n, eps, mean, rstd);
}
void RmsNormEntry(VecDtype dtype, void* y, const void* x, const void* w, int64_t n, float eps, float* rstd) {
  if (dtype == VecDtype::kFloat) return RmsNormRow<float>(y, x, w, n, eps, rstd);
  return RmsNormRow<BFloat16>(y, x, w, n, eps, rstd);
}
void LayerNormBackwardEntry(VecDtype dtype, void* dx, const void* dy, const void* x, const void* w, int64_t n,
                            float mean, float rstd, float* dw, float* db) {
  if (dtype == VecDtype::kFloat) return NormBackwardRow<float, true>(dx, dy, x, w, n, mean, rstd, dw, db);
  return NormBackwardRow<BFloat16, true>(dx, dy, x, w, n, mean, rstd, dw, db);
}
void RmsNormBackwardEntry(VecDtype dtype, void* dx, const void* dy, const void* x, const void* w, int64_t n,
                          float rstd, float* dw) {
  if (dtype == VecDtype::kFloat) return NormBackwardRow<float, false>(dx, dy, x, w, n, 0.0f, rstd, dw, nullptr);
  return NormBackwardRow<BFloat16, false>(dx, dy, x, w, n, 0.0f, rstd, dw, nullptr);
}

// Small-M products. The row count of a (M) is a template argument, so the accumulators
// are registers: with a run-time count they lived on the stack, a load and a store around
// every FMA (41 GFLOP/s on one AVX-512 thread at [4, 256] @ [256, 384]). R rows of w go at
// once, each step of a loaded once for all R, with R * M accumulator vectors sized to the
// register file (32 vector registers with AVX-512, 16 below).
//
// The accumulators stay registers only if nothing takes their address: handing them to
// the finishing lambda by pointer (and stepping through ForChunks' lambda) kept all 16 on
// the stack, a load and a store around every FMA: 43 GFLOP/s on one thread against 75 now
// ([4, 256] @ [256, 2048], w in L2). So the step is one always-inlined body called from a whole-vector loop and once
// for the tail, and `finish` receives each dot product as a float.
// W's rows may be of another type than A's (int8 weights under float activations: the
// int8 weight-only linear), read in steps of A's width.
template <typename T, typename TW, int M, int R, typename Finish>
void DotRowGroup(int64_t j, int64_t k, const T* a, int64_t lda, const TW* w, int64_t ldw, const Finish& finish) {
  constexpr int kP = Io<T>::kParts;
  constexpr int64_t kStep = Io<T>::kStep;
  static_assert(Io<TW>::kStep == kStep && Io<TW>::kParts == kP, "A's and W's rows load in the same steps");
  Vec acc[R][M][kP];
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) {
      for (int p = 0; p < kP; ++p) acc[r][i][p] = Vec(0.0f);
    }
  }
  const TW* wr[R];
  for (int r = 0; r < R; ++r) wr[r] = w + (j + r) * ldw;
  const auto step = [&](int64_t c0, int64_t c) __attribute__((always_inline)) {
    Vec x[R][kP];
    for (int r = 0; r < R; ++r) {
      // The next group's rows, one cache line ahead per line read: rows of w are short
      // (a decode step's k = 256 is 1 KB), too short for the hardware prefetcher to find
      // the streams before they end; this read them ~25% faster from L3.
      __builtin_prefetch(wr[r] + R * ldw + c0);
      Io<TW>::Load(wr[r] + c0, c, x[r]);
    }
    for (int i = 0; i < M; ++i) {
      Vec av[kP];
      Io<T>::Load(a + i * lda + c0, c, av);
      for (int r = 0; r < R; ++r) {
        for (int p = 0; p < kP; ++p) acc[r][i][p] = at::vec::fmadd(av[p], x[r][p], acc[r][i][p]);
      }
    }
  };
  int64_t c0 = 0;
  for (; c0 + kStep <= k; c0 += kStep) step(c0, kStep);
  if (c0 < k) step(c0, k - c0);  // Io's partial loads zero-fill the tail
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < M; ++i) {
      Vec sum = acc[r][i][0];
      for (int p = 1; p < kP; ++p) sum = sum + acc[r][i][p];
      // A shuffle tree (log2 of the width in steps), not a chain of 16 dependent adds.
      finish(i, j + r, at::vec::vec_reduce_all<float>(std::plus<Vec>(), sum));
    }
  }
}

template <typename T, typename TW, int M>
void DotRows(int64_t n, int64_t k, const T* a, int64_t lda, const TW* w, int64_t ldw, T* out, int64_t ldo,
             float alpha, float beta) {
  constexpr int kP = Io<T>::kParts;
  constexpr int kAccRegs = Vec::size() >= 16 ? 24 : 12;
  constexpr int R = std::max(1, std::min(4, kAccRegs / (M * kP)));
  auto finish = [&](int64_t i, int64_t j, float d) {
    T& o = out[i * ldo + j];
    o = static_cast<T>(beta == 0 ? alpha * d : alpha * d + beta * static_cast<float>(o));
  };
  int64_t j = 0;
  for (; j + R <= n; j += R) DotRowGroup<T, TW, M, R>(j, k, a, lda, w, ldw, finish);
  for (; j < n; ++j) DotRowGroup<T, TW, M, 1>(j, k, a, lda, w, ldw, finish);  // the last n % R rows of w
}

template <typename T, typename TW = T>
void DotRowsAnyM(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const TW* w, int64_t ldw, T* out,
                 int64_t ldo, float alpha, float beta) {
  static_assert(kDotRowsMaxM == 8, "one case per row count below");
  switch (m) {
    case 1: return DotRows<T, TW, 1>(n, k, a, lda, w, ldw, out, ldo, alpha, beta);
    case 2: return DotRows<T, TW, 2>(n, k, a, lda, w, ldw, out, ldo, alpha, beta);
    case 3: return DotRows<T, TW, 3>(n, k, a, lda, w, ldw, out, ldo, alpha, beta);
    case 4: return DotRows<T, TW, 4>(n, k, a, lda, w, ldw, out, ldo, alpha, beta);
    case 5: return DotRows<T, TW, 5>(n, k, a, lda, w, ldw, out, ldo, alpha, beta);
    case 6: return DotRows<T, TW, 6>(n, k, a, lda, w, ldw, out, ldo, alpha, beta);
    case 7: return DotRows<T, TW, 7>(n, k, a, lda, w, ldw, out, ldo, alpha, beta);
    case 8: return DotRows<T, TW, 8>(n, k, a, lda, w, ldw, out, ldo, alpha, beta);
    default: return;  // m <= 0: nothing to compute
  }
}

void DotRowsEntry(VecDtype dtype, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* w,
                  int64_t ldw, void* out, int64_t ldo, float alpha, float beta) {
  // More rows than the accumulators hold: blocks of kDotRowsMaxM rows (each reads w again).
  for (int64_t i = 0; i < m; i += kDotRowsMaxM) {
    const int64_t rows = std::min(kDotRowsMaxM, m - i);
    if (dtype == VecDtype::kFloat) {
      DotRowsAnyM<float>(rows, n, k, static_cast<const float*>(a) + i * lda, lda, static_cast<const float*>(w), ldw,
                         static_cast<float*>(out) + i * ldo, ldo, alpha, beta);
    } else {
      DotRowsAnyM<BFloat16>(rows, n, k, static_cast<const BFloat16*>(a) + i * lda, lda,
                            static_cast<const BFloat16*>(w), ldw, static_cast<BFloat16*>(out) + i * ldo, ldo, alpha,
                            beta);
    }
  }
}

void DotRowsInt8WeightEntry(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const int8_t* w,
                            int64_t ldw, float* out, int64_t ldo) {
  for (int64_t i = 0; i < m; i += kDotRowsMaxM) {
    DotRowsAnyM<float, int8_t>(std::min(kDotRowsMaxM, m - i), n, k, a + i * lda, lda, w, ldw, out + i * ldo, ldo,
                               1.0f, 0.0f);
  }
}

#define XXNPU_STRINGIFY2(x) #x
#define XXNPU_STRINGIFY(x) XXNPU_STRINGIFY2(x)

}  // namespace

extern const VecKernels kVecKernels;
const VecKernels kVecKernels = {
    XXNPU_STRINGIFY(CPU_CAPABILITY), &UnaryEntry, &BinaryEntry, &SumEntry, &MaxEntry, &SoftmaxEntry,
    // Index ops and outer-dim reductions.
    &AccumulateRowEntry, &MaxRowEntry, &SumSquaresEntry,
    // Normalisation rows and their backward.
    &LayerNormEntry, &RmsNormEntry, &LayerNormBackwardEntry, &RmsNormBackwardEntry,
    // Small-M products.
    &DotRowsEntry, &DotRowsInt8WeightEntry,
};

}  // namespace CPU_CAPABILITY
}  // namespace xxnpu
