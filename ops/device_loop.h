// Launching ATen-shaped work on the xxnpu device.
//
// LaunchTensorIterator runs an elementwise loop over a TensorIterator as an xxnpu kernel:
// ATen's TensorIterator does shapes, broadcasting, strides and dim coalescing on the host;
// the loop, which is ours, runs on the device's compute threads over device-view pointers
// (DeviceView), on the current stream of the iterator's device. The host returns at once.
#ifndef TORCH_XXNPU_OPS_DEVICE_LOOP_H_
#define TORCH_XXNPU_OPS_DEVICE_LOOP_H_

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <functional>

#include "device/runtime.h"

namespace xxnpu {

// (data, strides, size0, size1) as TensorIterator's 2-D loops, with every data pointer
// already translated to memory the device thread may touch.
using DeviceLoop2d = std::function<void(char** data, const int64_t* strides, int64_t size0, int64_t size1)>;

// Optional figures for the profiler; bytes default to every operand's bytes.
struct KernelCost {
  uint64_t bytes = 0;
  uint64_t flops_per_element = 0;
};

// `name` must outlive the process (a literal): the profiler shows it. The kernel keeps no
// reference to the iterator's tensors: as with CUDA, stream order (not lifetime) protects
// memory freed by the host while the kernel is queued.
void LaunchTensorIterator(const char* name, const at::TensorIteratorBase& iter, DeviceLoop2d loop,
                          KernelCost cost = {});

// A new uninitialized tensor on the current xxnpu device (the caller's DeviceGuard sets
// it), straight from the xxnpu allocator without a dispatcher call: the body of
// empty/empty_strided, and what kernels use for their outputs. Without `strides`, it is
// contiguous in `memory_format`.
at::Tensor NewXxnpuTensor(c10::IntArrayRef sizes, std::optional<c10::IntArrayRef> strides, at::ScalarType dtype,
                          std::optional<at::MemoryFormat> memory_format = std::nullopt);

// A TensorIterator for functional ops that allocates its outputs itself, straight from
// the xxnpu allocator, as CPU's and CUDA's structured kernels do. at::TensorIterator
// allocates through the dispatcher (at::empty), which costs a dispatcher round trip and,
// under the profiler, one more recorded op per call. Used on the device that the caller's
// DeviceGuard made current. Build it in place (its operands point into the object, so it
// is neither copied nor moved):
//   AllocatingIterator iter;
//   iter.build_binary_op(at::TensorBase(), a, b);   // any TensorIteratorBase::build_*
//   ... launch ...; return iter.output();
class AllocatingIterator final : public at::TensorIteratorBase {
 public:
  AllocatingIterator() = default;
  AllocatingIterator(const AllocatingIterator&) = delete;
  AllocatingIterator& operator=(const AllocatingIterator&) = delete;

  const at::Tensor& maybe_get_output(int64_t output_idx) override { return outputs_.at(output_idx); }
  void set_output_raw_strided(int64_t output_idx, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              at::TensorOptions options) override;

 private:
  std::array<at::Tensor, 2> outputs_;
};

// CUDA's check and message for an operand on another device than the op's ("Expected all
// tensors to be on the same device, but found at least two devices, xxnpu:0 and cpu! ...").
void CheckSameDevice(const char* op, const char* arg, const at::Tensor& t, c10::Device expected);

// The current stream of `device` (as the runtime handle): where kernels for tensors on
// that device are queued.
xxnpuStream_t CurrentStreamHandle(c10::DeviceIndex device);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_DEVICE_LOOP_H_
