#include "ops/cpu_fallback.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>

#include "device/env_flag.h"
#include "ops/xxnpu_tensor.h"

namespace xxnpu {
namespace {

std::mutex& Mu() {
  static auto* mu = new std::mutex();
  return *mu;
}
std::map<std::string, int64_t>& Counts() {
  static auto* counts = new std::map<std::string, int64_t>();
  return *counts;
}
std::set<std::string>& Warned() {
  static auto* warned = new std::set<std::string>();
  return *warned;
}

// CUDA's kernels reject operands on different devices; cpu_fallback would silently move
// them all to the CPU and return the result on the first tensor's device. Same rule as
// CUDA here: every tensor argument must be on one device, except CPU 0-dim tensors (the
// scalars TensorIterator ops accept on CUDA too) and the CPU `indices` of indexing ops.
void CheckOperandDevices(const c10::OperatorHandle& op, const torch::jit::Stack& stack, const std::string& name) {
  const auto& args = op.schema().arguments();
  static const std::set<std::string> kCpuIndicesOk = {"aten::index", "aten::index_put_", "aten::index_put",
                                                      "aten::_index_put_impl_", "aten::_unsafe_index",
                                                      "aten::_unsafe_index_put"};
  const bool cpu_indices_ok = kCpuIndicesOk.count(op.schema().name()) > 0;
  std::optional<c10::Device> common;
  auto visit = [&](const c10::IValue& v, const std::string& arg) {
    if (!v.isTensor()) return;
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return;
    if (t.device().is_cpu() && (t.dim() == 0 || (cpu_indices_ok && arg == "indices"))) return;
    if (!common) {
      common = t.device();
      return;
    }
    CheckSameDevice(name.c_str(), arg.c_str(), t, *common);
  };
  const size_t first = stack.size() - args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = stack[first + i];
    if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) visit(e, args[i].name());
    } else {
      visit(v, args[i].name());
    }
  }
}

}  // namespace

void XxnpuCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = c10::toString(op.operator_name());
  CheckOperandDevices(op, *stack, name);
  // A view op on the fallback would return a copy, and writes through it would be lost
  // silently: refused before it runs or counts (every view ATen registers per backend has
  // an xxnpu kernel; testing/ops/ops_test.py::test_every_backend_specific_view_op_has_an_xxnpu_kernel).
  for (const c10::Argument& ret : op.schema().returns()) {
    const c10::AliasInfo* alias = ret.alias_info();
    TORCH_CHECK_NOT_IMPLEMENTED(alias == nullptr || alias->isWrite(), "xxnpu: ", name,
                                " is a view op without an xxnpu kernel; the CPU fallback could only return a copy, "
                                "so writes through the view would be lost. Register it for PrivateUse1 "
                                "(ops/allocation_and_views.cc)");
  }
  TORCH_CHECK_NOT_IMPLEMENTED(!StrictFallback(), "xxnpu: ", name,
                              " has no xxnpu kernel and XXNPU_STRICT_FALLBACK=1 forbids running it on the CPU");
  bool first;
  {
    std::lock_guard<std::mutex> lock(Mu());
    ++Counts()[name];
    first = Warned().insert(name).second;
  }
  if (first) {
    TORCH_WARN("xxnpu: ", name, " has no xxnpu kernel; it ran on the CPU (copies to and from the device). ",
               "torch_xxnpu.ops.fallback_counts() counts such ops; XXNPU_STRICT_FALLBACK=1 makes them errors.");
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true);  // views: refused above already
}

namespace {

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&XxnpuCpuFallback>()); }

}  // namespace

bool StrictFallback() {
  // Read at each fallback (tests and users may set it after import); a malformed value is
  // an error here, at the point of reading, rather than silently true or false.
  absl::StatusOr<bool> strict = ReadEnvFlag("XXNPU_STRICT_FALLBACK", false);
  TORCH_CHECK_VALUE(strict.ok(), std::string(strict.status().message()));
  return *strict;
}

std::map<std::string, int64_t> FallbackCounts() {
  std::lock_guard<std::mutex> lock(Mu());
  return Counts();
}

void ResetFallbackCounts() {
  std::lock_guard<std::mutex> lock(Mu());
  Counts().clear();
}

std::vector<std::string> NativeOps() {
  std::vector<std::string> names;
  for (const c10::OperatorName& op : c10::Dispatcher::singleton().getRegistrationsForDispatchKey(
           c10::DispatchKey::PrivateUse1)) {
    names.push_back(c10::toString(op));
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace xxnpu
