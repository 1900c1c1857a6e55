// The CPU fallback for ops xxnpu has no kernel for, made visible: each op warns once
// ("ran on the CPU"), every use is counted, and XXNPU_STRICT_FALLBACK=1 turns a fallback
// into an error, so a chip team can see exactly what still leaves the device.
#ifndef TORCH_XXNPU_OPS_CPU_FALLBACK_H_
#define TORCH_XXNPU_OPS_CPU_FALLBACK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace xxnpu {

// Op name (e.g. "aten::abs") -> fallback uses since the last reset.
std::map<std::string, int64_t> FallbackCounts();
void ResetFallbackCounts();
// Ops with an xxnpu (PrivateUse1) kernel registered, sorted.
std::vector<std::string> NativeOps();
// Whether XXNPU_STRICT_FALLBACK is set (read at each fallback, so tests can flip it).
bool StrictFallback();

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_CPU_FALLBACK_H_
