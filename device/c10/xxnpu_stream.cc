#include "device/c10/xxnpu_stream.h"

#include <array>
#include <atomic>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "device/c10/torch_status.h"

namespace xxnpu {
namespace {

constexpr int kMaxDevices = 16;  // XXNPU_DEVICE_COUNT's upper bound

struct DevicePool {
  std::once_flag once;
  std::array<xxnpuStream_t, kStreamsPerPool> low{};
  std::array<xxnpuStream_t, kStreamsPerPool> high{};
  std::atomic<uint32_t> next_low{0};
  std::atomic<uint32_t> next_high{0};
};

DevicePool& Pool(c10::DeviceIndex d) {
  static std::array<DevicePool, kMaxDevices>* pools = new std::array<DevicePool, kMaxDevices>();
  return (*pools)[d];
}

// StreamId -> runtime handle for every non-default stream handed to c10.
std::mutex& RegistryMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
absl::flat_hash_map<c10::StreamId, xxnpuStream_t>& Registry() {
  static auto* registry = new absl::flat_hash_map<c10::StreamId, xxnpuStream_t>();
  return *registry;
}

// The current stream per device for this thread (0 = default stream).
thread_local std::array<c10::StreamId, kMaxDevices> t_current_stream{};

// The runtime handle of each device's default stream, looked up once: the runtime
// creates default streams at start-up and keeps them for the process's life, and every
// kernel launch and allocation asks for the current stream's handle.
xxnpuStream_t DefaultStreamHandle(c10::DeviceIndex device) {
  static std::array<std::atomic<xxnpuStream_t>, kMaxDevices>* handles =
      new std::array<std::atomic<xxnpuStream_t>, kMaxDevices>();
  std::atomic<xxnpuStream_t>& slot = (*handles)[device];
  xxnpuStream_t h = slot.load(std::memory_order_acquire);
  if (h == nullptr) {
    h = ValueOrThrow(xxnpuDeviceGetDefaultStream(device), "xxnpu stream");
    slot.store(h, std::memory_order_release);
  }
  return h;
}

c10::Stream MakeStream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kXxnpuDeviceType, device), id);
}

XxnpuStream Register(xxnpuStream_t handle, c10::DeviceIndex device) {
  const c10::StreamId id = ValueOrThrow(xxnpuStreamGetId(handle), "xxnpu stream");
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    Registry()[id] = handle;
  }
  return XxnpuStream(MakeStream(device, id));
}

}  // namespace

c10::DeviceIndex XxnpuDeviceCount() {
  static const c10::DeviceIndex count = [] {
    auto n = xxnpuGetDeviceCount();
    return static_cast<c10::DeviceIndex>(n.ok() ? *n : 0);
  }();
  return count;
}

c10::DeviceIndex ResolveDeviceIndex(c10::DeviceIndex device) {
  if (device == -1) return static_cast<c10::DeviceIndex>(xxnpuCurrentDevice());
  const c10::DeviceIndex count = XxnpuDeviceCount();
  // As CUDA's "invalid device ordinal": an AcceleratorError (torch_status.h).
  if (device < 0 || device >= count) {
    ThrowStatus(absl::OutOfRangeError(absl::StrCat("Invalid xxnpu device index ", static_cast<int>(device),
                                                   ": expected 0 <= index < ", static_cast<int>(count),
                                                   " (the number of xxnpu devices)")));
  }
  return device;
}

XxnpuStream::XxnpuStream(c10::Stream stream) : stream_(stream) {
  TORCH_CHECK(stream.device_type() == kXxnpuDeviceType, "Expected an xxnpu stream, got a stream of ",
              stream.device());
}

xxnpuStream_t XxnpuStream::handle() const { return HandleOf(stream_); }

int XxnpuStream::priority() const { return ValueOrThrow(xxnpuStreamGetPriority(handle()), "xxnpu stream"); }

bool XxnpuStream::query() const {
  absl::Status s = xxnpuStreamQuery(handle());
  if (s.code() == absl::StatusCode::kUnavailable) return false;
  CheckOk(s, "xxnpu stream");
  return true;
}

void XxnpuStream::synchronize() const { CheckOk(xxnpuStreamSynchronize(handle()), "xxnpu stream"); }

std::ostream& operator<<(std::ostream& os, const XxnpuStream& s) { return os << s.unwrap(); }

xxnpuStream_t HandleOf(c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kXxnpuDeviceType, "Expected an xxnpu stream, got a stream of ",
              stream.device());
  if (stream.id() == 0) return DefaultStreamHandle(ResolveDeviceIndex(stream.device_index()));
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto it = Registry().find(stream.id());
  TORCH_CHECK(it != Registry().end(), "Unknown xxnpu stream id ", stream.id(), " on ", stream.device(),
              ": streams must come from torch.xxnpu (pool, new or external)");
  return it->second;
}

XxnpuStream GetDefaultXxnpuStream(c10::DeviceIndex device) {
  return XxnpuStream(MakeStream(ResolveDeviceIndex(device), 0));
}

XxnpuStream GetCurrentXxnpuStream(c10::DeviceIndex device) {
  device = ResolveDeviceIndex(device);
  return XxnpuStream(MakeStream(device, t_current_stream[device]));
}

xxnpuStream_t CurrentXxnpuStreamHandle(c10::DeviceIndex device) {
  device = ResolveDeviceIndex(device);
  const c10::StreamId id = t_current_stream[device];
  return id == 0 ? DefaultStreamHandle(device) : HandleOf(MakeStream(device, id));
}

XxnpuStream SetCurrentXxnpuStream(XxnpuStream stream) {
  const c10::DeviceIndex device = ResolveDeviceIndex(stream.device_index());
  XxnpuStream previous(MakeStream(device, t_current_stream[device]));
  t_current_stream[device] = stream.id();
  return previous;
}

XxnpuStream GetStreamFromPool(bool high_priority, c10::DeviceIndex device) {
  device = ResolveDeviceIndex(device);
  DevicePool& pool = Pool(device);
  std::call_once(pool.once, [&] {
    // Streams are created on the pool's device, whatever this thread's current one is.
    const int previous = ValueOrThrow(xxnpuGetDevice(), "xxnpu");
    CheckOk(xxnpuSetDevice(device), "xxnpu stream pool");
    for (int i = 0; i < kStreamsPerPool; ++i) {
      pool.low[i] = ValueOrThrow(xxnpuStreamCreate(0), "xxnpu stream pool");
      pool.high[i] = ValueOrThrow(xxnpuStreamCreate(-1), "xxnpu stream pool");
      Register(pool.low[i], device);
      Register(pool.high[i], device);
    }
    CheckOk(xxnpuSetDevice(previous), "xxnpu stream pool");
  });
  const uint32_t i = (high_priority ? pool.next_high : pool.next_low).fetch_add(1) % kStreamsPerPool;
  const xxnpuStream_t handle = high_priority ? pool.high[i] : pool.low[i];
  return XxnpuStream(MakeStream(device, ValueOrThrow(xxnpuStreamGetId(handle), "xxnpu stream")));
}

XxnpuStream GetStreamFromExternal(xxnpuStream_t handle, c10::DeviceIndex device) {
  TORCH_CHECK_VALUE(handle != nullptr, "GetStreamFromExternal: null stream handle");
  const int actual = ValueOrThrow(xxnpuStreamGetDevice(handle), "external xxnpu stream");
  TORCH_CHECK_VALUE(actual == device, "External stream belongs to xxnpu:", actual, ", not xxnpu:",
                    static_cast<int>(device));
  return Register(handle, device);
}

}  // namespace xxnpu
