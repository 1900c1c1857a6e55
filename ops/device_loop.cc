#include "ops/device_loop.h"

#include <ATen/core/Tensor.h>

#include <exception>
#include <vector>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"

namespace xxnpu {
namespace {

// Elements per block of the launch grid: large enough that the per-block overhead
// (a virtual call and the pointer translation) vanishes, small enough to balance.
constexpr int64_t kElementsPerBlock = 16384;

// Walks elements [begin, end) of an iteration space (`shape`, byte `strides` laid out
// [dim][operand], as TensorIterator::get_strides) in 2-D steps, calling `loop` as
// TensorIterator's serial_for_each does. Ours because ATen's DimCounter is not exported.
void ForEach2d(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, const std::vector<char*>& base,
               int64_t begin, int64_t end, const DeviceLoop2d& loop) {
  const size_t ntensors = base.size();
  const size_t ndim = shape.size();
  std::vector<char*> ptrs(ntensors);
  if (ndim == 0) {
    ptrs = base;
    loop(ptrs.data(), strides.data(), 1, 1);
    return;
  }
  // Multi-index of `begin`, dim 0 fastest.
  std::vector<int64_t> idx(ndim, 0);
  int64_t rest = begin;
  for (size_t d = 0; d < ndim; ++d) {
    idx[d] = rest % shape[d];
    rest /= shape[d];
  }
  int64_t offset = begin;
  while (offset < end) {
    for (size_t t = 0; t < ntensors; ++t) {
      char* p = base[t];
      for (size_t d = 0; d < ndim; ++d) p += idx[d] * strides[d * ntensors + t];
      ptrs[t] = p;
    }
    int64_t size0 = std::min(shape[0] - idx[0], end - offset);
    int64_t size1 = 1;
    // At a row start with whole rows left, take several rows along dim 1 at once.
    if (ndim > 1 && idx[0] == 0 && size0 == shape[0]) {
      size1 = std::min(shape[1] - idx[1], (end - offset) / shape[0]);
    }
    loop(ptrs.data(), strides.data(), size0, size1);
    offset += size0 * size1;
    idx[0] += size0;
    if (idx[0] == shape[0]) {
      idx[0] = 0;
      if (ndim > 1) {
        idx[1] += size1;
        for (size_t d = 1; d + 1 < ndim && idx[d] >= shape[d]; ++d) {
          idx[d] -= shape[d];
          ++idx[d + 1];
        }
      }
    }
  }
}

}  // namespace

void CheckSameDevice(const char* op, const char* arg, const at::Tensor& t, c10::Device expected) {
  TORCH_CHECK(!t.defined() || t.device() == expected,
              "Expected all tensors to be on the same device, but found at least two devices, ", expected, " and ",
              t.device(), "! (when checking argument for argument ", arg, " in method ", op, ")");
}

xxnpuStream_t CurrentStreamHandle(c10::DeviceIndex device) { return GetCurrentXxnpuStream(device).handle(); }

void LaunchTensorIterator(const char* name, const at::TensorIteratorBase& iter, DeviceLoop2d loop,
                          KernelCost cost) {
  const int64_t numel = iter.numel();
  if (numel == 0) return;
  c10::DeviceIndex device = -1;
  uint64_t bytes = 0;
  for (int i = 0; i < iter.ntensors(); ++i) {
    if (iter.device(i).is_privateuseone() && device < 0) device = iter.device(i).index();
    bytes += static_cast<uint64_t>(iter.element_size(i)) * static_cast<uint64_t>(numel);
  }
  TORCH_INTERNAL_ASSERT(device >= 0, name, ": no xxnpu operand");
  // The kernel keeps only the iteration geometry and the operands' base pointers, already
  // translated to the device view: no tensor reference, so nothing is ever released on a
  // device thread (where a Python-owned tensor could not be freed) and memory is returned
  // to the caching allocator at the host's free, in stream order, as with CUDA.
  const int ntensors = iter.ntensors();
  std::vector<int64_t> shape(iter.shape().begin(), iter.shape().end());
  const auto strides_sv = iter.get_strides();
  std::vector<int64_t> strides(strides_sv.begin(), strides_sv.end());
  std::vector<char*> base(ntensors);
  for (int i = 0; i < ntensors; ++i) base[i] = static_cast<char*>(DeviceView(iter.data_ptr(i)));

  LaunchConfig cfg;
  cfg.name = name;
  const int64_t blocks = (numel + kElementsPerBlock - 1) / kElementsPerBlock;
  cfg.grid = Dim3{static_cast<uint32_t>(blocks), 1, 1};
  cfg.block = Dim3{static_cast<uint32_t>(std::min<int64_t>(numel, kElementsPerBlock)), 1, 1};
  cfg.bytes = cost.bytes ? cost.bytes : bytes;
  cfg.flops = cost.flops_per_element * static_cast<uint64_t>(numel);
  CheckOk(xxnpuLaunchKernel(cfg, [shape = std::move(shape), strides = std::move(strides), base = std::move(base),
                                  loop = std::move(loop), numel](BlockRange r) {
    // A loop that throws (e.g. integer division by zero) faults the kernel: the error is
    // sticky on the stream and reported, naming the kernel, at the next synchronizing call.
    try {
      ForEach2d(shape, strides, base, r.begin * kElementsPerBlock, std::min(numel, r.end * kElementsPerBlock), loop);
    } catch (const c10::Error& e) {
      return absl::InternalError(e.what_without_backtrace());
    } catch (const std::exception& e) {
      return absl::InternalError(e.what());
    }
    return absl::OkStatus();
  }, CurrentStreamHandle(device)), name);
}

}  // namespace xxnpu
