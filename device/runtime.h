// The xxnpu runtime API: the "driver" every layer above talks to.
//
// It is shaped like a GPU runtime (malloc/memcpy/streams/events/launch) so that a real
// chip's driver can sit behind the same calls. This implementation simulates the chip:
//   - Device memory is its own address space. Pointers returned by xxnpuMalloc are
//     device addresses; host code must not dereference them. Kernels and copies reach
//     the bytes through DeviceView(). With XXNPU_STRICT_MEMORY=1 a host access to a
//     device address faults at once (the device range is mapped PROT_NONE).
//   - Streams are in-order queues executed by device threads; every enqueueing call
//     returns as soon as the work is queued (XXNPU_LAUNCH_BLOCKING=1 makes each
//     enqueue wait for its completion, for debugging).
//   - Kernels are host functions run on the device's compute threads, the grid's
//     blocks split across them.
//
// Torch-free: depends on abseil only. Thread-safe: every call may come from any thread.
// Errors are absl::Status values whose messages say what was expected and what was got.
//
// Configuration (read once, at first use):
//   XXNPU_DEVICE_COUNT      number of devices (default 2, 1..16)
//   XXNPU_DEVICE_MEMORY     bytes per device; suffixes K, M, G accepted (default 8G)
//   XXNPU_COMPUTE_THREADS   compute threads per device (default: hardware threads)
//   XXNPU_LAUNCH_BLOCKING   1: every enqueue waits for its completion
//   XXNPU_STRICT_MEMORY     1: host access to device memory faults
//   XXNPU_SPIN_US           how long an idle stream thread, or a host waiting for a stream, spins
//                           before sleeping (default 50)
//   XXNPU_FETCH_INTERVAL_NS how often a busy stream thread looks for new commands (default 2000)
#ifndef TORCH_XXNPU_DEVICE_RUNTIME_H_
#define TORCH_XXNPU_DEVICE_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <memory>
#include <type_traits>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xxnpu {

// ---------------------------------------------------------------- devices

struct DeviceProperties {
  std::string name;
  int index = 0;
  size_t total_memory = 0;      // bytes of device memory (the allocation capacity)
  int compute_units = 0;        // compute threads that run kernels
  int max_threads_per_block = 1024;
  int stream_priority_low = 0;  // numerically larger = lower priority, as in CUDA
  int stream_priority_high = -1;
  bool strict_memory = false;   // host access to device memory faults
  bool launch_blocking = false;
  // The architecture version, as CUDA's compute capability: what a kernel library
  // checks to pick code paths. The simulator is version 1.0; a driver reports its chip's.
  int major = 1;
  int minor = 0;
};

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

struct StreamImpl;
struct EventImpl;
// nullptr names the current device's default stream.
using xxnpuStream_t = StreamImpl*;
using xxnpuEvent_t = EventImpl*;

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

enum EventFlags : unsigned {
  kEventDefault = 0,
  kEventDisableTiming = 1,
};
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

enum class MemcpyKind : uint8_t {
  kHostToHost = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
  kDefault = 4,  // inferred from the pointers
};
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

struct PointerAttributes {
  enum class Type : uint8_t { kUnregistered = 0, kHost = 1, kDevice = 2 };
  Type type = Type::kUnregistered;
  int device = -1;              // for kDevice
  const void* base = nullptr;   // start of the allocation holding the pointer
  size_t size = 0;              // size of that allocation
};
// Never fails for a plain host pointer (kUnregistered).
PointerAttributes xxnpuPointerGetAttributes(const void* ptr);

struct MemInfo {
  size_t free = 0;
  size_t total = 0;
};
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

struct Dim3 {
  uint32_t x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t{x} * y * z; }
};

// Blocks [begin, end) of the grid (linearised x fastest), given to one compute thread.
struct BlockRange {
  int64_t begin = 0;
  int64_t end = 0;
};

// Runs for each share of the grid on a compute thread. It must be callable concurrently.
// Returning an error fails the kernel: the error becomes its stream's sticky error.
using KernelBody = absl::AnyInvocable<absl::Status(BlockRange) const>;

struct LaunchConfig {
  // Shown by the profiler. Must outlive the process (a string literal or interned name).
  const char* name = "kernel";
  Dim3 grid;
  Dim3 block;
  uint64_t bytes = 0;  // bytes the kernel reads + writes (for achieved-bandwidth figures)
  uint64_t flops = 0;
  // A kernel below this much work (bytes + flops) runs on one thread: spreading it costs
  // more than it saves.
  uint64_t parallel_threshold = 256 * 1024;
};

absl::Status xxnpuLaunchKernel(const LaunchConfig& config, KernelBody body, xxnpuStream_t stream);

// Kernels passed by value. A kernel that is a trivially copyable function object (a
// lambda capturing pointers, sizes and scalars; a plain function) of at most
// kKernelArgsCapacity bytes is copied into the launch itself, as a CUDA kernel's
// parameters are: the launch allocates nothing and leaves nothing for the host to
// destroy, and the device thread reads it from the few cache lines the launch wrote.
// That is most of a small op's launch cost (docs/device-runtime.md). Other kernels
// (capturing owners: tensors, shared_ptrs, strings) take the KernelBody overload above.
inline constexpr size_t kKernelArgsCapacity = 192;
using KernelThunk = absl::Status (*)(const void* kernel, BlockRange range);
// Whether a kernel object of type K can be copied into the launch.
template <typename K>
inline constexpr bool kFitsInlineKernel =
    std::is_trivially_copyable_v<K> && sizeof(K) <= kKernelArgsCapacity && alignof(K) <= 16;

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

// A host function run in stream order on the device thread (cudaLaunchHostFunc).
absl::Status xxnpuLaunchHostFunc(xxnpuStream_t stream, absl::AnyInvocable<void()> fn);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_RUNTIME_H_
