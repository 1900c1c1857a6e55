// The SIMD spans behind vec_optimizer.h. Compiled once per CPU capability (DEFAULT, AVX2,
// AVX512: xxnpu_cpu_kernels in bazel/xxnpu.bzl), so at::vec::Vectorized<float> is 8 or 16
// lanes wide there. The arithmetic is fused_optimizer_ops.cc's scalar loop, operation for
// operation and in the same order, so the two agree to rounding (only FMA contraction
// differs); bfloat16 is widened to float and rounded back to nearest-even on store.
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cstdint>

#include "ops/vec_io.h"
#include "ops/vec_optimizer.h"

#ifndef CPU_CAPABILITY
#error "vec_optimizer_impl.cc is built by xxnpu_cpu_kernels, which defines CPU_CAPABILITY"
#endif

namespace xxnpu {
namespace CPU_CAPABILITY {
namespace {

using vec_io::BFloat16;
using vec_io::Io;
using vec_io::Vec;

template <typename T, bool kAmsgrad, bool kStoreGrad>
void AdamSpan(const VecAdamSpan& s, int64_t n, const VecAdamConsts& c) {
  using L = Io<T>;
  auto* param = static_cast<T*>(s.param);
  auto* grad = static_cast<T*>(s.grad);
  auto* exp_avg = static_cast<T*>(s.exp_avg);
  auto* exp_avg_sq = static_cast<T*>(s.exp_avg_sq);
  auto* max_exp_avg_sq = static_cast<T*>(s.max_exp_avg_sq);
  const Vec beta1(c.beta1), one_minus_beta1(c.one_minus_beta1), beta2(c.beta2), one_minus_beta2(c.one_minus_beta2);
  const Vec eps(c.eps), decay(c.decay), l2(c.l2), sign(c.sign), scale(c.scale), step_size(c.step_size);
  const Vec bias_correction2_sqrt(c.bias_correction2_sqrt);
  // Skipped, not added as 0 * w, when off: an inf parameter would make the gradient NaN
  // (the CPU's fused step skips it too).
  const bool use_l2 = c.l2 != 0;
  for (int64_t i = 0; i < n; i += L::kStep) {
    const int64_t count = std::min(L::kStep, n - i);
    Vec g[L::kParts], w[L::kParts], m[L::kParts], v[L::kParts], vmax[L::kParts];
    L::Load(grad + i, count, g);
    L::Load(param + i, count, w);
    L::Load(exp_avg + i, count, m);
    L::Load(exp_avg_sq + i, count, v);
    if constexpr (kAmsgrad) L::Load(max_exp_avg_sq + i, count, vmax);
    for (int k = 0; k < L::kParts; ++k) g[k] = g[k] / scale;
    if constexpr (kStoreGrad) L::Store(grad + i, count, g);
    for (int k = 0; k < L::kParts; ++k) {
      g[k] = g[k] * sign;
      if (use_l2) g[k] = g[k] + l2 * w[k];
      w[k] = w[k] * decay;
      m[k] = beta1 * m[k] + one_minus_beta1 * g[k];
      v[k] = beta2 * v[k] + one_minus_beta2 * g[k] * g[k];
      Vec vhat = v[k];
      // NaN-propagating, as the scalar loop's (old != old || old > v) ? old : v.
      if constexpr (kAmsgrad) vhat = vmax[k] = at::vec::maximum(vmax[k], v[k]);
      const Vec denom = vhat.sqrt() / bias_correction2_sqrt + eps;
      w[k] = w[k] - step_size * m[k] / denom;
    }
    L::Store(param + i, count, w);
    L::Store(exp_avg + i, count, m);
    L::Store(exp_avg_sq + i, count, v);
    if constexpr (kAmsgrad) L::Store(max_exp_avg_sq + i, count, vmax);
  }
}

template <typename T>
void AdamTyped(bool amsgrad, bool store_grad, const VecAdamSpan& s, int64_t n, const VecAdamConsts& c) {
  if (amsgrad) {
    store_grad ? AdamSpan<T, true, true>(s, n, c) : AdamSpan<T, true, false>(s, n, c);
  } else {
    store_grad ? AdamSpan<T, false, true>(s, n, c) : AdamSpan<T, false, false>(s, n, c);
  }
}

void AdamEntry(VecDtype dtype, bool amsgrad, bool store_grad, const VecAdamSpan& s, int64_t n,
               const VecAdamConsts& c) {
  if (dtype == VecDtype::kFloat) {
    AdamTyped<float>(amsgrad, store_grad, s, n, c);
  } else {
    AdamTyped<BFloat16>(amsgrad, store_grad, s, n, c);
  }
}

}  // namespace

#define XXNPU_VEC_OPT_STRINGIFY2(x) #x
#define XXNPU_VEC_OPT_STRINGIFY(x) XXNPU_VEC_OPT_STRINGIFY2(x)

extern const VecOptimizerKernels kVecOptimizerKernels;
const VecOptimizerKernels kVecOptimizerKernels = {
    XXNPU_VEC_OPT_STRINGIFY(CPU_CAPABILITY),
    &AdamEntry,
};

}  // namespace CPU_CAPABILITY
}  // namespace xxnpu
