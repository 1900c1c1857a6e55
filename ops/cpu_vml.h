// The host's vector math library as the CPU backend calls it: MKL's VML (vms* functions),
// which torch's pip build links statically and exports. Torch-free.
//
// Why: for float32 the CPU backend computes exp, log, sqrt, tanh, erf, sin, atan, ... of dense
// rows with VML (ATen/cpu/vml.h), not with Sleef through at::vec. With Sleef the device's
// kernels ran those at 0.16-0.45x the CPU's speed on one thread in L2 (tanh 0.63 against
// 3.73 Gelem/s, exp 1.78 against 5.78, sqrt 3.04 against 6.76), which the CPU's page
// faults on fresh outputs had hidden in the kernel benchmark. Calling the same VML makes
// the device kernel the host's own best, with the CPU's results.
#ifndef TORCH_XXNPU_OPS_CPU_VML_H_
#define TORCH_XXNPU_OPS_CPU_VML_H_

#include <cstdint>

#include "ops/vec_kernels.h"

namespace xxnpu {

// out[i] = op(in[i]) for i < n with VML in the CPU backend's mode (high accuracy,
// denormals kept, errors ignored), single-threaded on the calling thread. False, with
// nothing written, when the op has no VML form here or the process has no VML (another
// BLAS): the caller then runs its own kernel.
bool VmlUnaryFloat(VecUnaryOp op, float* out, const float* in, int64_t n);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_CPU_VML_H_
