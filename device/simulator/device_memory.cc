#include "device/simulator/device_memory.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <string>

#include "absl/strings/str_cat.h"
#include "device/simulator/host_memory.h"
#include "device/simulator/status_macros.h"

namespace xxnpu {
namespace {

constexpr size_t kPage = 4096;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older glibc headers lack the name
#endif

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// Allocations at least this large first ask the host how much RAM it can still give
// (reading /proc/meminfo and the cgroup files costs ~20-50 us, next to the ~250 us it
// takes to commit 1 MiB); smaller ones are committed without asking.
constexpr size_t kHostCheckBytes = size_t{1} << 20;
// What an allocation must leave the host: committing the very last free pages would push
// it into reclaim storms or the OOM killer.
constexpr uint64_t kHostSpare = uint64_t{256} << 20;

// Memcheck: the byte the space between the guard page and an allocation's start holds,
// and how much of it is checked after every kernel (CheckCanaries).
constexpr unsigned char kCanary = 0xFD;
constexpr size_t kCanaryWindow = 64;
constexpr uint64_t kFullCanaryEvery = 64;

std::string Hex(const void* p) { return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(p))); }

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, " failed: ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceMemory>> DeviceMemory::Create(int devices, size_t capacity,
                                                                    bool strict, bool memcheck) {
  std::unique_ptr<DeviceMemory> m(new DeviceMemory());
  m->capacity_ = RoundUp(capacity, kPage);
  m->span_ = m->capacity_ * devices;
  m->strict_ = strict;
  m->memcheck_ = memcheck;
  void* reserved = mmap(nullptr, 2 * m->span_, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return Errno("reserving the device address range (mmap)");
  m->base_ = static_cast<char*>(reserved);
  // Under memcheck nothing is accessible until allocated (Commit opens the pages).
  const int prot = memcheck ? PROT_NONE : PROT_READ | PROT_WRITE;
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
    } else if (mmap(device_addr, m->capacity_, prot, MAP_SHARED | MAP_FIXED, heap->fd, 0) == MAP_FAILED) {
      return Errno("mapping device memory");
    }
    if (mmap(view_addr, m->capacity_, prot, MAP_SHARED | MAP_FIXED, heap->fd, 0) == MAP_FAILED) {
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

size_t DeviceMemory::DataBegin(size_t start) { return start / kPage * kPage; }

void DeviceMemory::Protect(int device, size_t offset, size_t length, bool accessible) const {
  const int prot = accessible ? PROT_READ | PROT_WRITE : PROT_NONE;
  char* device_addr = base_ + device * capacity_ + offset;
  // Only fails for want of kernel memory for the split mappings (vm.max_map_count):
  // Commit checks the view's result, which is what kernels use.
  if (!strict_) (void)mprotect(device_addr, length, prot);
  (void)mprotect(device_addr + span_, length, prot);
}

absl::Status DeviceMemory::Commit(int device, size_t offset, size_t length, size_t bytes) {
  Heap& heap = *heaps_[device];
  char* view = base_ + span_ + device * capacity_ + offset;
  const char* how = "madvise(MADV_POPULATE_WRITE)";
  int rc = 0;
  int err = 0;
  if (memcheck_ && mprotect(view, length, PROT_READ | PROT_WRITE) != 0) {
    rc = -1;
    err = errno;
    how = "mprotect (too many mappings? vm.max_map_count)";
  }
  if (rc == 0) {
    if (memcheck_) Protect(device, offset, length, true);  // the device-address half too
    // A driver's allocation returns memory that is backed and mapped on the device; the
    // simulator does the same, so the first kernel to touch fresh memory is not charged
    // for page faults (a 4 MiB block took ~3 ms of faults inside its first kernel, which
    // the profiler showed as kernel time).
    if (!populate_unsupported_.load(std::memory_order_relaxed)) {
      rc = commit_ != nullptr ? commit_(view, length) : madvise(view, length, MADV_POPULATE_WRITE);
      err = rc != 0 ? errno : 0;
      if (rc != 0 && err == EINVAL) populate_unsupported_.store(true, std::memory_order_relaxed);
    }
    if (populate_unsupported_.load(std::memory_order_relaxed)) {
      // A kernel before 5.14 (no MADV_POPULATE_WRITE): allocate the memfd's pages instead,
      // which fails with an error (not a SIGBUS or the OOM killer at first touch); mapping
      // them still happens in the first kernel to touch them.
      how = "fallocate";
      rc = fallocate(heap.fd, 0, static_cast<off_t>(offset), static_cast<off_t>(length));
      err = rc != 0 ? errno : 0;
    }
  }
  if (rc == 0) return absl::OkStatus();
  // ENOMEM (no RAM or over the cgroup's limit), EFAULT/EHWPOISON (the pages cannot be
  // backed): the allocation fails as out of memory, and whatever was backed goes back.
  if (memcheck_) Protect(device, offset, length, false);
  ReleasePages(heap, offset, length);
  return absl::ResourceExhaustedError(absl::StrCat(
      "xxnpu:", device, " out of memory: tried to allocate ", bytes,
      " bytes; the host could not back them with RAM (", how, ": ", std::strerror(err),
      "); the simulated device's memory is host RAM"));
}

absl::StatusOr<void*> DeviceMemory::Allocate(int device, size_t bytes) {
  Heap& heap = *heaps_[device];
  const size_t data = RoundUp(bytes, kPage);
  // Memcheck: a guard page before and after each allocation (see the header).
  const size_t need = memcheck_ ? data + 2 * kPage : data;
  if (need >= kHostCheckBytes) {
    // Device memory is host RAM: an allocation the host cannot give must fail here, as
    // out-of-memory, not in the OOM killer once its pages are committed.
    const std::optional<uint64_t> available = host_available_ ? host_available_() : ReadHostMemory().available;
    if (available.has_value() && need + kHostSpare > *available) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "xxnpu:", device, " out of memory: tried to allocate ", bytes, " bytes, but the host has only ",
          *available, " bytes of RAM available (the simulated device's memory is host RAM; ", kHostSpare >> 20,
          " MiB are kept for the host)"));
    }
  }
  std::unique_lock<std::mutex> lock(heap.mu);
  const size_t offset = TakeRangeLocked(heap, need);
  if (offset == std::string::npos) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "xxnpu:", device, " out of memory: tried to allocate ", bytes, " bytes; ", heap.free_bytes,
        " bytes free of ", capacity_, " total", heap.free_bytes >= need ? " (fragmented)" : ""));
  }
  lock.unlock();
  const size_t data_offset = memcheck_ ? offset + kPage : offset;
  // Memcheck: the end flush against the guard page after it.
  const size_t start = memcheck_ ? data_offset + data - bytes : offset;
  if (absl::Status s = Commit(device, data_offset, data, bytes); !s.ok()) {
    lock.lock();
    InsertFree(heap, offset, need);
    heap.free_bytes += need;
    return s;
  }
  if (memcheck_ && start > data_offset) {
    std::memset(base_ + span_ + device * capacity_ + data_offset, kCanary, start - data_offset);
  }
  // Live only now, with its canary in place: a device thread checks the canaries of live
  // allocations after every kernel, concurrently with this.
  lock.lock();
  heap.live.emplace(start, bytes);
  return static_cast<void*>(base_ + device * capacity_ + start);
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
  const size_t data = RoundUp(it->second, kPage);
  size_t region = offset;
  size_t length = data;
  if (memcheck_) {
    // Closed again, so a kernel using the freed range faults (until it is reused).
    Protect(device, DataBegin(offset), data, false);
    region = DataBegin(offset) - kPage;
    length = data + 2 * kPage;
  }
  heap.live.erase(it);
  ReleasePages(heap, region, length);
  InsertFree(heap, region, length);
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
    if (memcheck_) Protect(device, offset, length, false);
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
  if (memcheck_) Protect(device, offset, length, false);
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
  if (memcheck_) Protect(device, 0, capacity_, false);
  ReleasePages(heap, 0, capacity_);
  heap.free_ranges.emplace(0, capacity_);
  heap.free_bytes = capacity_;
}

std::string DeviceMemory::DescribeFault(const void* addr, bool write) const {
  const char* p = static_cast<const char*>(addr);
  if (p >= base_ + span_ && p < base_ + 2 * span_) p -= span_;  // the device view: name the device address
#if defined(__x86_64__)
  const char* kind = write ? "write" : "read";  // the page fault's error code tells
#else
  const char* kind = "access";
#endif
  const std::string head = absl::StrCat("memcheck: invalid ", kind, " at ", Hex(p));
  const int device = DeviceOf(p);
  if (device < 0) return absl::StrCat(head, ": not device memory");
  const Heap& heap = *heaps_[device];
  const size_t offset = static_cast<size_t>(p - (base_ + device * capacity_));
  char* const device_base = base_ + device * capacity_;
  std::lock_guard<std::mutex> lock(heap.mu);
  auto next = heap.live.upper_bound(offset);
  // In the guard page or canary before an allocation: an underrun.
  if (next != heap.live.end() && offset + kPage >= DataBegin(next->first)) {
    return absl::StrCat(head, " on xxnpu:", device, ": ", next->first - offset, " bytes before the start of the allocation at ",
                        Hex(device_base + next->first), " of ", next->second, " bytes");
  }
  if (next != heap.live.begin()) {
    auto prev = std::prev(next);
    const size_t end = prev->first + prev->second;
    if (offset >= end && offset < RoundUp(end, kPage) + kPage) {
      return absl::StrCat(head, " on xxnpu:", device, ": ", offset - end, " bytes past the end of the allocation at ",
                          Hex(device_base + prev->first), " of ", prev->second, " bytes");
    }
  }
  return absl::StrCat(head, " on xxnpu:", device, ": not inside any live allocation (freed, or never allocated)");
}

std::string DeviceMemory::CheckCanaries(int device) const {
  const Heap& heap = *heaps_[device];
  char* const view = base_ + span_ + device * capacity_;
  std::lock_guard<std::mutex> lock(heap.mu);
  static const std::vector<unsigned char> intact(kPage, kCanary);
  // Every kernel checks the kCanaryWindow bytes nearest each start (an underrun by a few
  // elements); every kFullCanaryEvery-th check reads whole canaries. The scan touches one
  // line of every live allocation, the kernel-end cost that grows with their number.
  static std::atomic<uint64_t> checks{0};
  const bool full = checks.fetch_add(1, std::memory_order_relaxed) % kFullCanaryEvery == 0;
  for (const auto& [start, bytes] : heap.live) {
    const size_t begin = full ? DataBegin(start) : std::max(DataBegin(start), start - std::min(start, kCanaryWindow));
    if (std::memcmp(view + begin, intact.data(), start - begin) == 0) continue;
    // Closest to the start first: an underrun by a few elements changes those bytes.
    for (size_t o = start; o > begin; --o) {
      if (static_cast<unsigned char>(view[o - 1]) == kCanary) continue;
      std::memset(view + DataBegin(start), kCanary, start - DataBegin(start));  // reported once
      return absl::StrCat("memcheck: a write ", start - (o - 1), " bytes before the start of the allocation at ",
                          Hex(base_ + device * capacity_ + start), " of ", bytes, " bytes on xxnpu:", device,
                          " (found in its canary after the kernel)");
    }
  }
  return "";
}

}  // namespace xxnpu
