#include "device/simulator/device_memory.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <string>

#include "absl/strings/str_cat.h"
#include "device/simulator/status_macros.h"

namespace xxnpu {
namespace {

constexpr size_t kPage = 4096;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older glibc headers lack the name
#endif

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// A driver's allocation returns memory that is backed and mapped on the device; the
// simulator does the same, so the first kernel to touch fresh memory is not charged for
// page faults (a 4 MiB block took ~3 ms of faults inside its first kernel, which the
// profiler showed as kernel time). This is what makes a raw allocation cost what the
// caching allocator exists to avoid. Failure (a kernel before 5.14) only means the pages
// fault in on first use, as before.
void CommitPages(char* view, size_t length) { (void)madvise(view, length, MADV_POPULATE_WRITE); }

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, " failed: ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceMemory>> DeviceMemory::Create(int devices, size_t capacity,
                                                                    bool strict) {
  std::unique_ptr<DeviceMemory> m(new DeviceMemory());
  m->capacity_ = RoundUp(capacity, kPage);
  m->span_ = m->capacity_ * devices;
  m->strict_ = strict;
  void* reserved = mmap(nullptr, 2 * m->span_, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return Errno("reserving the device address range (mmap)");
  m->base_ = static_cast<char*>(reserved);
  for (int d = 0; d < devices; ++d) {
    auto heap = std::make_unique<Heap>();
    const std::string name = absl::StrCat("xxnpu-device-", d);
    heap->fd = memfd_create(name.c_str(), MFD_CLOEXEC);
    if (heap->fd < 0) return Errno("memfd_create");
    if (ftruncate(heap->fd, static_cast<off_t>(m->capacity_)) != 0) return Errno("ftruncate");
    char* device_addr = m->base_ + d * m->capacity_;
    char* view_addr = device_addr + m->span_;
    // In strict mode the device addresses map nothing accessible: any host dereference
    // faults at the exact instruction, which is what makes mis-registered kernels obvious.
    if (strict) {
      // Already PROT_NONE from the reservation.
    } else if (mmap(device_addr, m->capacity_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                    heap->fd, 0) == MAP_FAILED) {
      return Errno("mapping device memory");
    }
    if (mmap(view_addr, m->capacity_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, heap->fd, 0) ==
        MAP_FAILED) {
      return Errno("mapping the device view");
    }
    heap->free_ranges.emplace(0, m->capacity_);
    heap->free_bytes = m->capacity_;
    m->heaps_.push_back(std::move(heap));
  }
  return m;
}

DeviceMemory::~DeviceMemory() {
  for (auto& h : heaps_) close(h->fd);
  if (base_) munmap(base_, 2 * span_);
}

int DeviceMemory::DeviceOf(const void* ptr) const {
  const char* p = static_cast<const char*>(ptr);
  if (p < base_ || p >= base_ + span_) return -1;
  return static_cast<int>((p - base_) / capacity_);
}

size_t DeviceMemory::TakeRangeLocked(Heap& heap, size_t length) {
  for (auto it = heap.free_ranges.begin(); it != heap.free_ranges.end(); ++it) {
    if (it->second < length) continue;
    const size_t offset = it->first;
    const size_t rest = it->second - length;
    heap.free_ranges.erase(it);
    if (rest) heap.free_ranges.emplace(offset + length, rest);
    heap.free_bytes -= length;
    return offset;
  }
  return std::string::npos;
}

absl::StatusOr<void*> DeviceMemory::Allocate(int device, size_t bytes) {
  Heap& heap = *heaps_[device];
  const size_t need = RoundUp(bytes, kPage);
  std::unique_lock<std::mutex> lock(heap.mu);
  const size_t offset = TakeRangeLocked(heap, need);
  if (offset != std::string::npos) {
    heap.live.emplace(offset, bytes);
    lock.unlock();
    CommitPages(base_ + span_ + device * capacity_ + offset, need);
    return static_cast<void*>(base_ + device * capacity_ + offset);
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "xxnpu:", device, " out of memory: tried to allocate ", bytes, " bytes; ", heap.free_bytes,
      " bytes free of ", capacity_, " total", heap.free_bytes >= need ? " (fragmented)" : ""));
}

void DeviceMemory::InsertFree(Heap& heap, size_t offset, size_t length) {
  auto next = heap.free_ranges.lower_bound(offset);
  if (next != heap.free_ranges.end() && offset + length == next->first) {
    length += next->second;
    next = heap.free_ranges.erase(next);
  }
  if (next != heap.free_ranges.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += length;
      return;
    }
  }
  heap.free_ranges.emplace(offset, length);
}

void DeviceMemory::ReleasePages(Heap& heap, size_t offset, size_t length) {
  // Freed device memory gives its RAM back, as a driver unmapping pages would. Failure
  // only means the pages stay resident; the range is free either way.
  (void)fallocate(heap.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(length));
}

absl::StatusOr<DeviceMemory::Allocation> DeviceMemory::Free(void* ptr) {
  const int device = DeviceOf(ptr);
  if (device < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("xxnpuFree: ", absl::Hex(reinterpret_cast<uintptr_t>(ptr)),
                     " is not a device pointer"));
  }
  Heap& heap = *heaps_[device];
  const size_t offset = static_cast<size_t>(static_cast<char*>(ptr) - (base_ + device * capacity_));
  std::lock_guard<std::mutex> lock(heap.mu);
  auto it = heap.live.find(offset);
  if (it == heap.live.end()) {
    if (heap.foreign.count(offset)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "xxnpuFree: ", absl::Hex(reinterpret_cast<uintptr_t>(ptr)),
          " is another process's memory opened with xxnpuIpcOpenMemHandle; close it with "
          "xxnpuIpcCloseMemHandle"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "xxnpuFree: ", absl::Hex(reinterpret_cast<uintptr_t>(ptr)),
        " is not the start of a live allocation on xxnpu:", device, " (double free or interior pointer?)"));
  }
  Allocation a{device, static_cast<char*>(ptr), it->second};
  const size_t length = RoundUp(it->second, kPage);
  heap.live.erase(it);
  ReleasePages(heap, offset, length);
  InsertFree(heap, offset, length);
  heap.free_bytes += length;
  return a;
}

std::optional<DeviceMemory::Allocation> DeviceMemory::Find(const void* ptr) const {
  const int device = DeviceOf(ptr);
  if (device < 0) return std::nullopt;
  const Heap& heap = *heaps_[device];
  const size_t offset =
      static_cast<size_t>(static_cast<const char*>(ptr) - (base_ + device * capacity_));
  std::lock_guard<std::mutex> lock(heap.mu);
  for (const auto* ranges : {&heap.live, &heap.foreign}) {
    auto it = ranges->upper_bound(offset);
    if (it == ranges->begin()) continue;
    --it;
    if (offset >= it->first + std::max<size_t>(it->second, 1)) continue;
    return Allocation{device, base_ + device * capacity_ + it->first, it->second};
  }
  return std::nullopt;
}

size_t DeviceMemory::OffsetOf(const void* ptr) const {
  return static_cast<size_t>(static_cast<const char*>(ptr) - base_) % capacity_;
}

absl::Status DeviceMemory::MapRange(int device, size_t offset, size_t length, int fd, size_t fd_offset) {
  char* device_addr = base_ + device * capacity_ + offset;
  // Strict mode keeps the device addresses inaccessible to the host, foreign or not.
  if (!strict_ && mmap(device_addr, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                       static_cast<off_t>(fd_offset)) == MAP_FAILED) {
    return Errno("mapping device memory");
  }
  if (mmap(device_addr + span_, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
           static_cast<off_t>(fd_offset)) == MAP_FAILED) {
    return Errno("mapping the device view");
  }
  return absl::OkStatus();
}

absl::StatusOr<void*> DeviceMemory::MapForeign(int device, int fd, size_t fd_offset, size_t bytes) {
  Heap& heap = *heaps_[device];
  const size_t length = RoundUp(bytes, kPage);
  std::lock_guard<std::mutex> lock(heap.mu);
  const size_t offset = TakeRangeLocked(heap, length);
  if (offset == std::string::npos) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "xxnpu:", device, " has no free device address range of ", length, " bytes to map shared memory into (",
        heap.free_bytes, " bytes free of ", capacity_, ")"));
  }
  if (absl::Status s = MapRange(device, offset, length, fd, fd_offset); !s.ok()) {
    // Whatever got replaced must be this device's own memory again before reuse.
    (void)MapRange(device, offset, length, heap.fd, offset);
    InsertFree(heap, offset, length);
    heap.free_bytes += length;
    return s;
  }
  heap.foreign.emplace(offset, bytes);
  return static_cast<void*>(base_ + device * capacity_ + offset);
}

absl::Status DeviceMemory::UnmapForeign(void* ptr) {
  const int device = DeviceOf(ptr);
  if (device < 0) return absl::InvalidArgumentError("UnmapForeign: not a device pointer");
  Heap& heap = *heaps_[device];
  const size_t offset = OffsetOf(ptr);
  std::lock_guard<std::mutex> lock(heap.mu);
  auto it = heap.foreign.find(offset);
  if (it == heap.foreign.end()) return absl::InvalidArgumentError("UnmapForeign: not a mapped range");
  const size_t length = RoundUp(it->second, kPage);
  // Own pages under the range were punched when it was last freed: mapping them back
  // costs no memory until the range is allocated again.
  XXNPU_RETURN_IF_ERROR(MapRange(device, offset, length, heap.fd, offset));
  heap.foreign.erase(it);
  InsertFree(heap, offset, length);
  heap.free_bytes += length;
  return absl::OkStatus();
}

size_t DeviceMemory::FreeBytes(int device) const {
  const Heap& heap = *heaps_[device];
  std::lock_guard<std::mutex> lock(heap.mu);
  return heap.free_bytes;
}

void DeviceMemory::FreeAll(int device) {
  Heap& heap = *heaps_[device];
  std::lock_guard<std::mutex> lock(heap.mu);
  heap.live.clear();
  for (const auto& [offset, bytes] : heap.foreign) (void)MapRange(device, offset, RoundUp(bytes, kPage), heap.fd, offset);
  heap.foreign.clear();
  heap.free_ranges.clear();
  ReleasePages(heap, 0, capacity_);
  heap.free_ranges.emplace(0, capacity_);
  heap.free_bytes = capacity_;
}

}  // namespace xxnpu
