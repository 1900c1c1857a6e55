// Pinned (page-locked) host memory for xxnpu: Tensor.pin_memory(), DataLoader pinning and
// torch.accelerator's host cache go here. Built on ATen's CachingHostAllocatorImpl (the
// same policy as CUDA's pinned allocator); blocks used by asynchronous copies are
// reused only once the copies' streams have passed them.
#ifndef TORCH_XXNPU_DEVICE_C10_PINNED_ALLOCATOR_H_
#define TORCH_XXNPU_DEVICE_C10_PINNED_ALLOCATOR_H_

#include <ATen/core/CachingHostAllocator.h>

namespace xxnpu {

at::HostAllocator* GetXxnpuHostAllocator();
// Whether `ptr` lies in pinned memory of the xxnpu runtime.
bool IsXxnpuPinned(const void* ptr);
// After queueing an async copy that reads/writes the pinned `data` on `stream`: keeps the
// block from being reused before the stream is done with it. No-op for other memory.
void RecordPinnedUse(const at::DataPtr& data, c10::Stream stream);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_C10_PINNED_ALLOCATOR_H_
