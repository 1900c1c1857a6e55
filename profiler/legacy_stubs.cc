// The legacy (non-Kineto) profiler's PrivateUse1 hooks:
//   torch.autograd.profiler.profile(use_device="xxnpu", use_kineto=False) times each op on
//   the device with these ProfilerStubs (an xxnpu timing event recorded before and after
//   the op, elapsed from the device's timestamps), and
//   torch.xxnpu.markers.emit_xxnpu() (ProfilerState.PRIVATEUSE1) pushes the observer
//   below, which wraps every op in an xxnpu marker range, as emit_nvtx does with NVTX.
#include <ATen/record_function.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/standalone/privateuse1_observer.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <sstream>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "profiler/markers.h"

namespace xxnpu {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

struct XxnpuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    const c10::DeviceIndex d = ResolveDeviceIndex(-1);
    if (device) *device = d;
    xxnpuEvent_t e = ValueOrThrow(xxnpuEventCreate(kEventDefault), "xxnpu profiler event");
    // The event is destroyed when the profiler drops its last reference.
    *event = std::shared_ptr<void>(e, [](void* p) { (void)xxnpuEventDestroy(static_cast<xxnpuEvent_t>(p)); });
    if (cpu_ns) *cpu_ns = c10::getTime();
    CheckOk(xxnpuEventRecord(e, GetCurrentXxnpuStream(d).handle()), "xxnpu profiler event");
  }

  // Microseconds, as the CUDA stubs return.
  float elapsed(const ProfilerVoidEventStub* a, const ProfilerVoidEventStub* b) const override {
    auto* ea = static_cast<xxnpuEvent_t>(a->get());
    auto* eb = static_cast<xxnpuEvent_t>(b->get());
    CheckOk(xxnpuEventSynchronize(ea), "xxnpu profiler");
    CheckOk(xxnpuEventSynchronize(eb), "xxnpu profiler");
    return ValueOrThrow(xxnpuEventElapsedTime(ea, eb), "xxnpu profiler") * 1000.0f;
  }

  void mark(const char* name) const override { MarkerMark(name); }
  void rangePush(const char* name) const override { MarkerRangePush(name); }
  void rangePop() const override { MarkerRangePop(); }
  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex previous = ResolveDeviceIndex(-1);
    for (c10::DeviceIndex d = 0; d < XxnpuDeviceCount(); ++d) {
      CheckOk(xxnpuSetDevice(d));
      op(d);
    }
    CheckOk(xxnpuSetDevice(previous));
  }

  void synchronize() const override { CheckOk(xxnpuDeviceSynchronize(), "xxnpu profiler synchronize"); }
};

struct RegisterStubs {
  RegisterStubs() {
    static XxnpuProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
RegisterStubs g_register_stubs;

// ---- emit_xxnpu(): every op as a marker range, as emit_nvtx does with NVTX ranges.

// The profiler state torch expects while ProfilerState.PRIVATEUSE1 is on: it owns the
// RecordFunction callback, which torch's disable path removes when it pops the state.
struct MarkerProfilerState final : public torch::profiler::impl::ProfilerStateBase {
  explicit MarkerProfilerState(const torch::profiler::impl::ProfilerConfig& config) : ProfilerStateBase(config) {}
  torch::profiler::impl::ActiveProfilerType profilerType() override {
    return torch::profiler::impl::ActiveProfilerType::PRIVATEUSE1;
  }
  void reportMemoryUsage(void*, int64_t, size_t, size_t, c10::Device) override {}
};

std::unique_ptr<at::ObserverContext> EnterOp(const at::RecordFunction& fn) {
  MarkerRangePush(fn.name());
  return nullptr;
}

void ExitOp(const at::RecordFunction&, at::ObserverContext*) { MarkerRangePop(); }

void PushXxnpuCallbacks(const torch::profiler::impl::ProfilerConfig& config,
                        const std::unordered_set<at::RecordScope>& scopes) {
  TORCH_CHECK(!torch::profiler::impl::ProfilerStateBase::get(), "A profiler is already running on this thread");
  auto state = std::make_shared<MarkerProfilerState>(config);
  auto* state_ptr = state.get();
  torch::profiler::impl::ProfilerStateBase::push(std::move(state));
  state_ptr->setCallbackHandle(
      at::addThreadLocalCallback(at::RecordFunctionCallback(&EnterOp, &ExitOp).needsInputs(false).scopes(scopes)));
}

torch::profiler::impl::RegisterPRIVATEUSE1Observer g_register_observer(&PushXxnpuCallbacks);

}  // namespace
}  // namespace xxnpu
