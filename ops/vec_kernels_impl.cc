// The SIMD inner loops behind vec_kernels.h. This file is compiled once per CPU capability
// (DEFAULT, AVX2, AVX512: xxnpu_cpu_kernels in bazel/xxnpu.bzl), each time with torch's
// CPU_CAPABILITY macros and flags, so at::vec::Vectorized<float> is 8 or 16 lanes wide
// (and Sleef-backed) or the portable form. Only inner loops live here: everything compiled
// in this file is compiled three times.
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "ops/vec_kernels.h"

#ifndef CPU_CAPABILITY
#error "vec_kernels_impl.cc is built by xxnpu_cpu_kernels, which defines CPU_CAPABILITY"
#endif

namespace xxnpu {
namespace CPU_CAPABILITY {
namespace {

using Vec = at::vec::Vectorized<float>;
using c10::BFloat16;

// Loads and stores one step of a row as float vectors: one vector of float32, or a
// vector of bfloat16 widened into two of float. `count` < kStep only at the row's tail.
template <typename T>
struct Io;

template <>
struct Io<float> {
  static constexpr int64_t kStep = Vec::size();
  static constexpr int kParts = 1;
  static void Load(const float* p, int64_t count, Vec* v) {
    v[0] = count == kStep ? Vec::loadu(p) : Vec::loadu(p, count);
  }
  static void Store(float* p, int64_t count, const Vec* v) {
    if (count == kStep) {
      v[0].store(p);
    } else {
      v[0].store(p, static_cast<int>(count));
    }
  }
};

template <>
struct Io<BFloat16> {
  using BVec = at::vec::Vectorized<BFloat16>;
  static constexpr int64_t kStep = BVec::size();
  static constexpr int kParts = 2;
  static_assert(kStep == 2 * Vec::size());
  static void Load(const BFloat16* p, int64_t count, Vec* v) {
    const BVec x = count == kStep ? BVec::loadu(p) : BVec::loadu(p, static_cast<int16_t>(count));
    auto [lo, hi] = at::vec::convert_bfloat16_float(x);
    v[0] = lo;
    v[1] = hi;
  }
  static void Store(BFloat16* p, int64_t count, const Vec* v) {
    const BVec y = at::vec::convert_float_bfloat16(v[0], v[1]);
    if (count == kStep) {
      y.store(p);
    } else {
      y.store(p, static_cast<int>(count));
    }
  }
};

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

Vec Sigmoid(const Vec& x) {
  const Vec one(1.0f);
  return one / (one + x.neg().exp());
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
    case VecUnaryOp::kSilu:
      return Map1<T>(out, in, n, [](const Vec& x) { return x / (Vec(1.0f) + x.neg().exp()); });
    case VecUnaryOp::kGelu:
      return Map1<T>(out, in, n, [](const Vec& x) {
        return Vec(0.5f) * x * (Vec(1.0f) + (x * Vec(kSqrt1_2)).erf());
      });
    case VecUnaryOp::kGeluTanh:
      return Map1<T>(out, in, n, [](const Vec& x) { return Vec(0.5f) * x * (Vec(1.0f) + GeluTanhInner(x).tanh()); });
    case VecUnaryOp::kAbs:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.abs(); });
    case VecUnaryOp::kNeg:
      return Map1<T>(out, in, n, [](const Vec& x) { return x.neg(); });
    case VecUnaryOp::kRelu:
      return Map1<T>(out, in, n, [](const Vec& x) { return Vec::blendv(x, Vec(0.0f), x < Vec(0.0f)); });
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
        const Vec cdf = Vec(0.5f) * (Vec(1.0f) + (x * Vec(kSqrt1_2)).erf());
        const Vec pdf = (Vec(-0.5f) * x * x).exp() * Vec(kInvSqrt2Pi);
        return g * (cdf + x * pdf);
      });
    case VecBinaryOp::kGeluTanhBackward:
      return Map2<T>(out, a, b, n, [](const Vec& g, const Vec& x) {
        const Vec t = GeluTanhInner(x).tanh();
        const Vec dinner = Vec(kSqrt2OverPi) * (Vec(1.0f) + Vec(3.0f * kGeluTanhCoeff) * x * x);
        return g * (Vec(0.5f) * (Vec(1.0f) + t) + Vec(0.5f) * x * (Vec(1.0f) - t * t) * dinner);
      });
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
  const Vec lowest(-std::numeric_limits<float>::infinity());
  Vec acc[Io<T>::kParts];
  for (auto& a : acc) a = lowest;
  for (int64_t i = 0; i < n; i += kStep) {
    const int64_t c = std::min(kStep, n - i);
    Vec v[Io<T>::kParts];
    Io<T>::Load(in + i, c, v);
    for (int k = 0; k < Io<T>::kParts; ++k) {
      // A partial load's zero lanes must not count: -inf there instead.
      const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
      const Vec x = valid == Vec::size() ? v[k] : Vec::set(lowest, v[k], valid);
      acc[k] = at::vec::maximum(acc[k], x);  // NaN propagates
    }
  }
  Vec m = acc[0];
  for (int k = 1; k < Io<T>::kParts; ++k) m = at::vec::maximum(m, acc[k]);
  float lanes[Vec::size()];
  m.store(lanes);
  float r = lanes[0];
  for (int64_t k = 1; k < Vec::size(); ++k) r = (std::isnan(r) || lanes[k] > r || std::isnan(lanes[k])) ? (std::isnan(r) ? r : lanes[k]) : r;
  return r;
}

template <typename T>
void Softmax(bool log, void* out_p, const void* in_p, int64_t n) {
  const float mx = Max<T>(in_p, n);
  const T* in = static_cast<const T*>(in_p);
  T* out = static_cast<T*>(out_p);
  constexpr int64_t kStep = Io<T>::kStep;
  const Vec vmx(mx);
  // Pass 2: the exp-sum. float32 keeps exp(x - max) in `out` for the scaling pass; a
  // bfloat16 out would round it twice, so that case recomputes it.
  constexpr bool kKeep = std::is_same_v<T, float>;
  Vec acc[Io<T>::kParts] = {};
  for (int64_t i = 0; i < n; i += kStep) {
    const int64_t c = std::min(kStep, n - i);
    Vec v[Io<T>::kParts];
    Io<T>::Load(in + i, c, v);
    for (int k = 0; k < Io<T>::kParts; ++k) {
      v[k] = (v[k] - vmx).exp();
      const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
      acc[k] = acc[k] + (valid == Vec::size() ? v[k] : Vec::set(Vec(0.0f), v[k], valid));
    }
    if (kKeep && !log) Io<T>::Store(out + i, c, v);
  }
  Vec s = acc[0];
  for (int k = 1; k < Io<T>::kParts; ++k) s = s + acc[k];
  const float sum = AddLanes(s);
  // Pass 3: the scale.
  if (log) {
    const Vec shift(mx + std::log(sum));
    Map1<T>(out, in, n, [shift](const Vec& x) { return x - shift; });
  } else if (kKeep) {
    const Vec scale(1.0f / sum);
    Map1<T>(out, out, n, [scale](const Vec& e) { return e * scale; });
  } else {
    const Vec scale(1.0f / sum);
    Map1<T>(out, in, n, [vmx, scale](const Vec& x) { return (x - vmx).exp() * scale; });
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

template <typename T>
void AccumulateRow(float* acc, const void* in_p, int64_t n) {
  const T* in = static_cast<const T*>(in_p);
  constexpr int64_t kStep = Io<T>::kStep;
  for (int64_t i = 0; i < n; i += kStep) {
    const int64_t c = std::min(kStep, n - i);
    Vec v[Io<T>::kParts];
    Io<T>::Load(in + i, c, v);
    for (int k = 0; k < Io<T>::kParts; ++k) {
      const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
      if (valid == 0) break;
      float* a = acc + i + k * Vec::size();
      if (valid == Vec::size()) {
        (Vec::loadu(a) + v[k]).store(a);
      } else {
        (Vec::loadu(a, valid) + v[k]).store(a, static_cast<int>(valid));
      }
    }
  }
}

template <typename T>
void MaxRow(float* acc, const void* in_p, int64_t n) {
  const T* in = static_cast<const T*>(in_p);
  constexpr int64_t kStep = Io<T>::kStep;
  for (int64_t i = 0; i < n; i += kStep) {
    const int64_t c = std::min(kStep, n - i);
    Vec v[Io<T>::kParts];
    Io<T>::Load(in + i, c, v);
    for (int k = 0; k < Io<T>::kParts; ++k) {
      const int64_t valid = std::clamp<int64_t>(c - k * Vec::size(), 0, Vec::size());
      if (valid == 0) break;
      float* a = acc + i + k * Vec::size();
      if (valid == Vec::size()) {
        at::vec::maximum(Vec::loadu(a), v[k]).store(a);  // NaN propagates
      } else {
        at::vec::maximum(Vec::loadu(a, valid), v[k]).store(a, static_cast<int>(valid));
      }
    }
  }
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

#define XXNPU_STRINGIFY2(x) #x
#define XXNPU_STRINGIFY(x) XXNPU_STRINGIFY2(x)

}  // namespace

extern const VecKernels kVecKernels;
const VecKernels kVecKernels = {
    XXNPU_STRINGIFY(CPU_CAPABILITY), &UnaryEntry, &BinaryEntry, &SumEntry, &MaxEntry, &SoftmaxEntry,
    // Index ops and outer-dim reductions.
    &AccumulateRowEntry, &MaxRowEntry, &SumSquaresEntry,
};

}  // namespace CPU_CAPABILITY
}  // namespace xxnpu
