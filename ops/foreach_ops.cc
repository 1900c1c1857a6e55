// The _foreach_* ops on xxnpu as one device kernel per call over the whole tensor list
// (multi_tensor_apply.h), for what torch.optim's foreach paths (SGD, Adam, AdamW, their
// capturable forms) and torch.nn.utils.clip_grad_norm_/clip_grad_value_ call: binary ops
// with a Scalar, a ScalarList, a second list or a 0-dim tensor; unary math; addcmul,
// addcdiv and lerp; norm; zero_. Functional and in-place forms; the `.out` forms are
// ATen's wrappers over the functional ones.
//
// The routing is CUDA's: when ATen's fast-route test passes (one device and dtype across
// the lists, strided, non-overlapping and dense, list-mates of one size and strides, the
// scalars not promoting the dtype) and the dtype is floating (float32/64, bfloat16,
// float16; math in float for the 16-bit ones), one kernel; otherwise ATen's per-tensor slow
// path (`at::native::foreach_tensor_*_slow`), whose per-tensor ops run natively or raise the
// CPU's errors (mixed devices in a list, mismatched sizes). List-length and empty-list
// errors come first, from ATen's check_foreach_api_restrictions, as on the CPU.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/ForeachUtils.h>
#include <ATen/native/Lerp.h>
#include <ATen/ops/_foreach_abs_native.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_clamp_max_native.h>
#include <ATen/ops/_foreach_clamp_min_native.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_exp_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_log_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_norm_native.h>
#include <ATen/ops/_foreach_pow_native.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/_foreach_rsqrt_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/_foreach_zero_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/DynamicCast.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/multi_tensor_apply.h"

namespace xxnpu {
namespace {

namespace mt = multi_tensor;
using at::native::check_foreach_api_restrictions;

bool KernelDtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// CUDA's fast route, on xxnpu tensors of a dtype we have kernels for.
bool FastRoute(at::ArrayRef<at::TensorList> lists, at::ArrayRef<at::Scalar> scalars = {},
               bool promotes_integers = false) {
  const at::Tensor& first = lists[0][0];
  return first.device().is_privateuseone() && KernelDtype(first.scalar_type()) &&
         at::native::can_use_fast_route(lists, scalars, promotes_integers);
}

std::vector<at::Tensor> EmptyLike(at::TensorList self) {
  std::vector<at::Tensor> out;
  out.reserve(self.size());
  // Dense inputs keep their strides (preserve_format), as the fast route needs.
  for (const at::Tensor& t : self) out.push_back(at::empty_like(t));
  return out;
}

// out[i] = f(in_0[i], ..., in_{K-1}[i]) over one chunk; `f` works in opmath.
template <typename scalar_t, typename F, size_t... K>
C10_ALWAYS_INLINE void MapSpan(char* const* p, int64_t n, const F& f, std::index_sequence<K...>) {
  using opmath_t = at::opmath_type<scalar_t>;
  [[maybe_unused]] const std::array<const scalar_t*, sizeof...(K)> in{reinterpret_cast<const scalar_t*>(p[K])...};
  scalar_t* out = reinterpret_cast<scalar_t*>(p[sizeof...(K)]);
  // The output list may be an input list (the in-place forms), element for element.
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<scalar_t>(f(static_cast<opmath_t>(in[K][i])...));
}

// One kernel: out[t] = f_t(in_0[t], ...) for every tensor t, where `bind(t)` gives the
// elementwise function of tensor t (its scalar from a ScalarList, a device scalar read on
// the device, ...), bound once per chunk so that the element loop sees constants.
template <typename scalar_t, size_t kIn, typename Bind>
void LaunchMap(const char* name, const std::array<at::TensorList, kIn>& in, at::TensorList out,
               uint64_t flops_per_element, Bind bind) {
  std::array<at::TensorList, kIn + 1> lists;
  for (size_t k = 0; k < kIn; ++k) lists[k] = in[k];
  lists[kIn] = out;
  const c10::Device device = out[0].device();
  c10::DeviceGuard guard(device);
  mt::Plan<kIn + 1> plan = mt::MakePlan(lists);
  const uint64_t numel = plan.numel;
  mt::Launch(name, CurrentXxnpuStreamHandle(device.index()), std::move(plan), numel * sizeof(scalar_t) * (kIn + 1),
             numel * flops_per_element, [bind = std::move(bind)](char* const* p, int64_t n, int64_t t) {
               const auto f = bind(t);
               MapSpan<scalar_t>(p, n, f, std::make_index_sequence<kIn>());
             });
}

#define XXNPU_FOREACH_DISPATCH(TYPE, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, TYPE, "xxnpu_foreach", __VA_ARGS__)

// ------------------------------------------------------------------ the elementwise functions

// maximum/minimum (and the clamps, their foreach twins): a NaN on either side wins, as
// torch.maximum's.
struct MaxOp {
  template <typename T> T operator()(T a, T b) const { return (a != a || a > b) ? a : b; }
};
struct MinOp {
  template <typename T> T operator()(T a, T b) const { return (a != a || a < b) ? a : b; }
};
struct AddOp {
  template <typename T> T operator()(T a, T b) const { return a + b; }
};
struct SubOp {
  template <typename T> T operator()(T a, T b) const { return a - b; }
};
struct MulOp {
  template <typename T> T operator()(T a, T b) const { return a * b; }
};
struct DivOp {
  template <typename T> T operator()(T a, T b) const { return a / b; }
};
struct PowOp {
  template <typename T> T operator()(T a, T b) const { return std::pow(a, b); }
};

// The operand checks an op makes before any work (the CPU's per-tensor sub refuses bool
// operands): none, but for sub.
template <typename Op>
void CheckScalars(at::TensorList, at::ArrayRef<at::Scalar>) {}
template <>
void CheckScalars<SubOp>(at::TensorList self, at::ArrayRef<at::Scalar> s) {
  for (size_t i = 0; i < self.size(); ++i) at::native::sub_check(self[i], s.size() == 1 ? s[0] : s[i]);
}
template <typename Op>
void CheckPairs(at::TensorList, at::TensorList) {}
template <>
void CheckPairs<SubOp>(at::TensorList self, at::TensorList other) {
  for (size_t i = 0; i < self.size(); ++i) at::native::sub_check(self[i], other[i]);
}

// ------------------------------------------------------------------ binary: list op scalar

template <typename Op>
void ScalarKernel(const char* name, at::TensorList self, at::TensorList out, const at::Scalar& s) {
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t c = s.to<opmath_t>();
    LaunchMap<scalar_t, 1>(name, {self}, out, 1, [c](int64_t) { return [c](opmath_t a) { return Op{}(a, c); }; });
  });
}

template <typename Op>
void ScalarListKernel(const char* name, at::TensorList self, at::TensorList out, at::ArrayRef<at::Scalar> s) {
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    std::vector<opmath_t> c;
    c.reserve(s.size());
    for (const at::Scalar& v : s) c.push_back(v.to<opmath_t>());
    LaunchMap<scalar_t, 1>(name, {self}, out, 1, [c = std::move(c)](int64_t t) {
      return [v = c[t]](opmath_t a) { return Op{}(a, v); };
    });
  });
}

// out = self op (alpha * other); alpha only for add/sub (nullopt: none).
template <typename Op>
void ListKernel(const char* name, at::TensorList self, at::TensorList other, at::TensorList out,
                const std::optional<at::Scalar>& alpha) {
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    if (alpha.has_value() && !(alpha->equal(1))) {
      const opmath_t a = alpha->to<opmath_t>();
      LaunchMap<scalar_t, 2>(name, {self, other}, out, 2, [a](int64_t) {
        return [a](opmath_t x, opmath_t y) { return Op{}(x, a * y); };
      });
    } else {
      LaunchMap<scalar_t, 2>(name, {self, other}, out, 1,
                             [](int64_t) { return [](opmath_t x, opmath_t y) { return Op{}(x, y); }; });
    }
  });
}

// self op (alpha * other) with `other` a 0-dim tensor on the lists' device, read by the
// kernel: no host synchronisation (clip_grad_norm_'s coefficient, a capturable lr).
template <typename Op>
void DeviceScalarKernel(const char* name, at::TensorList self, at::TensorList out, const at::Tensor& other,
                        const at::Scalar& alpha) {
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    // In opmath's dtype (a no-op for the usual float32 scalar); the temporary is freed in
    // stream order, after the kernel has read it.
    const at::Tensor o = other.to(c10::CppTypeToScalarType<opmath_t>::value);
    const auto* ptr = static_cast<const opmath_t*>(DeviceView(o.const_data_ptr()));
    const opmath_t a = alpha.to<opmath_t>();
    LaunchMap<scalar_t, 1>(name, {self}, out, 2, [ptr, a](int64_t) {
      return [c = a * *ptr](opmath_t x) { return Op{}(x, c); };
    });
  });
}

// The four overloads of a binary foreach op, functional and in-place. SLOW names ATen's
// per-tensor kernels: foreach_tensor_<SLOW>_{scalar,list,scalarlist,tensor}_kernel_slow[_].
#define XXNPU_FOREACH_BINARY_SCALAR(OP, OPNAME, SLOW, PROMOTES)                                             \
  std::vector<at::Tensor> OP##Scalar(at::TensorList self, const at::Scalar& s) {                           \
    check_foreach_api_restrictions(self);                                                                  \
    CheckScalars<OP##Op>(self, s);                                                                         \
    if (!FastRoute({self}, {s}, PROMOTES)) return at::native::foreach_tensor_##SLOW##_scalar_kernel_slow(self, s); \
    auto out = EmptyLike(self);                                                                            \
    ScalarKernel<OP##Op>("xxnpu::foreach_" OPNAME, self, out, s);                                          \
    return out;                                                                                            \
  }                                                                                                        \
  void OP##Scalar_(at::TensorList self, const at::Scalar& s) {                                             \
    check_foreach_api_restrictions(self);                                                                  \
    CheckScalars<OP##Op>(self, s);                                                                         \
    if (!FastRoute({self}, {s}, PROMOTES)) return at::native::foreach_tensor_##SLOW##_scalar_kernel_slow_(self, s); \
    ScalarKernel<OP##Op>("xxnpu::foreach_" OPNAME, self, self, s);                                         \
  }                                                                                                        \
  std::vector<at::Tensor> OP##ScalarList(at::TensorList self, at::ArrayRef<at::Scalar> s) {                \
    check_foreach_api_restrictions(self, s);                                                               \
    CheckScalars<OP##Op>(self, s);                                                                         \
    if (!FastRoute({self}, s, PROMOTES)) return at::native::foreach_tensor_##SLOW##_scalarlist_kernel_slow(self, s); \
    auto out = EmptyLike(self);                                                                            \
    ScalarListKernel<OP##Op>("xxnpu::foreach_" OPNAME, self, out, s);                                      \
    return out;                                                                                            \
  }                                                                                                        \
  void OP##ScalarList_(at::TensorList self, at::ArrayRef<at::Scalar> s) {                                  \
    check_foreach_api_restrictions(self, s);                                                               \
    CheckScalars<OP##Op>(self, s);                                                                         \
    if (!FastRoute({self}, s, PROMOTES)) return at::native::foreach_tensor_##SLOW##_scalarlist_kernel_slow_(self, s); \
    ScalarListKernel<OP##Op>("xxnpu::foreach_" OPNAME, self, self, s);                                     \
  }

#define XXNPU_FOREACH_BINARY_LIST(OP, OPNAME, SLOW, PROMOTES)                                               \
  std::vector<at::Tensor> OP##List(at::TensorList self, at::TensorList other) {                            \
    check_foreach_api_restrictions(self, other);                                                           \
    if (!FastRoute({self, other}, {}, PROMOTES)) return at::native::foreach_tensor_##SLOW##_list_kernel_slow(self, other); \
    auto out = EmptyLike(self);                                                                            \
    ListKernel<OP##Op>("xxnpu::foreach_" OPNAME, self, other, out, std::nullopt);                          \
    return out;                                                                                            \
  }                                                                                                        \
  void OP##List_(at::TensorList self, at::TensorList other) {                                              \
    check_foreach_api_restrictions(self, other);                                                           \
    if (!FastRoute({self, other}, {}, PROMOTES)) return at::native::foreach_tensor_##SLOW##_list_kernel_slow_(self, other); \
    ListKernel<OP##Op>("xxnpu::foreach_" OPNAME, self, other, self, std::nullopt);                         \
  }

// add and sub: the List and Tensor forms take alpha.
#define XXNPU_FOREACH_BINARY_ALPHA_LIST(OP, OPNAME)                                                         \
  std::vector<at::Tensor> OP##List(at::TensorList self, at::TensorList other, const at::Scalar& alpha) {   \
    check_foreach_api_restrictions(self, other);                                                           \
    CheckPairs<OP##Op>(self, other);                                                                       \
    if (!FastRoute({self, other}, alpha)) return at::native::foreach_tensor_##OPNAME##_list_kernel_slow(self, other, alpha); \
    auto out = EmptyLike(self);                                                                            \
    ListKernel<OP##Op>("xxnpu::foreach_" #OPNAME, self, other, out, alpha);                                \
    return out;                                                                                            \
  }                                                                                                        \
  void OP##List_(at::TensorList self, at::TensorList other, const at::Scalar& alpha) {                     \
    check_foreach_api_restrictions(self, other);                                                           \
    CheckPairs<OP##Op>(self, other);                                                                       \
    if (!FastRoute({self, other}, alpha)) return at::native::foreach_tensor_##OPNAME##_list_kernel_slow_(self, other, alpha); \
    ListKernel<OP##Op>("xxnpu::foreach_" #OPNAME, self, other, self, alpha);                               \
  }

// The 0-dim tensor form: a CPU scalar is read now (as CUDA does), a device scalar by the
// kernel; anything else (not 0-dim, another device, an integral list) takes the slow path.
#define XXNPU_FOREACH_BINARY_TENSOR(OP, OPNAME, SLOW_CALL, SLOW_CALL_, ALPHA_PARAM, ALPHA)                 \
  std::vector<at::Tensor> OP##Tensor(at::TensorList self, const at::Tensor& other ALPHA_PARAM) {           \
    check_foreach_api_restrictions(self);                                                                  \
    if (other.dim() != 0 || !FastRoute({self}) ||                                                          \
        (!other.device().is_cpu() && other.device() != self[0].device())) {                                \
      return SLOW_CALL;                                                                                    \
    }                                                                                                      \
    auto out = EmptyLike(self);                                                                            \
    if (other.device().is_cpu()) {                                                                         \
      ScalarKernel<OP##Op>("xxnpu::foreach_" OPNAME, self, out, other.item().toDouble() * (ALPHA).toDouble()); \
    } else {                                                                                               \
      DeviceScalarKernel<OP##Op>("xxnpu::foreach_" OPNAME, self, out, other, ALPHA);                       \
    }                                                                                                      \
    return out;                                                                                            \
  }                                                                                                        \
  void OP##Tensor_(at::TensorList self, const at::Tensor& other ALPHA_PARAM) {                             \
    check_foreach_api_restrictions(self);                                                                  \
    if (other.dim() != 0 || !FastRoute({self}) ||                                                          \
        (!other.device().is_cpu() && other.device() != self[0].device())) {                                \
      return SLOW_CALL_;                                                                                   \
    }                                                                                                      \
    if (other.device().is_cpu()) {                                                                         \
      ScalarKernel<OP##Op>("xxnpu::foreach_" OPNAME, self, self, other.item().toDouble() * (ALPHA).toDouble()); \
    } else {                                                                                               \
      DeviceScalarKernel<OP##Op>("xxnpu::foreach_" OPNAME, self, self, other, ALPHA);                      \
    }                                                                                                      \
  }

#define XXNPU_COMMA ,
XXNPU_FOREACH_BINARY_SCALAR(Add, "add", add, false)
XXNPU_FOREACH_BINARY_ALPHA_LIST(Add, add)
XXNPU_FOREACH_BINARY_TENSOR(Add, "add", at::native::foreach_tensor_add_tensor_kernel_slow(self, other, alpha),
                            at::native::foreach_tensor_add_tensor_kernel_slow_(self, other, alpha),
                            XXNPU_COMMA const at::Scalar& alpha, alpha)
XXNPU_FOREACH_BINARY_SCALAR(Sub, "sub", sub, false)
XXNPU_FOREACH_BINARY_ALPHA_LIST(Sub, sub)
XXNPU_FOREACH_BINARY_SCALAR(Mul, "mul", mul, false)
XXNPU_FOREACH_BINARY_LIST(Mul, "mul", mul, false)
XXNPU_FOREACH_BINARY_TENSOR(Mul, "mul", at::native::foreach_tensor_mul_tensor_kernel_slow(self, other),
                            at::native::foreach_tensor_mul_tensor_kernel_slow_(self, other), , at::Scalar(1))
XXNPU_FOREACH_BINARY_SCALAR(Div, "div", div, true)
XXNPU_FOREACH_BINARY_LIST(Div, "div", div, true)
XXNPU_FOREACH_BINARY_TENSOR(Div, "div", at::native::foreach_tensor_div_tensor_kernel_slow(self, other),
                            at::native::foreach_tensor_div_tensor_kernel_slow_(self, other), , at::Scalar(1))
// maximum/minimum share ATen's clamp_min/clamp_max slow kernels.
XXNPU_FOREACH_BINARY_SCALAR(Max, "maximum", clamp_min, false)
XXNPU_FOREACH_BINARY_LIST(Max, "maximum", clamp_min, false)
XXNPU_FOREACH_BINARY_SCALAR(Min, "minimum", clamp_max, false)
XXNPU_FOREACH_BINARY_LIST(Min, "minimum", clamp_max, false)
XXNPU_FOREACH_BINARY_SCALAR(Pow, "pow", pow, false)
XXNPU_FOREACH_BINARY_LIST(Pow, "pow", pow, false)
#undef XXNPU_COMMA

// c ** exponent[i] (Adam's capturable bias corrections: beta ** step).
std::vector<at::Tensor> ScalarPowList(const at::Scalar& c, at::TensorList exponent) {
  check_foreach_api_restrictions(exponent);
  if (!FastRoute({exponent}, {c})) return at::native::foreach_scalar_pow_list_kernel_slow(c, exponent);
  auto out = EmptyLike(exponent);
  XXNPU_FOREACH_DISPATCH(exponent[0].scalar_type(), [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t b = c.to<opmath_t>();
    LaunchMap<scalar_t, 1>("xxnpu::foreach_pow", {exponent}, out, 1,
                           [b](int64_t) { return [b](opmath_t e) { return std::pow(b, e); }; });
  });
  return out;
}

// ------------------------------------------------------------------ unary

#define XXNPU_FOREACH_UNARY(NAME, EXPR)                                                                    \
  template <typename scalar_t>                                                                             \
  void NAME##Kernel(at::TensorList self, at::TensorList out) {                                             \
    using opmath_t = at::opmath_type<scalar_t>;                                                            \
    LaunchMap<scalar_t, 1>("xxnpu::foreach_" #NAME, {self}, out, 1,                                        \
                           [](int64_t) { return [](opmath_t x) -> opmath_t { return EXPR; }; });           \
  }                                                                                                        \
  std::vector<at::Tensor> NAME##Foreach(at::TensorList self) {                                             \
    check_foreach_api_restrictions(self);                                                                  \
    if (!FastRoute({self}, {}, true)) return at::native::foreach_tensor_##NAME##_slow(self);               \
    auto out = EmptyLike(self);                                                                            \
    XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] { NAME##Kernel<scalar_t>(self, out); });             \
    return out;                                                                                            \
  }                                                                                                        \
  void NAME##Foreach_(at::TensorList self) {                                                               \
    check_foreach_api_restrictions(self);                                                                  \
    if (!FastRoute({self}, {}, true)) return at::native::foreach_tensor_##NAME##_slow_(self);              \
    XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] { NAME##Kernel<scalar_t>(self, self); });            \
  }

XXNPU_FOREACH_UNARY(neg, -x)
XXNPU_FOREACH_UNARY(sqrt, std::sqrt(x))
XXNPU_FOREACH_UNARY(rsqrt, opmath_t(1) / std::sqrt(x))
XXNPU_FOREACH_UNARY(reciprocal, opmath_t(1) / x)
XXNPU_FOREACH_UNARY(abs, std::abs(x))
XXNPU_FOREACH_UNARY(exp, std::exp(x))
XXNPU_FOREACH_UNARY(log, std::log(x))

// optimizer.zero_grad(set_to_none=False).
void ZeroForeach_(at::TensorList self) {
  check_foreach_api_restrictions(self);
  if (!FastRoute({self})) return at::native::foreach_tensor_zero_slow_(self);
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] {
    LaunchMap<scalar_t, 0>("xxnpu::foreach_zero", {}, self, 0,
                           [](int64_t) { return []() { return at::opmath_type<scalar_t>(0); }; });
  });
}

// ------------------------------------------------------------------ copy_

// torch._foreach_copy_(dst, src): a list of same-layout copies as one kernel. What copies
// many small tensors at once: mode="reduce-overhead"'s copy of a step's inputs into its
// graph's buffers (compiler/reduce_overhead.py), optimizers' and FSDP's state copies. One
// kernel when every pair is one xxnpu device's tensors of one dtype (which may differ
// between pairs), sizes and strides, dense and not overlapping (then a pair is one byte
// range of each); otherwise ATen's per-pair copy_, whose errors (a partial overlap, sizes
// that do not broadcast) are the CPU's. All or nothing, as CUDA's fast route: with one
// slow pair the list keeps its order.
constexpr int64_t kCopyChunkBytes = 256 * 1024;

bool BytewiseCopyable(const at::Tensor& dst, const at::Tensor& src, c10::Device device) {
  if (!(dst.device() == device && src.device() == device && dst.scalar_type() == src.scalar_type() &&
        dst.sizes() == src.sizes() && dst.strides() == src.strides() && dst.is_non_overlapping_and_dense() &&
        dst.is_conj() == src.is_conj() && dst.is_neg() == src.is_neg() && !dst.is_quantized())) {
    return false;
  }
  // Full: the same bytes in the same layout, nothing to copy (skipped below).
  const at::MemOverlapStatus overlap = at::get_overlap_status(dst, src);
  return overlap == at::MemOverlapStatus::No || overlap == at::MemOverlapStatus::Full;
}

void CopyForeach_(at::TensorList self, at::TensorList src, bool non_blocking) {
  check_foreach_api_restrictions(self, src);
  const c10::Device device = self[0].device();
  bool fast = device.is_privateuseone();
  for (size_t i = 0; fast && i < self.size(); ++i) fast = BytewiseCopyable(self[i], src[i], device);
  if (!fast) return at::native::foreach_tensor_copy_list_kernel_slow_(self, src, non_blocking);
  struct Span {
    char* dst;
    const char* src;
    int64_t bytes;
  };
  std::vector<Span> spans;
  uint64_t total = 0;
  for (size_t i = 0; i < self.size(); ++i) {
    const int64_t bytes = self[i].numel() * static_cast<int64_t>(self[i].element_size());
    if (bytes == 0 || self[i].const_data_ptr() == src[i].const_data_ptr()) continue;
    char* d = static_cast<char*>(DeviceView(self[i].data_ptr()));
    const char* s = static_cast<const char*>(DeviceView(src[i].const_data_ptr()));
    for (int64_t off = 0; off < bytes; off += kCopyChunkBytes) {
      spans.push_back({d + off, s + off, std::min(kCopyChunkBytes, bytes - off)});
    }
    total += static_cast<uint64_t>(bytes);
  }
  if (spans.empty()) return;
  c10::DeviceGuard guard(device);
  LaunchConfig cfg;
  cfg.name = "xxnpu::foreach_copy";
  cfg.grid = Dim3{static_cast<uint32_t>(spans.size()), 1, 1};
  cfg.bytes = 2 * total;
  CheckOk(xxnpuLaunchKernel(cfg, KernelBody([spans = std::move(spans)](BlockRange r) {
            for (int64_t b = r.begin; b < r.end; ++b) std::memcpy(spans[b].dst, spans[b].src, spans[b].bytes);
            return absl::OkStatus();
          }), CurrentXxnpuStreamHandle(device.index())), cfg.name);
}

// ------------------------------------------------------------------ addcmul, addcdiv

struct AddcmulOp {
  template <typename T> static T Apply(T s, T a, T b, T v) { return s + v * a * b; }
};
// The CPU's addcdiv: self + value * (t1 / t2).
struct AddcdivOp {
  template <typename T> static T Apply(T s, T a, T b, T v) { return s + v * (a / b); }
};

// `values` has one scalar for all tensors or one per tensor.
template <typename Op>
void PointwiseKernel(const char* name, at::TensorList self, at::TensorList t1, at::TensorList t2, at::TensorList out,
                     at::ArrayRef<at::Scalar> values) {
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    std::vector<opmath_t> v;
    v.reserve(values.size());
    for (const at::Scalar& s : values) v.push_back(s.to<opmath_t>());
    LaunchMap<scalar_t, 3>(name, {self, t1, t2}, out, 3, [v = std::move(v)](int64_t t) {
      return [c = v[v.size() == 1 ? 0 : t]](opmath_t s, opmath_t a, opmath_t b) { return Op::Apply(s, a, b, c); };
    });
  });
}

#define XXNPU_FOREACH_POINTWISE(OP, NAME, PROMOTES)                                                        \
  std::vector<at::Tensor> OP##Scalar(at::TensorList self, at::TensorList t1, at::TensorList t2, const at::Scalar& v) { \
    check_foreach_api_restrictions(self, t1, t2);                                                          \
    if (!FastRoute({self, t1, t2}, v, PROMOTES)) return at::native::foreach_tensor_##NAME##_scalar_slow(self, t1, t2, v); \
    auto out = EmptyLike(self);                                                                            \
    PointwiseKernel<OP##Op>("xxnpu::foreach_" #NAME, self, t1, t2, out, v);                                \
    return out;                                                                                            \
  }                                                                                                        \
  void OP##Scalar_(at::TensorList self, at::TensorList t1, at::TensorList t2, const at::Scalar& v) {       \
    check_foreach_api_restrictions(self, t1, t2);                                                          \
    if (!FastRoute({self, t1, t2}, v, PROMOTES)) return at::native::foreach_tensor_##NAME##_scalar_slow_(self, t1, t2, v); \
    PointwiseKernel<OP##Op>("xxnpu::foreach_" #NAME, self, t1, t2, self, v);                               \
  }                                                                                                        \
  std::vector<at::Tensor> OP##ScalarList(at::TensorList self, at::TensorList t1, at::TensorList t2,        \
                                         at::ArrayRef<at::Scalar> v) {                                     \
    check_foreach_api_restrictions(self, t1, t2, v);                                                       \
    if (!FastRoute({self, t1, t2}, v, PROMOTES)) {                                                         \
      return at::native::foreach_tensor_##NAME##_scalarlist_slow(self, t1, t2, v);                         \
    }                                                                                                      \
    auto out = EmptyLike(self);                                                                            \
    PointwiseKernel<OP##Op>("xxnpu::foreach_" #NAME, self, t1, t2, out, v);                                \
    return out;                                                                                            \
  }                                                                                                        \
  void OP##ScalarList_(at::TensorList self, at::TensorList t1, at::TensorList t2, at::ArrayRef<at::Scalar> v) { \
    check_foreach_api_restrictions(self, t1, t2, v);                                                       \
    if (!FastRoute({self, t1, t2}, v, PROMOTES)) {                                                         \
      return at::native::foreach_tensor_##NAME##_scalarlist_slow_(self, t1, t2, v);                        \
    }                                                                                                      \
    PointwiseKernel<OP##Op>("xxnpu::foreach_" #NAME, self, t1, t2, self, v);                               \
  }                                                                                                        \
  /* The scalars as a 1-D CPU tensor (ATen's convert_tensor_to_scalar_list checks it). */                 \
  std::vector<at::Tensor> OP##Tensor(at::TensorList self, at::TensorList t1, at::TensorList t2,            \
                                     const at::Tensor& scalars) {                                          \
    check_foreach_api_restrictions(self, t1, t2);                                                          \
    const auto v = at::native::convert_tensor_to_scalar_list(scalars, static_cast<int64_t>(self.size()));  \
    return OP##ScalarList(self, t1, t2, v);                                                                \
  }                                                                                                        \
  void OP##Tensor_(at::TensorList self, at::TensorList t1, at::TensorList t2, const at::Tensor& scalars) { \
    check_foreach_api_restrictions(self, t1, t2);                                                          \
    const auto v = at::native::convert_tensor_to_scalar_list(scalars, static_cast<int64_t>(self.size()));  \
    OP##ScalarList_(self, t1, t2, v);                                                                      \
  }

XXNPU_FOREACH_POINTWISE(Addcmul, addcmul, false)
XXNPU_FOREACH_POINTWISE(Addcdiv, addcdiv, true)

// ------------------------------------------------------------------ lerp

template <typename scalar_t>
void LerpScalarsKernel(at::TensorList self, at::TensorList end, at::TensorList out, at::ArrayRef<at::Scalar> w) {
  using opmath_t = at::opmath_type<scalar_t>;
  std::vector<opmath_t> v;
  v.reserve(w.size());
  for (const at::Scalar& s : w) v.push_back(s.to<opmath_t>());
  LaunchMap<scalar_t, 2>("xxnpu::foreach_lerp", {self, end}, out, 3, [v = std::move(v)](int64_t t) {
    return [c = v[v.size() == 1 ? 0 : t]](opmath_t a, opmath_t b) { return at::native::lerp(a, b, c); };
  });
}

template <typename scalar_t>
void LerpListKernel(at::TensorList self, at::TensorList end, at::TensorList weights, at::TensorList out) {
  using opmath_t = at::opmath_type<scalar_t>;
  LaunchMap<scalar_t, 3>("xxnpu::foreach_lerp", {self, end, weights}, out, 3, [](int64_t) {
    return [](opmath_t a, opmath_t b, opmath_t w) { return at::native::lerp(a, b, w); };
  });
}

std::vector<at::Tensor> LerpScalar(at::TensorList self, at::TensorList end, const at::Scalar& w) {
  check_foreach_api_restrictions(self, end);
  if (!FastRoute({self, end}, {}, true)) return at::native::foreach_tensor_lerp_list_kernel_slow(self, end, w);
  auto out = EmptyLike(self);
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] { LerpScalarsKernel<scalar_t>(self, end, out, w); });
  return out;
}
void LerpScalar_(at::TensorList self, at::TensorList end, const at::Scalar& w) {
  check_foreach_api_restrictions(self, end);
  if (!FastRoute({self, end}, {}, true)) return at::native::foreach_tensor_lerp_list_kernel_slow_(self, end, w);
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] { LerpScalarsKernel<scalar_t>(self, end, self, w); });
}
std::vector<at::Tensor> LerpScalarList(at::TensorList self, at::TensorList end, at::ArrayRef<at::Scalar> w) {
  check_foreach_api_restrictions(self, end, w);
  if (!FastRoute({self, end}, {}, true)) return at::native::foreach_tensor_lerp_scalarlist_kernel_slow(self, end, w);
  auto out = EmptyLike(self);
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] { LerpScalarsKernel<scalar_t>(self, end, out, w); });
  return out;
}
void LerpScalarList_(at::TensorList self, at::TensorList end, at::ArrayRef<at::Scalar> w) {
  check_foreach_api_restrictions(self, end, w);
  if (!FastRoute({self, end}, {}, true)) return at::native::foreach_tensor_lerp_scalarlist_kernel_slow_(self, end, w);
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] { LerpScalarsKernel<scalar_t>(self, end, self, w); });
}
std::vector<at::Tensor> LerpList(at::TensorList self, at::TensorList end, at::TensorList weights) {
  check_foreach_api_restrictions(self, end, weights);
  if (!FastRoute({self, end, weights}, {}, true)) return at::native::foreach_tensor_ternary_lerp_slow(self, end, weights);
  auto out = EmptyLike(self);
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] { LerpListKernel<scalar_t>(self, end, weights, out); });
  return out;
}
void LerpList_(at::TensorList self, at::TensorList end, at::TensorList weights) {
  check_foreach_api_restrictions(self, end, weights);
  if (!FastRoute({self, end, weights}, {}, true)) return at::native::foreach_tensor_ternary_lerp_slow_(self, end, weights);
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] { LerpListKernel<scalar_t>(self, end, weights, self); });
}

// ------------------------------------------------------------------ norm

enum class NormKind { kL1, kL2, kInf };

// One chunk's partial: sum |x|, sum x^2 or max |x| (a NaN stays). Independent lanes, so
// the compiler vectorises the loop without reassociating a single sum.
template <typename scalar_t, NormKind kKind>
double ChunkPartial(const scalar_t* x, int64_t n) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int kLanes = 16;
  std::array<acc_t, kLanes> acc{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const acc_t v = static_cast<acc_t>(x[i + k]);
      if constexpr (kKind == NormKind::kL1) {
        acc[k] += std::abs(v);
      } else if constexpr (kKind == NormKind::kL2) {
        acc[k] += v * v;
      } else {
        const acc_t a = std::abs(v);
        acc[k] = (a != a || a > acc[k]) ? a : acc[k];
      }
    }
  }
  double r = 0;
  for (; i < n; ++i) {
    const double v = static_cast<double>(x[i]);
    if constexpr (kKind == NormKind::kL1) {
      r += std::abs(v);
    } else if constexpr (kKind == NormKind::kL2) {
      r += v * v;
    } else {
      r = (std::isnan(v) || std::abs(v) > r) ? std::abs(v) : r;
    }
  }
  for (int k = 0; k < kLanes; ++k) {
    const double a = static_cast<double>(acc[k]);
    if constexpr (kKind == NormKind::kInf) {
      r = (std::isnan(a) || a > r) ? a : r;
    } else {
      r += a;
    }
  }
  return r;
}

// One kernel for every tensor's norm: each chunk leaves its partial; the block finishing a
// tensor's last chunk (a per-tensor countdown) combines that tensor's partials in chunk
// order, so the result does not depend on which thread ran what.
template <typename scalar_t, NormKind kKind>
void LaunchNorm(at::TensorList self, const at::Tensor& out) {
  const c10::Device device = self[0].device();
  mt::Plan<1> plan = mt::MakePlan<1>({self}, /*chunk_empty=*/true);
  const size_t ntensors = self.size();
  std::vector<int64_t> first(ntensors, -1), count(ntensors, 0);
  for (size_t b = 0; b < plan.chunks.size(); ++b) {
    const int64_t t = plan.chunks[b].tensor;
    if (first[t] < 0) first[t] = static_cast<int64_t>(b);
    ++count[t];
  }
  auto pending = std::make_unique<std::atomic<int64_t>[]>(ntensors);
  for (size_t t = 0; t < ntensors; ++t) pending[t].store(count[t], std::memory_order_relaxed);
  auto partial = std::make_unique<double[]>(plan.chunks.size());
  char* out_base = static_cast<char*>(DeviceView(out.data_ptr()));
  const at::ScalarType out_t = out.scalar_type();
  const int64_t out_stride = out.stride(0) * static_cast<int64_t>(out.element_size());
  LaunchConfig cfg;
  cfg.name = "xxnpu::foreach_norm";
  cfg.grid = Dim3{static_cast<uint32_t>(plan.chunks.size()), 1, 1};
  cfg.block = Dim3{static_cast<uint32_t>(mt::kChunkElements), 1, 1};
  cfg.bytes = plan.numel * sizeof(scalar_t) + ntensors * out.element_size();
  cfg.flops = plan.numel * 2;
  CheckOk(xxnpuLaunchKernel(cfg, KernelBody([plan = std::move(plan), first = std::move(first),
                                             count = std::move(count), pending = std::move(pending),
                                             partial = std::move(partial), out_base, out_t,
                                             out_stride](BlockRange r) {
            for (int64_t b = r.begin; b < r.end; ++b) {
              const mt::Chunk& c = plan.chunks[b];
              const auto* x = reinterpret_cast<const scalar_t*>(plan.base[c.tensor][0]) + c.begin;
              partial[b] = ChunkPartial<scalar_t, kKind>(x, c.n);
              if (pending[c.tensor].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
              double v = 0;
              for (int64_t k = first[c.tensor]; k < first[c.tensor] + count[c.tensor]; ++k) {
                if constexpr (kKind == NormKind::kInf) {
                  v = (std::isnan(partial[k]) || partial[k] > v) ? partial[k] : v;
                } else {
                  v += partial[k];
                }
              }
              if constexpr (kKind == NormKind::kL2) v = std::sqrt(v);
              c10::cast_and_store<double>(out_t, out_base + c.tensor * out_stride, v);
            }
            return absl::OkStatus();
          }), CurrentXxnpuStreamHandle(device.index())), cfg.name);
}

std::vector<at::Tensor> NormForeach(at::TensorList self, const at::Scalar& ord, std::optional<at::ScalarType> dtype) {
  check_foreach_api_restrictions(self);
  const double p = ord.to<double>();
  const at::ScalarType out_t = dtype.value_or(self[0].scalar_type());
  bool fast = (p == 1 || p == 2 || p == INFINITY) && KernelDtype(out_t) && FastRoute({self});
  // The CPU raises for the inf-norm of an empty tensor (no identity): its path says so.
  for (size_t i = 0; fast && p == INFINITY && i < self.size(); ++i) fast = self[i].numel() > 0;
  if (!fast) return at::native::foreach_tensor_norm_slow(self, ord, dtype);
  c10::DeviceGuard guard(self[0].device());
  // One allocation; each result is a 0-dim view of it (as CUDA returns them).
  const at::Tensor all = at::empty({static_cast<int64_t>(self.size())}, self[0].options().dtype(out_t));
  XXNPU_FOREACH_DISPATCH(self[0].scalar_type(), [&] {
    if (p == 1) {
      LaunchNorm<scalar_t, NormKind::kL1>(self, all);
    } else if (p == 2) {
      LaunchNorm<scalar_t, NormKind::kL2>(self, all);
    } else {
      LaunchNorm<scalar_t, NormKind::kInf>(self, all);
    }
  });
  std::vector<at::Tensor> out;
  out.reserve(self.size());
  for (size_t i = 0; i < self.size(); ++i) out.push_back(all.select(0, static_cast<int64_t>(i)));
  return out;
}

#define XXNPU_IMPL_BINARY_SCALAR(NAME, OP)          \
  m.impl("_foreach_" NAME ".Scalar", &OP##Scalar);   \
  m.impl("_foreach_" NAME "_.Scalar", &OP##Scalar_); \
  m.impl("_foreach_" NAME ".ScalarList", &OP##ScalarList); \
  m.impl("_foreach_" NAME "_.ScalarList", &OP##ScalarList_);
#define XXNPU_IMPL_LIST(NAME, OP)               \
  m.impl("_foreach_" NAME ".List", &OP##List);   \
  m.impl("_foreach_" NAME "_.List", &OP##List_);
#define XXNPU_IMPL_TENSOR(NAME, OP)                 \
  m.impl("_foreach_" NAME ".Tensor", &OP##Tensor);   \
  m.impl("_foreach_" NAME "_.Tensor", &OP##Tensor_);
#define XXNPU_IMPL_UNARY(NAME)                   \
  m.impl("_foreach_" #NAME, &NAME##Foreach);      \
  m.impl("_foreach_" #NAME "_", &NAME##Foreach_);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  XXNPU_IMPL_BINARY_SCALAR("add", Add)
  XXNPU_IMPL_LIST("add", Add)
  XXNPU_IMPL_TENSOR("add", Add)
  XXNPU_IMPL_BINARY_SCALAR("sub", Sub)
  XXNPU_IMPL_LIST("sub", Sub)
  XXNPU_IMPL_BINARY_SCALAR("mul", Mul)
  XXNPU_IMPL_LIST("mul", Mul)
  XXNPU_IMPL_TENSOR("mul", Mul)
  XXNPU_IMPL_BINARY_SCALAR("div", Div)
  XXNPU_IMPL_LIST("div", Div)
  XXNPU_IMPL_TENSOR("div", Div)
  XXNPU_IMPL_BINARY_SCALAR("maximum", Max)
  XXNPU_IMPL_LIST("maximum", Max)
  XXNPU_IMPL_BINARY_SCALAR("minimum", Min)
  XXNPU_IMPL_LIST("minimum", Min)
  XXNPU_IMPL_BINARY_SCALAR("clamp_min", Max)
  XXNPU_IMPL_LIST("clamp_min", Max)
  XXNPU_IMPL_BINARY_SCALAR("clamp_max", Min)
  XXNPU_IMPL_LIST("clamp_max", Min)
  XXNPU_IMPL_BINARY_SCALAR("pow", Pow)
  XXNPU_IMPL_LIST("pow", Pow)
  m.impl("_foreach_pow.ScalarAndTensor", &ScalarPowList);
  XXNPU_IMPL_UNARY(neg)
  XXNPU_IMPL_UNARY(sqrt)
  XXNPU_IMPL_UNARY(rsqrt)
  XXNPU_IMPL_UNARY(reciprocal)
  XXNPU_IMPL_UNARY(abs)
  XXNPU_IMPL_UNARY(exp)
  XXNPU_IMPL_UNARY(log)
  m.impl("_foreach_zero_", &ZeroForeach_);
  m.impl("_foreach_copy_", &CopyForeach_);
  XXNPU_IMPL_BINARY_SCALAR("addcmul", Addcmul)
  XXNPU_IMPL_TENSOR("addcmul", Addcmul)
  XXNPU_IMPL_BINARY_SCALAR("addcdiv", Addcdiv)
  XXNPU_IMPL_TENSOR("addcdiv", Addcdiv)
  m.impl("_foreach_lerp.Scalar", &LerpScalar);
  m.impl("_foreach_lerp_.Scalar", &LerpScalar_);
  m.impl("_foreach_lerp.ScalarList", &LerpScalarList);
  m.impl("_foreach_lerp_.ScalarList", &LerpScalarList_);
  m.impl("_foreach_lerp.List", &LerpList);
  m.impl("_foreach_lerp_.List", &LerpList_);
  m.impl("_foreach_norm.Scalar", &NormForeach);
}

}  // namespace
}  // namespace xxnpu
