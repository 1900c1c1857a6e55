// The inner spans of the fused optimizer steps (ops/fused_optimizer_ops.cc) for float32
// and bfloat16, written with torch's SIMD layer and compiled once per CPU capability
// (vec_optimizer_impl.cc, built by xxnpu_cpu_kernels): the scalar loops vectorised only to
// SSE width in the portable build, so AdamW's fused step ran at 0.42x the CPU backend's
// (whose fused kernels are per-capability at::vec code). Torch-free on purpose.
//
// Kept apart from vec_kernels.h's table: that one is the elementwise ops', this one is
// only the optimizers'.
#ifndef TORCH_XXNPU_OPS_VEC_OPTIMIZER_H_
#define TORCH_XXNPU_OPS_VEC_OPTIMIZER_H_

#include <cstdint>

#include "ops/cpu_capability.h"
#include "ops/vec_kernels.h"

namespace xxnpu {

// One Adam/AdamW step's per-parameter constants, in float (the opmath of both dtypes).
struct VecAdamConsts {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  float decay;  // AdamW: 1 - lr * weight_decay; Adam: 1
  float l2;     // Adam: weight_decay (grad += l2 * param, skipped when 0); AdamW: 0
  float sign;   // maximize: -1
  float scale;  // grad_scale (1 without)
  float step_size, bias_correction2_sqrt;
};

// One Adam/AdamW span of n elements. With store_grad the unscaled gradient is written back
// (GradScaler's contract); max_exp_avg_sq is read only with amsgrad. Every pointer is a
// dense run of `dtype` elements.
struct VecAdamSpan {
  void* param;
  void* grad;
  void* exp_avg;
  void* exp_avg_sq;
  void* max_exp_avg_sq;
};

struct VecOptimizerKernels {
  const char* capability;  // "DEFAULT", "AVX2", "AVX512"
  void (*adam)(VecDtype dtype, bool amsgrad, bool store_grad, const VecAdamSpan& span, int64_t n,
               const VecAdamConsts& c);
};

// The host's table (HostCpuCapability()).
const VecOptimizerKernels& HostVecOptimizerKernels();

// The table built for `capability`, or null when it was not built or the host cannot run
// it: for tests comparing the levels.
const VecOptimizerKernels* VecOptimizerKernelsFor(CpuCapability capability);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_VEC_OPTIMIZER_H_
