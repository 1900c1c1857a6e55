// The SIMD inner loops (vec_kernels.h) of every CPU capability this host can run, against
// double-precision references: vector tails (sizes around the vector width, and nothing
// written past a row), bfloat16, broadcast operands, NaN handling, and that the host's
// table is the one torch chose (ATEN_CPU_CAPABILITY included: the _default_ test target
// runs this file with ATEN_CPU_CAPABILITY=default).
#include "ops/vec_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Version.h>
#include <c10/util/BFloat16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
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

// Row lengths around the vector widths (8 and 16 floats, 16 and 32 bfloat16s) and across
// a sum's 4096-element blocks.
const std::vector<int64_t> kSizes = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65, 100, 4097, 9001};

std::vector<const VecKernels*> Tables() { return vec_test::AllLevels<VecKernels>(&VecKernelsFor); }

// Runs `run(out, in...)` on float32 and bfloat16 rows of each size and checks each element
// against `ref` (in double, from the operands as stored), and the guard after the row.
struct Case {
  std::string name;
  double lo, hi;
  std::function<double(double)> ref;
  VecUnaryOp op;
};

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double Gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double GeluTanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

const std::vector<Case>& UnaryCases() {
  static const std::vector<Case> cases = {
      {"exp", -10, 10, [](double x) { return std::exp(x); }, VecUnaryOp::kExp},
      {"exp2", -10, 10, [](double x) { return std::exp2(x); }, VecUnaryOp::kExp2},
      {"expm1", -3, 3, [](double x) { return std::expm1(x); }, VecUnaryOp::kExpm1},
      {"log", 0.01, 100, [](double x) { return std::log(x); }, VecUnaryOp::kLog},
      {"log2", 0.01, 100, [](double x) { return std::log2(x); }, VecUnaryOp::kLog2},
      {"log10", 0.01, 100, [](double x) { return std::log10(x); }, VecUnaryOp::kLog10},
      {"log1p", -0.5, 5, [](double x) { return std::log1p(x); }, VecUnaryOp::kLog1p},
      {"sqrt", 0, 50, [](double x) { return std::sqrt(x); }, VecUnaryOp::kSqrt},
      {"rsqrt", 0.1, 50, [](double x) { return 1 / std::sqrt(x); }, VecUnaryOp::kRsqrt},
      {"reciprocal", 0.5, 5, [](double x) { return 1 / x; }, VecUnaryOp::kReciprocal},
      {"sin", -4, 4, [](double x) { return std::sin(x); }, VecUnaryOp::kSin},
      {"cos", -4, 4, [](double x) { return std::cos(x); }, VecUnaryOp::kCos},
      {"tan", -1, 1, [](double x) { return std::tan(x); }, VecUnaryOp::kTan},
      {"tanh", -5, 5, [](double x) { return std::tanh(x); }, VecUnaryOp::kTanh},
      {"sigmoid", -10, 10, Sigmoid, VecUnaryOp::kSigmoid},
      {"erf", -3, 3, [](double x) { return std::erf(x); }, VecUnaryOp::kErf},
      {"erfc", -3, 3, [](double x) { return std::erfc(x); }, VecUnaryOp::kErfc},
      {"asin", -0.99, 0.99, [](double x) { return std::asin(x); }, VecUnaryOp::kAsin},
      {"acos", -0.99, 0.99, [](double x) { return std::acos(x); }, VecUnaryOp::kAcos},
      {"atan", -10, 10, [](double x) { return std::atan(x); }, VecUnaryOp::kAtan},
      {"silu", -8, 8, [](double x) { return x * Sigmoid(x); }, VecUnaryOp::kSilu},
      {"gelu", -5, 5, Gelu, VecUnaryOp::kGelu},
      {"gelu_tanh", -5, 5, GeluTanh, VecUnaryOp::kGeluTanh},
      {"abs", -5, 5, [](double x) { return std::abs(x); }, VecUnaryOp::kAbs},
      {"neg", -5, 5, [](double x) { return -x; }, VecUnaryOp::kNeg},
      {"relu", -5, 5, [](double x) { return x > 0 ? x : 0.0; }, VecUnaryOp::kRelu},
      {"square", -5, 5, [](double x) { return x * x; }, VecUnaryOp::kSquare},
      {"cube", -5, 5, [](double x) { return x * x * x; }, VecUnaryOp::kCube},
      {"reciprocal_square", 0.5, 5, [](double x) { return 1 / (x * x); }, VecUnaryOp::kReciprocalSquare},
  };
  return cases;
}

template <typename T>
std::vector<T> Cast(const std::vector<float>& v) {
  return std::vector<T>(v.begin(), v.end());
}

TEST(VecKernels, HostTableIsTorchsChoice) {
  const std::string torch_choice = at::get_cpu_capability();
  EXPECT_STREQ(HostVecKernels().capability, CpuCapabilityName(HostCpuCapability()));
  if (torch_choice == "AVX512" || torch_choice == "AVX2" || torch_choice == "DEFAULT") {
    EXPECT_EQ(torch_choice, HostVecKernels().capability);
  }
  const char* env = std::getenv("ATEN_CPU_CAPABILITY");
  if (env != nullptr && std::string(env) == "default") {
    EXPECT_STREQ(HostVecKernels().capability, "DEFAULT");
    EXPECT_EQ(VecKernelsFor(CpuCapability::kAvx2), nullptr);  // nothing above the chosen level
  }
#if defined(__x86_64__)
  if (torch_choice == "AVX512") {
    EXPECT_NE(VecKernelsFor(CpuCapability::kAvx512), nullptr);
    EXPECT_NE(VecKernelsFor(CpuCapability::kAvx2), nullptr);
  }
#endif
  ASSERT_NE(VecKernelsFor(CpuCapability::kDefault), nullptr);
}

TEST(VecKernels, UnaryMatchesReferenceWithTailsAndGuards) {
  for (const VecKernels* k : Tables()) {
    for (const Case& c : UnaryCases()) {
      for (int64_t n : kSizes) {
        const std::vector<float> x = Values(n, c.lo, c.hi, 1);
        // float32
        std::vector<float> out(n + kGuard, kSentinel);
        k->unary(c.op, VecDtype::kFloat, out.data(), x.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(Close(out[i], c.ref(x[i]), 1e-5, 1e-6))
              << k->capability << " " << c.name << " n=" << n << " x=" << x[i] << " got " << out[i];
        }
        for (int64_t i = n; i < n + kGuard; ++i) ASSERT_EQ(out[i], kSentinel) << k->capability << " " << c.name;
        // bfloat16: the reference from the stored input, within bfloat16's rounding.
        const std::vector<BFloat16> xb = Cast<BFloat16>(x);
        std::vector<BFloat16> outb(n + kGuard, BFloat16(kSentinel));
        k->unary(c.op, VecDtype::kBFloat16, outb.data(), xb.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(Close(static_cast<float>(outb[i]), c.ref(static_cast<float>(xb[i])), 8e-3, 1e-5))
              << k->capability << " bf16 " << c.name << " n=" << n << " x=" << static_cast<float>(xb[i]);
        }
        for (int64_t i = n; i < n + kGuard; ++i) {
          ASSERT_EQ(static_cast<float>(outb[i]), static_cast<float>(BFloat16(kSentinel))) << c.name;
        }
      }
    }
  }
}

// float32 rows of the ops the CPU backend computes with MKL's VML go to the same VML in
// the host table (cpu_vml.h): its results are the CPU backend's, bit for bit, special
// values included, and nothing past the row is written.
TEST(VecKernels, HostFloatUnaryIsTheCpuBackends) {
  struct Op {
    const char* name;
    VecUnaryOp op;
    at::Tensor (*cpu)(const at::Tensor&);
    double lo, hi;
  };
  const std::vector<Op> ops = {
      {"exp", VecUnaryOp::kExp, at::exp, -10, 10},       {"log", VecUnaryOp::kLog, at::log, 0.01, 100},
      {"log2", VecUnaryOp::kLog2, at::log2, 0.01, 100},  {"log10", VecUnaryOp::kLog10, at::log10, 0.01, 100},
      {"sqrt", VecUnaryOp::kSqrt, at::sqrt, 0, 50},      {"tanh", VecUnaryOp::kTanh, at::tanh, -5, 5},
      {"erf", VecUnaryOp::kErf, at::erf, -3, 3},         {"erfc", VecUnaryOp::kErfc, at::erfc, -3, 3},
      {"sin", VecUnaryOp::kSin, at::sin, -4, 4},         {"cos", VecUnaryOp::kCos, at::cos, -4, 4},
      {"tan", VecUnaryOp::kTan, at::tan, -1, 1},         {"asin", VecUnaryOp::kAsin, at::asin, -1, 1},
      {"acos", VecUnaryOp::kAcos, at::acos, -1, 1},      {"atan", VecUnaryOp::kAtan, at::atan, -10, 10},
  };
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.0f, -0.0f, 1e-40f,
                                      -1e-40f, 1e30f, -1e30f, 88.8f, -104.0f};
  const auto same = [](float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0; };
  for (const Op& o : ops) {
    for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{4097}, int64_t{9001}, int64_t{-1}}) {
      std::vector<float> x = n < 0 ? special : Values(n, o.lo, o.hi, 3);
      const int64_t len = static_cast<int64_t>(x.size());
      std::vector<float> out(len + kGuard, kSentinel);
      HostVecKernels().unary(o.op, VecDtype::kFloat, out.data(), x.data(), len);
      const at::Tensor want = o.cpu(at::from_blob(x.data(), {len}, at::kFloat)).contiguous();
      const float* w = want.const_data_ptr<float>();
      for (int64_t i = 0; i < len; ++i) {
        ASSERT_TRUE(same(out[i], w[i])) << o.name << " n=" << len << " x=" << x[i] << ": got " << out[i]
                                        << ", the CPU backend " << w[i];
      }
      for (int64_t i = len; i < len + kGuard; ++i) ASSERT_EQ(out[i], kSentinel) << o.name;
    }
  }
}

TEST(VecKernels, UnaryKeepsNanAndInfinities) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {nan, inf, -inf, 0.0f, -0.0f};
  for (const VecKernels* k : Tables()) {
    std::vector<float> out(x.size());
    k->unary(VecUnaryOp::kExp, VecDtype::kFloat, out.data(), x.data(), 5);
    EXPECT_TRUE(std::isnan(out[0]));
    EXPECT_EQ(out[1], inf);
    EXPECT_EQ(out[2], 0.0f);
    EXPECT_EQ(out[3], 1.0f);
    k->unary(VecUnaryOp::kSigmoid, VecDtype::kFloat, out.data(), x.data(), 5);
    EXPECT_TRUE(std::isnan(out[0]));
    EXPECT_EQ(out[1], 1.0f);
    EXPECT_EQ(out[2], 0.0f);
    k->unary(VecUnaryOp::kTanh, VecDtype::kFloat, out.data(), x.data(), 5);
    EXPECT_EQ(out[1], 1.0f);
    EXPECT_EQ(out[2], -1.0f);
    // relu and abs as the CPU backend: NaN propagates; relu keeps -0.0, abs clears its sign.
    k->unary(VecUnaryOp::kRelu, VecDtype::kFloat, out.data(), x.data(), 5);
    EXPECT_TRUE(std::isnan(out[0])) << k->capability;
    EXPECT_EQ(out[1], inf);
    EXPECT_EQ(out[2], 0.0f);
    EXPECT_TRUE(std::signbit(out[4])) << k->capability;
    k->unary(VecUnaryOp::kAbs, VecDtype::kFloat, out.data(), x.data(), 5);
    EXPECT_TRUE(std::isnan(out[0])) << k->capability;
    EXPECT_EQ(out[2], inf);
    EXPECT_FALSE(std::signbit(out[4])) << k->capability;
    k->unary(VecUnaryOp::kNeg, VecDtype::kFloat, out.data(), x.data(), 5);
    EXPECT_EQ(out[1], -inf);
    EXPECT_TRUE(std::signbit(out[3])) << k->capability;
    // gelu: x * Phi(x) with Phi(+inf) = 1 and Phi(-inf) = 0, so -inf * 0 is NaN, as CUDA's.
    k->unary(VecUnaryOp::kGelu, VecDtype::kFloat, out.data(), x.data(), 5);
    EXPECT_TRUE(std::isnan(out[0])) << k->capability;
    EXPECT_EQ(out[1], inf) << k->capability;
    EXPECT_TRUE(std::isnan(out[2])) << k->capability;
    EXPECT_EQ(out[3], 0.0f) << k->capability;
    // gelu backward at NaN is NaN; at +-inf the derivative is Phi: 1 and 0.
    const std::vector<float> g(x.size(), 1.0f);
    k->binary(VecBinaryOp::kGeluBackward, VecDtype::kFloat, out.data(), VecOperand{g.data(), 0.0f},
              VecOperand{x.data(), 0.0f}, 5, 0.0f);
    EXPECT_TRUE(std::isnan(out[0])) << k->capability;
    EXPECT_NEAR(out[3], 0.5f, 1e-6) << k->capability;
  }
}

// gelu's cdf for x < 0 is erfc(|x| / sqrt 2) / 2 taken as it is. As 1 + erf(z) in float it
// cancels: at x = -5 it kept one significant digit, from x = -6 on none. The approximation's
// own relative error in the tail is 1% at x = -8 (0.2% at x = -5).
TEST(VecKernels, GeluNegativeTailKeepsRelativeAccuracy) {
  for (const VecKernels* k : Tables()) {
    const std::vector<float> x = Values(301, -8, -3, 21);
    std::vector<float> out(x.size()), dx(x.size());
    const std::vector<float> g(x.size(), 1.0f);
    k->unary(VecUnaryOp::kGelu, VecDtype::kFloat, out.data(), x.data(), 301);
    k->binary(VecBinaryOp::kGeluBackward, VecDtype::kFloat, dx.data(), VecOperand{g.data(), 0.0f},
              VecOperand{x.data(), 0.0f}, 301, 0.0f);
    for (size_t i = 0; i < x.size(); ++i) {
      const double cdf = 0.5 * std::erfc(-x[i] / std::sqrt(2.0)), pdf = std::exp(-0.5 * x[i] * x[i]) / std::sqrt(2 * M_PI);
      const double want = x[i] * cdf;
      ASSERT_NEAR(out[i], want, 0.015 * std::abs(want)) << k->capability << " x=" << x[i];
      // The backward cdf + x pdf cancels by itself (its terms have opposite signs): absolute.
      ASSERT_NEAR(dx[i], cdf + x[i] * pdf, 1e-6) << k->capability << " x=" << x[i];
    }
  }
}

struct BinaryCase {
  std::string name;
  VecBinaryOp op;
  float param;
  std::function<double(double, double)> ref;
};

TEST(VecKernels, BinaryMatchesReferenceDenseAndBroadcast) {
  const std::vector<BinaryCase> cases = {
      {"add", VecBinaryOp::kAdd, 1.0f, [](double a, double b) { return a + b; }},
      {"add_alpha", VecBinaryOp::kAdd, -2.5f, [](double a, double b) { return a - 2.5 * b; }},
      {"mul", VecBinaryOp::kMul, 0, [](double a, double b) { return a * b; }},
      {"div", VecBinaryOp::kDiv, 0, [](double a, double b) { return a / b; }},
      {"maximum", VecBinaryOp::kMaximum, 0, [](double a, double b) { return a > b ? a : b; }},
      {"minimum", VecBinaryOp::kMinimum, 0, [](double a, double b) { return a < b ? a : b; }},
      {"threshold_backward", VecBinaryOp::kThresholdBackward, 0.25f,
       [](double g, double x) { return x <= 0.25 ? 0.0 : g; }},
      {"sigmoid_backward", VecBinaryOp::kSigmoidBackward, 0, [](double g, double s) { return g * (1 - s) * s; }},
      {"tanh_backward", VecBinaryOp::kTanhBackward, 0, [](double g, double t) { return g * (1 - t * t); }},
      {"silu_backward", VecBinaryOp::kSiluBackward, 0,
       [](double g, double x) { return g * Sigmoid(x) * (1 + x * (1 - Sigmoid(x))); }},
      {"gelu_backward", VecBinaryOp::kGeluBackward, 0,
       [](double g, double x) {
         return g * (0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI));
       }},
      {"silu_mul", VecBinaryOp::kSiluMul, 0, [](double a, double b) { return a * Sigmoid(a) * b; }},
      {"pow", VecBinaryOp::kPow, 0, [](double a, double b) { return std::pow(a, b); }},
      {"gelu_tanh_backward", VecBinaryOp::kGeluTanhBackward, 0,
       [](double g, double x) {
         const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
         return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x));
       }},
  };
  for (const VecKernels* k : Tables()) {
    for (const BinaryCase& c : cases) {
      for (int64_t n : kSizes) {
        const std::vector<float> a = Values(n, -3, 3, 2), b = Values(n, 0.5, 3, 3);
        // dense, a broadcast scalar first, a broadcast scalar second
        for (int form = 0; form < 3; ++form) {
          const VecOperand va = form == 1 ? VecOperand{nullptr, 1.75f} : VecOperand{a.data(), 0};
          const VecOperand vb = form == 2 ? VecOperand{nullptr, 0.625f} : VecOperand{b.data(), 0};
          std::vector<float> out(n + kGuard, kSentinel);
          k->binary(c.op, VecDtype::kFloat, out.data(), va, vb, n, c.param);
          for (int64_t i = 0; i < n; ++i) {
            const double x = form == 1 ? 1.75 : a[i], y = form == 2 ? 0.625 : b[i];
            ASSERT_TRUE(Close(out[i], c.ref(x, y), 1e-5, 1e-6))
                << k->capability << " " << c.name << " form " << form << " n=" << n << " got " << out[i];
          }
          for (int64_t i = n; i < n + kGuard; ++i) ASSERT_EQ(out[i], kSentinel) << c.name;
        }
        const std::vector<BFloat16> ab = Cast<BFloat16>(a), bb = Cast<BFloat16>(b);
        std::vector<BFloat16> outb(n + kGuard, BFloat16(kSentinel));
        k->binary(c.op, VecDtype::kBFloat16, outb.data(), VecOperand{ab.data(), 0}, VecOperand{bb.data(), 0}, n,
                  c.param);
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_TRUE(Close(static_cast<float>(outb[i]),
                            c.ref(static_cast<float>(ab[i]), static_cast<float>(bb[i])), 8e-3, 1e-5))
              << k->capability << " bf16 " << c.name << " n=" << n;
        }
        for (int64_t i = n; i < n + kGuard; ++i) {
          ASSERT_EQ(static_cast<float>(outb[i]), static_cast<float>(BFloat16(kSentinel))) << c.name;
        }
      }
    }
  }
}

TEST(VecKernels, ComparisonsWriteBoolsWithNanSemantics) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<VecBinaryOp, std::function<bool(float, float)>>> ops = {
      {VecBinaryOp::kEq, [](float a, float b) { return a == b; }},
      {VecBinaryOp::kNe, [](float a, float b) { return a != b; }},
      {VecBinaryOp::kLt, [](float a, float b) { return a < b; }},
      {VecBinaryOp::kLe, [](float a, float b) { return a <= b; }},
      {VecBinaryOp::kGt, [](float a, float b) { return a > b; }},
      {VecBinaryOp::kGe, [](float a, float b) { return a >= b; }},
  };
  for (const VecKernels* k : Tables()) {
    for (const auto& [op, ref] : ops) {
      for (int64_t n : kSizes) {
        std::vector<float> a = Values(n, -2, 2, 4), b = Values(n, -2, 2, 5);
        for (int64_t i = 0; i < n; i += 3) b[i] = a[i];  // equal pairs
        for (int64_t i = 1; i < n; i += 7) a[i] = nan;
        for (const bool scalar_b : {false, true}) {
          std::vector<uint8_t> out(n + kGuard, 7);
          const VecOperand vb = scalar_b ? VecOperand{nullptr, 0.5f} : VecOperand{b.data(), 0};
          k->binary(op, VecDtype::kFloat, out.data(), VecOperand{a.data(), 0}, vb, n, 0);
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(out[i], ref(a[i], scalar_b ? 0.5f : b[i]) ? 1 : 0) << k->capability << " n=" << n << " i=" << i;
          }
          for (int64_t i = n; i < n + kGuard; ++i) ASSERT_EQ(out[i], 7);
          const std::vector<BFloat16> ab = Cast<BFloat16>(a), bb = Cast<BFloat16>(b);
          std::vector<uint8_t> outb(n + kGuard, 7);
          k->binary(op, VecDtype::kBFloat16, outb.data(), VecOperand{ab.data(), 0}, VecOperand{bb.data(), 0}, n, 0);
          for (int64_t i = 0; i < n; ++i) {
            ASSERT_EQ(outb[i], ref(static_cast<float>(ab[i]), static_cast<float>(bb[i])) ? 1 : 0) << "bf16 i=" << i;
          }
          for (int64_t i = n; i < n + kGuard; ++i) ASSERT_EQ(outb[i], 7);
        }
      }
    }
  }
}

TEST(VecKernels, SumAndMaxOverTails) {
  for (const VecKernels* k : Tables()) {
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{33}, int64_t{4095}, int64_t{4097},
                      int64_t{100003}}) {
      // All negative: a tail whose padding counted as 0 would make the max 0.
      const std::vector<float> x = Values(n, -3, -1, 6);
      double want = 0;
      float mx = -std::numeric_limits<float>::infinity();
      for (float v : x) {
        want += v;
        mx = std::max(mx, v);
      }
      EXPECT_NEAR(k->sum(VecDtype::kFloat, x.data(), n), want, 1e-6 * std::abs(want) + 1e-6) << k->capability << n;
      EXPECT_EQ(k->max(VecDtype::kFloat, x.data(), n), mx) << k->capability << " n=" << n;
      const std::vector<BFloat16> xb = Cast<BFloat16>(x);
      double want_b = 0;
      float mx_b = -std::numeric_limits<float>::infinity();
      for (BFloat16 v : xb) {
        want_b += static_cast<float>(v);
        mx_b = std::max(mx_b, static_cast<float>(v));
      }
      EXPECT_NEAR(k->sum(VecDtype::kBFloat16, xb.data(), n), want_b, 1e-6 * std::abs(want_b) + 1e-6) << n;
      EXPECT_EQ(k->max(VecDtype::kBFloat16, xb.data(), n), mx_b) << k->capability << " n=" << n;
    }
    // NaN anywhere (the tail included) makes the max NaN.
    for (int64_t n : {int64_t{5}, int64_t{16}, int64_t{35}}) {
      std::vector<float> x = Values(n, -3, 3, 7);
      x[n - 1] = std::numeric_limits<float>::quiet_NaN();
      EXPECT_TRUE(std::isnan(k->max(VecDtype::kFloat, x.data(), n))) << k->capability << " n=" << n;
    }
    // The max and a NaN at every position of a row long enough for all of Max's parallel
    // chains (4 x 32 bfloat16 lanes at most) plus a tail: each chain is folded in.
    const int64_t n = 4 * 32 * 2 + 21;
    for (int64_t at = 0; at < n; ++at) {
      std::vector<float> x = Values(n, -3, 3, 5);
      x[at] = 7.5f;  // exact in bfloat16 too
      const std::vector<BFloat16> xb = Cast<BFloat16>(x);
      ASSERT_EQ(k->max(VecDtype::kFloat, x.data(), n), 7.5f) << k->capability << " at=" << at;
      ASSERT_EQ(k->max(VecDtype::kBFloat16, xb.data(), n), 7.5f) << k->capability << " at=" << at;
      x[at] = std::numeric_limits<float>::quiet_NaN();
      const std::vector<BFloat16> nb = Cast<BFloat16>(x);
      ASSERT_TRUE(std::isnan(k->max(VecDtype::kFloat, x.data(), n))) << k->capability << " at=" << at;
      ASSERT_TRUE(std::isnan(k->max(VecDtype::kBFloat16, nb.data(), n))) << k->capability << " at=" << at;
    }
  }
}

// accumulate_row / max_row (outer-dim reductions, embedding backward) and sum_squares
// (the 2-norm): every element of a row with a tail, nothing written past it, NaN kept.
TEST(VecKernels, RowAccumulationAndSumSquaresOverTails) {
  for (const VecKernels* k : Tables()) {
    for (int64_t n : kSizes) {
      const std::vector<float> x = Values(n, -3, 3, 8);
      const std::vector<BFloat16> xb = Cast<BFloat16>(x);
      for (VecDtype dtype : {VecDtype::kFloat, VecDtype::kBFloat16}) {
        const void* in = dtype == VecDtype::kFloat ? static_cast<const void*>(x.data()) : xb.data();
        auto elem = [&](int64_t i) { return dtype == VecDtype::kFloat ? x[i] : static_cast<float>(xb[i]); };
        std::vector<float> acc(n + kGuard, kSentinel), mx(n + kGuard, kSentinel);
        for (int64_t i = 0; i < n; ++i) {
          acc[i] = 0.5f * static_cast<float>(i);
          mx[i] = i % 3 == 0 ? -10.0f : 1.0f;
        }
        if (n > 2) mx[n - 1] = std::numeric_limits<float>::quiet_NaN();  // a NaN in the tail stays
        k->accumulate_row(dtype, acc.data(), in, n);
        k->max_row(dtype, mx.data(), in, n);
        double squares = 0;
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_FLOAT_EQ(acc[i], 0.5f * static_cast<float>(i) + elem(i)) << k->capability << " n=" << n << " i=" << i;
          if (n > 2 && i == n - 1) {
            EXPECT_TRUE(std::isnan(mx[i])) << k->capability << " n=" << n;
          } else {
            EXPECT_EQ(mx[i], std::max(i % 3 == 0 ? -10.0f : 1.0f, elem(i))) << k->capability << " n=" << n << " i=" << i;
          }
          squares += static_cast<double>(elem(i)) * elem(i);
        }
        for (int64_t i = n; i < n + kGuard; ++i) {
          ASSERT_EQ(acc[i], kSentinel) << k->capability << " wrote past the row, n=" << n;
          ASSERT_EQ(mx[i], kSentinel) << k->capability << " wrote past the row, n=" << n;
        }
        EXPECT_NEAR(k->sum_squares(dtype, in, n), squares, 1e-6 * squares + 1e-6) << k->capability << " n=" << n;
      }
    }
    // A NaN input propagates into max_row's accumulator.
    std::vector<float> x = Values(19, -3, 3, 9), acc(19, 0.0f);
    x[18] = std::numeric_limits<float>::quiet_NaN();
    k->max_row(VecDtype::kFloat, acc.data(), x.data(), 19);
    EXPECT_TRUE(std::isnan(acc[18])) << k->capability;
  }
}

TEST(VecKernels, SoftmaxRowsMatchReference) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const VecKernels* k : Tables()) {
    for (const bool log : {false, true}) {
      for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{16}, int64_t{17}, int64_t{33}, int64_t{1000}}) {
        std::vector<float> x = Values(n, -20, 20, 8);
        if (n > 3) x[2] = -inf;  // a masked position
        double mx = -INFINITY, sum = 0;
        for (float v : x) mx = std::max<double>(mx, v);
        for (float v : x) sum += std::exp(v - mx);
        std::vector<float> out(n + kGuard, kSentinel);
        k->softmax(log, VecDtype::kFloat, out.data(), x.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          const double want = log ? x[i] - mx - std::log(sum) : std::exp(x[i] - mx) / sum;
          ASSERT_TRUE(Close(out[i], want, 1e-5, 1e-7)) << k->capability << " log=" << log << " n=" << n << " i=" << i;
        }
        for (int64_t i = n; i < n + kGuard; ++i) ASSERT_EQ(out[i], kSentinel);
        const std::vector<BFloat16> xb = Cast<BFloat16>(x);
        std::vector<BFloat16> outb(n);
        k->softmax(log, VecDtype::kBFloat16, outb.data(), xb.data(), n);
        double mxb = -INFINITY, sumb = 0;
        for (BFloat16 v : xb) mxb = std::max<double>(mxb, static_cast<float>(v));
        for (BFloat16 v : xb) sumb += std::exp(static_cast<float>(v) - mxb);
        for (int64_t i = 0; i < n; ++i) {
          const double v = static_cast<float>(xb[i]);
          const double want = log ? v - mxb - std::log(sumb) : std::exp(v - mxb) / sumb;
          ASSERT_TRUE(Close(static_cast<float>(outb[i]), want, 8e-3, 1e-6)) << "bf16 log=" << log << " i=" << i;
        }
      }
    }
    // bfloat16 rows longer than the float row a compute thread keeps: exp is recomputed.
    for (const int64_t n : {int64_t{(1 << 16) - 3}, int64_t{(1 << 16) + 5}}) {
      const std::vector<BFloat16> xb = Cast<BFloat16>(Values(n, -20, 20, 10));
      std::vector<BFloat16> outb(n);
      k->softmax(false, VecDtype::kBFloat16, outb.data(), xb.data(), n);
      double mxb = -INFINITY, sumb = 0;
      for (BFloat16 v : xb) mxb = std::max<double>(mxb, static_cast<float>(v));
      for (BFloat16 v : xb) sumb += std::exp(static_cast<float>(v) - mxb);
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(static_cast<float>(xb[i]) - mxb) / sumb;
        ASSERT_TRUE(Close(static_cast<float>(outb[i]), want, 8e-3, 1e-9)) << k->capability << " n=" << n << " i=" << i;
      }
    }
    // In place, as torch's softmax_(x) would.
    std::vector<float> x = Values(37, -5, 5, 9), y(37);
    k->softmax(false, VecDtype::kFloat, y.data(), x.data(), 37);
    k->softmax(false, VecDtype::kFloat, x.data(), x.data(), 37);
    for (int i = 0; i < 37; ++i) ASSERT_EQ(x[i], y[i]);
  }
}

// dot_rows against a double reference: m from 1 to past kDotRowsMaxM (the row blocks), k
// around the vector widths, an odd n (the last single row of w), leading dims past the
// rows (strided storage), alpha and beta, and C's padding between rows left untouched.
TEST(VecKernels, DotRowsMatchReference) {
  for (const VecKernels* t : Tables()) {
    for (int64_t m : {1, 2, 5, 8, 9, 17}) {
      for (int64_t k : {1, 7, 16, 33, 100, 517}) {
        const int64_t n = 13, lda = k + 3, ldw = k + 5, ldo = n + 2;
        const std::vector<float> a = Values(m * lda, -2, 2, 11), w = Values(n * ldw, -1, 1, 12);
        const std::vector<BFloat16> ab = Cast<BFloat16>(a), wb = Cast<BFloat16>(w);
        for (VecDtype dtype : {VecDtype::kFloat, VecDtype::kBFloat16}) {
          const bool f32 = dtype == VecDtype::kFloat;
          auto av = [&](int64_t i) { return f32 ? a[i] : static_cast<float>(ab[i]); };
          auto wv = [&](int64_t i) { return f32 ? w[i] : static_cast<float>(wb[i]); };
          for (float beta : {0.0f, 0.5f}) {
            std::vector<float> out(m * ldo, kSentinel), c0 = Values(m * ldo, -1, 1, 13);
            std::vector<BFloat16> outb(m * ldo, BFloat16(kSentinel));
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                out[i * ldo + j] = c0[i * ldo + j];
                outb[i * ldo + j] = BFloat16(c0[i * ldo + j]);
              }
            }
            t->dot_rows(dtype, m, n, k, f32 ? static_cast<const void*>(a.data()) : ab.data(), lda,
                        f32 ? static_cast<const void*>(w.data()) : wb.data(), ldw,
                        f32 ? static_cast<void*>(out.data()) : outb.data(), ldo, 1.5f, beta);
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < ldo; ++j) {
                const float got = f32 ? out[i * ldo + j] : static_cast<float>(outb[i * ldo + j]);
                if (j >= n) {
                  const float sentinel = f32 ? kSentinel : static_cast<float>(BFloat16(kSentinel));  // as stored
                  ASSERT_EQ(got, sentinel) << t->capability << " wrote into C's padding, m=" << m << " k=" << k;
                  continue;
                }
                double d = 0, mag = 0;
                for (int64_t p = 0; p < k; ++p) {
                  d += static_cast<double>(av(i * lda + p)) * wv(j * ldw + p);
                  mag += std::abs(static_cast<double>(av(i * lda + p)) * wv(j * ldw + p));
                }
                const double c = f32 ? c0[i * ldo + j] : static_cast<float>(BFloat16(c0[i * ldo + j]));
                const double want = 1.5 * d + beta * c;
                const double tol = f32 ? 1e-6 * (1.5 * mag + 1) : 8e-3 * (1.5 * mag + 1);
                EXPECT_NEAR(got, want, tol) << t->capability << (f32 ? " float" : " bfloat16") << " m=" << m
                                            << " k=" << k << " i=" << i << " j=" << j << " beta=" << beta;
              }
            }
          }
        }
      }
    }
  }
}

// dot_rows_int8_weight: int8 rows of W (the full range, -128 and 127 included) under float
// rows of A, every row count and tails of every width; each capability against a double
// reference, and nothing written past n.
TEST(VecKernels, DotRowsInt8WeightMatchReference) {
  for (const VecKernels* t : Tables()) {
    for (int64_t m : {1, 3, 8, 9, 17}) {
      for (int64_t k : {1, 7, 16, 33, 100, 517}) {
        const int64_t n = 13, lda = k + 3, ldw = k + 5, ldo = n + 2;
        const std::vector<float> a = Values(m * lda, -2, 2, 21);
        std::vector<int8_t> w(n * ldw);
        for (int64_t i = 0; i < n * ldw; ++i) w[i] = static_cast<int8_t>((i * 37 + 11) % 256 - 128);
        std::vector<float> out(m * ldo, kSentinel);
        t->dot_rows_int8_weight(m, n, k, a.data(), lda, w.data(), ldw, out.data(), ldo);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < ldo; ++j) {
            if (j >= n) {
              ASSERT_EQ(out[i * ldo + j], kSentinel) << t->capability << " wrote into C's padding";
              continue;
            }
            double d = 0, mag = 0;
            for (int64_t p = 0; p < k; ++p) {
              d += static_cast<double>(a[i * lda + p]) * w[j * ldw + p];
              mag += std::abs(static_cast<double>(a[i * lda + p]) * w[j * ldw + p]);
            }
            EXPECT_NEAR(out[i * ldo + j], d, 1e-6 * (mag + 1))
                << t->capability << " m=" << m << " k=" << k << " i=" << i << " j=" << j;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace xxnpu
