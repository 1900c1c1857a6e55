// Proves the ops layer's toolchain: C++20 + torch's ABI flag compile against the pip
// torch headers, link libtorch, and compute on a CPU tensor.
#include <ATen/ATen.h>
#include <torch/torch.h>

#include "gtest/gtest.h"

namespace {

TEST(LibtorchCpuTest, ComputesOnCpuTensor) {
  at::Tensor a = at::arange(6, at::kFloat).reshape({2, 3});
  at::Tensor b = at::ones({2, 3});
  at::Tensor c = a + b * 2;
  EXPECT_EQ(c.sizes(), (at::IntArrayRef{2, 3}));
  EXPECT_FLOAT_EQ(c.sum().item<float>(), 15.0f + 12.0f);
  EXPECT_FLOAT_EQ(c[1][2].item<float>(), 7.0f);
}

TEST(LibtorchCpuTest, ReportsShapeErrorsAsExceptions) {
  EXPECT_THROW(at::ones({2, 3}) + at::ones({4}), c10::Error);
}

}  // namespace
