// Kernel-author helper for gtest: checks an xxnpu op against a CPU reference on random
// and edge-case inputs, with dtype-aware tolerances.
//
//   TEST(MyOp, MatchesCpu) {
//     EXPECT_TRUE(xxnpu::testing::CheckKernel(
//         "mul", /*arity=*/2, [](const std::vector<at::Tensor>& t) { return at::mul(t[0], t[1]); }));
//   }
//
// For each dtype of the options, CheckKernel generates CPU input cases (contiguous, 0-dim,
// large, empty, broadcast, transposed, sliced with gaps and an offset, stride-0 expanded,
// and for floating dtypes NaN / +-Inf / +-0 / extreme values in every pairing), copies
// each input to the device with the same sizes, strides and storage offset, runs `op` on
// the device copies and `reference` (default: `op` itself) on the CPU tensors, and
// compares: the result must be on the device, with the CPU's dtype and shape, and values
// within rtol/atol (NaN matches NaN, infinities must match exactly). Both sides raising
// counts as agreement; one side raising is a failure. The failure message names the op,
// the dtype, the case, every input's shape/strides and the first bad element.
#ifndef TORCH_XXNPU_TESTING_KERNEL_CHECK_H_
#define TORCH_XXNPU_TESTING_KERNEL_CHECK_H_

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace xxnpu {
namespace testing {

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// torch.testing.assert_close's defaults: float16 1e-3/1e-5, bfloat16 1.6e-2/1e-5,
// float32 1.3e-6/1e-5, float64 1e-7/1e-7 (complex alike); exact for integers and bool.
Tolerance DefaultTolerance(at::ScalarType dtype);

using OpFn = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

struct KernelCheckOptions {
  std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16,
                                        at::kInt,   at::kLong,   at::kBool};
  // NaN, +-Inf, +-0, huge and tiny values, all pairings (floating dtypes only).
  bool edge_values = true;
  // Integer inputs after the first are kept away from zero (integer division, remainder).
  bool nonzero_integer_divisors = false;
  // Overrides DefaultTolerance for every dtype.
  std::optional<Tolerance> tolerance;
  uint64_t seed = 0;
  c10::Device device = c10::Device(c10::DeviceType::PrivateUse1, 0);
};

// One generated case: a name and CPU inputs.
struct InputCase {
  std::string name;
  std::vector<at::Tensor> inputs;
};

// The cases CheckKernel runs for `arity` inputs of `dtype`.
std::vector<InputCase> MakeCases(int arity, at::ScalarType dtype, const KernelCheckOptions& options = {});

// `t` on `device` with the same sizes, strides and storage offset (its whole storage copied).
at::Tensor ToDeviceKeepStrides(const at::Tensor& t, c10::Device device);

// `actual` (any device) against `expected` (CPU): dtype, shape, values within `tol`.
::testing::AssertionResult TensorsClose(const at::Tensor& actual, const at::Tensor& expected, Tolerance tol);

// The check described above. `name` labels failures.
::testing::AssertionResult CheckKernel(const std::string& name, int arity, const OpFn& op,
                                       const KernelCheckOptions& options = {}, const OpFn& reference = nullptr);

}  // namespace testing
}  // namespace xxnpu

#endif  // TORCH_XXNPU_TESTING_KERNEL_CHECK_H_
