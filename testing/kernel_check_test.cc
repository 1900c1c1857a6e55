// The native add/sub/mul/div kernels through the kernel_check helper, and proof that the
// helper catches the kernel bugs it is meant to catch (wrong values, ignored strides,
// wrong NaN handling, a result left on the CPU).
#include "testing/kernel_check.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace testing {
namespace {

using ::testing::HasSubstr;
using Ts = std::vector<at::Tensor>;

bool OnDevice(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

KernelCheckOptions Only(std::vector<at::ScalarType> dtypes, bool nonzero_integer_divisors = false) {
  KernelCheckOptions options;
  options.dtypes = std::move(dtypes);
  options.nonzero_integer_divisors = nonzero_integer_divisors;
  return options;
}

TEST(KernelCheckNativeOps, AddSubMulDivMatchTheCpu) {
  KernelCheckOptions all;
  all.dtypes = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kInt, at::kLong, at::kBool};
  EXPECT_TRUE(CheckKernel("add", 2, [](const Ts& t) { return at::add(t[0], t[1]); }, all));
  const OpFn add_alpha = [](const Ts& t) { return at::add(t[0], t[1], 3); };
  EXPECT_TRUE(CheckKernel("add alpha", 2, add_alpha, Only({at::kFloat, at::kDouble, at::kLong})));
  // float16 with alpha: the CPU's non-vectorised path (small tensors, loop tails) rounds
  // alpha * other to half before adding, up to several ulps off where a and alpha * b
  // cancel; xxnpu computes in float and rounds once. Reference: the same, on the CPU.
  EXPECT_TRUE(CheckKernel("add alpha half", 2, add_alpha, Only({at::kHalf, at::kBFloat16}), [](const Ts& t) {
    return at::add(t[0].to(at::kFloat), t[1].to(at::kFloat), 3).to(t[0].scalar_type());
  }));
  EXPECT_TRUE(CheckKernel("mul", 2, [](const Ts& t) { return at::mul(t[0], t[1]); }, all));
  // bool - bool is rejected on both sides: the helper counts that as agreement.
  EXPECT_TRUE(CheckKernel("sub", 2, [](const Ts& t) { return at::sub(t[0], t[1]); }, all));
  // True division: integers promote to float, x / 0 is inf or nan on both sides.
  EXPECT_TRUE(CheckKernel("div", 2, [](const Ts& t) { return at::div(t[0], t[1]); }, all));
  EXPECT_TRUE(CheckKernel("div trunc", 2, [](const Ts& t) { return at::div(t[0], t[1], "trunc"); },
                          Only({at::kInt, at::kLong}, /*nonzero_integer_divisors=*/true)));
  EXPECT_TRUE(CheckKernel("div floor", 2, [](const Ts& t) { return at::div(t[0], t[1], "floor"); },
                          Only({at::kFloat, at::kDouble, at::kInt}, true)));
}

TEST(KernelCheckNativeOps, OutAndInplaceForms) {
  const KernelCheckOptions f = Only({at::kFloat, at::kHalf});
  EXPECT_TRUE(CheckKernel("mul.out", 2, [](const Ts& t) {
    at::Tensor out = at::empty({0}, t[0].options());
    at::mul_out(out, t[0], t[1]);
    return out;
  }, f));
  // In place on a private copy (the inputs are shared with nothing else), same shapes only.
  EXPECT_TRUE(CheckKernel("add_", 2, [](const Ts& t) {
    at::Tensor self = (t[0] + t[1] * 0).clone();
    self.add_(t[1]);
    return self;
  }, f));
}

TEST(KernelCheckSelfTest, CasesCoverTheLayoutsAndEdgeValues) {
  const std::vector<InputCase> cases = MakeCases(2, at::kFloat);
  bool noncontiguous = false, stride0 = false, empty = false, zero_dim = false, nan = false, inf = false,
       offset = false, broadcast = false;
  for (const InputCase& c : cases) {
    ASSERT_EQ(c.inputs.size(), 2u) << c.name;
    for (const at::Tensor& t : c.inputs) {
      noncontiguous |= !t.is_contiguous();
      offset |= t.storage_offset() != 0;
      empty |= t.numel() == 0;
      zero_dim |= t.dim() == 0;
      for (int64_t s : t.strides()) stride0 |= s == 0 && t.numel() > 1;
      nan |= t.isnan().any().item<bool>();
      inf |= t.isinf().any().item<bool>();
    }
    broadcast |= c.inputs[0].sizes() != c.inputs[1].sizes();
  }
  EXPECT_TRUE(noncontiguous && stride0 && empty && zero_dim && nan && inf && offset && broadcast);
  // Integers get no NaN case; the divisors can be kept nonzero.
  for (const InputCase& c : MakeCases(2, at::kInt, Only({at::kInt}, true))) {
    if (c.inputs[1].numel()) {
      EXPECT_FALSE((c.inputs[1] == 0).any().item<bool>()) << c.name;
    }
  }
}

TEST(KernelCheckSelfTest, DeviceCopiesKeepStridesAndOffset) {
  const at::Tensor base = at::arange(104, at::kFloat).view({8, 13});
  const at::Tensor view = base.slice(0, 1, 7).slice(1, 2, 13, 3);
  const at::Tensor dev = ToDeviceKeepStrides(view, c10::Device(c10::DeviceType::PrivateUse1, 0));
  EXPECT_TRUE(OnDevice(dev));
  EXPECT_EQ(dev.strides(), view.strides());
  EXPECT_EQ(dev.storage_offset(), view.storage_offset());
  EXPECT_TRUE(at::equal(dev.cpu(), view));
}

TEST(KernelCheckSelfTest, TolerancesFollowTheDtype) {
  const at::Tensor e = at::ones({4}, at::kHalf);
  EXPECT_TRUE(TensorsClose(e + 5e-4, e, DefaultTolerance(at::kHalf)));
  EXPECT_FALSE(TensorsClose(e.to(at::kFloat) + 5e-4, e.to(at::kFloat), DefaultTolerance(at::kFloat)));
  EXPECT_FALSE(TensorsClose(at::full({2}, 3, at::kLong), at::full({2}, 4, at::kLong), DefaultTolerance(at::kLong)));
  const double nan = std::nan("");
  const at::Tensor n = at::tensor({nan, 1.0});
  EXPECT_TRUE(TensorsClose(n, n.clone(), DefaultTolerance(at::kDouble)));
  EXPECT_FALSE(TensorsClose(at::tensor({1.0, 1.0}), n, DefaultTolerance(at::kDouble)));
  EXPECT_FALSE(TensorsClose(e, e.to(at::kFloat), DefaultTolerance(at::kFloat)));  // dtype differs
}

// Deliberately wrong "kernels": on the device they misbehave, on the CPU they are correct.
TEST(KernelCheckSelfTest, CatchesWrongValues) {
  const auto r = CheckKernel("bad add", 2, [](const Ts& t) {
    return OnDevice(t[0]) ? at::sub(t[0], t[1]) : at::add(t[0], t[1]);
  }, Only({at::kFloat}));
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("bad add [Float, case \"contiguous [7, 33]\"]"));
  EXPECT_THAT(r.message(), HasSubstr("elements differ beyond rtol"));
  EXPECT_THAT(r.message(), HasSubstr("shape=[7, 33]"));
}

TEST(KernelCheckSelfTest, CatchesAKernelThatIgnoresStrides) {
  // Reads each input's storage as if it were contiguous: right on contiguous inputs only.
  const auto r = CheckKernel("strideless add", 2, [](const Ts& t) {
    if (!OnDevice(t[0])) return at::add(t[0], t[1]);
    auto dense = [](const at::Tensor& x) {
      return x.as_strided(x.sizes(), c10::contiguous_strides(x.sizes()), x.storage_offset());
    };
    return at::add(dense(t[0]), dense(t[1]));
  }, Only({at::kFloat}));
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("non-contiguous"));
}

TEST(KernelCheckSelfTest, CatchesWrongNanHandling) {
  // Right on finite inputs; only the edge-value case exposes it.
  const auto r = CheckKernel("nan-squashing mul", 2, [](const Ts& t) {
    const at::Tensor y = at::mul(t[0], t[1]);
    return OnDevice(t[0]) ? at::nan_to_num(y, 0.0) : y;
  }, Only({at::kFloat}));
  ASSERT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("NaN/Inf"));
  EXPECT_THAT(r.message(), HasSubstr("expected nan"));
}

TEST(KernelCheckSelfTest, CatchesAResultLeftOnTheCpuAndOneSidedErrors) {
  const auto on_cpu = CheckKernel("cpu result", 2, [](const Ts& t) { return at::add(t[0].cpu(), t[1].cpu()); },
                                  Only({at::kFloat}));
  ASSERT_FALSE(on_cpu);
  EXPECT_THAT(on_cpu.message(), HasSubstr("result is on cpu"));
  const auto raises = CheckKernel("raises on device", 1, [](const Ts& t) {
    TORCH_CHECK(!OnDevice(t[0]), "no kernel");
    return t[0].neg();
  }, Only({at::kFloat}));
  ASSERT_FALSE(raises);
  EXPECT_THAT(raises.message(), HasSubstr("the device op raised (the CPU did not): no kernel"));
}

}  // namespace
}  // namespace testing
}  // namespace xxnpu

int main(int argc, char** argv) {
  setenv("XXNPU_DEVICE_MEMORY", "512M", 1);
  ::testing::InitGoogleTest(&argc, argv);
  at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  return RUN_ALL_TESTS();
}
