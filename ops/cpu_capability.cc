#include "ops/cpu_capability.h"

#include <ATen/Version.h>

#include <string>

namespace xxnpu {

CpuCapability HostCpuCapability() {
  static const CpuCapability capability = [] {
    const std::string name = at::get_cpu_capability();
    if (name == "AVX512") return CpuCapability::kAvx512;
    if (name == "AVX2") return CpuCapability::kAvx2;
    return CpuCapability::kDefault;  // DEFAULT, and levels of other architectures we do not build
  }();
  return capability;
}

const char* CpuCapabilityName(CpuCapability capability) {
  switch (capability) {
    case CpuCapability::kAvx512:
      return "AVX512";
    case CpuCapability::kAvx2:
      return "AVX2";
    case CpuCapability::kDefault:
      break;
  }
  return "DEFAULT";
}

}  // namespace xxnpu
