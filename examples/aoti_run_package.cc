// Running an AOTInductor package on xxnpu from C++ (no Python): the package
// testing/compiler/aoti_test.py compiles (torch._inductor.aoti_compile_and_package of
// TinyMlp there: relu(x @ W^T + b) * 2 summed over the last dim, plus the largest of x
// sorted, an op the package runs through torch's proxy executor), loaded with libtorch's
// AOTIModelPackageLoader, its weight given as an xxnpu tensor, run on xxnpu, checked
// against the same computation on the CPU.
//
//   aoti_run_package PACKAGE.pt2
//
// What a program needs (examples/BUILD.bazel): //device/c10:c10_xxnpu and //ops, which
// include torch_xxnpu's AOTInductor runner for "xxnpu" (ops/aoti_model_runner.cc) and the
// launcher the package's generated kernels call (ops/compiled_kernel_launch.cc). Both are
// alwayslink: their static registrations are what the program uses.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace {

// The weights and input aoti_test.py's TinyMlp uses: values from a formula, so this
// program needs no file besides the package. Keep both sides in step.
at::Tensor Weight() { return at::arange(8 * 16, at::kFloat).reshape({8, 16}).mul(0.01).sub(0.5); }
at::Tensor Bias() { return at::arange(8, at::kFloat).mul(0.1).sub(0.3); }
at::Tensor Input() { return at::arange(4 * 16, at::kFloat).reshape({4, 16}).mul(0.05).sin(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PACKAGE.pt2\n", argv[0]);
    return 2;
  }
  // What `import torch_xxnpu` does first in Python: name PrivateUse1 "xxnpu" (the package's
  // device key, the runner's registry key).
  c10::register_privateuse1_backend("xxnpu");
  at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  const c10::Device device(c10::DeviceType::PrivateUse1, 0);

  torch::inductor::AOTIModelPackageLoader loader(argv[1]);
  std::printf("package device: %s\n", loader.get_metadata()["AOTI_DEVICE_KEY"].c_str());

  // The package carries no weights (an xxnpu package is compiled with
  // package_constants_in_so=False, docs/compile.md): they are given as xxnpu tensors, used
  // in place (user_managed: AOTI's copying path would memcpy on the host).
  std::unordered_map<std::string, at::Tensor> constants;
  for (const std::string& fqn : loader.get_constant_fqns()) {
    if (fqn != "lin.weight") {
      std::fprintf(stderr, "unexpected constant %s\n", fqn.c_str());
      return 1;
    }
    constants[fqn] = Weight().to(device);
  }
  loader.load_constants(constants, /*use_inactive=*/false, /*check_full_update=*/true, /*user_managed=*/true);

  const std::vector<at::Tensor> outputs = loader.run({Input().to(device)});
  c10::impl::VirtualGuardImpl(c10::DeviceType::PrivateUse1).synchronizeDevice(0);
  const at::Tensor expected = at::relu(at::linear(Input(), Weight(), Bias())).mul(2).sum(-1) +
                              std::get<0>(at::sort(Input(), -1)).amax(-1);
  const bool ok = outputs.size() == 1 && outputs[0].device() == device &&
                  at::allclose(outputs[0].cpu(), expected, 1e-5, 1e-5);
  std::printf("output on %s: %s\n", outputs.empty() ? "-" : outputs[0].device().str().c_str(),
              ok ? "matches the CPU" : "DIFFERS from the CPU");
  if (!ok && !outputs.empty()) std::printf("got %s\nexpected %s\n", outputs[0].cpu().toString().c_str(), expected.toString().c_str());
  return ok ? 0 : 1;
}
