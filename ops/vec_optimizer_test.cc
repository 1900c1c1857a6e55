// The fused optimizers' SIMD spans (vec_optimizer.h) of every CPU capability this host can
// run, against a double-precision reference of fused_optimizer_ops.cc's scalar loop: vector
// tails (sizes around the 8/16-float and 16/32-bfloat16 widths, nothing written past a
// span), bfloat16, each variant (amsgrad, GradScaler's unscale written back, Adam's L2 vs
// AdamW's decay, maximize), and amsgrad's NaN propagation.
#include "ops/vec_optimizer.h"

#include <c10/util/BFloat16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/cpu_capability.h"
#include "ops/vec_test_util.h"

namespace xxnpu {
namespace {

using c10::BFloat16;
using vec_test::Close;
using vec_test::kGuard;
using vec_test::kSentinel;
using vec_test::Values;

const std::vector<int64_t> kSizes = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65, 100, 1001};

std::vector<const VecOptimizerKernels*> Tables() {
  return vec_test::AllLevels<VecOptimizerKernels>(&VecOptimizerKernelsFor);
}

struct Variant {
  std::string name;
  bool amsgrad, store_grad;
  VecAdamConsts c;
};

VecAdamConsts Consts(bool adamw, bool maximize, double lr, double weight_decay, double scale, double step) {
  const double beta1 = 0.9, beta2 = 0.999;
  VecAdamConsts c;
  c.beta1 = beta1;
  c.one_minus_beta1 = 1 - beta1;
  c.beta2 = beta2;
  c.one_minus_beta2 = 1 - beta2;
  c.eps = 1e-8;
  c.decay = adamw ? 1 - lr * weight_decay : 1;
  c.l2 = adamw ? 0 : weight_decay;
  c.sign = maximize ? -1 : 1;
  c.scale = scale;
  c.step_size = lr / (1 - std::pow(beta1, step));
  c.bias_correction2_sqrt = std::sqrt(1 - std::pow(beta2, step));
  return c;
}

std::vector<Variant> Variants() {
  return {
      {"adam", false, false, Consts(false, false, 0.01, 0, 1, 1)},
      {"adam_l2_amsgrad", true, false, Consts(false, false, 0.02, 0.05, 1, 3)},
      {"adamw_maximize_scaled", false, true, Consts(true, true, 0.01, 0.1, 4, 2)},
      {"adamw_amsgrad_scaled", true, true, Consts(true, false, 0.03, 0.1, 0.5, 7)},
  };
}

template <typename T>
void CheckAdam(const VecOptimizerKernels& k, const Variant& var) {
  const bool bf16 = std::is_same_v<T, BFloat16>;
  const double rtol = bf16 ? 8e-3 : 2e-6, atol = bf16 ? 1e-4 : 1e-7;
  for (int64_t n : kSizes) {
    SCOPED_TRACE(std::string(k.capability) + " " + var.name + (bf16 ? " bfloat16" : " float") +
                 " n=" + std::to_string(n));
    // Each buffer: n values then kGuard sentinels.
    auto make = [&](double lo, double hi, int seed) {
      std::vector<float> f = Values(n, lo, hi, seed);
      std::vector<T> t(n + kGuard, static_cast<T>(kSentinel));
      for (int64_t i = 0; i < n; ++i) t[i] = static_cast<T>(f[i]);
      return t;
    };
    std::vector<T> param = make(-2, 2, 1), grad = make(-1, 1, 2), m = make(-0.1, 0.1, 3), v = make(0, 0.01, 4),
                   vmax = make(0, 0.02, 5);
    const std::vector<T> param0 = param, grad0 = grad, m0 = m, v0 = v, vmax0 = vmax;
    k.adam(bf16 ? VecDtype::kBFloat16 : VecDtype::kFloat, var.amsgrad, var.store_grad,
           {param.data(), grad.data(), m.data(), v.data(), vmax.data()}, n, var.c);
    const VecAdamConsts& c = var.c;
    for (int64_t i = 0; i < n; ++i) {
      double g = static_cast<double>(grad0[i]) / c.scale;
      const double stored_grad = g;
      g *= c.sign;
      double w = static_cast<double>(param0[i]);
      if (c.l2 != 0) g += c.l2 * w;
      w *= c.decay;
      const double mm = c.beta1 * static_cast<double>(m0[i]) + c.one_minus_beta1 * g;
      const double vv = c.beta2 * static_cast<double>(v0[i]) + c.one_minus_beta2 * g * g;
      const double vhat = var.amsgrad ? std::max(static_cast<double>(vmax0[i]), vv) : vv;
      const double want = w - c.step_size * mm / (std::sqrt(vhat) / c.bias_correction2_sqrt + c.eps);
      ASSERT_TRUE(Close(static_cast<double>(param[i]), want, rtol, atol)) << i << ": " << param[i] << " vs " << want;
      ASSERT_TRUE(Close(static_cast<double>(m[i]), mm, rtol, atol)) << i;
      ASSERT_TRUE(Close(static_cast<double>(v[i]), vv, rtol, atol)) << i;
      const double want_grad = var.store_grad ? stored_grad : static_cast<double>(grad0[i]);
      ASSERT_TRUE(Close(static_cast<double>(grad[i]), want_grad, rtol, atol)) << i;
      const double want_max = var.amsgrad ? vhat : static_cast<double>(vmax0[i]);
      ASSERT_TRUE(Close(static_cast<double>(vmax[i]), want_max, rtol, atol)) << i;
    }
    const float sentinel = static_cast<float>(static_cast<T>(kSentinel));  // as the dtype stores it
    for (int64_t i = n; i < n + kGuard; ++i) {
      ASSERT_EQ(static_cast<float>(param[i]), sentinel) << "param written past the span at " << i;
      ASSERT_EQ(static_cast<float>(grad[i]), sentinel) << "grad written past the span at " << i;
      ASSERT_EQ(static_cast<float>(m[i]), sentinel) << "exp_avg written past the span at " << i;
      ASSERT_EQ(static_cast<float>(v[i]), sentinel) << "exp_avg_sq written past the span at " << i;
      ASSERT_EQ(static_cast<float>(vmax[i]), sentinel) << "max_exp_avg_sq written past the span at " << i;
    }
  }
}

TEST(VecOptimizerTest, AdamMatchesTheScalarStepAtEveryLevel) {
  const std::vector<const VecOptimizerKernels*> tables = Tables();
  ASSERT_FALSE(tables.empty());
  for (const VecOptimizerKernels* k : tables) {
    for (const Variant& var : Variants()) {
      CheckAdam<float>(*k, var);
      CheckAdam<BFloat16>(*k, var);
    }
  }
}

// amsgrad keeps a NaN in either the running max or the new second moment, as the scalar
// loop's (old != old || old > v) ? old : v does, at every lane (a NaN in one lane must not
// leak into its neighbours).
TEST(VecOptimizerTest, AmsgradPropagatesNaNPerLane) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const VecOptimizerKernels* k : Tables()) {
    SCOPED_TRACE(k->capability);
    constexpr int64_t n = 37;
    std::vector<float> param(n, 1.0f), grad(n, 0.5f), m(n, 0.0f), v(n, 0.0f), vmax(n, 0.0f);
    vmax[3] = nan;  // the old max is NaN
    grad[20] = nan;  // the new moment is NaN
    k->adam(VecDtype::kFloat, true, false, {param.data(), grad.data(), m.data(), v.data(), vmax.data()}, n,
            Consts(true, false, 0.01, 0, 1, 1));
    for (int64_t i = 0; i < n; ++i) {
      const bool poisoned = i == 3 || i == 20;
      EXPECT_EQ(std::isnan(vmax[i]), poisoned) << i;
      EXPECT_EQ(std::isnan(param[i]), poisoned) << i;
    }
  }
}

TEST(VecOptimizerTest, HostTableIsTheHighestLevelBuilt) {
  const VecOptimizerKernels* best = nullptr;
  for (const VecOptimizerKernels* k : Tables()) best = k;
  ASSERT_NE(best, nullptr);
  EXPECT_EQ(&HostVecOptimizerKernels(), best);
}

}  // namespace
}  // namespace xxnpu
