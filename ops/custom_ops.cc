// torch.ops.xxnpu.*: the backend's own operators. Each has a schema, the xxnpu kernel, a
// CPU reference kernel (what correctness checks compare against) and a Meta kernel (shape
// inference for torch.compile / fake tensors / opcheck). Autograd formulas are
// registered from Python (torch_xxnpu/ops.py) with torch.library.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <new>
#include <string>

#include "absl/status/status.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/clock.h"
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

// Debugging aid: queues a kernel "xxnpu::debug_throw" on x's device (current stream)
// whose body throws a C++ exception: `kind` "bad_alloc" throws std::bad_alloc (what a
// kernel's scratch allocation throws when the host is out of memory), "non_std" an object
// that is not a std::exception. The runtime turns either into the kernel's sticky error,
// reported like any kernel fault (testing/profiler/kernel_fault_test.py).
struct DebugNotAnException {
  int code;
};
void DebugThrowKernel(const at::Tensor& x, c10::string_view kind) {
  TORCH_CHECK(x.device().type() == c10::DeviceType::PrivateUse1,
              "xxnpu::_debug_throw_kernel expects an xxnpu tensor, got one on ", x.device());
  TORCH_CHECK(kind == "bad_alloc" || kind == "non_std",
              "xxnpu::_debug_throw_kernel: kind must be 'bad_alloc' or 'non_std', got '", kind, "'");
  const c10::DeviceGuard guard(x.device());
  LaunchConfig config;
  config.name = "xxnpu::debug_throw";
  const bool bad_alloc = kind == "bad_alloc";
  CheckOk(xxnpuLaunchKernel(config,
                            [bad_alloc](BlockRange) -> absl::Status {
                              if (bad_alloc) throw std::bad_alloc();
                              throw DebugNotAnException{1};
                            },
                            CurrentXxnpuStreamHandle(x.device().index())),
          "xxnpu::_debug_throw_kernel");
}
void DebugThrowKernelMeta(const at::Tensor&, c10::string_view) {}

// Debugging aid for XXNPU_MEMCHECK=1 (docs/device-runtime.md): queues a kernel
// "xxnpu::debug_access" that reads (or, with `write`, writes) the byte at x.data_ptr() +
// byte_offset, unchecked, as a buggy kernel would. Under memcheck an offset outside x's
// allocation is reported as the kernel's sticky error naming the allocation; without it
// the access is undefined behaviour, so use it only under memcheck.
void DebugAccessKernel(const at::Tensor& x, int64_t byte_offset, bool write) {
  TORCH_CHECK(x.device().type() == c10::DeviceType::PrivateUse1,
              "xxnpu::_debug_access_kernel expects an xxnpu tensor, got one on ", x.device());
  const c10::DeviceGuard guard(x.device());
  LaunchConfig config;
  config.name = "xxnpu::debug_access";
  char* target = static_cast<char*>(x.data_ptr()) + byte_offset;
  CheckOk(xxnpuLaunchKernel(config,
                            [target, write](BlockRange) {
                              volatile char* p = DeviceView(target);
                              if (write) {
                                *p = 1;
                              } else {
                                (void)*p;
                              }
                              return absl::OkStatus();
                            },
                            CurrentXxnpuStreamHandle(x.device().index())),
          "xxnpu::_debug_access_kernel");
}
void DebugAccessKernelMeta(const at::Tensor&, int64_t, bool) {}

// Debugging aid for measuring the profiler against the truth (testing/profiler/
// accuracy_test.py): queues a kernel "xxnpu::debug_timed" on stamps' device (current
// stream) that spins for spin_ns and writes three trace-clock stamps into stamps[0..2]:
// the host's time just before the launch call, and the body's own start and end. The
// body's stamps are what the kernel observes running, independent of the runtime's
// activity record that the profiler converts; they are read from the records' own clock
// (device/clock.h: TraceClockNow), so torch_xxnpu._C._trace_clock_to_unix_ns converts
// them exactly as the last capture converted its records.
void DebugTimedKernel(const at::Tensor& stamps, int64_t spin_ns) {
  TORCH_CHECK(stamps.device().type() == c10::DeviceType::PrivateUse1,
              "xxnpu::_debug_timed_kernel expects an xxnpu tensor, got one on ", stamps.device());
  TORCH_CHECK(stamps.scalar_type() == at::kLong && stamps.is_contiguous() && stamps.numel() >= 3,
              "xxnpu::_debug_timed_kernel expects a contiguous int64 tensor of at least 3 elements, got ",
              stamps.scalar_type(), " ", stamps.sizes());
  TORCH_CHECK(spin_ns >= 0, "xxnpu::_debug_timed_kernel: spin_ns must be >= 0, got ", spin_ns);
  const c10::DeviceGuard guard(stamps.device());
  LaunchConfig config;
  config.name = "xxnpu::debug_timed";
  config.bytes = 3 * sizeof(int64_t);  // one block on one thread: nothing to spread
  int64_t* out = stamps.data_ptr<int64_t>();
  const xxnpuStream_t stream = CurrentXxnpuStreamHandle(stamps.device().index());
  // Taken last before the call, so the launch-to-start truth includes no work of ours.
  const int64_t launch_ticks = TraceClockNow();
  CheckOk(xxnpuLaunchKernel(
              config,
              [out, launch_ticks, spin_ns](BlockRange) {
                // The clock is read first and last; finding the stamps and the first store
                // (which brings their cache line in) happen inside the spin, so the body
                // does as little as possible outside [start, end].
                const int64_t start = TraceClockNow();
                const int64_t start_ns = NowNs();  // the spin's length is in ns
                int64_t* v = DeviceView(out);
                v[0] = launch_ticks;
                while (NowNs() - start_ns < spin_ns) {
                }
                const int64_t end = TraceClockNow();
                v[1] = start;
                v[2] = end;
                return absl::OkStatus();
              },
              stream),
          "xxnpu::_debug_timed_kernel");
}
void DebugTimedKernelMeta(const at::Tensor&, int64_t) {}

TORCH_LIBRARY(xxnpu, m) {
  m.def("add(Tensor a, Tensor b) -> Tensor");
  m.def("_debug_fail_kernel(Tensor x, str message) -> ()");
  m.def("_debug_timed_kernel(Tensor(a!) stamps, int spin_ns) -> ()");
  m.def("_debug_throw_kernel(Tensor x, str kind) -> ()");
  m.def("_debug_access_kernel(Tensor(a!) x, int byte_offset, bool write) -> ()");
}

TORCH_LIBRARY_IMPL(xxnpu, PrivateUse1, m) {
  m.impl("add", &XxnpuAdd);
  m.impl("_debug_fail_kernel", &DebugFailKernel);
  m.impl("_debug_timed_kernel", &DebugTimedKernel);
  m.impl("_debug_throw_kernel", &DebugThrowKernel);
  m.impl("_debug_access_kernel", &DebugAccessKernel);
}
TORCH_LIBRARY_IMPL(xxnpu, CPU, m) { m.impl("add", &AddCpu); }
TORCH_LIBRARY_IMPL(xxnpu, Meta, m) {
  m.impl("add", &AddMeta);
  m.impl("_debug_fail_kernel", &DebugFailKernelMeta);
  m.impl("_debug_timed_kernel", &DebugTimedKernelMeta);
  m.impl("_debug_throw_kernel", &DebugThrowKernelMeta);
  m.impl("_debug_access_kernel", &DebugAccessKernelMeta);
}

}  // namespace
}  // namespace xxnpu
