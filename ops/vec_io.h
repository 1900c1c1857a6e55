// The float-vector view of a dense row that the per-capability SIMD sources share
// (vec_kernels_impl.cc, vec_optimizer_impl.cc): included only by sources built by
// xxnpu_cpu_kernels, so Vectorized<float> is the capability's width and everything here
// lands in that build's namespace.
#ifndef TORCH_XXNPU_OPS_VEC_IO_H_
#define TORCH_XXNPU_OPS_VEC_IO_H_

#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>

#include <cstdint>

#ifndef CPU_CAPABILITY
#error "ops/vec_io.h is for sources built by xxnpu_cpu_kernels, which defines CPU_CAPABILITY"
#endif

namespace xxnpu {
namespace CPU_CAPABILITY {
namespace vec_io {

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
  // `v` rounded to this dtype and widened back.
  static Vec Round(const Vec& v) { return v; }
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
  static Vec Round(const Vec& v) { return std::get<0>(at::vec::convert_bfloat16_float(at::vec::convert_float_bfloat16(v, v))); }
  static void Store(BFloat16* p, int64_t count, const Vec* v) {
    const BVec y = at::vec::convert_float_bfloat16(v[0], v[1]);
    if (count == kStep) {
      y.store(p);
    } else {
      y.store(p, static_cast<int>(count));
    }
  }
};

// int8 (a weight row of the int8 weight-only linear): loaded, never stored. One float
// vector's worth of bytes, sign-extended and converted in registers (vpmovsxbd +
// vcvtdq2ps) at AVX2 and AVX-512; the row's tail, and the DEFAULT build, through a small
// array. (An element-wise loop with the tail test inside ran at half the float path's
// speed: the compiler did not vectorise it.)
template <>
struct Io<int8_t> {
  static constexpr int64_t kStep = Vec::size();
  static constexpr int kParts = 1;
  static void Load(const int8_t* p, int64_t count, Vec* v) {
#if defined(CPU_CAPABILITY_AVX512)
    if (count == kStep) {
      v[0] = Vec(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
      return;
    }
#elif defined(CPU_CAPABILITY_AVX2)
    if (count == kStep) {
      v[0] = Vec(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
      return;
    }
#endif
    alignas(64) float f[Vec::size()] = {};
    for (int64_t i = 0; i < count; ++i) f[i] = static_cast<float>(p[i]);
    v[0] = Vec::loadu(f);
  }
};

}  // namespace vec_io
}  // namespace CPU_CAPABILITY
}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_VEC_IO_H_
