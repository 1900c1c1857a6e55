// RuntimeAllocatorBackend: the caching allocator's view of a real (simulated) device.
#include "device/runtime_allocator_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "device/graph.h"

namespace xxnpu {

namespace {

// Makes `device` the calling thread's current device for the guard's lifetime (events
// are created on the current device, and a nullptr stream is the current device's
// default stream), restoring the caller's device afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    absl::StatusOr<int> current = xxnpuGetDevice();
    if (!current.ok()) {
      status_ = current.status();
      return;
    }
    if (*current == device) return;
    status_ = xxnpuSetDevice(device);
    if (status_.ok()) previous_ = *current;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)xxnpuSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
  int previous_ = -1;
};

xxnpuEvent_t ToEvent(MarkerId marker) {
  return reinterpret_cast<xxnpuEvent_t>(static_cast<uintptr_t>(marker));
}
MarkerId ToMarker(xxnpuEvent_t event) {
  return static_cast<MarkerId>(reinterpret_cast<uintptr_t>(event));
}

}  // namespace

RuntimeAllocatorBackend::RuntimeAllocatorBackend(int device) : device_(device) {}

RuntimeAllocatorBackend::~RuntimeAllocatorBackend() {
  std::lock_guard<std::mutex> lock(mu_);
  for (xxnpuEvent_t e : idle_events_) (void)xxnpuEventDestroy(e);
  for (xxnpuEvent_t e : recorded_events_) (void)xxnpuEventDestroy(e);
}

absl::StatusOr<void*> RuntimeAllocatorBackend::RawAlloc(size_t bytes) {
  // In relaxed mode, as PyTorch's CUDA allocator calls cudaMalloc during capture: a new
  // segment is not stream work, and the allocator keeps the memory of a graph's pool as
  // long as the graph (caching_allocator.h), so the capture may go on.
  StreamCaptureMode mode = StreamCaptureMode::kRelaxed;
  if (absl::Status s = xxnpuThreadExchangeStreamCaptureMode(&mode); !s.ok()) return s;
  absl::StatusOr<void*> ptr = xxnpuMallocOnDevice(device_, bytes);
  (void)xxnpuThreadExchangeStreamCaptureMode(&mode);
  return ptr;
}

absl::Status RuntimeAllocatorBackend::RawFree(void* ptr) { return xxnpuFree(ptr); }

size_t RuntimeAllocatorBackend::Capacity() {
  size_t capacity = capacity_.load(std::memory_order_relaxed);
  if (capacity != 0) return capacity;
  absl::StatusOr<DeviceProperties> props = xxnpuGetDeviceProperties(device_);
  if (!props.ok()) return 0;
  capacity_.store(props->total_memory, std::memory_order_relaxed);
  return props->total_memory;
}

size_t RuntimeAllocatorBackend::FreeBytes() {
  absl::StatusOr<MemInfo> info = xxnpuMemGetInfo(device_);
  return info.ok() ? info->free : 0;
}

absl::StatusOr<MarkerId> RuntimeAllocatorBackend::RecordMarker(xxnpuStream_t stream) {
  DeviceGuard guard(device_);
  if (!guard.status().ok()) return guard.status();
  xxnpuEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_events_.empty()) {
      event = idle_events_.back();
      idle_events_.pop_back();
    }
  }
  if (event == nullptr) {
    // No timing: the allocator only asks "done yet?", and timing events cost a timestamp.
    absl::StatusOr<xxnpuEvent_t> created = xxnpuEventCreate(kEventDisableTiming);
    if (!created.ok()) return created.status();
    event = *created;
  }
  // Recorded without mu_: queueing on the stream may run finished kernels' destructors on
  // this thread, and a tensor they free can come back here for its own marker.
  const absl::Status s = xxnpuEventRecord(event, stream);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) {
    idle_events_.push_back(event);
    return s;
  }
  recorded_events_.insert(event);
  return ToMarker(event);
}

absl::StatusOr<bool> RuntimeAllocatorBackend::MarkerDone(MarkerId marker) {
  const absl::Status s = xxnpuEventQuery(ToEvent(marker));
  // kUnavailable is "not ready". Any other error means the stream got past the marker
  // with a failure (or the event died in a device reset): the work the marker guards
  // will not touch the memory any more, and the error belongs to the stream's owner,
  // who sees it on their next synchronizing call. Holding the block forever would only
  // leak it.
  return !absl::IsUnavailable(s);
}

void RuntimeAllocatorBackend::ReleaseMarker(MarkerId marker) {
  std::lock_guard<std::mutex> lock(mu_);
  xxnpuEvent_t event = ToEvent(marker);
  if (recorded_events_.erase(event) > 0) idle_events_.push_back(event);
}

absl::Status RuntimeAllocatorBackend::Synchronize() {
  // Waits for the recorded markers only. xxnpuDeviceSynchronize would wait for more
  // than needed and, worse, take (clear) the streams' sticky errors, hiding a failed
  // kernel from the user's own next synchronization. Event errors are ignored for the
  // same reason (see MarkerDone).
  std::vector<xxnpuEvent_t> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events.assign(recorded_events_.begin(), recorded_events_.end());
  }
  for (xxnpuEvent_t e : events) (void)xxnpuEventSynchronize(e);
  return absl::OkStatus();
}

int32_t RuntimeAllocatorBackend::StreamId(xxnpuStream_t stream) {
  if (stream != nullptr) {
    absl::StatusOr<int> id = xxnpuStreamGetId(stream);
    return id.ok() ? *id : -1;
  }
  // nullptr is the default stream of the current device, which the allocator's callers
  // mean to be this device: look its id up once, on this device.
  int32_t id = default_stream_id_.load(std::memory_order_relaxed);
  if (id != -2) return id;
  DeviceGuard guard(device_);
  absl::StatusOr<int> looked_up =
      guard.status().ok() ? xxnpuStreamGetId(nullptr) : absl::StatusOr<int>(guard.status());
  id = looked_up.ok() ? *looked_up : -1;
  default_stream_id_.store(id, std::memory_order_relaxed);
  return id;
}

}  // namespace xxnpu
