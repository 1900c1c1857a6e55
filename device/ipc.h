// Sharing device memory between processes, zero-copy (cudaIpc* in spirit).
//
// A process exports an allocation as a handle (plain bytes: send it any way you like);
// another process opens the handle and gets a pointer in its *own* device address space
// whose pages are the exporter's: kernels, copies and memsets of either process see the
// other's writes. How it works: device memory is a memfd per device (device_memory.h);
// the handle names the exporter's pid, the memfd's descriptor number and inode, and where
// the allocation lies in it. The importer opens /proc/<pid>/fd/<n> (a re-open of the
// exporter's memfd) and maps that range into a free range of its device addresses.
//
// Who may open: /proc/<pid>/fd needs ptrace *read* access to the exporter
// (PTRACE_MODE_READ_FSCREDS): root, or a process of the same user while the exporter is
// dumpable (the default; a process that changed its uid must prctl(PR_SET_DUMPABLE, 1)).
// Yama's ptrace_scope does not restrict it (pidfd_getfd, which needs ptrace *attach*
// rights, would be refused between siblings under ptrace_scope=1, hence not used). Both
// processes must see the same pid namespace (/proc).
//
// Lifetimes, as CUDA's: an opened mapping keeps the pages alive even after the exporter
// exits. The exporter must not free an allocation another process has open: xxnpuFree of
// one refuses (FailedPrecondition) until every importer has closed it or exited, since its
// range would otherwise alias the exporter's next allocation there. Freeing an exported
// allocation nobody has open revokes the handle: opening it later fails.
//
// Reference counters (CUDA's "ref counter files" of torch.multiprocessing): a sender that
// hands out a piece of an allocation many times needs to know when every receiver is done
// with it. xxnpuIpcRefCreate makes a counter in shared memory; each send adds one pending
// reference; a receiver's Acquire turns one pending reference into its process holding the
// counter, Release drops that. The counter is in use while references are pending or a
// live process holds it: a receiver that dies stops holding it (checked by pid), so a
// crashed consumer does not pin the sender's memory. A reference sent but never received
// stays pending (as in CUDA).
//
// Torch-free (abseil only). Thread-safe. Errors say what was expected and what was got.
#ifndef TORCH_XXNPU_DEVICE_IPC_H_
#define TORCH_XXNPU_DEVICE_IPC_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xxnpu {

// Opaque, trivially copyable: send the bytes.
struct xxnpuIpcMemHandle_t {
  unsigned char bytes[64];
};
struct xxnpuIpcRefHandle_t {
  unsigned char bytes[48];
};

// The handle of the allocation starting at `device_ptr` (a pointer xxnpuMalloc returned;
// an interior pointer, host memory or a freed pointer is kInvalidArgument). The same
// allocation always gives the same handle until it is freed.
absl::Status xxnpuIpcGetMemHandle(xxnpuIpcMemHandle_t* handle, void* device_ptr);
// Maps another process's allocation on the same device index; `*device_ptr` is its start
// in this process. Opening a handle this process already has open returns the same
// pointer (and needs one more close). Errors: not a handle, the handle of this process,
// the exporter exited, the allocation was freed, permission denied.
absl::Status xxnpuIpcOpenMemHandle(void** device_ptr, const xxnpuIpcMemHandle_t& handle);
// Waits for this process's work on the device (queued kernels may still use the memory),
// then unmaps it once every open is closed. A pointer not open here (or closed already)
// is kInvalidArgument.
absl::Status xxnpuIpcCloseMemHandle(void* device_ptr);
// The allocation behind a handle this process made itself (a tensor sent back to its
// owner): its pointer, or an error when the handle is another process's or was revoked.
absl::StatusOr<void*> xxnpuIpcMemHandleOwnPointer(const xxnpuIpcMemHandle_t& handle);
// How many other live processes have the allocation at `device_ptr` open (0 when it was
// never exported).
absl::StatusOr<int> xxnpuIpcMemOpenCount(void* device_ptr);

// Sender side of a reference counter.
absl::Status xxnpuIpcRefCreate(xxnpuIpcRefHandle_t* handle);
// One more reference on its way to a receiver. The creator may call it, and so may a
// process that holds the counter (forwarding what it received).
absl::Status xxnpuIpcRefAddPending(const xxnpuIpcRefHandle_t& handle);
// True while references are pending or a live process holds the counter.
absl::StatusOr<bool> xxnpuIpcRefInUse(const xxnpuIpcRefHandle_t& handle);
absl::Status xxnpuIpcRefDestroy(const xxnpuIpcRefHandle_t& handle);
// Receiver side: takes one pending reference; the process holds the counter until a
// matching number of Releases. A destroyed counter or a dead sender is an error.
absl::Status xxnpuIpcRefAcquire(const xxnpuIpcRefHandle_t& handle);
absl::Status xxnpuIpcRefRelease(const xxnpuIpcRefHandle_t& handle);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_IPC_H_
