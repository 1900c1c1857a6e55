// Convolutions on xxnpu: convolution_overrideable and convolution_backward_overrideable, the
// two ops ATen's convolution sends a PrivateUse1 tensor to (ConvBackend::Overrideable), for
// conv1d/2d/3d and conv_transpose1d/2d/3d, any stride, padding, dilation, output padding and
// groups. Without them every nn.Conv*d on xxnpu raised "convolution_overrideable not
// implemented", eagerly and under torch.compile (Inductor leaves convolution to ATen).
//
// They are built from xxnpu kernels, as a GEMM convolution: the input's windows are
// gathered into columns (one strided copy: im2col), one batched matmul per group gives the
// output, and the backward scatters the columns' gradient back into the input (col2im: one
// strided add per kernel offset, so no two writes of one kernel hit the same element).
// Every step is an xxnpu kernel on the current stream, so the profiler shows the copy, the
// bmm and the adds under the aten::convolution row. Other dtypes than mm's (integers)
// follow mm, which runs them through the CPU fallback.
//
// A transposed convolution is the input gradient of an ordinary one whose input and output
// swap roles, and its gradients are that ordinary convolution's forward and weight
// gradient; the three helpers below serve both.
#include <ATen/ATen.h>
#include <c10/util/accumulate.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <array>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

namespace xxnpu {
namespace {

// The geometry of an ordinary convolution: input [N, C, *in] -> output [N, O, *out] with a
// weight [O, C / groups, *kernel].
struct ConvShape {
  int64_t n = 0, c = 0, o = 0, groups = 1;
  std::vector<int64_t> in, kernel, out, stride, padding, dilation;
  int64_t dims() const { return static_cast<int64_t>(kernel.size()); }
  int64_t KernelVolume() const { return c10::multiply_integers(kernel); }
  int64_t OutVolume() const { return c10::multiply_integers(out); }
};

std::vector<int64_t> Expand(const char* what, at::IntArrayRef v, int64_t dims) {
  TORCH_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == dims, "xxnpu convolution: expected ", what,
              " with 1 or ", dims, " values, got ", v.size());
  return v.size() == 1 ? std::vector<int64_t>(dims, v[0]) : v.vec();
}

// The ordinary convolution whose input is `input_sizes`, weight `weight`, and whose output
// size follows from them.
ConvShape MakeShape(at::IntArrayRef input_sizes, const at::Tensor& weight, at::IntArrayRef stride,
                    at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  const int64_t dims = weight.dim() - 2;
  TORCH_CHECK(dims >= 1 && dims <= 3, "xxnpu convolution: expected a weight of 3 to 5 dims, got ", weight.dim());
  TORCH_CHECK(static_cast<int64_t>(input_sizes.size()) == dims + 2, "xxnpu convolution: expected a ", dims + 2,
              "-d input for a ", weight.dim(), "-d weight, got ", input_sizes.size(), " dims");
  TORCH_CHECK(groups > 0, "xxnpu convolution: groups must be positive, got ", groups);
  ConvShape s;
  s.n = input_sizes[0];
  s.c = input_sizes[1];
  s.o = weight.size(0);
  s.groups = groups;
  TORCH_CHECK(s.c == weight.size(1) * groups && s.o % groups == 0, "xxnpu convolution: a weight of shape ",
              weight.sizes(), " with groups=", groups, " does not fit an input of ", s.c, " channels");
  s.stride = Expand("stride", stride, dims);
  s.padding = Expand("padding", padding, dims);
  s.dilation = Expand("dilation", dilation, dims);
  for (const auto i : c10::irange(dims)) {
    const int64_t k = weight.size(i + 2), in = input_sizes[i + 2];
    TORCH_CHECK(s.stride[i] > 0 && s.dilation[i] > 0 && s.padding[i] >= 0,
                "xxnpu convolution: expected positive stride and dilation and non-negative padding");
    const int64_t span = s.dilation[i] * (k - 1) + 1;
    TORCH_CHECK(in + 2 * s.padding[i] >= span, "xxnpu convolution: the kernel (", span, " wide with dilation) is ",
                "larger than the padded input (", in + 2 * s.padding[i], ") in spatial dim ", i);
    s.in.push_back(in);
    s.kernel.push_back(k);
    s.out.push_back((in + 2 * s.padding[i] - span) / s.stride[i] + 1);
  }
  return s;
}

// as_strided sizes and strides that walk, for every kernel offset, the positions of the
// padded tensor `xp` [N, C, *padded] it multiplies: [g, C/g, *kernel, N, *out], so that a
// contiguous copy is the columns [g, (C/g) * kernel volume, N * out volume].
void WindowView(const ConvShape& s, const at::Tensor& xp, std::vector<int64_t>& sizes,
                std::vector<int64_t>& strides) {
  const int64_t cg = s.c / s.groups;
  sizes = {s.groups, cg};
  strides = {cg * xp.stride(1), xp.stride(1)};
  for (const auto i : c10::irange(s.dims())) {
    sizes.push_back(s.kernel[i]);
    strides.push_back(s.dilation[i] * xp.stride(i + 2));
  }
  sizes.push_back(s.n);
  strides.push_back(xp.stride(0));
  for (const auto i : c10::irange(s.dims())) {
    sizes.push_back(s.out[i]);
    strides.push_back(s.stride[i] * xp.stride(i + 2));
  }
}

std::vector<int64_t> SymmetricPads(const ConvShape& s) {
  std::vector<int64_t> pads;  // constant_pad_nd's order: last dim first
  for (int64_t i = s.dims() - 1; i >= 0; --i) {
    pads.push_back(s.padding[i]);
    pads.push_back(s.padding[i]);
  }
  return pads;
}

bool Padded(const ConvShape& s) {
  for (const int64_t p : s.padding) {
    if (p != 0) return true;
  }
  return false;
}

// im2col: [g, (C/g) * kernel volume, N * out volume], contiguous.
at::Tensor Columns(const ConvShape& s, const at::Tensor& input) {
  const at::Tensor xp = Padded(s) ? at::constant_pad_nd(input, SymmetricPads(s), 0) : input;
  std::vector<int64_t> sizes, strides;
  WindowView(s, xp, sizes, strides);
  return xp.as_strided(sizes, strides, xp.storage_offset())
      .contiguous()
      .view({s.groups, (s.c / s.groups) * s.KernelVolume(), s.n * s.OutVolume()});
}

// [g, X, N * out volume] -> [N, g * X, *out], contiguous (the layout torch's fake tensors
// give an overrideable convolution's output; with one group reshape alone would return a
// strided view).
at::Tensor GroupsToBatch(const ConvShape& s, const at::Tensor& y) {
  std::vector<int64_t> sizes = {s.groups, y.size(1), s.n};
  sizes.insert(sizes.end(), s.out.begin(), s.out.end());
  std::vector<int64_t> perm = {2, 0, 1};
  for (const auto i : c10::irange(s.dims())) perm.push_back(3 + i);
  std::vector<int64_t> result = {s.n, s.groups * y.size(1)};
  result.insert(result.end(), s.out.begin(), s.out.end());
  return y.view(sizes).permute(perm).reshape(result).contiguous();
}

// [N, g * X, *out] -> [g, X, N * out volume], contiguous.
at::Tensor BatchToGroups(const ConvShape& s, const at::Tensor& y) {
  const int64_t x = y.size(1) / s.groups;
  std::vector<int64_t> sizes = {s.n, s.groups, x};
  sizes.insert(sizes.end(), s.out.begin(), s.out.end());
  std::vector<int64_t> perm = {1, 2, 0};
  for (const auto i : c10::irange(s.dims())) perm.push_back(3 + i);
  return y.reshape(sizes).permute(perm).reshape({s.groups, x, s.n * s.OutVolume()});
}

at::Tensor BiasView(const at::Tensor& bias, int64_t dims) {
  std::vector<int64_t> shape(dims + 2, 1);
  shape[1] = bias.numel();
  return bias.view(shape);
}

at::Tensor GroupedWeight(const ConvShape& s, const at::Tensor& weight) {
  return weight.reshape({s.groups, s.o / s.groups, (s.c / s.groups) * s.KernelVolume()});
}

// The ordinary convolution: [N, O, *out]. The bias goes into the GEMM (baddbmm), so a
// half/bfloat16 output is rounded once, as the CPU's is.
at::Tensor ConvForward(const ConvShape& s, const at::Tensor& input, const at::Tensor& weight,
                       const at::Tensor& bias = at::Tensor()) {
  const at::Tensor cols = Columns(s, input), w = GroupedWeight(s, weight);
  if (!bias.defined()) return GroupsToBatch(s, at::bmm(w, cols));
  const int64_t og = s.o / s.groups;
  const at::Tensor b = bias.to(w.scalar_type()).view({s.groups, og, 1}).expand({s.groups, og, cols.size(2)});
  return GroupsToBatch(s, at::baddbmm(b, w, cols));
}

// Its gradient with respect to the input, given the output's gradient `grad` [N, O, *out]:
// the columns' gradient scattered back (col2im), [N, C, *in], plus `bias` per channel if
// given (a transposed convolution's). half/bfloat16 are summed in float32 and rounded once
// at the end: the col2im adds would otherwise round once per kernel offset.
at::Tensor ConvInputGrad(const ConvShape& s, const at::Tensor& grad, const at::Tensor& weight,
                         const at::Tensor& bias = at::Tensor()) {
  const at::ScalarType dtype = grad.scalar_type();
  const at::ScalarType acc = at::isReducedFloatingType(dtype) ? at::kFloat : dtype;
  const at::Tensor cols =
      at::bmm(GroupedWeight(s, weight.to(acc)).transpose(1, 2), BatchToGroups(s, grad.to(acc)));
  std::vector<int64_t> padded = {s.n, s.c};
  for (const auto i : c10::irange(s.dims())) padded.push_back(s.in[i] + 2 * s.padding[i]);
  at::Tensor gp = at::zeros(padded, grad.options().dtype(acc));
  std::vector<int64_t> sizes, strides;
  WindowView(s, gp, sizes, strides);
  // cols viewed as the window view's shape: [g, C/g, *kernel, N, *out].
  const at::Tensor src = cols.view(sizes);
  // One strided add per kernel offset: within one, the windows' positions are distinct.
  const int64_t kd = s.dims();
  std::vector<int64_t> one_sizes = {s.groups, s.c / s.groups, s.n};
  std::vector<int64_t> one_strides = {strides[0], strides[1], strides[2 + kd]};
  for (const auto i : c10::irange(kd)) {
    one_sizes.push_back(s.out[i]);
    one_strides.push_back(strides[3 + kd + i]);
  }
  for (const auto k : c10::irange(s.KernelVolume())) {
    // k's position in each kernel dim (the last dim fastest, as in the columns).
    int64_t offset = gp.storage_offset(), rest = k;
    std::vector<int64_t> idx(kd);
    for (int64_t i = kd - 1; i >= 0; --i) {
      idx[i] = rest % s.kernel[i];
      rest /= s.kernel[i];
      offset += idx[i] * strides[2 + i];
    }
    at::Tensor piece = src;
    for (const auto i : c10::irange(kd)) piece = piece.select(2, idx[i]);  // each select drops dim 2
    gp.as_strided(one_sizes, one_strides, offset).add_(piece);
  }
  at::Tensor g = gp;
  for (const auto i : c10::irange(kd)) g = g.narrow(i + 2, s.padding[i], s.in[i]);
  if (bias.defined()) g = g + BiasView(bias.to(acc), kd);
  return g.to(dtype).contiguous();
}

// Its gradient with respect to the weight, given the input and the output's gradient:
// [O, C / g, *kernel].
at::Tensor ConvWeightGrad(const ConvShape& s, const at::Tensor& input, const at::Tensor& grad,
                          at::IntArrayRef weight_sizes) {
  return at::bmm(BatchToGroups(s, grad), Columns(s, input).transpose(1, 2)).reshape(weight_sizes);
}

void CheckTensors(const at::Tensor& input, const at::Tensor& weight) {
  TORCH_CHECK(input.device() == weight.device(), "xxnpu convolution: expected input and weight on one device, got ",
              input.device(), " and ", weight.device());
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "xxnpu convolution: expected input and weight of one ",
              "dtype, got ", input.scalar_type(), " and ", weight.scalar_type());
}

// A transposed convolution's input sizes are the output sizes of the ordinary convolution
// it is the input gradient of. (Its own output sizes give them back, or one more in a dim
// whose output_padding is at least the stride, which torch allows below the dilation: those
// last positions are never read by a window the input covers, so taking the input's sizes
// is exact.)
std::vector<int64_t> SpatialSizes(const at::Tensor& t) {
  return std::vector<int64_t>(t.sizes().begin() + 2, t.sizes().end());
}

// The sizes a transposed convolution gives: the ordinary convolution it is the input
// gradient of has them as its input.
std::vector<int64_t> TransposedOutputSizes(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
                                           at::IntArrayRef padding, at::IntArrayRef dilation,
                                           at::IntArrayRef output_padding, int64_t groups) {
  const int64_t dims = weight.dim() - 2;
  TORCH_CHECK(input.dim() == dims + 2, "xxnpu convolution: expected a ", dims + 2, "-d input, got ", input.dim());
  TORCH_CHECK(input.size(1) == weight.size(0), "xxnpu conv_transpose: a weight of shape ", weight.sizes(),
              " does not fit an input of ", input.size(1), " channels");
  const auto st = Expand("stride", stride, dims), pa = Expand("padding", padding, dims),
             di = Expand("dilation", dilation, dims), op = Expand("output_padding", output_padding, dims);
  std::vector<int64_t> sizes = {input.size(0), weight.size(1) * groups};
  for (const auto i : c10::irange(dims)) {
    TORCH_CHECK(op[i] >= 0 && (op[i] < st[i] || op[i] < di[i]), "xxnpu conv_transpose: output_padding must be ",
                "smaller than stride or dilation, got ", op[i]);
    sizes.push_back((input.size(i + 2) - 1) * st[i] - 2 * pa[i] + di[i] * (weight.size(i + 2) - 1) + op[i] + 1);
    TORCH_CHECK(sizes.back() > 0, "xxnpu conv_transpose: the output would have size ", sizes.back(),
                " in spatial dim ", i);
  }
  return sizes;
}

at::Tensor ConvolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                   at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                   at::IntArrayRef output_padding, int64_t groups) {
  CheckTensors(input, weight);
  const at::Tensor b = bias.has_value() ? *bias : at::Tensor();
  if (transposed) {
    // The input gradient of the ordinary convolution from `out` to `input`, whose weight
    // [C_in, C_out / g, *kernel] is this one.
    const auto out_sizes = TransposedOutputSizes(input, weight, stride, padding, dilation, output_padding, groups);
    ConvShape s = MakeShape(out_sizes, weight, stride, padding, dilation, groups);
    s.out = SpatialSizes(input);
    return ConvInputGrad(s, input, weight, b);
  }
  return ConvForward(MakeShape(input.sizes(), weight, stride, padding, dilation, groups), input, weight, b);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ConvolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  CheckTensors(input, weight);
  const int64_t dims = weight.dim() - 2;
  at::Tensor grad_input, grad_weight, grad_bias;
  if (transposed) {
    // The ordinary convolution runs from grad_output's shape to input's.
    ConvShape s = MakeShape(grad_output.sizes(), weight, stride, padding, dilation, groups);
    s.out = SpatialSizes(input);
    if (output_mask[0]) grad_input = ConvForward(s, grad_output, weight);
    if (output_mask[1]) grad_weight = ConvWeightGrad(s, grad_output, input, weight.sizes());
  } else {
    const ConvShape s = MakeShape(input.sizes(), weight, stride, padding, dilation, groups);
    if (output_mask[0]) grad_input = ConvInputGrad(s, grad_output, weight);
    if (output_mask[1]) grad_weight = ConvWeightGrad(s, input, grad_output, weight.sizes());
  }
  if (output_mask[2]) {
    std::vector<int64_t> reduce = {0};
    for (const auto i : c10::irange(dims)) reduce.push_back(i + 2);
    grad_bias = grad_output.sum(reduce);
  }
  return {grad_input, grad_weight, grad_bias};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", &ConvolutionOverrideable);
  m.impl("convolution_backward_overrideable", &ConvolutionBackwardOverrideable);
}

}  // namespace
}  // namespace xxnpu
