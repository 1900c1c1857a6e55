// Vectorizable float32 math for device kernels. std::exp and std::tanh are scalar libm
// calls; the CPU backend's kernels use vectorized ones, so ours must too to keep pace.
#ifndef TORCH_XXNPU_OPS_FAST_MATH_H_
#define TORCH_XXNPU_OPS_FAST_MATH_H_

#include <bit>
#include <cstdint>

namespace xxnpu {

// exp(x) for float32 in a form the compiler vectorizes (std::exp is a scalar libm call;
// the CPU backend's kernels use a vectorized one, so ours must too to keep pace): Cephes'
// expf, exp(x) = 2^k exp(r) with k = round(x / ln 2), |r| <= ln 2 / 2, a degree-6
// polynomial for exp(r): about 1 ulp. x is clamped to [-87.3, 88.7] (results in
// [1.2e-38, 3.3e38]: no denormals or infinities); NaN stays NaN (it propagates through
// the polynomial). Branch-free; the selects below become vector blends only with
// -fno-trapping-math (set for the targets that use it in ops/BUILD.bazel).
inline float ExpF(float x) {
  float xc = x < -87.3f ? -87.3f : x;
  xc = xc > 88.7f ? 88.7f : xc;
  // Round to nearest by the 1.5 * 2^23 trick (no lrint call: it would not vectorize).
  const float k = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = (xc - k * 0.693359375f) - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(k) + 127) << 23);
  return p * scale;
}

// 1 / (1 + exp(-x)): a few ulp, saturating to exactly 0 and 1.
inline float SigmoidF(float x) { return 1.0f / (1.0f + ExpF(-x)); }

// tanh(x) = 1 - 2 / (1 + exp(2x)): within ~1.2e-7 absolute (the subtraction from 1 costs
// the relative accuracy of tiny results, not the absolute one), exactly +-1 at the ends.
inline float TanhF(float x) { return 1.0f - 2.0f / (1.0f + ExpF(2.0f * x)); }

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_FAST_MATH_H_
