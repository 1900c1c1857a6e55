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

#include <type_traits>
#include <functional>

#include "absl/functional/function_ref.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"  // CurrentXxnpuStreamHandle: where kernels are queued
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

namespace device_loop_detail {

// Where and how an iterator's kernel is launched (computed on the host).
struct LaunchSetup {
  LaunchConfig config;
  xxnpuStream_t stream = nullptr;
  int64_t numel = 0;
};
// False when there is nothing to run (no elements).
bool SetUpLaunch(const char* name, const at::TensorIteratorBase& iter, const KernelCost& cost, LaunchSetup* setup);

// The iteration geometry of a small iterator, kept inside the launch itself (see
// xxnpuLaunchKernel's inline form): up to 2 dims (after TensorIterator coalesced them)
// and 4 operands, which covers contiguous and simply broadcast elementwise ops.
struct InlineGeometry {
  static constexpr int kMaxDims = 2;
  static constexpr int kMaxOperands = 4;
  int32_t ndim = 0;
  int32_t ntensors = 0;
  int64_t numel = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims * kMaxOperands] = {};  // bytes, [dim][operand]
  char* base[kMaxOperands] = {};                  // device-view pointers
};
// False when `iter` has more dims or operands than InlineGeometry holds.
bool FillInlineGeometry(const at::TensorIteratorBase& iter, int64_t numel, InlineGeometry* g);

using LoopRef = absl::FunctionRef<void(char** data, const int64_t* strides, int64_t size0, int64_t size1)>;
// Runs blocks `r` of an inline-geometry kernel; a loop that throws fails the kernel.
absl::Status RunInline(const InlineGeometry& g, BlockRange r, LoopRef loop);

// A loop and its geometry as one trivially copyable kernel, copied into the launch.
template <typename L>
struct InlineKernel {
  InlineGeometry g;
  L loop;
  absl::Status operator()(BlockRange r) const { return RunInline(g, r, loop); }
};

// The general form: the geometry and the loop go into a heap-allocated kernel body.
void LaunchWithBody(const char* name, const at::TensorIteratorBase& iter, const LaunchSetup& setup, DeviceLoop2d loop);

}  // namespace device_loop_detail

// `name` must outlive the process (a literal): the profiler shows it. The kernel keeps no
// reference to the iterator's tensors: as with CUDA, stream order (not lifetime) protects
// memory freed by the host while the kernel is queued. `loop` is called as
// loop(char** data, const int64_t* strides, int64_t size0, int64_t size1), TensorIterator's
// 2-D loop. A trivially copyable loop (a lambda capturing values) on a small iterator is
// copied into the launch, without allocating: the common small-op case.
template <typename Loop>
void LaunchTensorIterator(const char* name, const at::TensorIteratorBase& iter, Loop&& loop, KernelCost cost = {}) {
  namespace d = device_loop_detail;
  using L = std::decay_t<Loop>;
  d::LaunchSetup setup;
  if (!d::SetUpLaunch(name, iter, cost, &setup)) return;
  if constexpr (kFitsInlineKernel<d::InlineKernel<L>>) {
    d::InlineKernel<L> kernel{{}, loop};
    if (d::FillInlineGeometry(iter, setup.numel, &kernel.g)) {
      CheckOk(xxnpuLaunchKernel(setup.config, kernel, setup.stream), name);
      return;
    }
  }
  d::LaunchWithBody(name, iter, setup, DeviceLoop2d(std::forward<Loop>(loop)));
}

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_DEVICE_LOOP_H_
