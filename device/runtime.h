// The xxnpu runtime API: the "driver" every layer above talks to, and the seam where a
// real chip's driver replaces the simulator (docs/porting.md).
//
// It is shaped like a GPU runtime (malloc/memcpy/streams/events/launch). This header
// declares the functions only; their vocabulary types are in device/runtime_types.h and
// their implementation is chosen at link time (//device:driver, by default the simulator
// in device/simulator/). Contracts every implementation keeps:
//   - Device memory is its own address space. Pointers returned by xxnpuMalloc are
//     device addresses; host code must not dereference them. Kernels and copies reach
//     the bytes through DeviceView().
//   - Streams are in-order queues executed by the device; every enqueueing call returns
//     as soon as the work is queued.
//   - Kernels are host functions run on the device's compute threads, the grid's
//     blocks split across them.
//   - Device work and API calls are described to the profiler as activity records
//     (device/activity_trace.h).
//
// Torch-free: depends on abseil only. Thread-safe: every call may come from any thread.
// Errors are absl::Status values whose messages say what was expected and what was got.
//
// The simulator's configuration (read once, at first use):
//   XXNPU_DEVICE_COUNT      number of devices (default 2, 1..16)
//   XXNPU_DEVICE_MEMORY     bytes per device; suffixes K, M, G accepted (default 8G)
//   XXNPU_COMPUTE_THREADS   compute threads per device (default: hardware threads)
//   XXNPU_LAUNCH_BLOCKING   1: every enqueue waits for its completion
//   XXNPU_STRICT_MEMORY     1: host access to device memory faults (the device range is
//                           mapped PROT_NONE)
//   XXNPU_SPIN_US           how long an idle stream thread, or a host waiting for a stream, spins
//                           before sleeping (default 50)
//   XXNPU_FETCH_INTERVAL_NS how often a busy stream thread looks for new commands (default 2000)
#ifndef TORCH_XXNPU_DEVICE_RUNTIME_H_
#define TORCH_XXNPU_DEVICE_RUNTIME_H_

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/runtime_types.h"

namespace xxnpu {

// ---------------------------------------------------------------- devices

absl::StatusOr<int> xxnpuGetDeviceCount();
// The calling host thread's current device (initially 0).
absl::StatusOr<int> xxnpuGetDevice();
// The same without the runtime's health check, for paths taken several times per op
// (device guards, the allocator): whatever the thread uses next reports a broken runtime.
int xxnpuCurrentDevice() noexcept;
absl::Status xxnpuSetDevice(int device);
absl::StatusOr<DeviceProperties> xxnpuGetDeviceProperties(int device);
// Waits for all work on every stream of the current device; returns (and clears) the
// first sticky error of any of its streams.
absl::Status xxnpuDeviceSynchronize();
// Waits for the device's work, then frees every allocation and destroys every created
// stream and event of `device`. Handles to them become invalid.
absl::Status xxnpuDeviceReset(int device);

// ---------------------------------------------------------------- streams and events

// Priority: xxnpuDeviceGetStreamPriorityRange; out-of-range values are clamped as CUDA does.
absl::StatusOr<xxnpuStream_t> xxnpuStreamCreate(int priority = 0);
// Work already queued still runs; the handle is invalid afterwards.
absl::Status xxnpuStreamDestroy(xxnpuStream_t stream);
// OK when all queued work is done, absl::StatusCode::kUnavailable ("not ready") when not,
// or the stream's sticky error (cleared by this call).
absl::Status xxnpuStreamQuery(xxnpuStream_t stream);
absl::Status xxnpuStreamSynchronize(xxnpuStream_t stream);
// Work queued on `stream` after this call waits until `event`'s latest record completes
// (no-op for a never-recorded event). The event may belong to another device.
absl::Status xxnpuStreamWaitEvent(xxnpuStream_t stream, xxnpuEvent_t event);
absl::StatusOr<int> xxnpuStreamGetDevice(xxnpuStream_t stream);
// The default stream of `device` as an explicit handle (nullptr always means the
// *current* device's default stream; this names one device's regardless of the thread).
absl::StatusOr<xxnpuStream_t> xxnpuDeviceGetDefaultStream(int device);
absl::StatusOr<int> xxnpuStreamGetPriority(xxnpuStream_t stream);
// A small process-unique number naming the stream in traces (default streams included).
absl::StatusOr<int> xxnpuStreamGetId(xxnpuStream_t stream);

// Created on the current device.
absl::StatusOr<xxnpuEvent_t> xxnpuEventCreate(unsigned flags = kEventDefault);
absl::Status xxnpuEventDestroy(xxnpuEvent_t event);
// Captures the work queued so far on `stream` (which must be on the event's device); the
// event completes when the device reaches this point, stamping the device time. An event
// may be recorded again; queries then refer to the latest record.
absl::Status xxnpuEventRecord(xxnpuEvent_t event, xxnpuStream_t stream);
// OK if complete (or never recorded), kUnavailable if not yet.
absl::Status xxnpuEventQuery(xxnpuEvent_t event);
absl::Status xxnpuEventSynchronize(xxnpuEvent_t event);
// Milliseconds between two completed timing events' device timestamps.
absl::StatusOr<float> xxnpuEventElapsedTime(xxnpuEvent_t start, xxnpuEvent_t end);
absl::StatusOr<int> xxnpuEventGetDevice(xxnpuEvent_t event);

// ---------------------------------------------------------------- memory

const char* MemcpyKindName(MemcpyKind kind);

// Allocates `bytes` of device memory on the current device (256-byte aligned). Exceeding
// the device's capacity is a kResourceExhausted error naming requested and free bytes.
// Zero bytes returns nullptr.
absl::StatusOr<void*> xxnpuMalloc(size_t bytes);
absl::StatusOr<void*> xxnpuMallocOnDevice(int device, size_t bytes);
// Waits for the device (as cudaFree does), then releases the allocation. nullptr is a
// no-op; a pointer that is not the start of a live allocation is kInvalidArgument.
absl::Status xxnpuFree(void* device_ptr);

// Page-locked host memory: async copies from/to it do not block the host.
absl::StatusOr<void*> xxnpuHostAlloc(size_t bytes);
absl::Status xxnpuFreeHost(void* host_ptr);

// Synchronous copy: queued on the default stream of the device that owns the device side
// (the destination's for device-to-device) and waited for. Host-to-host is a memcpy.
absl::Status xxnpuMemcpy(void* dst, const void* src, size_t bytes, MemcpyKind kind);
// Queued on `stream`. A host side that is not pinned (xxnpuHostAlloc) makes the call wait
// until the copy is done, as CUDA does for pageable memory.
absl::Status xxnpuMemcpyAsync(void* dst, const void* src, size_t bytes, MemcpyKind kind,
                              xxnpuStream_t stream);
absl::Status xxnpuMemset(void* device_ptr, int value, size_t bytes);
absl::Status xxnpuMemsetAsync(void* device_ptr, int value, size_t bytes, xxnpuStream_t stream);

// Never fails for a plain host pointer (kUnregistered).
PointerAttributes xxnpuPointerGetAttributes(const void* ptr);

absl::StatusOr<MemInfo> xxnpuMemGetInfo(int device);

// The host-accessible view of device memory, for code that runs on the device (kernel
// bodies, copy engines). Not for host code: in strict mode only views are accessible.
// Pointers outside device memory are returned unchanged.
void* DeviceView(const void* device_ptr);
template <typename T>
T* DeviceView(T* device_ptr) {
  return static_cast<T*>(DeviceView(static_cast<const void*>(device_ptr)));
}
bool IsDevicePointer(const void* ptr);
// Which device's memory `ptr` points into (-1 for host memory). Pure arithmetic, no lock:
// for hot paths such as a tensor's deleter.
int DeviceOfPointer(const void* ptr);

// ---------------------------------------------------------------- kernels

absl::Status xxnpuLaunchKernel(const LaunchConfig& config, KernelBody body, xxnpuStream_t stream);

// The type-erased form of the overload below: `kernel` points to `bytes` bytes of a
// trivially copyable object that `thunk` knows how to run.
absl::Status xxnpuLaunchKernelInline(const LaunchConfig& config, KernelThunk thunk, const void* kernel,
                                     size_t bytes, xxnpuStream_t stream);

template <typename F>
  requires(kFitsInlineKernel<std::decay_t<F>> && std::is_invocable_r_v<absl::Status, const std::decay_t<F>&, BlockRange>)
absl::Status xxnpuLaunchKernel(const LaunchConfig& config, F&& kernel, xxnpuStream_t stream) {
  using K = std::decay_t<F>;
  constexpr KernelThunk thunk = [](const void* k, BlockRange r) -> absl::Status {
    return (*static_cast<const K*>(k))(r);
  };
  if constexpr (std::is_function_v<std::remove_reference_t<F>>) {
    const K function = kernel;  // a function decays to a pointer, which is what is copied
    return xxnpuLaunchKernelInline(config, thunk, &function, sizeof(K), stream);
  } else {
    return xxnpuLaunchKernelInline(config, thunk, std::addressof(kernel), sizeof(K), stream);
  }
}

// Device-side fork-join, for a kernel whose work comes in phases (Inductor's generated
// kernels: a parallel loop, then code that combines its per-thread results, then the next
// loop). Called from inside a running kernel, it runs `body` over blocks [0, blocks)
// across the compute threads of the device running that kernel and returns when all are
// done, with the first error a share returned: a child grid its parent waits for, as with
// CUDA's dynamic parallelism. The child's time is the parent kernel's (one activity
// record). `body` gets ranges of blocks, as a kernel does. It runs all blocks as one range
// on the calling thread when the kernel is below its LaunchConfig::parallel_threshold, or
// when the calling thread is not a stream's device thread (a pool worker running part of a
// larger grid; host code).
absl::Status xxnpuKernelParallelFor(int64_t blocks, absl::FunctionRef<absl::Status(BlockRange)> body);

// A host function run in stream order on the device thread (cudaLaunchHostFunc).
absl::Status xxnpuLaunchHostFunc(xxnpuStream_t stream, absl::AnyInvocable<void()> fn);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_RUNTIME_H_
