// torch.ops.xxnpu.*: the backend's own operators. Each has a schema, the xxnpu kernel, a
// CPU reference kernel (what correctness checks compare against) and a Meta kernel (shape
// inference for torch.compile / fake tensors / opcheck). Autograd formulas are
// registered from Python (torch_xxnpu/ops.py) with torch.library.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <string>

#include "absl/status/status.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/binary_ops.h"

namespace xxnpu {
namespace {

// The seed's op: elementwise a + b with broadcasting and type promotion.
at::Tensor AddCpu(const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }
at::Tensor AddMeta(const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); }

// Debugging aid: queues a kernel "xxnpu::debug_fail" on x's device (current stream) whose
// body fails with `message`. The host returns at once; the failure surfaces, as any
// kernel fault does, at the next synchronizing call (torch.xxnpu.synchronize(), .cpu(),
// stream/event synchronize) as a RuntimeError naming the kernel. For testing async error
// reporting and how the profiler behaves around a fault.
void DebugFailKernel(const at::Tensor& x, c10::string_view message) {
  TORCH_CHECK(x.device().type() == c10::DeviceType::PrivateUse1,
              "xxnpu::_debug_fail_kernel expects an xxnpu tensor, got one on ", x.device());
  const c10::DeviceGuard guard(x.device());
  LaunchConfig config;
  config.name = "xxnpu::debug_fail";
  CheckOk(xxnpuLaunchKernel(config, [msg = std::string(message)](BlockRange) { return absl::InternalError(msg); },
                            CurrentXxnpuStreamHandle(x.device().index())),
          "xxnpu::_debug_fail_kernel");
}
void DebugFailKernelMeta(const at::Tensor&, c10::string_view) {}

TORCH_LIBRARY(xxnpu, m) {
  m.def("add(Tensor a, Tensor b) -> Tensor");
  m.def("_debug_fail_kernel(Tensor x, str message) -> ()");
}

TORCH_LIBRARY_IMPL(xxnpu, PrivateUse1, m) {
  m.impl("add", &XxnpuAdd);
  m.impl("_debug_fail_kernel", &DebugFailKernel);
}
TORCH_LIBRARY_IMPL(xxnpu, CPU, m) { m.impl("add", &AddCpu); }
TORCH_LIBRARY_IMPL(xxnpu, Meta, m) {
  m.impl("add", &AddMeta);
  m.impl("_debug_fail_kernel", &DebugFailKernelMeta);
}

}  // namespace
}  // namespace xxnpu
