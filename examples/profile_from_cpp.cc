// Profiling xxnpu work from C++ (no Python): libtorch's Kineto profiler with the
// PrivateUse1 activity, the xxnpu Kineto plugin linked in, a chrome trace written.
//
//   bazel run //examples:profile_from_cpp -- /tmp/xxnpu_cpp_trace.json
//
// What a program needs (see examples/BUILD.bazel): //device/c10:c10_xxnpu (the device as
// c10 sees it), //ops (kernels, torch.ops.xxnpu.*), //profiler:kineto_plugin (the device
// timeline) and, for marker ranges, //profiler:markers. They are alwayslink: their static
// registrations are what the program uses.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceType.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <ActivityType.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "profiler/markers.h"

namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

at::Tensor XxnpuAdd(const at::Tensor& a, const at::Tensor& b) {
  // torch.ops.xxnpu.add, through the dispatcher.
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("xxnpu::add", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
  return op.call(a, b);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "xxnpu_cpp_trace.json";

  // What `import torch_xxnpu` does first in Python: name PrivateUse1 "xxnpu" (torch's
  // Kineto path for PrivateUse1 is off under the default name "privateuseone").
  c10::register_privateuse1_backend("xxnpu");
  at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  const c10::Device device(c10::DeviceType::PrivateUse1, 0);
  const auto options = at::TensorOptions().device(device);
  c10::impl::VirtualGuardImpl guard(c10::DeviceType::PrivateUse1);

  at::Tensor a = at::ones({512, 512}, options);
  at::Tensor b = at::full({512, 512}, 2.0, options);
  guard.synchronizeDevice(0);  // first use (stream threads starting) stays out of the capture

  // = torch.profiler.profile(activities=[CPU, PrivateUse1], record_shapes=True)
  const ProfilerConfig config(ProfilerState::KINETO_PRIVATEUSE1, /*report_input_shapes=*/true);
  const std::set<ActivityType> activities = {ActivityType::CPU, ActivityType::PrivateUse1};
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);

  xxnpu::MarkerRangePush("step");  // an NVTX-like range (torch.xxnpu.markers.range)
  at::Tensor c = XxnpuAdd(a, b);
  at::Tensor d = c * c;
  at::Tensor host = d.cpu();
  xxnpu::MarkerRangePop();

  guard.synchronizeDevice(0);  // as torch.profiler's exit does: all device work in the window
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  result->save(path);

  // The device timeline and device time per op, from the result itself.
  std::map<uint64_t, std::string> ops;  // correlation id -> op name
  for (const auto& e : result->events()) {
    if (static_cast<libkineto::ActivityType>(e.activityType()) == libkineto::ActivityType::CPU_OP) {
      ops[e.correlationId()] = e.name();
    }
  }
  std::printf("result: mean %.1f (expected 9.0)\n", host.mean().item<float>());
  std::printf("xxnpu activities:\n");
  for (const auto& e : result->events()) {
    if (e.deviceType() != c10::DeviceType::PrivateUse1) continue;
    const auto op = e.linkedCorrelationId() != 0 ? ops.find(e.linkedCorrelationId()) : ops.end();
    const bool annotation =
        static_cast<libkineto::ActivityType>(e.activityType()) == libkineto::ActivityType::GPU_USER_ANNOTATION;
    std::printf("  %-22s %9.3f us  stream %lld  <- %s\n", e.name().c_str(), e.durationNs() / 1000.0,
                static_cast<long long>(e.deviceResourceId()),
                annotation ? "(marker range)" : op == ops.end() ? "-" : op->second.c_str());
  }
  std::printf("trace: %s\n", path.c_str());
  return 0;
}
