// Chooses among the per-capability builds of vec_kernels_impl.cc.
#include "ops/vec_kernels.h"

#include "ops/cpu_capability.h"

namespace xxnpu {

// Defined by vec_kernels_impl.cc, once per capability namespace (its CPU_CAPABILITY).
namespace DEFAULT {
extern const VecKernels kVecKernels;
}
#if defined(__x86_64__)
namespace AVX2 {
extern const VecKernels kVecKernels;
}
namespace AVX512 {
extern const VecKernels kVecKernels;
}
#define XXNPU_VEC_AVX2 (&AVX2::kVecKernels)
#define XXNPU_VEC_AVX512 (&AVX512::kVecKernels)
#else
#define XXNPU_VEC_AVX2 nullptr
#define XXNPU_VEC_AVX512 nullptr
#endif

const VecKernels& HostVecKernels() {
  static const VecKernels& kernels = ForHostCpu<VecKernels>(&DEFAULT::kVecKernels, XXNPU_VEC_AVX2, XXNPU_VEC_AVX512);
  return kernels;
}

const VecKernels* VecKernelsFor(CpuCapability capability) {
  if (static_cast<int>(capability) > static_cast<int>(HostCpuCapability())) return nullptr;
  switch (capability) {
    case CpuCapability::kAvx512:
      return XXNPU_VEC_AVX512;
    case CpuCapability::kAvx2:
      return XXNPU_VEC_AVX2;
    case CpuCapability::kDefault:
      break;
  }
  return &DEFAULT::kVecKernels;
}

}  // namespace xxnpu
