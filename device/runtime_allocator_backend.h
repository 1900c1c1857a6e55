// The production AllocatorBackend: one xxnpu device reached through the runtime API
// (device/runtime.h).
//
//   RawAlloc / RawFree   xxnpuMallocOnDevice / xxnpuFree
//   markers              events created with kEventDisableTiming, recorded on the stream
//                        and queried; released events are pooled and recorded again, so
//                        a steady stream of cross-stream frees creates no new events
//   Synchronize          xxnpuEventSynchronize on every outstanding marker (see .cc for
//                        why not xxnpuDeviceSynchronize)
//   Capacity / FreeBytes xxnpuGetDeviceProperties().total_memory / xxnpuMemGetInfo().free
//   StreamId             xxnpuStreamGetId
//
// Events are created on, and streams named by nullptr resolve to, the current device, so
// every call that needs it switches the calling thread to this backend's device and
// back. Thread-safe.
#ifndef TORCH_XXNPU_DEVICE_RUNTIME_ALLOCATOR_BACKEND_H_
#define TORCH_XXNPU_DEVICE_RUNTIME_ALLOCATOR_BACKEND_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "device/caching_allocator.h"
#include "device/runtime.h"

namespace xxnpu {

class RuntimeAllocatorBackend final : public AllocatorBackend {
 public:
  explicit RuntimeAllocatorBackend(int device);
  // Destroys the pooled events (outstanding ones too: the allocator releases its markers
  // before it goes away).
  ~RuntimeAllocatorBackend() override;

  RuntimeAllocatorBackend(const RuntimeAllocatorBackend&) = delete;
  RuntimeAllocatorBackend& operator=(const RuntimeAllocatorBackend&) = delete;

  int Device() const override { return device_; }
  absl::StatusOr<void*> RawAlloc(size_t bytes) override;
  absl::Status RawFree(void* ptr) override;
  // 0 if the device's properties cannot be read (then any memory fraction allows 0).
  size_t Capacity() override;
  size_t FreeBytes() override;
  absl::StatusOr<MarkerId> RecordMarker(xxnpuStream_t stream) override;
  absl::StatusOr<bool> MarkerDone(MarkerId marker) override;
  void ReleaseMarker(MarkerId marker) override;
  absl::Status Synchronize() override;
  int32_t StreamId(xxnpuStream_t stream) override;

 private:
  const int device_;
  std::atomic<size_t> capacity_{0};          // 0 = not read yet
  std::atomic<int32_t> default_stream_id_{-2};  // -2 = not looked up yet

  std::mutex mu_;
  std::vector<xxnpuEvent_t> idle_events_;             // released, ready to record again
  absl::flat_hash_set<xxnpuEvent_t> recorded_events_;  // handed out as markers
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_RUNTIME_ALLOCATOR_BACKEND_H_
