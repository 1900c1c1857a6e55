// The c10 face of the caching allocator: a c10::DeviceAllocator for PrivateUse1 (what
// torch.empty(device="xxnpu"), torch.accelerator's memory functions and the profiler's
// memory events go through), with one CachingAllocator per device behind it.
#ifndef TORCH_XXNPU_DEVICE_C10_XXNPU_ALLOCATOR_H_
#define TORCH_XXNPU_DEVICE_C10_XXNPU_ALLOCATOR_H_

#include <c10/core/CachingDeviceAllocator.h>

#include "device/caching_allocator.h"

namespace xxnpu {

class XxnpuDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t bytes) override;
  c10::DeleterFnPtr raw_deleter() const override;
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  bool initialized() override;
  void emptyCache(c10::MempoolId_t mempool_id = {0, 0}) override;
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override;
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override;
  void resetAccumulatedStats(c10::DeviceIndex device) override;
  void resetPeakStats(c10::DeviceIndex device) override;
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override;

  // The device's allocator (created on first use).
  CachingAllocator& ForDevice(c10::DeviceIndex device);
  // Whether ForDevice(device) has been created (statistics of an unused device are zero).
  bool HasDevice(c10::DeviceIndex device) const;
  void SetMemoryFraction(double fraction, c10::DeviceIndex device);
  // Raw allocation for non-tensor users (e.g. workspaces): freed with RawFree.
  void* RawAlloc(size_t bytes, c10::DeviceIndex device, xxnpuStream_t stream);
  void RawFree(void* ptr);
};

XxnpuDeviceAllocator* GetXxnpuAllocator();

// While set, every tensor allocation asks it for a context id (e.g. an interned stack
// trace) that the allocator's history and snapshot carry. The Python bindings install one
// when torch.xxnpu.memory._record_memory_history(stacks="python") is on; nullptr removes it.
using AllocationContextRecorder = uint64_t (*)();
void SetAllocationContextRecorder(AllocationContextRecorder recorder);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_C10_XXNPU_ALLOCATOR_H_
