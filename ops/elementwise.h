// Elementwise kernels on xxnpu from one scalar function: the machinery every unary and
// binary op uses (see binary_ops.cc and docs/adding-an-op.md).
//
// ATen's TensorIterator computes broadcasting, type promotion and strides on the host.
// The loop runs on the device: in `opmath` precision (float for half/bfloat16), reading
// and writing each operand in its own dtype when they differ from the common dtype (the
// dynamic casting CUDA does). A CPU scalar operand (e.g. the 2 in `x * 2`) is read on the
// host at launch and baked into the kernel, as CUDA does, so nothing on the host has to
// outlive the launch.
#ifndef TORCH_XXNPU_OPS_ELEMENTWISE_H_
#define TORCH_XXNPU_OPS_ELEMENTWISE_H_

#include <ATen/OpMathType.h>
#include <ATen/TensorIterator.h>
#include <ATen/ScalarOps.h>
#include <c10/core/DynamicCast.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <utility>

#include "ops/device_loop.h"
#include "ops/vec_kernels.h"

namespace xxnpu {

namespace elementwise_detail {

// Reads one element as opmath_t: of dtype `dtype` when casting dynamically, else of
// the kernel's own scalar_t.
template <typename scalar_t, typename opmath_t>
opmath_t Load(const char* p, at::ScalarType dtype, bool dynamic) {
  return dynamic ? c10::fetch_and_cast<opmath_t>(dtype, p)
                 : static_cast<opmath_t>(*reinterpret_cast<const scalar_t*>(p));
}

// The dtypes with SIMD inner loops (vec_kernels.h).
template <typename scalar_t>
inline constexpr bool kHasVecKernels = std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, c10::BFloat16>;

// What a launch runs on its dense rows instead of the scalar loop, decided on the host:
// the op's vector form, for operands all of the kernel's own dtype (float32 or bfloat16),
// the out bool for a comparison. Everything else (strided, mixed dtypes, other dtypes)
// keeps the scalar loop, which stays the reference.
struct VecPlan {
  const VecKernels* kernels = nullptr;  // null: the scalar loop everywhere
  VecDtype dtype = VecDtype::kFloat;
  VecUnaryOp unary = VecUnaryOp::kNone;
  VecBinaryOp binary = VecBinaryOp::kNone;  // a binary op with one operand baked in (`constant`)
  bool constant_first = false;
  float constant = 0;
  float param = 0;
};

// Fills `plan`'s kernels when its op has a vector form and the operands' dtypes allow.
template <typename scalar_t>
void ChooseVecKernels(VecPlan& plan, at::ScalarType out_t, std::initializer_list<at::ScalarType> inputs) {
  if constexpr (kHasVecKernels<scalar_t>) {
    constexpr at::ScalarType kT = c10::CppTypeToScalarType<scalar_t>::value;
    if (plan.unary == VecUnaryOp::kNone && plan.binary == VecBinaryOp::kNone) return;
    if (out_t != (IsComparison(plan.binary) ? at::kBool : kT)) return;
    for (const at::ScalarType t : inputs) {
      if (t != kT) return;
    }
    plan.kernels = &HostVecKernels();
    plan.dtype = std::is_same_v<scalar_t, float> ? VecDtype::kFloat : VecDtype::kBFloat16;
  }
}

// A kernel constant as the vector kernels' float (0 where they never apply: complex...).
template <typename T>
float VecConstant(T v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return static_cast<float>(v);
  } else {
    return 0;
  }
}

// Rows the vector kernels cannot take as they are (strided elements) or, for unary ops,
// should not take one call at a time (rows shorter than kShortRow) go through them via staging
// buffers: the elements are gathered into a dense buffer, the kernel runs once over up to
// kStageElems of them, and the results are scattered back. A [65536, 4] slice of a wider
// tensor was 65536 calls of 4 elements (the VML functions' calls cost ~20 ns: tanh took
// 1.5 ms, the CPU 0.96 ms; now 0.15 ms, benchmarks/layouts_benchmark.py), and strided rows
// took a scalar loop whose functions differ from the vector kernels in the last bit: now
// every layout gets the dense path's results.
inline constexpr int64_t kShortRow = 64;
inline constexpr int64_t kStageElems = 2048;

// Gathers `n` elements `stride` bytes apart (0: one element repeated) into `dst`.
// Short pieces are copied inline: a call to memcpy per 4-element row cost more than the
// vector kernel's call it saves.
inline constexpr int64_t kInlineCopy = 16;

template <typename T>
inline void GatherElements(T* dst, const char* src, int64_t stride, int64_t n) {
  if (stride == static_cast<int64_t>(sizeof(T)) && n <= kInlineCopy) {
    const T* s = reinterpret_cast<const T*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
  } else if (stride == static_cast<int64_t>(sizeof(T))) {
    std::memcpy(dst, src, n * sizeof(T));
  } else if (stride == 0) {
    std::fill(dst, dst + n, *reinterpret_cast<const T*>(src));
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = *reinterpret_cast<const T*>(src + i * stride);
  }
}

template <typename T>
inline void ScatterElements(char* dst, int64_t stride, const T* src, int64_t n) {
  if (stride == static_cast<int64_t>(sizeof(T)) && n <= kInlineCopy) {
    T* d = reinterpret_cast<T*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = src[i];
  } else if (stride == static_cast<int64_t>(sizeof(T))) {
    std::memcpy(dst, src, n * sizeof(T));
  } else {
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(dst + i * stride) = src[i];
  }
}

// A TensorIterator 2-D loop's operands for staging: strides[k] is operand k's element
// stride, strides[kOperands + k] its row stride (operand 0 the output).
template <typename scalar_t, int kInputs, typename Run>
void RunStaged(char* const* data, const int64_t* strides, int64_t out_size, int64_t n0, int64_t rows, Run run) {
  constexpr int kOperands = kInputs + 1;
  alignas(64) scalar_t staged_in[kInputs][kStageElems];
  alignas(64) scalar_t staged_out[kStageElems];  // out_size <= sizeof(scalar_t) (bool for comparisons)
  // Pieces: (row, first column, length); whole rows are batched when they fit.
  const int64_t piece = std::min(n0, kStageElems);
  const int64_t per_batch = n0 <= kStageElems ? kStageElems / n0 : 1;
  for (int64_t j0 = 0; j0 < rows; j0 += per_batch) {
    const int64_t batch = std::min(per_batch, rows - j0);
    for (int64_t c0 = 0; c0 < n0; c0 += piece) {
      const int64_t len = std::min(piece, n0 - c0);
      for (int64_t r = 0; r < batch; ++r) {
        for (int k = 0; k < kInputs; ++k) {
          GatherElements(staged_in[k] + r * len,
                         data[k + 1] + (j0 + r) * strides[kOperands + k + 1] + c0 * strides[k + 1], strides[k + 1],
                         len);
        }
      }
      run(reinterpret_cast<char*>(staged_out), staged_in, batch * len);
      for (int64_t r = 0; r < batch; ++r) {
        char* dst = data[0] + (j0 + r) * strides[kOperands] + c0 * strides[0];
        if (out_size == static_cast<int64_t>(sizeof(scalar_t))) {
          ScatterElements(dst, strides[0], staged_out + r * len, len);
        } else {
          ScatterElements(dst, strides[0], reinterpret_cast<const uint8_t*>(staged_out) + r * len, len);
        }
      }
    }
  }
}

template <typename scalar_t, typename Op>
void LaunchUnaryWithPlan(const char* name, const at::TensorIteratorBase& iter, Op op, uint64_t flops_per_element,
                         VecPlan plan) {
  using opmath_t = at::opmath_type<scalar_t>;
  const at::ScalarType out_t = iter.dtype(0), in_t = iter.dtype(1);
  const bool dynamic = out_t != c10::CppTypeToScalarType<scalar_t>::value ||
                       in_t != c10::CppTypeToScalarType<scalar_t>::value;
  ChooseVecKernels<scalar_t>(plan, out_t, {in_t});
  LaunchTensorIterator(name, iter, [op, out_t, in_t, dynamic, plan](char** d, const int64_t* s, int64_t n0, int64_t n1) {
    if constexpr (kHasVecKernels<scalar_t>) {
      const int64_t out_size = IsComparison(plan.binary) ? 1 : sizeof(scalar_t);
      if (plan.kernels != nullptr) {
        auto run = [&plan](char* out, const void* in, int64_t n) {
          if (plan.unary != VecUnaryOp::kNone) {
            plan.kernels->unary(plan.unary, plan.dtype, out, in, n);
          } else {
            const VecOperand x{in, 0}, c{nullptr, plan.constant};
            plan.kernels->binary(plan.binary, plan.dtype, out, plan.constant_first ? c : x,
                                 plan.constant_first ? x : c, n, plan.param);
          }
        };
        if (s[0] == out_size && s[1] == sizeof(scalar_t) && (n0 >= kShortRow || n1 == 1)) {
          for (int64_t j = 0; j < n1; ++j) run(d[0] + j * s[2], d[1] + j * s[3], n0);
        } else {
          RunStaged<scalar_t, 1>(d, s, out_size, n0, n1,
                                 [&](char* out, scalar_t (*in)[kStageElems], int64_t n) { run(out, in[0], n); });
        }
        return;
      }
    }
    // Dense rows of one dtype: a plain loop the compiler vectorizes.
    if (!dynamic && s[0] == sizeof(scalar_t) && s[1] == sizeof(scalar_t)) {
      for (int64_t j = 0; j < n1; ++j) {
        scalar_t* __restrict out = reinterpret_cast<scalar_t*>(d[0] + j * s[2]);
        const scalar_t* __restrict in = reinterpret_cast<const scalar_t*>(d[1] + j * s[3]);
        for (int64_t i = 0; i < n0; ++i) out[i] = static_cast<scalar_t>(op(static_cast<opmath_t>(in[i])));
      }
      return;
    }
    for (int64_t j = 0; j < n1; ++j) {
      char* out = d[0] + j * s[2];
      const char* in = d[1] + j * s[3];
      for (int64_t i = 0; i < n0; ++i) {
        const opmath_t r = op(elementwise_detail::Load<scalar_t, opmath_t>(in + i * s[1], in_t, dynamic));
        if (dynamic) {
          c10::cast_and_store<opmath_t>(out_t, out + i * s[0], r);
        } else {
          *reinterpret_cast<scalar_t*>(out + i * s[0]) = static_cast<scalar_t>(r);
        }
      }
    }
  }, KernelCost{0, flops_per_element});
}

// A binary operand's row for the vector kernels: dense, or (stride 0) its one element.
template <typename scalar_t>
VecOperand VecOperandOf(const char* p, int64_t stride) {
  if (stride != 0) return VecOperand{p, 0};
  return VecOperand{nullptr, static_cast<float>(*reinterpret_cast<const scalar_t*>(p))};
}

}  // namespace elementwise_detail

// out = op(a) for a unary TensorIterator (out, a); `op` maps opmath -> opmath. `vec`, when
// given, is the same op in vec_kernels.h: the launch runs it on dense float32/bfloat16
// rows.
template <typename scalar_t, typename Op>
void LaunchUnary(const char* name, const at::TensorIteratorBase& iter, Op op, uint64_t flops_per_element = 1,
                 VecUnaryOp vec = VecUnaryOp::kNone) {
  elementwise_detail::VecPlan plan;
  plan.unary = vec;
  elementwise_detail::LaunchUnaryWithPlan<scalar_t>(name, iter, op, flops_per_element, plan);
}

// out = op(a, b) for a binary TensorIterator (out, a, b); `op` maps (opmath, opmath) -> opmath.
// `vec` (with its `vec_param`), when given, is the same op in vec_kernels.h, run on dense
// float32/bfloat16 rows, an operand broadcast along a row (stride 0) included.
template <typename scalar_t, typename Op>
void LaunchBinary(const char* name, const at::TensorIteratorBase& iter, Op op, uint64_t flops_per_element = 1,
                  VecBinaryOp vec = VecBinaryOp::kNone, float vec_param = 0) {
  using opmath_t = at::opmath_type<scalar_t>;
  constexpr at::ScalarType kT = c10::CppTypeToScalarType<scalar_t>::value;
  namespace ed = elementwise_detail;
  // A CPU scalar becomes a constant of the kernel.
  // The device test first: is_cpu_scalar walks the strides, and most launches have none.
  if ((iter.device(2).is_cpu() && iter.is_cpu_scalar(2)) || (iter.device(1).is_cpu() && iter.is_cpu_scalar(1))) {
    at::TensorIterator it(iter);  // a copy only here: copying costs a small op's launch ~0.1 us
    const bool second = it.is_cpu_scalar(2);
    // The original (pre-promotion) value: a double scalar is not first rounded to half.
    const opmath_t c = it.original_scalar_value<opmath_t>(second ? 2 : 1);
    it.remove_operand(second ? 2 : 1);
    ed::VecPlan plan;
    plan.binary = vec;
    plan.constant_first = !second;
    plan.constant = ed::VecConstant(c);
    plan.param = vec_param;
    if (second) {
      ed::LaunchUnaryWithPlan<scalar_t>(name, it, [op, c](opmath_t a) { return op(a, c); }, flops_per_element, plan);
    } else {
      ed::LaunchUnaryWithPlan<scalar_t>(name, it, [op, c](opmath_t b) { return op(c, b); }, flops_per_element, plan);
    }
    return;
  }
  const at::ScalarType out_t = iter.dtype(0), a_t = iter.dtype(1), b_t = iter.dtype(2);
  const bool dynamic = out_t != kT || a_t != kT || b_t != kT;
  ed::VecPlan plan;
  plan.binary = vec;
  plan.param = vec_param;
  ed::ChooseVecKernels<scalar_t>(plan, out_t, {a_t, b_t});
  LaunchTensorIterator(name, iter, [op, out_t, a_t, b_t, dynamic, plan](char** d, const int64_t* s, int64_t n0, int64_t n1) {
    if constexpr (ed::kHasVecKernels<scalar_t>) {
      const int64_t out_size = IsComparison(plan.binary) ? 1 : sizeof(scalar_t);
      constexpr int64_t kSize = sizeof(scalar_t);
      // Strided elements are staged (RunStaged), so that every layout gets the dense path's
      // results (the scalar loop's a + alpha * b rounds differently from the kernels' fused
      // multiply-add). Short dense rows are not: measured, staging [65536, 4] rows gained
      // nothing over a call per row (a binary kernel's call is cheap).
      const bool dense = s[0] == out_size && (s[1] == kSize || s[1] == 0) && (s[2] == kSize || s[2] == 0);
      if (plan.kernels != nullptr && !dense) {
        ed::RunStaged<scalar_t, 2>(d, s, out_size, n0, n1, [&](char* out, scalar_t (*in)[ed::kStageElems], int64_t n) {
          plan.kernels->binary(plan.binary, plan.dtype, out, VecOperand{in[0], 0}, VecOperand{in[1], 0}, n, plan.param);
        });
        return;
      }
      if (plan.kernels != nullptr) {
        for (int64_t j = 0; j < n1; ++j) {
          plan.kernels->binary(plan.binary, plan.dtype, d[0] + j * s[3], ed::VecOperandOf<scalar_t>(d[1] + j * s[4], s[1]),
                               ed::VecOperandOf<scalar_t>(d[2] + j * s[5], s[2]), n0, plan.param);
        }
        return;
      }
    }
    // Dense rows of one dtype: a plain loop the compiler vectorizes.
    if (!dynamic && s[0] == sizeof(scalar_t) && s[1] == sizeof(scalar_t) && s[2] == sizeof(scalar_t)) {
      for (int64_t j = 0; j < n1; ++j) {
        scalar_t* __restrict out = reinterpret_cast<scalar_t*>(d[0] + j * s[3]);
        const scalar_t* __restrict a = reinterpret_cast<const scalar_t*>(d[1] + j * s[4]);
        const scalar_t* __restrict b = reinterpret_cast<const scalar_t*>(d[2] + j * s[5]);
        for (int64_t i = 0; i < n0; ++i) {
          out[i] = static_cast<scalar_t>(op(static_cast<opmath_t>(a[i]), static_cast<opmath_t>(b[i])));
        }
      }
      return;
    }
    for (int64_t j = 0; j < n1; ++j) {
      char* out = d[0] + j * s[3];
      const char* a = d[1] + j * s[4];
      const char* b = d[2] + j * s[5];
      for (int64_t i = 0; i < n0; ++i) {
        const opmath_t r = op(elementwise_detail::Load<scalar_t, opmath_t>(a + i * s[1], a_t, dynamic),
                              elementwise_detail::Load<scalar_t, opmath_t>(b + i * s[2], b_t, dynamic));
        if (dynamic) {
          c10::cast_and_store<opmath_t>(out_t, out + i * s[0], r);
        } else {
          *reinterpret_cast<scalar_t*>(out + i * s[0]) = static_cast<scalar_t>(r);
        }
      }
    }
  }, KernelCost{0, flops_per_element});
}

namespace elementwise_detail {

// op(x1[i], ..., xN[i]) in opmath from N typed input rows.
template <typename scalar_t, typename Op, size_t... K>
C10_ALWAYS_INLINE at::opmath_type<scalar_t> ApplyAt(const Op& op, const scalar_t* const* in, int64_t i,
                                                    std::index_sequence<K...>) {
  using opmath_t = at::opmath_type<scalar_t>;
  return op(static_cast<opmath_t>(in[K][i])...);
}

}  // namespace elementwise_detail

// out = op(x1, ..., xN) for an N-input TensorIterator (out, x1..xN), e.g. where, addcmul,
// lerp. When every operand has the kernel's dtype and the rows are dense (the optimizer
// steps' addcmul/addcdiv/lerp), a typed loop the compiler vectorizes; otherwise every
// operand is read and written through dynamic casts (a bool condition next to float values
// is the usual case).
template <typename scalar_t, size_t N, typename Op>
void LaunchNary(const char* name, const at::TensorIteratorBase& iter, Op op, uint64_t flops_per_element = 1) {
  using opmath_t = at::opmath_type<scalar_t>;
  TORCH_INTERNAL_ASSERT(iter.ntensors() == static_cast<int>(N) + 1, name, ": expected ", N, " inputs");
  std::array<at::ScalarType, N + 1> types;
  bool same_dtype = true;
  for (size_t k = 0; k <= N; ++k) {
    types[k] = iter.dtype(k);
    same_dtype = same_dtype && types[k] == c10::CppTypeToScalarType<scalar_t>::value;
  }
  LaunchTensorIterator(name, iter, [op, types, same_dtype](char** d, const int64_t* s, int64_t n0, int64_t n1) {
    constexpr size_t kT = N + 1;
    bool dense = same_dtype;
    for (size_t k = 0; k <= N && dense; ++k) dense = s[k] == static_cast<int64_t>(sizeof(scalar_t));
    if (dense) {
      for (int64_t j = 0; j < n1; ++j) {
        scalar_t* out = reinterpret_cast<scalar_t*>(d[0] + j * s[kT]);
        std::array<const scalar_t*, N> in;
        for (size_t k = 0; k < N; ++k) in[k] = reinterpret_cast<const scalar_t*>(d[k + 1] + j * s[kT + k + 1]);
        // The output may be one of the inputs (addcmul_), element for element: no
        // dependency between iterations, which is what ivdep promises.
#pragma GCC ivdep
        for (int64_t i = 0; i < n0; ++i) {
          out[i] = static_cast<scalar_t>(
              elementwise_detail::ApplyAt<scalar_t>(op, in.data(), i, std::make_index_sequence<N>()));
        }
      }
      return;
    }
    for (int64_t j = 0; j < n1; ++j) {
      for (int64_t i = 0; i < n0; ++i) {
        std::array<opmath_t, N> x;
        for (size_t k = 0; k < N; ++k) {
          x[k] = c10::fetch_and_cast<opmath_t>(types[k + 1], d[k + 1] + j * s[kT + k + 1] + i * s[k + 1]);
        }
        const opmath_t r = std::apply(op, x);
        c10::cast_and_store<opmath_t>(types[0], d[0] + j * s[kT] + i * s[0], r);
      }
    }
  }, KernelCost{0, flops_per_element});
}

// A Scalar argument as a CPU 0-dim wrapped number: TensorIterator promotes types as for a
// Python scalar, and LaunchBinary bakes it into the kernel.
inline at::Tensor WrapScalar(const at::Scalar& s) { return at::native::wrapped_scalar_tensor(s); }

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_ELEMENTWISE_H_
