// The CPU fallback for ops xxnpu has no kernel for, made visible: each op warns once
// ("ran on the CPU"), every use is counted, and XXNPU_STRICT_FALLBACK=1 turns a fallback
// into an error, so a chip team can see exactly what still leaves the device.
#ifndef TORCH_XXNPU_OPS_CPU_FALLBACK_H_
#define TORCH_XXNPU_OPS_CPU_FALLBACK_H_

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/CPUFallback.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace xxnpu {

// The boxed fallback registered for every PrivateUse1 op without a kernel: checks devices,
// honours strict mode, warns once, counts, then runs the op on the CPU.
void XxnpuCpuFallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// For a native kernel that covers only some dtypes: runs the op (`Op` = at::_ops::<op>)
// through the counted CPU fallback, e.g. `FallbackFor<at::_ops::exp_out>::call(self, out)`.
template <class Op>
using FallbackFor = at::native::call_fallback_fn<&XxnpuCpuFallback, Op>;
// The same for ops with SymInt arguments, called with the SymInt signature.
template <class Op>
using FallbackForSymInt = at::native::call_fallback_fn_symint<&XxnpuCpuFallback, Op>;

// Op name (e.g. "aten::abs") -> fallback uses since the last reset.
std::map<std::string, int64_t> FallbackCounts();
void ResetFallbackCounts();
// Ops with an xxnpu (PrivateUse1) kernel registered, sorted.
std::vector<std::string> NativeOps();
// Whether XXNPU_STRICT_FALLBACK is set (read at each fallback, so tests can flip it).
bool StrictFallback();

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_CPU_FALLBACK_H_
