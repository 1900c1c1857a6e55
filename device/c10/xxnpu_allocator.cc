#include "device/c10/xxnpu_allocator.h"

#include <c10/core/Allocator.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "device/runtime_allocator_backend.h"

namespace xxnpu {
namespace {

constexpr int kMaxDevices = 16;

// One allocator per device, created at the device's first use and never destroyed
// (tensors may be freed during static destruction). Atomic pointers: the per-op paths
// read them without a lock while another thread may be creating one (issue 21: a plain
// unique_ptr read raced with its creation). The release store publishes a fully built
// allocator to every acquire load that sees the pointer.
std::array<std::atomic<CachingAllocator*>, kMaxDevices>& Allocators() {
  static auto* allocators = new std::array<std::atomic<CachingAllocator*>, kMaxDevices>();
  return *allocators;
}
std::atomic<AllocationContextRecorder> g_context_recorder{nullptr};

std::mutex& CreateMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

// The allocator of a device index known to be valid (the current device, or where a block
// of ours lives): the per-op paths skip ResolveDeviceIndex's checks.
CachingAllocator& AllocatorOf(c10::DeviceIndex device) {
  std::atomic<CachingAllocator*>& slot = Allocators()[device];
  if (CachingAllocator* a = slot.load(std::memory_order_acquire)) return *a;
  // Creation is serialised so that racing first uses build one allocator, not two.
  std::lock_guard<std::mutex> lock(CreateMutex());
  CachingAllocator* a = slot.load(std::memory_order_relaxed);
  if (a == nullptr) {
    a = new CachingAllocator(std::make_unique<RuntimeAllocatorBackend>(device));
    slot.store(a, std::memory_order_release);
  }
  return *a;
}

void ReportToProfiler(CachingAllocator& a, void* ptr, int64_t delta, c10::DeviceIndex device) {
  // Only pay for the statistics when torch.profiler(profile_memory=True) is listening.
  if (!c10::memoryProfilingEnabled()) return;
  const DeviceStats stats = a.GetStats();
  const auto agg = static_cast<size_t>(StatType::AGGREGATE);
  c10::reportMemoryUsageToProfiler(ptr, delta, static_cast<size_t>(stats.allocated_bytes[agg].current),
                                   static_cast<size_t>(stats.reserved_bytes[agg].current),
                                   c10::Device(kXxnpuDeviceType, device));
}

void DeleteDataPtr(void* ptr) {
  if (ptr == nullptr) return;
  const int device = DeviceOfPointer(ptr);
  TORCH_INTERNAL_ASSERT(device >= 0, "xxnpu allocator: freeing a pointer that is not device memory");
  CachingAllocator& a = AllocatorOf(static_cast<c10::DeviceIndex>(device));
  // The profiler wants the freed size; learn it while the block is still ours.
  int64_t freed = 0;
  if (c10::memoryProfilingEnabled()) {
    if (auto size = a.BlockSize(ptr); size.ok()) freed = static_cast<int64_t>(*size);
  }
  absl::Status s = a.Free(ptr);
  // A deleter cannot throw (it runs in destructors); a failure here is a bug in the
  // allocator's bookkeeping, not a user error.
  TORCH_INTERNAL_ASSERT(s.ok(), "xxnpu allocator: ", s.message());
  if (freed) ReportToProfiler(a, ptr, -freed, static_cast<c10::DeviceIndex>(device));
}

void ConvertStat(const Stat& in, c10::CachingAllocator::Stat* out) {
  out->current = in.current;
  out->peak = in.peak;
  out->allocated = in.allocated;
  out->freed = in.freed;
}

void ConvertArray(const StatArray& in, c10::CachingAllocator::StatArray* out) {
  for (size_t i = 0; i < in.size(); ++i) ConvertStat(in[i], &(*out)[i]);
}

}  // namespace

XxnpuDeviceAllocator* GetXxnpuAllocator() {
  static XxnpuDeviceAllocator* allocator = new XxnpuDeviceAllocator();
  return allocator;
}

CachingAllocator& XxnpuDeviceAllocator::ForDevice(c10::DeviceIndex device) {
  return AllocatorOf(ResolveDeviceIndex(device));
}

bool XxnpuDeviceAllocator::HasDevice(c10::DeviceIndex device) const {
  return device >= 0 && device < kMaxDevices && Allocators()[device].load(std::memory_order_acquire) != nullptr;
}

c10::DataPtr XxnpuDeviceAllocator::allocate(size_t bytes) {
  const auto device = static_cast<c10::DeviceIndex>(xxnpuCurrentDevice());  // valid: set through xxnpuSetDevice
  const c10::Device dev(kXxnpuDeviceType, device);
  if (bytes == 0) return c10::DataPtr(nullptr, nullptr, &DeleteDataPtr, dev);
  CachingAllocator& a = AllocatorOf(device);
  const AllocationContextRecorder recorder = g_context_recorder.load(std::memory_order_relaxed);
  auto ptr = a.Allocate(bytes, CurrentXxnpuStreamHandle(device), recorder ? recorder() : 0);
  if (!ptr.ok()) {
    if (ptr.status().code() == absl::StatusCode::kResourceExhausted && c10::memoryProfilingEnabled()) {
      const DeviceStats stats = a.GetStats();
      const auto agg = static_cast<size_t>(StatType::AGGREGATE);
      c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(bytes),
                                       static_cast<size_t>(stats.allocated_bytes[agg].current),
                                       static_cast<size_t>(stats.reserved_bytes[agg].current), dev);
    }
    ThrowStatus(ptr.status());
  }
  ReportToProfiler(a, *ptr, static_cast<int64_t>(CachingAllocatorRoundSize(bytes)), device);
  return c10::DataPtr(*ptr, *ptr, &DeleteDataPtr, dev);
}

c10::DeleterFnPtr XxnpuDeviceAllocator::raw_deleter() const { return &DeleteDataPtr; }

void XxnpuDeviceAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  CheckOk(xxnpuMemcpy(dest, src, count, MemcpyKind::kDefault), "xxnpu copy_data");
}

bool XxnpuDeviceAllocator::initialized() { return xxnpuGetDeviceCount().ok(); }

void XxnpuDeviceAllocator::emptyCache(c10::MempoolId_t) {
  for (c10::DeviceIndex d = 0; d < XxnpuDeviceCount(); ++d) {
    if (HasDevice(d)) CheckOk(ForDevice(d).EmptyCache(), "xxnpu empty_cache");
  }
}

void XxnpuDeviceAllocator::recordStream(const c10::DataPtr& ptr, c10::Stream stream) {
  // Only blocks of ours: a view of memory from elsewhere (e.g. from_blob) has another
  // deleter, and there is nothing to protect.
  if (ptr.get() == nullptr || ptr.get_deleter() != &DeleteDataPtr) return;
  const int device = DeviceOfPointer(ptr.get());
  CheckOk(ForDevice(static_cast<c10::DeviceIndex>(device)).RecordStream(ptr.get(), HandleOf(stream)),
          "xxnpu record_stream");
}

c10::CachingDeviceAllocator::DeviceStats XxnpuDeviceAllocator::getDeviceStats(c10::DeviceIndex device) {
  c10::CachingDeviceAllocator::DeviceStats out;
  device = ResolveDeviceIndex(device);
  if (!HasDevice(device)) return out;
  const DeviceStats s = ForDevice(device).GetStats();
  ConvertArray(s.allocation, &out.allocation);
  ConvertArray(s.segment, &out.segment);
  ConvertArray(s.active, &out.active);
  ConvertArray(s.inactive_split, &out.inactive_split);
  ConvertArray(s.allocated_bytes, &out.allocated_bytes);
  ConvertArray(s.reserved_bytes, &out.reserved_bytes);
  ConvertArray(s.active_bytes, &out.active_bytes);
  ConvertArray(s.inactive_split_bytes, &out.inactive_split_bytes);
  ConvertArray(s.requested_bytes, &out.requested_bytes);
  out.num_alloc_retries = s.num_alloc_retries;
  out.num_ooms = s.num_ooms;
  ConvertStat(s.oversize_allocations, &out.oversize_allocations);
  ConvertStat(s.oversize_segments, &out.oversize_segments);
  out.num_sync_all_streams = s.num_sync_all_streams;
  out.num_device_alloc = s.num_device_alloc;
  out.num_device_free = s.num_device_free;
  out.max_split_size = s.max_split_size;
  return out;
}

void XxnpuDeviceAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  device = ResolveDeviceIndex(device);
  if (HasDevice(device)) ForDevice(device).ResetAccumulatedStats();
}

void XxnpuDeviceAllocator::resetPeakStats(c10::DeviceIndex device) {
  device = ResolveDeviceIndex(device);
  if (HasDevice(device)) ForDevice(device).ResetPeakStats();
}

std::pair<size_t, size_t> XxnpuDeviceAllocator::getMemoryInfo(c10::DeviceIndex device) {
  const MemInfo info = ValueOrThrow(xxnpuMemGetInfo(ResolveDeviceIndex(device)), "xxnpu mem_get_info");
  return {info.free, info.total};
}

void XxnpuDeviceAllocator::SetMemoryFraction(double fraction, c10::DeviceIndex device) {
  TORCH_CHECK_VALUE(fraction >= 0 && fraction <= 1, "Invalid fraction value: ", fraction,
                    ". Allowed range: 0~1");
  CheckOk(ForDevice(ResolveDeviceIndex(device)).SetMemoryFraction(fraction), "xxnpu memory fraction");
}

void* XxnpuDeviceAllocator::RawAlloc(size_t bytes, c10::DeviceIndex device, xxnpuStream_t stream) {
  device = ResolveDeviceIndex(device);
  return ValueOrThrow(ForDevice(device).Allocate(bytes, stream));
}

void XxnpuDeviceAllocator::RawFree(void* ptr) { DeleteDataPtr(ptr); }

void SetAllocationContextRecorder(AllocationContextRecorder recorder) { g_context_recorder.store(recorder); }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, GetXxnpuAllocator())

}  // namespace xxnpu
