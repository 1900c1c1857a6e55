// Helpers shared by the tests of the per-capability SIMD tables (vec_kernels_test.cc,
// vec_optimizer_test.cc): every level the host runs, deterministic inputs, a tolerance
// check, and the guard after a row that must stay untouched. testonly.
#ifndef TORCH_XXNPU_OPS_VEC_TEST_UTIL_H_
#define TORCH_XXNPU_OPS_VEC_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/cpu_capability.h"

namespace xxnpu::vec_test {

constexpr int64_t kGuard = 40;  // elements after each row that must stay untouched
constexpr float kSentinel = 12345.0f;

// The tables `table_for(capability)` gives for every level this host can run (it returns
// null for the others): DEFAULT, then AVX2 and AVX512 where available.
template <typename Table, typename TableFor>
std::vector<const Table*> AllLevels(TableFor table_for) {
  std::vector<const Table*> tables;
  for (CpuCapability c : {CpuCapability::kDefault, CpuCapability::kAvx2, CpuCapability::kAvx512}) {
    if (const Table* t = table_for(c)) tables.push_back(t);
  }
  return tables;
}

// Deterministic values spread over [lo, hi].
inline std::vector<float> Values(int64_t n, double lo, double hi, int seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    const double t = std::fmod((i + 1) * 0.6180339887 + seed * 0.37, 1.0);
    v[i] = static_cast<float>(lo + (hi - lo) * t);
  }
  return v;
}

// |got - want| <= atol + rtol * |want|; NaN and infinities must match exactly.
inline bool Close(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

}  // namespace xxnpu::vec_test

#endif  // TORCH_XXNPU_OPS_VEC_TEST_UTIL_H_
