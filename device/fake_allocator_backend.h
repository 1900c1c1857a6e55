// A fake device for the caching allocator's tests: no runtime, fully controlled.
//
//   - RawAlloc hands out addresses from a made-up address space (never dereferenced),
//     up to a configurable capacity, and counts calls. Segments are placed back to back
//     by default, so an allocator that merged blocks by address adjacency instead of
//     segment membership would be caught.
//   - Markers stay pending until the test completes them (per stream, one, or all), so a
//     test decides exactly when "work on stream B" has finished.
//   - Failures can be injected.
// Thread-safe (tests may complete markers while other threads allocate).
#ifndef TORCH_XXNPU_DEVICE_FAKE_ALLOCATOR_BACKEND_H_
#define TORCH_XXNPU_DEVICE_FAKE_ALLOCATOR_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "device/caching_allocator.h"

namespace xxnpu {

// A distinct, never-dereferenced stream handle for tests.
inline xxnpuStream_t FakeStream(uintptr_t n) {
  return reinterpret_cast<xxnpuStream_t>(uintptr_t{0x5000} + n * 0x10);
}

class FakeAllocatorBackend : public AllocatorBackend {
 public:
  static constexpr uintptr_t kBase = uintptr_t{1} << 40;

  explicit FakeAllocatorBackend(size_t capacity = size_t{1} << 30, int device = 0,
                                size_t gap = 0)
      : capacity_(capacity), device_(device), gap_(gap) {}

  int Device() const override { return device_; }

  absl::StatusOr<void*> RawAlloc(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++alloc_calls_;
    if (fail_allocs_ > 0) {
      --fail_allocs_;
      return absl::ResourceExhaustedError("fake: injected allocation failure");
    }
    if (outstanding_bytes_ + bytes > capacity_) {
      return absl::ResourceExhaustedError(absl::StrCat("fake: ", bytes, " bytes requested, ",
                                                       capacity_ - outstanding_bytes_,
                                                       " free"));
    }
    const uintptr_t addr = next_;
    next_ += bytes + gap_;
    live_.emplace(addr, bytes);
    outstanding_bytes_ += bytes;
    return reinterpret_cast<void*>(addr);
  }

  absl::Status RawFree(void* ptr) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++free_calls_;
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live_.end()) return absl::InvalidArgumentError("fake: unknown pointer");
    outstanding_bytes_ -= it->second;
    live_.erase(it);
    return absl::OkStatus();
  }

  size_t Capacity() override {
    std::lock_guard<std::mutex> lock(mu_);
    return capacity_;
  }
  size_t FreeBytes() override {
    std::lock_guard<std::mutex> lock(mu_);
    return capacity_ - outstanding_bytes_;
  }

  absl::StatusOr<MarkerId> RecordMarker(xxnpuStream_t stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (fail_markers_ > 0) {
      --fail_markers_;
      return absl::InternalError("fake: injected marker failure");
    }
    const MarkerId id = next_marker_++;
    markers_.emplace(id, Marker{stream, false});
    return id;
  }
  absl::StatusOr<bool> MarkerDone(MarkerId marker) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = markers_.find(marker);
    if (it == markers_.end()) return absl::InvalidArgumentError("fake: unknown marker");
    return it->second.done;
  }
  void ReleaseMarker(MarkerId marker) override {
    std::lock_guard<std::mutex> lock(mu_);
    markers_.erase(marker);
  }
  absl::Status Synchronize() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++sync_calls_;
    for (auto& [id, m] : markers_) m.done = true;
    return absl::OkStatus();
  }

  // ---- test control

  // Completes every marker recorded so far on `stream` (its queued work finished).
  void CompleteStream(xxnpuStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, m] : markers_) {
      if (m.stream == stream) m.done = true;
    }
  }
  void CompleteAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, m] : markers_) m.done = true;
  }
  void FailNextAllocs(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_allocs_ = n;
  }
  void FailNextMarkers(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_markers_ = n;
  }
  void set_capacity(size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    capacity_ = capacity;
  }

  // ---- observation

  // Runs `fn` under the fake's lock (observers are called while other threads work).
  template <typename Fn>
  auto Locked(Fn fn) const {
    std::lock_guard<std::mutex> lock(mu_);
    return fn();
  }


  int alloc_calls() const { return Locked([&] { return alloc_calls_; }); }
  int free_calls() const { return Locked([&] { return free_calls_; }); }
  int sync_calls() const { return Locked([&] { return sync_calls_; }); }
  size_t outstanding_bytes() const { return Locked([&] { return outstanding_bytes_; }); }
  size_t outstanding_allocs() const { return Locked([&] { return live_.size(); }); }
  // Markers recorded and not yet released (pending or done).
  size_t live_markers() const { return Locked([&] { return markers_.size(); }); }
  size_t pending_markers() const {
    return Locked([&] {
      size_t n = 0;
      for (const auto& [id, m] : markers_) n += m.done ? 0 : 1;
      return n;
    });
  }
  // The live device allocations, base -> size.
  std::map<uintptr_t, size_t> live() const { return Locked([&] { return live_; }); }

 private:
  struct Marker {
    xxnpuStream_t stream;
    bool done;
  };

  mutable std::mutex mu_;
  size_t capacity_;
  const int device_;
  const size_t gap_;
  uintptr_t next_ = kBase;
  std::map<uintptr_t, size_t> live_;
  size_t outstanding_bytes_ = 0;
  int alloc_calls_ = 0;
  int free_calls_ = 0;
  int sync_calls_ = 0;
  int fail_allocs_ = 0;
  int fail_markers_ = 0;
  MarkerId next_marker_ = 1;
  std::map<MarkerId, Marker> markers_;
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_FAKE_ALLOCATOR_BACKEND_H_
