// The xxnpu PrivateUse1HooksInterface: availability, lazy initialisation, device count
// and current device, generators, pinned memory, pointer -> device, storage resize.
// Registered at load time, like the guard and the allocator.
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include <atomic>

#include "device/c10/pinned_allocator.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_allocator.h"
#include "device/c10/xxnpu_stream.h"
#include "device/generator/xxnpu_generator.h"
#include "device/runtime.h"

namespace xxnpu {
namespace {

std::atomic<bool> g_initialized{false};

struct XxnpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return XxnpuDeviceCount() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device) const override { return g_initialized.load(); }

  // Starts the runtime (reads its configuration, maps device memory) and the generators.
  void init() const override {
    if (g_initialized.load()) return;
    const int count = ValueOrThrow(xxnpuGetDeviceCount(), "xxnpu initialization");
    InitXxnpuGenerators(static_cast<c10::DeviceIndex>(count));
    g_initialized.store(true);
  }

  c10::DeviceIndex deviceCount() const override { return XxnpuDeviceCount(); }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    CheckOk(xxnpuSetDevice(ResolveDeviceIndex(device)), "xxnpu set_device");
  }
  c10::DeviceIndex getCurrentDevice() const override { return ResolveDeviceIndex(-1); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = getCurrentDevice();
    if (device >= 0 && device != previous) setCurrentDevice(device);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return exchangeDevice(device); }

  bool isPinnedPtr(const void* data) const override { return IsXxnpuPinned(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return GetXxnpuHostAllocator(); }

  at::Device getDeviceFromPtr(void* data) const override {
    const int device = DeviceOfPointer(data);
    TORCH_CHECK(device >= 0, "Pointer ", data, " is not xxnpu device memory");  // RuntimeError, as CUDA's
    return at::Device(kXxnpuDeviceType, static_cast<c10::DeviceIndex>(device));
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    init();
    return GetDefaultXxnpuGenerator(ResolveDeviceIndex(device));
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    init();
    return CreateXxnpuGenerator(ResolveDeviceIndex(device));
  }

  // Storage.resize_() / Tensor.resize_() growth: new device memory, old bytes copied on
  // the device, in stream order.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    const c10::Device device = impl->data_ptr().device();
    const c10::DeviceIndex index = device.is_privateuseone() ? device.index() : ResolveDeviceIndex(-1);
    const int previous = ValueOrThrow(xxnpuGetDevice(), "xxnpu resize");
    CheckOk(xxnpuSetDevice(index), "xxnpu resize");
    c10::DataPtr fresh = impl->allocator()->allocate(new_bytes);
    const size_t keep = std::min(new_bytes, impl->nbytes());
    absl::Status s = absl::OkStatus();
    if (keep > 0) {
      s = xxnpuMemcpyAsync(fresh.get(), impl->data(), keep, MemcpyKind::kDeviceToDevice,
                           GetCurrentXxnpuStream(index).handle());
    }
    (void)xxnpuSetDevice(previous);
    CheckOk(s, "xxnpu resize");
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(new_bytes);
  }
};

// Registered from a function-local static so the object outlives every user.
struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new XxnpuHooks()); }
};
RegisterHooks g_register_hooks;

}  // namespace
}  // namespace xxnpu
