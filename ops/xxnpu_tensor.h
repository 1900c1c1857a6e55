// Tensor helpers every xxnpu kernel shares, apart from how work is launched
// (ops/device_loop.h): allocating outputs straight from the xxnpu allocator, a
// TensorIterator that does so, and the one check that an operand is on the op's device.
#ifndef TORCH_XXNPU_OPS_XXNPU_TENSOR_H_
#define TORCH_XXNPU_OPS_XXNPU_TENSOR_H_

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <optional>

namespace xxnpu {

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
//   iter.build_borrowing_binary_op(iter.maybe_get_output(0), a, b);  // any build_*
//   ... launch ...; return iter.TakeOutput();
// Borrowing builds skip two reference counts per operand: a small op's launch pays for
// every atomic read-modify-write (docs/device-runtime.md).
class AllocatingIterator final : public at::TensorIteratorBase {
 public:
  AllocatingIterator() = default;
  AllocatingIterator(const AllocatingIterator&) = delete;
  AllocatingIterator& operator=(const AllocatingIterator&) = delete;

  const at::Tensor& maybe_get_output(int64_t output_idx) override { return outputs_.at(output_idx); }
  // The allocated output, moved out: call last (the iterator only borrowed it).
  at::Tensor TakeOutput(int64_t output_idx = 0) { return std::move(outputs_.at(output_idx)); }
  void set_output_raw_strided(int64_t output_idx, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              at::TensorOptions options) override;

 private:
  std::array<at::Tensor, 2> outputs_;
};

// The one check, for every xxnpu kernel and the CPU fallback, that operand `arg` of `op`
// is on `expected` (the op's device); an undefined `t` passes. CUDA's message, so that
// code matching it works on both: "Expected all tensors to be on the same device, but
// found at least two devices, xxnpu:0 and cpu! (when checking argument for argument
// <arg> in method <op>)".
void CheckSameDevice(const char* op, const char* arg, const at::Tensor& t, c10::Device expected);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_XXNPU_TENSOR_H_
