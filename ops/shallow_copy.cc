// Which TensorImpls may take each other's metadata in a shallow copy (`t.data = other`,
// torch.nn.Module.to()'s in-place parameter swap, `_has_compatible_shallow_copy_type`).
//
// c10's TensorImpl::has_compatible_shallow_copy_type treats dense tensors of CPU, CUDA,
// MPS, HIP, XPU, HPU and MTIA as interchangeable, but not PrivateUse1's: without this
// override `cpu_tensor.data = xxnpu_tensor` fails with "incompatible tensor type" where the
// same line with a CUDA tensor works. c10 documents this op as the PrivateUse1 hook. The
// dispatcher picks our kernel whenever either argument is an xxnpu tensor (PrivateUse1
// outranks CPU), so both directions go through here.
#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKeySet.h>
#include <torch/library.h>

namespace xxnpu {
namespace {

bool IsDenseOnAShallowCopyBackend(c10::DispatchKeySet ks) {
  // The dense backends c10 accepts among themselves, plus ours.
  constexpr auto kBackends = c10::DispatchKeySet(
      {c10::BackendComponent::CPUBit, c10::BackendComponent::CUDABit, c10::BackendComponent::MPSBit,
       c10::BackendComponent::HIPBit, c10::BackendComponent::XPUBit, c10::BackendComponent::HPUBit,
       c10::BackendComponent::MTIABit, c10::BackendComponent::PrivateUse1Bit});
  return ks.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) && ks.has_any(kBackends);
}

bool HasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  const c10::DispatchKeySet to_keys = self.key_set();
  const c10::DispatchKeySet from_keys = from.key_set();
  if (IsDenseOnAShallowCopyBackend(to_keys) && IsDenseOnAShallowCopyBackend(from_keys)) return true;
  // Everything else (same key set, sparse, sparse-compressed) by c10's own rule.
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from_keys);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &HasCompatibleShallowCopyType);
}

}  // namespace
}  // namespace xxnpu
