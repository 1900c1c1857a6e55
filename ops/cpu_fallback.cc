#include "ops/cpu_fallback.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

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

void XxnpuCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = c10::toString(op.operator_name());
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
  at::native::cpu_fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&XxnpuCpuFallback>()); }

}  // namespace

bool StrictFallback() {
  const char* v = std::getenv("XXNPU_STRICT_FALLBACK");
  return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
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
