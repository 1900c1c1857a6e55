// The inner loops of the dense float32/bfloat16 kernels, written with torch's SIMD layer
// (at::vec::Vectorized) and compiled once per CPU capability (vec_kernels_impl.cc, built
// by xxnpu_cpu_kernels in bazel/xxnpu.bzl); the host's table is chosen at run time
// (cpu_capability.h), so one wheel runs AVX-512 code on AVX-512 hosts, AVX2 code on AVX2
// hosts and portable code elsewhere.
//
// Each entry processes one dense row of `n` elements, so the op switch runs once per row,
// not per element. The launch machinery (elementwise.h, the reductions, softmax) decides
// when a row is dense and keeps the general strided / broadcast / mixed-dtype path for the
// rest. Arithmetic is in float for both dtypes (bfloat16 is loaded into float vectors and
// rounded back to nearest-even on store, as the CPU backend does). Torch-free on purpose:
// included by kernel files that do not need the SIMD headers.
#ifndef TORCH_XXNPU_OPS_VEC_KERNELS_H_
#define TORCH_XXNPU_OPS_VEC_KERNELS_H_

#include <cstdint>

#include "ops/cpu_capability.h"

namespace xxnpu {

enum class VecDtype : uint8_t { kFloat, kBFloat16 };

// out = op(x).
enum class VecUnaryOp : uint8_t {
  kNone,
  kExp,
  kExp2,
  kExpm1,
  kLog,
  kLog2,
  kLog10,
  kLog1p,
  kSqrt,
  kRsqrt,
  kReciprocal,
  kSin,
  kCos,
  kTan,
  kTanh,
  kSigmoid,
  kErf,
  kErfc,
  kAsin,
  kAcos,
  kAtan,
  kSilu,
  kGelu,      // x * Phi(x), with erf
  kGeluTanh,  // the tanh approximation
  kAbs,
  kNeg,
  kRelu,  // negatives become 0; NaN and -0.0 pass through, as the CPU's clamp_min(x, 0)
  kSquare,            // x * x: pow(x, 2)
  kCube,              // x * x * x: pow(x, 3)
  kReciprocalSquare,  // 1 / (x * x): pow(x, -2)
};

// out = op(a, b); `param` is add's alpha or threshold_backward's threshold. Backward ops
// take (grad, saved). Comparisons write bool (one byte, 0 or 1).
enum class VecBinaryOp : uint8_t {
  kNone,
  kAdd,  // a + param * b
  kMul,
  kDiv,
  kMaximum,  // NaN-propagating, as torch.maximum
  kMinimum,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kThresholdBackward,  // a where b > param, else 0
  kSigmoidBackward,    // b = sigmoid's output
  kTanhBackward,       // b = tanh's output
  kSiluBackward,       // b = the input
  kGeluBackward,       // b = the input
  kGeluTanhBackward,   // b = the input
  kSiluMul,            // silu(a) * b: SwiGLU's gate (xxnpu::silu_and_mul)
  kPow,                // a ** b, Sleef's pow as at::vec (the CPU backend's dense pow)
};

constexpr bool IsComparison(VecBinaryOp op) { return op >= VecBinaryOp::kEq && op <= VecBinaryOp::kGe; }

// One binary operand: a dense row, or (data == nullptr) `scalar` broadcast over the row.
struct VecOperand {
  const void* data = nullptr;
  float scalar = 0;
};

struct VecKernels {
  const char* capability;  // "DEFAULT", "AVX2", "AVX512"
  void (*unary)(VecUnaryOp op, VecDtype dtype, void* out, const void* in, int64_t n);
  void (*binary)(VecBinaryOp op, VecDtype dtype, void* out, VecOperand a, VecOperand b, int64_t n, float param);
  // Sum of a dense row in float (pairwise over vector-wide blocks, so a long row keeps
  // float's accuracy as the scalar cascade did).
  float (*sum)(VecDtype dtype, const void* in, int64_t n);
  // Largest element; NaN if any element is NaN; -inf for an empty row.
  float (*max)(VecDtype dtype, const void* in, int64_t n);
  // softmax (or log_softmax) of one dense row: max, exp-sum, scale.
  void (*softmax)(bool log, VecDtype dtype, void* out, const void* in, int64_t n);

  // Index ops and outer-dim reductions.
  // acc[j] += in[j] over a dense row of n, accumulating in float: one row of a reduction
  // over an outer dim (sum(0)), which runs down the rows with SIMD along the inner dim.
  void (*accumulate_row)(VecDtype dtype, float* acc, const void* in, int64_t n);
  // acc[j] = max(acc[j], in[j]), NaN-propagating (torch.amax over an outer dim).
  void (*max_row)(VecDtype dtype, float* acc, const void* in, int64_t n);
  // Sum of squares of a dense row (the 2-norm's accumulation), blocked as `sum`.
  float (*sum_squares)(VecDtype dtype, const void* in, int64_t n);

  // Normalisation rows and their backward. One dense row of `n` elements each; `w` and
  // `b` are dense [n] rows of the same dtype, or null (no affine weight / bias). Statistics
  // are float. Mean and variance come from two passes over the row (the second, centred,
  // over a row already in cache), as accurate as the CPU's Welford. Sums over long rows are
  // blocked with double totals, as `sum` is.
  // y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps) (biased variance).
  void (*layer_norm)(VecDtype dtype, void* y, const void* x, const void* w, const void* b, int64_t n, float eps,
                     float* mean, float* rstd);
  // y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps).
  void (*rms_norm)(VecDtype dtype, void* y, const void* x, const void* w, int64_t n, float eps, float* rstd);
  // With xhat = (x - mean) * rstd and gw = dy * w: dx = rstd * (gw - mean(gw) - xhat *
  // mean(gw * xhat)) when dx is not null; adds dy * xhat into dw[n] and dy into db[n] (float
  // partial sums of the caller's rows) when they are not null.
  void (*layer_norm_backward)(VecDtype dtype, void* dx, const void* dy, const void* x, const void* w, int64_t n,
                              float mean, float rstd, float* dw, float* db);
  // The same for rms_norm (xhat = x * rstd, no mean): dx = rstd * (gw - xhat * mean(gw *
  // xhat)); dw += dy * xhat.
  void (*rms_norm_backward)(VecDtype dtype, void* dx, const void* dy, const void* x, const void* w, int64_t n,
                            float rstd, float* dw);

  // Small-M products (ops/matmul.cc): out[i, j] = alpha * dot(a[i, :k], w[j, :k]) (+ beta *
  // out[i, j] when beta != 0) for i < m, j < n; a, w, out dense rows with leading dims lda,
  // ldw, ldo; float accumulation. A linear layer's x @ W^T with few rows of x (a decode
  // step): each row of W is read once, where a GEMM would pack it first.
  void (*dot_rows)(VecDtype dtype, int64_t m, int64_t n, int64_t k, const void* a, int64_t lda, const void* w,
                   int64_t ldw, void* out, int64_t ldo, float alpha, float beta);
  // The same with int8 rows of W under float32 rows of A (the int8 weight-only linear,
  // before its scales): out[i, j] = dot(a[i, :k], float(w[j, :k])). Each weight byte is
  // widened in registers, so W is read at a byte a weight.
  void (*dot_rows_int8_weight)(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const int8_t* w,
                               int64_t ldw, float* out, int64_t ldo);
};

// The most rows of `a` dot_rows takes at once (its accumulators live in registers).
inline constexpr int64_t kDotRowsMaxM = 8;

// The host's table: HostCpuCapability()'s build, except that float32 `unary` rows of the
// ops the CPU backend computes with MKL's VML go to VML (cpu_vml.h).
const VecKernels& HostVecKernels();

// The table built for `capability`, or null when it was not built (another architecture)
// or the host cannot run it: for tests comparing the levels.
const VecKernels* VecKernelsFor(CpuCapability capability);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_VEC_KERNELS_H_
