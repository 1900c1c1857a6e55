// Copies that involve xxnpu tensors: host<->device and device<->device, any dtypes and
// strides, registered as aten::_copy_from and aten::_copy_from_and_resize (which
// Tensor.copy_, .to(), .cpu() and .xxnpu() reach for PrivateUse1).
//
// Contiguous same-dtype copies are single runtime memcpys (truly asynchronous from
// pinned memory with non_blocking=True). Anything else runs the strided, casting copy
// kernel on the device; a host side is first staged through a contiguous buffer.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorIterator.h>
#include <c10/util/TypeCast.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#include "device/c10/pinned_allocator.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/device_loop.h"

namespace xxnpu {
namespace {

// Dense, same layout, same dtype: one memcpy of the whole span moves every element.
bool SameDenseLayout(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.is_non_overlapping_and_dense() && b.is_non_overlapping_and_dense();
}

// A transposed copy, x.t().contiguous() or x.transpose(-2, -1).contiguous(): dst is
// contiguous [..., R, C] and src holds each [R, C] matrix column-major (stride 1 along R,
// R along C), batches in the same order. The element-by-element loop reads one element
// per cache line of src; this copies kTile x kTile tiles instead, so both sides of a
// tile stay in L1, with the tiles split over the compute threads.
constexpr int64_t kTile = 32;
constexpr int64_t kTransposeElementsPerBlock = 1 << 15;

bool IsTransposedCopy(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.dtype() != src.dtype() || dst.dim() < 2 || dst.sizes() != src.sizes() || !dst.is_contiguous()) return false;
  const int64_t nd = dst.dim(), rows = dst.size(nd - 2), cols = dst.size(nd - 1);
  if (rows < 2 || cols < 2) return false;
  if (src.stride(nd - 2) != 1 || src.stride(nd - 1) != rows) return false;
  for (int64_t d = 0; d < nd - 2; ++d) {
    if (dst.size(d) != 1 && src.stride(d) != dst.stride(d)) return false;
  }
  const size_t e = dst.element_size();
  return e == 1 || e == 2 || e == 4 || e == 8;
}

template <typename T>
void TransposeTile(T* __restrict d, const T* __restrict s, int64_t rows, int64_t cols, int64_t i0, int64_t j0) {
  const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t j = j0; j < j1; ++j) d[i * cols + j] = s[j * rows + i];
  }
}

void TransposedCopy(const at::Tensor& dst, const at::Tensor& src) {
  const int64_t nd = dst.dim(), rows = dst.size(nd - 2), cols = dst.size(nd - 1);
  const int64_t batches = dst.numel() / (rows * cols);
  const int64_t tr = (rows + kTile - 1) / kTile, tc = (cols + kTile - 1) / kTile, tiles = batches * tr * tc;
  const int64_t per_block = std::max<int64_t>(1, kTransposeElementsPerBlock / (kTile * kTile));
  LaunchConfig cfg;
  cfg.name = "xxnpu::copy_transpose";
  cfg.grid = Dim3{static_cast<uint32_t>((tiles + per_block - 1) / per_block), 1, 1};
  cfg.bytes = 2 * static_cast<uint64_t>(dst.nbytes());
  char* dp = static_cast<char*>(DeviceView(dst.data_ptr()));
  const char* sp = static_cast<const char*>(DeviceView(src.const_data_ptr()));
  const size_t elem = dst.element_size();
  auto run = [&](auto tag) {
    using T = decltype(tag);
    CheckOk(xxnpuLaunchKernel(cfg, [dp, sp, rows, cols, tr, tc, tiles, per_block](BlockRange r) {
      for (int64_t t = r.begin * per_block; t < std::min(tiles, r.end * per_block); ++t) {
        const int64_t b = t / (tr * tc), i0 = (t / tc) % tr * kTile, j0 = t % tc * kTile;
        TransposeTile(reinterpret_cast<T*>(dp) + b * rows * cols, reinterpret_cast<const T*>(sp) + b * rows * cols,
                      rows, cols, i0, j0);
      }
      return absl::OkStatus();
    }, CurrentXxnpuStreamHandle(dst.device().index())), cfg.name);
  };
  switch (elem) {
    case 1: run(uint8_t{}); break;
    case 2: run(uint16_t{}); break;
    case 4: run(uint32_t{}); break;
    default: run(uint64_t{}); break;
  }
}

// dst = src on the device, any dtypes and strides (both xxnpu).
void DeviceCopyKernel(const at::Tensor& dst, const at::Tensor& src) {
  if (IsTransposedCopy(dst, src)) {
    TransposedCopy(dst, src);
    return;
  }
  auto iter = at::TensorIteratorConfig()
                  .add_output(dst)
                  .add_const_input(src)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .check_all_same_device(false)
                  .build();
  const at::ScalarType out_t = dst.scalar_type();
  const at::ScalarType in_t = src.scalar_type();
  AT_DISPATCH_V2(out_t, "xxnpu_copy_out", AT_WRAP([&] {
    using out_scalar = scalar_t;
    AT_DISPATCH_V2(in_t, "xxnpu_copy_in", AT_WRAP([&] {
      using in_scalar = scalar_t;
      LaunchTensorIterator(out_t == in_t ? "xxnpu::copy_strided" : "xxnpu::copy_cast", iter,
                           [](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
        for (int64_t j = 0; j < n1; ++j) {
          char* out = data[0] + j * strides[2];
          const char* in = data[1] + j * strides[3];
          for (int64_t i = 0; i < n0; ++i) {
            *reinterpret_cast<out_scalar*>(out + i * strides[0]) =
                c10::convert<out_scalar>(*reinterpret_cast<const in_scalar*>(in + i * strides[1]));
          }
        }
      });
    }), AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
        at::kComplexHalf, AT_EXPAND(AT_FLOAT8_TYPES));
    // float8 and complex32 as the CPU's copy takes them: x.to(torch.float8_e4m3fn) on the
    // device (scaled-matmul inputs), torch.chalf.
  }), AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
      at::kComplexHalf, AT_EXPAND(AT_FLOAT8_TYPES));
}

size_t SpanBytes(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

void HostToDevice(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  const c10::DeviceIndex device = dst.device().index();
  if (SameDenseLayout(dst, src)) {
    // Pinned + non_blocking: queued and returns; otherwise the runtime waits for the copy
    // (pageable memory), or we wait below (blocking semantics of a plain copy_).
    xxnpuStream_t stream = CurrentXxnpuStreamHandle(device);
    const absl::Status queued = xxnpuMemcpyAsync(dst.data_ptr(), src.const_data_ptr(), SpanBytes(src),
                                                 MemcpyKind::kHostToDevice, stream);
    if (non_blocking) {
      CheckOk(queued, "copy to xxnpu");
      RecordPinnedUse(src.storage().data_ptr(), GetCurrentXxnpuStream(device).unwrap());
      return;
    }
    // A blocking copy reports the stream's sticky error through the synchronize, which
    // also clears it (the copy call itself only peeks at it).
    CheckOk(xxnpuStreamSynchronize(stream), "copy to xxnpu");
    CheckOk(queued, "copy to xxnpu");
    return;
  }
  // Stage: a contiguous host image in the source dtype, then cast/scatter on the device.
  at::Tensor host = src.contiguous();
  at::Tensor staged = at::empty(host.sizes(), host.options().device(dst.device()));
  HostToDevice(staged, host, /*non_blocking=*/false);
  DeviceCopyKernel(dst, staged);
  if (!non_blocking) CheckOk(xxnpuStreamSynchronize(CurrentXxnpuStreamHandle(device)), "copy to xxnpu");
}

void DeviceToHost(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  const c10::DeviceIndex device = src.device().index();
  xxnpuStream_t stream = CurrentXxnpuStreamHandle(device);
  if (SameDenseLayout(dst, src)) {
    const absl::Status queued = xxnpuMemcpyAsync(dst.data_ptr(), src.const_data_ptr(), SpanBytes(src),
                                                 MemcpyKind::kDeviceToHost, stream);
    if (non_blocking) {
      CheckOk(queued, "copy from xxnpu");
      RecordPinnedUse(dst.storage().data_ptr(), GetCurrentXxnpuStream(device).unwrap());
      return;
    }
    CheckOk(xxnpuStreamSynchronize(stream), "copy from xxnpu");  // reports and clears, as above
    CheckOk(queued, "copy from xxnpu");
    return;
  }
  // Gather/cast on the device into a contiguous buffer of dst's dtype, then one memcpy.
  at::Tensor gathered = at::empty(dst.sizes(), src.options().dtype(dst.scalar_type()));
  DeviceCopyKernel(gathered, src);
  at::Tensor host = at::empty(dst.sizes(), dst.options().memory_format(at::MemoryFormat::Contiguous));
  const absl::Status queued = xxnpuMemcpyAsync(host.data_ptr(), gathered.const_data_ptr(), SpanBytes(gathered),
                                               MemcpyKind::kDeviceToHost, stream);
  CheckOk(xxnpuStreamSynchronize(stream), "copy from xxnpu");
  CheckOk(queued, "copy from xxnpu");
  dst.copy_(host);
}

void DeviceToDevice(const at::Tensor& dst, const at::Tensor& src) {
  const c10::DeviceIndex dst_device = dst.device().index();
  const c10::DeviceIndex src_device = src.device().index();
  if (src_device != dst_device) {
    // The source's pending writes are on its own current stream: order our copy after them.
    // The event belongs to the source's device, where it is recorded.
    xxnpuEvent_t ready;
    {
      const c10::DeviceGuard src_guard(src.device());
      ready = ValueOrThrow(xxnpuEventCreate(kEventDisableTiming), "xxnpu copy");
    }
    CheckOk(xxnpuEventRecord(ready, CurrentXxnpuStreamHandle(src_device)), "xxnpu copy");
    CheckOk(xxnpuStreamWaitEvent(CurrentXxnpuStreamHandle(dst_device), ready), "xxnpu copy");
    CheckOk(xxnpuEventDestroy(ready), "xxnpu copy");
  }
  if (SameDenseLayout(dst, src)) {
    CheckOk(xxnpuMemcpyAsync(dst.data_ptr(), src.const_data_ptr(), SpanBytes(src), MemcpyKind::kDeviceToDevice,
                             CurrentXxnpuStreamHandle(dst_device)),
            "xxnpu copy");
    return;
  }
  c10::DeviceGuard guard(dst.device());
  DeviceCopyKernel(dst, src);
}

// The source as dst's shape. ATen's copy_ hands every copy that involves a PrivateUse1
// tensor to _copy_from before it broadcasts (torch 2.13's copy_impl), so the broadcasting
// and its errors are ours: the CPU's rules and messages (its copy_ is a TensorIterator
// with a fixed output). A source of another shape with the same element count is an
// error, as on the CPU (this once reshaped it silently).
at::Tensor BroadcastSource(const at::Tensor& self, const at::Tensor& dst) {
  if (self.sizes() == dst.sizes()) return self;
  // "The size of tensor a (3) must match the size of tensor b (6) at non-singleton dimension 1"
  const auto shape = at::infer_size_dimvector(dst.sizes(), self.sizes());
  TORCH_CHECK(at::IntArrayRef(shape) == dst.sizes(), "output with shape ", dst.sizes(),
              " doesn't match the broadcast shape ", at::IntArrayRef(shape));
  return self.expand(dst.sizes());
}

at::Tensor CopyFromLazyView(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);

at::Tensor CopyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  // A lazily conjugated or negated view reaches this PrivateUse1 kernel, not the
  // Conjugate/Negative one below, whenever those keys are excluded: under any
  // TorchDispatchMode (torch.compile's AOTAutograd runs its graphs under one) the redispatch
  // skips every key above Python, so clone/copy_ of x.conj() lost the conjugation. Any bit,
  // even the same on both sides: the host paths below hand tensors to the CPU's copy_ and
  // contiguous(), which would apply it to values this copy moves as stored.
  if (self.is_conj() || dst.is_conj() || self.is_neg() || dst.is_neg()) {
    return CopyFromLazyView(self, dst, non_blocking);
  }
  const at::Tensor src = BroadcastSource(self, dst);
  if (dst.numel() == 0) return dst;
  // The CPU's overlap errors (its TensorIterator's): a destination with repeated elements,
  // or one that partly overlaps its source, would make the result depend on copy order.
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, src);
  const bool src_dev = src.device().is_privateuseone();
  const bool dst_dev = dst.device().is_privateuseone();
  if (src_dev && dst_dev) {
    DeviceToDevice(dst, src);
  } else if (dst_dev) {
    TORCH_CHECK(src.device().is_cpu(), "copy to xxnpu: unsupported source device ", src.device());
    HostToDevice(dst, src, non_blocking);
  } else {
    TORCH_CHECK(dst.device().is_cpu(), "copy from xxnpu: unsupported destination device ", dst.device());
    DeviceToHost(dst, src, non_blocking);
  }
  return dst;
}

at::Tensor CopyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return CopyFrom(self, dst, /*non_blocking=*/false);
}

// Copies from or into a lazily conjugated or negated view (x.conj(), x.conj().imag).
// ATen's copy_ falls through the Conjugate and Negative keys and hands any copy that
// involves an xxnpu tensor to _copy_from before it deals with those views (it does that
// only for CPU/CUDA), and the keys' generic fallback would materialise the view with a
// clone, i.e. a copy_ again: infinite recursion. So: copy the stored values, then apply
// the pending conj/neg to the destination.
at::Tensor CopyFromLazyView(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor src = self.is_conj() ? at::_conj(self) : self;
  src = src.is_neg() ? at::_neg_view(src) : src;
  at::Tensor out = dst.is_conj() ? at::_conj(dst) : dst;
  out = out.is_neg() ? at::_neg_view(out) : out;
  const bool flip_conj = self.is_conj() != dst.is_conj(), flip_neg = self.is_neg() != dst.is_neg();
  if (!flip_conj && !flip_neg) {
    at::_copy_from(src, out, non_blocking);
    return dst;
  }
  // conj_physical has no xxnpu kernel (ATen reaches it through a DispatchStub, which the
  // CPU fallback cannot serve): apply the pending ops on the host side of the copy.
  at::Tensor host = out.device().is_cpu() ? out : (src.device().is_cpu() ? src.clone() : src.to(at::kCPU));
  if (out.device().is_cpu()) at::_copy_from(src, out, /*non_blocking=*/false);
  if (flip_conj) host.conj_physical_();
  if (flip_neg) host.neg_();
  if (!out.device().is_cpu()) at::_copy_from(host, out, /*non_blocking=*/false);
  return dst;
}

// The PrivateUse1 kernel (CopyFrom) resolves the bits itself, with or without these keys in
// the dispatch: they only pass the call through (their generic fallback would materialise
// the view with a clone, a copy_ again: infinite recursion).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) { m.impl("_copy_from", torch::CppFunction::makeFallthrough()); }
TORCH_LIBRARY_IMPL(aten, Negative, m) { m.impl("_copy_from", torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", &CopyFrom);
  m.impl("_copy_from_and_resize", &CopyFromAndResize);
}

}  // namespace
}  // namespace xxnpu
