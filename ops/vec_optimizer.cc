// Chooses among the per-capability builds of vec_optimizer_impl.cc.
#include "ops/vec_optimizer.h"

#include "ops/cpu_capability.h"

namespace xxnpu {

// Defined by vec_optimizer_impl.cc, once per capability namespace (its CPU_CAPABILITY).
namespace DEFAULT {
extern const VecOptimizerKernels kVecOptimizerKernels;
}
#if defined(__x86_64__)
namespace AVX2 {
extern const VecOptimizerKernels kVecOptimizerKernels;
}
namespace AVX512 {
extern const VecOptimizerKernels kVecOptimizerKernels;
}
#define XXNPU_VEC_OPT_AVX2 (&AVX2::kVecOptimizerKernels)
#define XXNPU_VEC_OPT_AVX512 (&AVX512::kVecOptimizerKernels)
#else
#define XXNPU_VEC_OPT_AVX2 nullptr
#define XXNPU_VEC_OPT_AVX512 nullptr
#endif

const VecOptimizerKernels& HostVecOptimizerKernels() {
  static const VecOptimizerKernels& kernels =
      ForHostCpu<VecOptimizerKernels>(&DEFAULT::kVecOptimizerKernels, XXNPU_VEC_OPT_AVX2, XXNPU_VEC_OPT_AVX512);
  return kernels;
}

const VecOptimizerKernels* VecOptimizerKernelsFor(CpuCapability capability) {
  if (static_cast<int>(capability) > static_cast<int>(HostCpuCapability())) return nullptr;
  switch (capability) {
    case CpuCapability::kAvx512:
      return XXNPU_VEC_OPT_AVX512;
    case CpuCapability::kAvx2:
      return XXNPU_VEC_OPT_AVX2;
    case CpuCapability::kDefault:
      break;
  }
  return &DEFAULT::kVecOptimizerKernels;
}

}  // namespace xxnpu
