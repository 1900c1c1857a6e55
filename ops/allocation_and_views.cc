// The ops that make tensors live on xxnpu: allocation (empty, empty_strided), views
// (as_strided, view, _reshape_alias, unfold, view_as_real/complex), storage manipulation (resize_, set_), fill_/zero_
// and reading one element back (_local_scalar_dense). Everything else builds on these.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/EmptyTensor.h>
#include <ATen/InferSize.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/device_loop.h"
#include "ops/xxnpu_tensor.h"

namespace xxnpu {
namespace {

c10::Device TargetDevice(std::optional<c10::Device> device) {
  c10::Device d = device.value_or(c10::Device(kXxnpuDeviceType, -1));
  TORCH_CHECK(d.is_privateuseone(), "expected an xxnpu device, got ", d);
  return c10::Device(kXxnpuDeviceType, ResolveDeviceIndex(d.has_index() ? d.index() : -1));
}

at::Tensor Empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                 std::optional<c10::Device> device, std::optional<bool> pin_memory,
                 std::optional<at::MemoryFormat> memory_format) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided, "xxnpu supports strided tensors only, got ",
              layout.value());
  const c10::Device target = TargetDevice(device);
  const c10::DeviceGuard guard(target);  // the allocator allocates on the current device
  return NewXxnpuTensor(size, std::nullopt, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor EmptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<c10::Device> device,
                        std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  const c10::Device target = TargetDevice(device);
  const c10::DeviceGuard guard(target);
  return NewXxnpuTensor(size, stride, c10::dtype_or_default(dtype));
}

// Grows the storage (never shrinks it, like CPU and CUDA) to hold `bytes`, keeping its
// contents: the hooks' resizePrivateUse1Bytes allocates and copies on the device.
void EnsureStorageBytes(const at::Tensor& self, size_t bytes) {
  const c10::Storage& storage = self.unsafeGetTensorImpl()->unsafe_storage();
  if (bytes > storage.nbytes()) at::native::resize_bytes_nocuda(storage, c10::SymInt(static_cast<int64_t>(bytes)));
}

const at::Tensor& Resize(const at::Tensor& self, c10::IntArrayRef size, std::optional<at::MemoryFormat> format) {
  for (int64_t s : size) TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", size);
  const c10::DeviceGuard guard(self.device());
  at::TensorImpl* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  const auto mf = format.value_or(at::MemoryFormat::Contiguous);
  if (mf != at::MemoryFormat::Contiguous) impl->empty_tensor_restride(mf);
  const size_t needed = at::detail::computeStorageNbytes(size, impl->strides(), self.dtype().itemsize(),
                                                          impl->storage_offset());
  EnsureStorageBytes(self, needed);
  return self;
}

at::Tensor& SetStorage(at::Tensor& self, c10::Storage source, int64_t storage_offset, c10::IntArrayRef size,
                       c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  at::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (stride.data() != nullptr && !stride.empty()) {
    impl->set_sizes_and_strides(size, stride);
  } else {
    impl->set_sizes_contiguous(size);
  }
  const size_t needed = at::detail::computeStorageNbytes(size, impl->strides(), self.dtype().itemsize(),
                                                          storage_offset);
  EnsureStorageBytes(self, needed);
  return self;
}

at::Tensor& SetSourceStorage(at::Tensor& self, c10::Storage source) {
  const int64_t numel = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return SetStorage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& SetSourceTensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return SetStorage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& SetEmpty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, c10::GetAllocator(kXxnpuDeviceType), true);
  return SetStorage(self, std::move(empty), 0, {0}, {});
}

at::Tensor& Fill(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  const c10::DeviceGuard guard(self.device());
  auto iter = at::TensorIteratorConfig()
                  .add_output(self)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .build();
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_fill", AT_WRAP([&] {
    const scalar_t v = value.to<scalar_t>();
    LaunchTensorIterator("xxnpu::fill", iter, [v](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
      for (int64_t j = 0; j < n1; ++j) {
        char* out = data[0] + j * strides[1];
        for (int64_t i = 0; i < n0; ++i) *reinterpret_cast<scalar_t*>(out + i * strides[0]) = v;
      }
    });
  }), AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
      at::kComplexHalf, AT_EXPAND(AT_FLOAT8_TYPES));  // torch.zeros(..., dtype=float8 / chalf), as on the CPU
  return self;
}

at::Scalar LocalScalarDense(const at::Tensor& self);

at::Tensor& FillTensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  return Fill(self, value.item());
}

at::Tensor& Zero(at::Tensor& self) { return Fill(self, 0); }

at::Scalar LocalScalarDense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  at::Scalar result;
  const c10::DeviceGuard guard(self.device());
  // Waits for the producer on the current stream, like CUDA's .item().
  xxnpuStream_t stream = CurrentXxnpuStreamHandle(self.device().index());
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_local_scalar_dense", AT_WRAP([&] {
    scalar_t value;
    const absl::Status queued = xxnpuMemcpyAsync(&value, self.const_data_ptr<scalar_t>(), sizeof(scalar_t),
                                                 MemcpyKind::kDeviceToHost, stream);
    // Synchronize even if queueing failed: a sticky kernel error is then reported (and
    // cleared) once, here, rather than again at the next synchronizing call.
    const absl::Status synced = xxnpuStreamSynchronize(stream);
    CheckOk(synced.ok() ? queued : synced, "xxnpu item()");
    result = at::Scalar(value);
  }), AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
  return result;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &Empty);
  m.impl("empty_strided", &EmptyStrided);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  // Views whose ATen kernels are registered per backend (CPU, CUDA, Meta) rather than as
  // composites: without these they went to the CPU fallback, which returns a copy, so a
  // write through view_as_real(x) or x.unfold(...) was lost (complex torch.randn on
  // xxnpu filled a copy). They only compute sizes and strides.
  m.impl("unfold", &at::native::unfold);
  m.impl("view_as_real", &at::native::view_as_real);
  m.impl("view_as_complex", &at::native::view_as_complex);
  m.impl("resize_", &Resize);
  m.impl("set_.source_Storage", &SetSourceStorage);
  m.impl("set_.source_Storage_storage_offset", &SetStorage);
  m.impl("set_.source_Tensor", &SetSourceTensor);
  m.impl("set_", &SetEmpty);
  m.impl("fill_.Scalar", &Fill);
  m.impl("fill_.Tensor", &FillTensor);
  m.impl("zero_", &Zero);
  m.impl("_local_scalar_dense", &LocalScalarDense);
}

}  // namespace
}  // namespace xxnpu
