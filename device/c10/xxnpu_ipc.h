// Storages shared between processes (torch.multiprocessing's CUDA path, for xxnpu): the
// sender exports the caching allocator's segment holding a storage, the receiver maps it
// (device/ipc.h) and wraps storage-sized piece of it, zero-copy.
//
// Lifetime, as CUDA's CudaIPCSentData: sharing a storage swaps its DataPtr for one whose
// deleter keeps the block out of the allocator while any receiver still holds it (a
// cross-process reference counter: one pending reference per send, held by each receiving
// process until its storage dies; a receiver that dies stops holding). Such blocks wait in
// a list that IpcCollect() (torch.xxnpu.ipc_collect) and every later share or free sweep.
//
// Ordering: sharing synchronizes the storage device's current stream, so work queued
// before the send has landed when a receiver reads (CUDA records an event instead).
#ifndef TORCH_XXNPU_DEVICE_C10_XXNPU_IPC_H_
#define TORCH_XXNPU_DEVICE_C10_XXNPU_IPC_H_

#include <c10/core/Storage.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace xxnpu {

struct SharedStorageHandle {
  int device = -1;
  std::string mem_handle;   // xxnpuIpcMemHandle_t of the segment (empty: a 0-byte storage)
  size_t storage_bytes = 0;
  size_t offset_bytes = 0;  // of the storage in the segment
  std::string ref_handle;   // xxnpuIpcRefHandle_t: one pending reference for this send
};

// For one send of `storage` (an xxnpu storage of the caching allocator, or one received
// from another process, which is forwarded).
SharedStorageHandle ShareStorage(const c10::Storage& storage);
// The receiver's storage (not resizable); takes the send's pending reference.
c10::Storage OpenSharedStorage(const SharedStorageHandle& handle);
// For a send whose storage the receiver already has: takes and drops its reference.
void ReleaseSharedReference(const std::string& ref_handle);
// Gives the blocks no receiver holds any more back to the allocator; returns how many
// shared blocks are still held by receivers.
int64_t IpcCollect();

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_C10_XXNPU_IPC_H_
