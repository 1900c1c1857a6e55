// The simulated devices' memory: one address space per device, separate from the host's.
//
// Each device's memory is a memfd mapped twice into one reserved range:
//   [base, base + N*cap)            device addresses, handed to the host by xxnpuMalloc;
//                                   PROT_NONE in strict mode, so a host access faults
//   [base + N*cap, base + 2*N*cap)  the device's own view, used by kernels and copy
//                                   engines (DeviceView adds the constant offset)
// An allocation's pages are backed by RAM and mapped in the device view when it is made
// (as a driver maps device pages), and freeing punches them out of the memfd, so a large
// nominal capacity costs nothing until allocated.
#ifndef TORCH_XXNPU_DEVICE_SIMULATOR_DEVICE_MEMORY_H_
#define TORCH_XXNPU_DEVICE_SIMULATOR_DEVICE_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xxnpu {

class DeviceMemory {
 public:
  struct Allocation {
    int device = -1;
    char* base = nullptr;  // device address
    size_t size = 0;       // as requested
  };

  static absl::StatusOr<std::unique_ptr<DeviceMemory>> Create(int devices, size_t capacity,
                                                               bool strict);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // First fit in address order, page-granular (so freed pages can be returned to the OS).
  absl::StatusOr<void*> Allocate(int device, size_t bytes);
  // `ptr` must be the start of a live allocation.
  absl::StatusOr<Allocation> Free(void* ptr);
  // The live allocation containing `ptr`, if any.
  std::optional<Allocation> Find(const void* ptr) const;
  size_t FreeBytes(int device) const;
  size_t capacity() const { return capacity_; }
  // Releases every allocation of `device`.
  void FreeAll(int device);
  // Which device's address range holds `ptr`, or -1.
  int DeviceOf(const void* ptr) const;

  // Inter-process sharing (device/ipc.h). The memfd behind `device`'s memory, and where
  // `ptr` (a live allocation's start) lies in it.
  int HeapFd(int device) const { return heaps_[device]->fd; }
  size_t OffsetOf(const void* ptr) const;
  // Maps `bytes` of another process's device memory (`fd` at `fd_offset`) into a free
  // range of `device`'s addresses, both halves, so kernels and copies reach it like an
  // allocation of this process. Find() reports it; Free() refuses it.
  absl::StatusOr<void*> MapForeign(int device, int fd, size_t fd_offset, size_t bytes);
  // Puts this device's own memory back under a range MapForeign returned and frees it.
  absl::Status UnmapForeign(void* ptr);

  char* range_begin() const { return base_; }
  char* range_end() const { return base_ + span_; }
  ptrdiff_t view_offset() const { return static_cast<ptrdiff_t>(span_); }

 private:
  struct Heap {
    int fd = -1;
    mutable std::mutex mu;
    std::map<size_t, size_t> free_ranges;  // offset -> length, coalesced
    std::map<size_t, size_t> live;         // offset -> requested bytes
    std::map<size_t, size_t> foreign;      // offset -> bytes mapped by MapForeign
    size_t free_bytes = 0;
  };
  DeviceMemory() = default;
  void ReleasePages(Heap& heap, size_t offset, size_t length);
  void InsertFree(Heap& heap, size_t offset, size_t length);
  // First fit; the range's offset, or npos. Called with heap.mu held.
  size_t TakeRangeLocked(Heap& heap, size_t length);
  // Maps `fd` at `fd_offset` under the device addresses (unless strict) and the device
  // view of `device`'s range [offset, offset + length).
  absl::Status MapRange(int device, size_t offset, size_t length, int fd, size_t fd_offset);

  char* base_ = nullptr;   // start of the reserved range (device addresses)
  size_t capacity_ = 0;    // bytes per device (page multiple)
  size_t span_ = 0;        // devices * capacity_: the device-address half
  bool strict_ = false;
  std::vector<std::unique_ptr<Heap>> heaps_;
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_SIMULATOR_DEVICE_MEMORY_H_
