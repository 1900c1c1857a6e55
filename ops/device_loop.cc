#include "ops/device_loop.h"

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include <exception>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"

namespace xxnpu {
namespace {

// Elements per block of the launch grid: large enough that the per-block overhead
// (a virtual call and the pointer translation) vanishes, small enough to balance.
constexpr int64_t kElementsPerBlock = 16384;

// The iteration geometry a heap-allocated kernel keeps: inline for up to 6 dims and 4
// operands, so that launching one allocates only the kernel body itself.
struct Geometry {
  c10::SmallVector<int64_t, 6> shape;
  c10::SmallVector<int64_t, 24> strides;  // bytes, [dim][operand] as TensorIterator::get_strides
  c10::SmallVector<char*, 4> base;       // device-view pointers
};

// What ForEach2d reads, from either geometry.
struct GeometryView {
  size_t ndim;
  size_t ntensors;
  const int64_t* shape;
  const int64_t* strides;
  char* const* base;
};

// GCC 12 reports the growth path of SmallVector for `ptrs` below (taken for more than 4
// operands) as reading it uninitialized: a -Wmaybe-uninitialized false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Walks elements [begin, end) of an iteration space in 2-D steps, calling `loop` as
// TensorIterator's serial_for_each does. Ours because ATen's DimCounter is not exported.
void ForEach2d(const GeometryView& g, int64_t begin, int64_t end, device_loop_detail::LoopRef loop) {
  const size_t ntensors = g.ntensors;
  const size_t ndim = g.ndim;
  c10::SmallVector<char*, 4> ptrs(g.base, g.base + ntensors);
  if (ndim == 0) {
    // A 0-dim iteration has no strides; the loop still reads two dims' worth.
    const c10::SmallVector<int64_t, 8> zeros(2 * ntensors, 0);
    loop(ptrs.data(), zeros.data(), 1, 1);
    return;
  }
  if (ndim == 1) {  // contiguous or coalesced to one dim: one call
    for (size_t t = 0; t < ntensors; ++t) ptrs[t] += begin * g.strides[t];
    loop(ptrs.data(), g.strides, end - begin, 1);
    return;
  }
  // Multi-index of `begin`, dim 0 fastest.
  c10::SmallVector<int64_t, 6> idx(ndim, 0);
  int64_t rest = begin;
  for (size_t d = 0; d < ndim; ++d) {
    idx[d] = rest % g.shape[d];
    rest /= g.shape[d];
  }
  int64_t offset = begin;
  while (offset < end) {
    for (size_t t = 0; t < ntensors; ++t) {
      char* p = g.base[t];
      for (size_t d = 0; d < ndim; ++d) p += idx[d] * g.strides[d * ntensors + t];
      ptrs[t] = p;
    }
    int64_t size0 = std::min(g.shape[0] - idx[0], end - offset);
    int64_t size1 = 1;
    // At a row start with whole rows left, take several rows along dim 1 at once.
    if (idx[0] == 0 && size0 == g.shape[0]) {
      size1 = std::min(g.shape[1] - idx[1], (end - offset) / g.shape[0]);
    }
    loop(ptrs.data(), g.strides, size0, size1);
    offset += size0 * size1;
    idx[0] += size0;
    if (idx[0] == g.shape[0]) {
      idx[0] = 0;
      idx[1] += size1;
      for (size_t d = 1; d + 1 < ndim && idx[d] >= g.shape[d]; ++d) {
        idx[d] -= g.shape[d];
        ++idx[d + 1];
      }
    }
  }
}
#pragma GCC diagnostic pop

}  // namespace

namespace device_loop_detail {

bool SetUpLaunch(const char* name, const at::TensorIteratorBase& iter, const KernelCost& cost, LaunchSetup* setup) {
  const int64_t numel = iter.numel();
  if (numel == 0) return false;
  c10::DeviceIndex device = -1;
  uint64_t bytes = 0;
  for (int i = 0; i < iter.ntensors(); ++i) {
    if (iter.device(i).is_privateuseone() && device < 0) device = iter.device(i).index();
    bytes += static_cast<uint64_t>(iter.element_size(i)) * static_cast<uint64_t>(numel);
  }
  TORCH_INTERNAL_ASSERT(device >= 0, name, ": no xxnpu operand");
  LaunchConfig& cfg = setup->config;
  cfg.name = name;
  const int64_t blocks = (numel + kElementsPerBlock - 1) / kElementsPerBlock;
  cfg.grid = Dim3{static_cast<uint32_t>(blocks), 1, 1};
  cfg.block = Dim3{static_cast<uint32_t>(std::min<int64_t>(numel, kElementsPerBlock)), 1, 1};
  cfg.bytes = cost.bytes ? cost.bytes : bytes;
  cfg.flops = cost.flops_per_element * static_cast<uint64_t>(numel);
  setup->stream = CurrentXxnpuStreamHandle(device);
  setup->numel = numel;
  return true;
}

// The kernel keeps only the iteration geometry and the operands' base pointers, already
// translated to the device view: no tensor reference, so nothing is ever released on a
// device thread (where a Python-owned tensor could not be freed) and memory is returned
// to the caching allocator at the host's free, in stream order, as with CUDA.
bool FillInlineGeometry(const at::TensorIteratorBase& iter, int64_t numel, InlineGeometry* g) {
  const int ndim = iter.ndim();
  const int ntensors = iter.ntensors();
  if (ndim > InlineGeometry::kMaxDims || ntensors > InlineGeometry::kMaxOperands) return false;
  g->ndim = ndim;
  g->ntensors = ntensors;
  g->numel = numel;
  const c10::IntArrayRef shape = iter.shape();
  for (int d = 0; d < ndim; ++d) g->shape[d] = shape[d];
  // get_strides()'s layout, [dim][operand], read straight from the operands (get_strides
  // builds a temporary vector: a tenth of a small op's launch).
  for (int i = 0; i < ntensors; ++i) {
    const c10::IntArrayRef strides = iter.strides(i);
    for (int d = 0; d < ndim; ++d) g->strides[d * ntensors + i] = strides[d];
    g->base[i] = static_cast<char*>(DeviceView(iter.data_ptr(i)));
  }
  return true;
}

namespace {

// Blocks [r.begin, r.end) of a kernel over `numel` elements. A loop that throws (e.g.
// integer division by zero) faults the kernel: the error is sticky on the stream and
// reported, naming the kernel, at the next synchronizing call.
absl::Status RunBlocks(const GeometryView& g, int64_t numel, BlockRange r, LoopRef loop) {
  try {
    ForEach2d(g, r.begin * kElementsPerBlock, std::min(numel, r.end * kElementsPerBlock), loop);
  } catch (const c10::Error& e) {
    return absl::InternalError(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunInline(const InlineGeometry& g, BlockRange r, LoopRef loop) {
  const GeometryView view{static_cast<size_t>(g.ndim), static_cast<size_t>(g.ntensors), g.shape, g.strides, g.base};
  return RunBlocks(view, g.numel, r, loop);
}

void LaunchWithBody(const char* name, const at::TensorIteratorBase& iter, const LaunchSetup& setup,
                    DeviceLoop2d loop) {
  const int ntensors = iter.ntensors();
  Geometry g;
  g.shape.assign(iter.shape().begin(), iter.shape().end());
  const auto strides = iter.get_strides();
  g.strides.assign(strides.begin(), strides.end());
  g.base.resize(ntensors);
  for (int i = 0; i < ntensors; ++i) g.base[i] = static_cast<char*>(DeviceView(iter.data_ptr(i)));
  const int64_t numel = setup.numel;
  CheckOk(xxnpuLaunchKernel(setup.config, KernelBody([g = std::move(g), loop = std::move(loop), numel](BlockRange r) {
            const GeometryView view{g.shape.size(), g.base.size(), g.shape.data(), g.strides.data(), g.base.data()};
            return RunBlocks(view, numel, r, loop);
          }), setup.stream), name);
}

}  // namespace device_loop_detail

}  // namespace xxnpu
