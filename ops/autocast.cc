// torch.autocast("xxnpu"): the op lists CUDA uses, registered for AutocastPrivateUse1.
//
// PyTorch publishes its autocast policy lists as macros (ATen/autocast_mode.h) so that
// other backends can reuse them: matmul/conv/linear-like ops run in the autocast dtype
// (float16 or bfloat16), numerically sensitive ones (softmax, norms, losses, exp/log, ...)
// in float32, and multi-input ops like addcmul promote to the widest input type. Every
// other op must fall through to the next key: ATen registers that fallthrough for CUDA's,
// CPU's, XPU's and MPS's autocast keys but (torch 2.13) not for AutocastPrivateUse1, so
// without ours any op off the lists (randn, dropout, indexing, ...) fails inside
// torch.autocast("xxnpu") with "Could not run ... from the 'Autocastxxnpu' backend".
// The Python side (torch.xxnpu.get_amp_supported_dtype, ...) is in
// python/torch_xxnpu/xxnpu/__init__.py.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace at::autocast {
namespace {

// The registration macros refer to `Tensor`, `Scalar`, ... unqualified, as ATen's own
// autocast_mode.cpp does; hence this namespace.
#define XXNPU_AUTOCAST_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define XXNPU_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define XXNPU_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define XXNPU_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(XXNPU_AUTOCAST_LOWER_PRECISION)
  AT_FORALL_FP32(XXNPU_AUTOCAST_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(XXNPU_AUTOCAST_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(XXNPU_AUTOCAST_PROMOTE)
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

}  // namespace
}  // namespace at::autocast
