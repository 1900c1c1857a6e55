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
//
// With memcheck (XXNPU_MEMCHECK=1) every address not inside a live allocation is
// PROT_NONE in both halves, and each allocation is placed alone between two guard pages,
// its end flush against the guard after it; the bytes between the guard before it and its
// start hold a canary. A kernel's access past either end faults (kernel_guard.h turns that
// into the kernel's error, DescribeFault names the allocation); a store into the canary
// is found by CheckCanaries after the kernel.
#ifndef TORCH_XXNPU_DEVICE_SIMULATOR_DEVICE_MEMORY_H_
#define TORCH_XXNPU_DEVICE_SIMULATOR_DEVICE_MEMORY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
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
                                                               bool strict, bool memcheck = false);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // First fit in address order, page-granular (so freed pages can be returned to the OS).
  // The pages are committed (backed by RAM) here; an allocation the host cannot back is
  // kResourceExhausted, like one beyond the capacity (see host_memory.h).
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

  // Memcheck: what lies at `addr` (a device address or its device view), for a fault
  // there: which allocation it overruns and by how much, or that it is in none.
  std::string DescribeFault(const void* addr, bool write) const;
  // Memcheck: the first allocation of `device` whose canary (the bytes before its start)
  // was overwritten, described, and its canary restored so it is reported once; "" if none.
  std::string CheckCanaries(int device) const;
  bool memcheck() const { return memcheck_; }

  // Seams for tests. `commit(view, length)` backs the pages (madvise's contract: 0 or -1
  // with errno); `host_available()` tells how many bytes of RAM the host can still give.
  using CommitFn = int (*)(void* view, size_t length);
  void set_commit_for_testing(CommitFn commit) { commit_ = commit; }
  void set_host_available_for_testing(std::function<std::optional<uint64_t>()> probe) {
    host_available_ = std::move(probe);
  }

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

  // Backs `length` bytes of `device`'s range at `offset` with RAM (and, under memcheck,
  // opens them to access); on failure nothing stays committed or open.
  absl::Status Commit(int device, size_t offset, size_t length, size_t bytes);
  // Memcheck: sets the protection of both halves of `device`'s range at `offset`.
  void Protect(int device, size_t offset, size_t length, bool accessible) const;
  // Memcheck: the offset of the first data page of the live allocation starting at `start`.
  static size_t DataBegin(size_t start);

  CommitFn commit_ = nullptr;  // null: madvise(MADV_POPULATE_WRITE)
  std::atomic<bool> populate_unsupported_{false};  // EINVAL seen: commit with fallocate
  std::function<std::optional<uint64_t>()> host_available_;  // null: ReadHostMemory()

  char* base_ = nullptr;   // start of the reserved range (device addresses)
  size_t capacity_ = 0;    // bytes per device (page multiple)
  size_t span_ = 0;        // devices * capacity_: the device-address half
  bool strict_ = false;
  bool memcheck_ = false;
  std::vector<std::unique_ptr<Heap>> heaps_;
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_SIMULATOR_DEVICE_MEMORY_H_
