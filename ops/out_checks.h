// The one validation path for out= arguments and mixed inputs of hand-written xxnpu
// kernels: the checks the CPU runs, with the CPU's messages, so bad input gets the CPU's
// answer (and never a kernel writing past the end of a tensor of another dtype).
//
// - Structured ops (those with an ATen meta function: gather, scatter, sort, topk, tril,
//   cumsum, max.dim, argmax, linalg_vector_norm, ...): call CheckOutWithMeta<at::meta::
//   structured_OP>(outs, args...) first. It runs ATen's own meta function against the out=
//   tensors, as the CPU's generated out= wrapper does: shape and argument checks, overlap
//   checks, out's dtype and device ("Expected out tensor to have dtype float, but got
//   double instead"), then resize_output (a warning when a non-empty out is resized).
//   A functional call that reached the kernel through ATen's structured wrapper passes
//   these checks by construction; an out= call reaches the kernel directly and gets them
//   here.
// - Other ops: CheckOutDevice / CheckOutDtype / CheckCastsToOut, plus ATen's
//   at::assert_no_internal_overlap / assert_no_overlap / assert_no_partial_overlap
//   (ATen/MemoryOverlap.h) where the CPU kernel calls them.
// - Inputs on another device: CheckSameDevice (ops/xxnpu_tensor.h, CUDA's message).
#ifndef TORCH_XXNPU_OPS_OUT_CHECKS_H_
#define TORCH_XXNPU_OPS_OUT_CHECKS_H_

#include <ATen/TensorMeta.h>
#include <ATen/core/Tensor.h>

#include <array>
#include <cstddef>
#include <functional>
#include <utility>

namespace xxnpu {

// What the CPU's structured out= wrapper does with an out= tensor (resize_out): its dtype
// and device must be the ones the meta function asked for, then it is resized
// (at::native::resize_output: warns when a non-empty tensor changes shape) and, if it was,
// restrided as asked.
void ResizeOut(const at::Tensor& out, c10::IntArrayRef sizes, c10::IntArrayRef strides,
               const at::TensorOptions& options);

// "Expected out tensor to have device xxnpu:0, but got cpu instead" (the structured
// wrapper's message; CUDA's for the same call).
void CheckOutDevice(const at::Tensor& out, c10::Device expected);

// "Expected out tensor to have dtype float, but got double instead".
void CheckOutDtype(const at::Tensor& out, at::ScalarType expected);

// For ops that compute in `result` and cast into out (TensorIterator's rule):
// "result type Float can't be cast to the desired output type Int".
void CheckCastsToOut(at::ScalarType result, const at::Tensor& out);

// ATen's meta function of a structured op (Meta = at::meta::structured_OP), run against
// `N` out= tensors. Used through CheckOutWithMeta.
template <typename Meta, size_t N>
class OutMeta final : public Meta {
 public:
  explicit OutMeta(std::array<std::reference_wrapper<const at::Tensor>, N> outs) : outs_(outs) {}
  const at::Tensor& maybe_get_output(int64_t i) override { return outs_.at(i).get(); }
  void set_output_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                          at::TensorOptions options) override {
    ResizeOut(outs_.at(i).get(), sizes, strides, options);
  }
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              at::TensorOptions options) override {
    ResizeOut(outs_.at(i).get(), sizes, strides, options);
  }

 private:
  std::array<std::reference_wrapper<const at::Tensor>, N> outs_;
};

// Checks and resizes the out= tensor(s) of a structured op exactly as the CPU does for
// `torch.op(args..., out=...)`:
//   CheckOutWithMeta<at::meta::structured_gather>(out, self, dim, index, sparse_grad);
//   CheckOutsWithMeta<at::meta::structured_topk>(values, indices, self, k, dim, largest, sorted);
template <typename Meta, typename... Args>
void CheckOutWithMeta(const at::Tensor& out, Args&&... args) {
  OutMeta<Meta, 1> meta({std::cref(out)});
  meta.meta(std::forward<Args>(args)...);
}

template <typename Meta, typename... Args>
void CheckOutsWithMeta(const at::Tensor& out0, const at::Tensor& out1, Args&&... args) {
  OutMeta<Meta, 2> meta({std::cref(out0), std::cref(out1)});
  meta.meta(std::forward<Args>(args)...);
}

}  // namespace xxnpu

#endif  // TORCH_XXNPU_OPS_OUT_CHECKS_H_
