// The vocabulary of the xxnpu runtime API (device/runtime.h): value and handle types only,
// no functions. Split from runtime.h so a driver's internals (the simulator's stream engine
// and compute pool, a real chip's command queues) can name launches, ranges and handles
// without seeing, or being tempted to call back into, the API they implement.
//
// Torch-free: abseil only.
#ifndef TORCH_XXNPU_DEVICE_RUNTIME_TYPES_H_
#define TORCH_XXNPU_DEVICE_RUNTIME_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"

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

// ---------------------------------------------------------------- streams and events

// Opaque to everything above the driver: each driver defines these structs itself.
struct StreamImpl;
struct EventImpl;
// nullptr names the current device's default stream.
using xxnpuStream_t = StreamImpl*;
using xxnpuEvent_t = EventImpl*;

enum EventFlags : unsigned {
  kEventDefault = 0,
  kEventDisableTiming = 1,
};

// ---------------------------------------------------------------- memory

enum class MemcpyKind : uint8_t {
  kHostToHost = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
  kDefault = 4,  // inferred from the pointers
};

struct PointerAttributes {
  enum class Type : uint8_t { kUnregistered = 0, kHost = 1, kDevice = 2 };
  Type type = Type::kUnregistered;
  int device = -1;              // for kDevice
  const void* base = nullptr;   // start of the allocation holding the pointer
  size_t size = 0;              // size of that allocation
};

struct MemInfo {
  size_t free = 0;
  size_t total = 0;
};

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
  // What a generated kernel was made from, for the profiler (the trace's "fused nodes"):
  // a compiled kernel's fused FX nodes, "add, mul, relu". nullptr for hand-written kernels.
  // Must outlive the process, like `name`.
  const char* fused_nodes = nullptr;
};

// Kernels passed by value. A kernel that is a trivially copyable function object (a
// lambda capturing pointers, sizes and scalars; a plain function) of at most
// kKernelArgsCapacity bytes is copied into the launch itself, as a CUDA kernel's
// parameters are: the launch allocates nothing and leaves nothing for the host to
// destroy, and the device thread reads it from the few cache lines the launch wrote.
// That is most of a small op's launch cost (docs/device-runtime.md). Other kernels
// (capturing owners: tensors, shared_ptrs, strings) take the KernelBody overload of
// xxnpuLaunchKernel (runtime.h).
inline constexpr size_t kKernelArgsCapacity = 192;
using KernelThunk = absl::Status (*)(const void* kernel, BlockRange range);
// Whether a kernel object of type K can be copied into the launch.
template <typename K>
inline constexpr bool kFitsInlineKernel =
    std::is_trivially_copyable_v<K> && sizeof(K) <= kKernelArgsCapacity && alignof(K) <= 16;

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_RUNTIME_TYPES_H_
