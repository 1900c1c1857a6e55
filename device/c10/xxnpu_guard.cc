// The xxnpu DeviceGuardImplInterface: how c10 (DeviceGuard, StreamGuard, torch.Stream,
// torch.Event, autograd's stream handling) switches devices, streams and uses events on
// this backend. Registered for PrivateUse1 at load time.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_allocator.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"

namespace xxnpu {
namespace {

xxnpuEvent_t AsEvent(void* event) { return static_cast<xxnpuEvent_t>(event); }

struct XxnpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kXxnpuDeviceType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    if (old.index() != d.index()) setDevice(d);
    return old;
  }
  // Every op takes a DeviceGuard: reading the current device must not cost a runtime call.
  c10::Device getDevice() const override {
    return c10::Device(kXxnpuDeviceType, static_cast<c10::DeviceIndex>(xxnpuCurrentDevice()));
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.is_privateuseone(), "Expected an xxnpu device, got ", d);
    CheckOk(xxnpuSetDevice(ResolveDeviceIndex(d.index())), "xxnpu");
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    // Every DeviceGuard restores its device on exit, mostly the one already current.
    if (xxnpuCurrentDevice() != d.index()) (void)xxnpuSetDevice(d.index());
  }

  c10::Stream getStream(c10::Device d) const override { return GetCurrentXxnpuStream(d.index()).unwrap(); }
  c10::Stream getDefaultStream(c10::Device d) const override { return GetDefaultXxnpuStream(d.index()).unwrap(); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return GetStreamFromPool(high_priority, d.index()).unwrap();
  }
  // As CUDA's: a "new" stream comes from the pool (streams are shared around by copy and
  // never destroyed through c10, so the pool bounds how many exist).
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return GetStreamFromPool(priority < 0, d.index()).unwrap();
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return SetCurrentXxnpuStream(XxnpuStream(s)).unwrap();
  }
  void* getStreamNativeHandle(const c10::Stream s) const override { return HandleOf(s); }

  c10::DeviceIndex deviceCount() const noexcept override { return XxnpuDeviceCount(); }

  // torch.accelerator.get_device_capability(): the dtypes a tensor can be allocated in and
  // converted between on this device (ops/copy.cc's conversion kernel covers exactly these).
  // Not listed: the float8/float4 formats, complex32, the bit and quantized-integer types,
  // whose element conversions the device does not implement.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    (void)ResolveDeviceIndex(d.index());  // an invalid index fails as everywhere else
    c10::DeviceCapability cap;
    cap.capability_data.capability_bits = 0;
    auto& has = cap.capability_data.supported_scalar_types;
    has.has_Byte = has.has_Char = has.has_Short = has.has_Int = has.has_Long = 1;
    has.has_UInt16 = has.has_UInt32 = has.has_UInt64 = 1;
    has.has_Half = has.has_BFloat16 = has.has_Float = has.has_Double = 1;
    has.has_ComplexFloat = has.has_ComplexDouble = 1;
    has.has_Bool = 1;
    return cap;
  }

  // ---- events: a c10 event holds an xxnpuEvent_t, created at its first record.
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (event != nullptr) (void)xxnpuEventDestroy(AsEvent(event));
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ",
                static_cast<int>(device_index), " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    if (*event == nullptr) {
      // Events live on the stream's device, whatever the thread's current device is.
      const int previous = ValueOrThrow(xxnpuGetDevice(), "xxnpu");
      CheckOk(xxnpuSetDevice(stream.device_index()), "xxnpu event");
      auto created = xxnpuEventCreate(flag == c10::EventFlag::BACKEND_DEFAULT ? kEventDefault : kEventDisableTiming);
      (void)xxnpuSetDevice(previous);
      *event = ValueOrThrow(std::move(created), "xxnpu event");
    }
    CheckOk(xxnpuEventRecord(AsEvent(*event), HandleOf(stream)), "xxnpu event record");
  }

  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;  // never recorded: nothing to wait for
    CheckOk(xxnpuStreamWaitEvent(HandleOf(stream), AsEvent(event)), "xxnpu event wait");
  }

  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    absl::Status s = xxnpuEventQuery(AsEvent(event));
    if (s.code() == absl::StatusCode::kUnavailable) return false;
    CheckOk(s, "xxnpu event query");
    return true;
  }

  void synchronizeEvent(void* event) const override {
    if (event == nullptr) return;
    CheckOk(xxnpuEventSynchronize(AsEvent(event)), "xxnpu event synchronize");
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start != nullptr && end != nullptr,
                "Both events must be recorded before calculating elapsed time.");
    return ValueOrThrow(xxnpuEventElapsedTime(AsEvent(start), AsEvent(end)), "xxnpu elapsed_time");
  }

  // ---- streams and device
  bool queryStream(const c10::Stream& stream) const override { return XxnpuStream(stream).query(); }
  void synchronizeStream(const c10::Stream& stream) const override { XxnpuStream(stream).synchronize(); }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    const int previous = ValueOrThrow(xxnpuGetDevice(), "xxnpu");
    CheckOk(xxnpuSetDevice(ResolveDeviceIndex(device_index)), "xxnpu synchronize");
    absl::Status s = xxnpuDeviceSynchronize();
    (void)xxnpuSetDevice(previous);
    CheckOk(s, "xxnpu synchronize");
  }
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    GetXxnpuAllocator()->recordStream(data_ptr, stream);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, XxnpuGuardImpl);

}  // namespace
}  // namespace xxnpu
