// Chooses among the per-capability builds of vec_kernels_impl.cc.
#include "ops/vec_kernels.h"

#include "ops/cpu_capability.h"
#include "ops/cpu_vml.h"

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

namespace {

// The per-capability build this host runs.
const VecKernels& CapabilityKernels() {
  static const VecKernels& kernels = ForHostCpu<VecKernels>(&DEFAULT::kVecKernels, XXNPU_VEC_AVX2, XXNPU_VEC_AVX512);
  return kernels;
}

// float32 rows of the ops the CPU backend computes with VML go to VML (cpu_vml.h); the
// rest, and bfloat16 (which the CPU computes with at::vec too), to the capability's build.
void HostUnary(VecUnaryOp op, VecDtype dtype, void* out, const void* in, int64_t n) {
  if (dtype == VecDtype::kFloat && VmlUnaryFloat(op, static_cast<float*>(out), static_cast<const float*>(in), n)) {
    return;
  }
  CapabilityKernels().unary(op, dtype, out, in, n);
}

}  // namespace

const VecKernels& HostVecKernels() {
  static const VecKernels kernels = [] {
    VecKernels k = CapabilityKernels();
    k.unary = &HostUnary;
    return k;
  }();
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
