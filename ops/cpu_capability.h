// The host's SIMD level, as torch's own CPU kernels choose it, for kernels compiled once per
// level (the xxnpu_cpu_kernels macro in bazel/xxnpu.bzl).
//
// The level is torch's: at::get_cpu_capability(), which honours ATEN_CPU_CAPABILITY (so
// `ATEN_CPU_CAPABILITY=default` runs our kernels in their portable form too) and never
// reports a level the host lacks. Torch-free: only cpu_capability.cc asks torch.
#ifndef TORCH_XXNPU_OPS_CPU_CAPABILITY_H_
#define TORCH_XXNPU_OPS_CPU_CAPABILITY_H_

namespace xxnpu {

// Ordered: a host that runs one level runs every lower one.
enum class CpuCapability { kDefault = 0, kAvx2 = 1, kAvx512 = 2 };

// Read once per process (torch fixes its own choice at first use, too).
CpuCapability HostCpuCapability();

// "DEFAULT", "AVX2", "AVX512": torch's spelling.
const char* CpuCapabilityName(CpuCapability capability);

// Picks the entry compiled for the host's level from one per level, falling back to the
// next lower one that was compiled (a null entry: not built for this architecture).
template <typename T>
const T& ForHostCpu(const T* default_level, const T* avx2, const T* avx512) {
  switch (HostCpuCapability()) {
    case CpuCapability::kAvx512:
      if (avx512 != nullptr) return *avx512;
      [[fallthrough]];
    case CpuCapability::kAvx2:
      if (avx2 != nullptr) return *avx2;
      [[fallthrough]];
    case CpuCapability::kDefault:
      break;
  }
  return *default_level;
}

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_CPU_CAPABILITY_H_
