// Quantized tensors on xxnpu, at CUDA's level: per-tensor and per-channel affine
// quantize / dequantize / int_repr, the q_* accessors, the quantized empties, views,
// clone and copies (host <-> device), _make_per_{tensor,channel}_quantized_tensor and
// the fake_quantize_* family (dense ops).
//
// The structure is CUDA's: ATen's device-generic native functions are registered on
// QuantizedPrivateUse1 / PrivateUse1 as native_functions.yaml registers them on
// QuantizedCUDA / CUDA, and the arithmetic reaches the device through ATen's
// DispatchStubs (quantize_tensor_per_*_stub, fake_quant_*_stub), whose PrivateUse1 slots
// we fill with device kernels. The rounding is the CPU's, bit for bit:
// q = clamp(nearbyint(x * (1.0f / float(scale)) + zero_point), qmin, qmax), see QuantizeValue.
// Where CUDA has its own kernel (int_repr, _make_per_*_quantized_tensor) or where
// ATen's copy_ hands PrivateUse1 copies to _copy_from before its quantized handling,
// the function is ours. quint4x2 is not supported, as on CUDA (no sub-byte stub).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/quantized/AffineQuantizer.h>
#include <ATen/native/quantized/FakeQuantAffine.h>
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/_fake_quantize_learnable_per_channel_affine_backward_native.h>
#include <ATen/ops/_fake_quantize_learnable_per_channel_affine_native.h>
#include <ATen/ops/_fake_quantize_learnable_per_tensor_affine_backward_native.h>
#include <ATen/ops/_fake_quantize_learnable_per_tensor_affine_native.h>
#include <ATen/ops/_fake_quantize_per_tensor_affine_cachemask_tensor_qparams_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/dequantize_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/fake_quantize_per_channel_affine_cachemask_native.h>
#include <ATen/ops/fake_quantize_per_tensor_affine_cachemask_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/max_native.h>
#include <ATen/ops/min_native.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/quantize_per_channel_native.h>
#include <ATen/ops/quantize_per_tensor_dynamic_native.h>
#include <ATen/ops/quantize_per_tensor_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ops/device_loop.h"

namespace xxnpu {
namespace {

// ---------------------------------------------------------------------------------------
// Element helpers, run on the device.

// The rounding of the CPU backend of torch 2.13, measured against it (the per-tensor
// 8-bit path is fbgemm's AVX2 loop, which fuses x * inv_scale + zero_point in one FMA;
// qint32 and every per-channel quantization use the scalar form, which rounds the product
// to float first); both round half to even. A NaN maps to qmin, as the AVX2 path's
// float->int conversion does; anything beyond the range saturates.
template <typename T>
T Saturate(float r) {
  constexpr double kMin = std::numeric_limits<T>::min();
  constexpr double kMax = std::numeric_limits<T>::max();
  if (!(r >= kMin)) return std::numeric_limits<T>::min();
  if (r > kMax) return std::numeric_limits<T>::max();
  return static_cast<T>(static_cast<int64_t>(r));
}

// zero_point + x * inv_scale, the product rounded to float first, then to nearest-even.
template <typename T>
T QuantizeValue(float x, float inv_scale, int64_t zero_point) {
  const float product = x * inv_scale;
  return Saturate<T>(std::nearbyint(static_cast<float>(zero_point) + product));
}

// The same with one rounding (an FMA: glibc's fmaf is the FMA instruction where the host
// has one).
template <typename T>
T QuantizeValueFused(float x, float inv_scale, int64_t zero_point) {
  return Saturate<T>(std::nearbyint(std::fmaf(x, inv_scale, static_cast<float>(zero_point))));
}

// Calls f(p) for every element of a TensorIterator 2-D loop, p[k] pointing at operand k.
template <int N, typename F>
inline void ForEachElement(char** d, const int64_t* s, int64_t n0, int64_t n1, F&& f) {
  char* p[N];
  for (int64_t j = 0; j < n1; ++j) {
    for (int64_t i = 0; i < n0; ++i) {
      for (int k = 0; k < N; ++k) p[k] = d[k] + j * s[N + k] + i * s[k];
      f(p);
    }
  }
}

template <typename T>
T& At(char* p) {
  return *reinterpret_cast<T*>(p);
}

void CheckNotSubByte(const char* fn, at::ScalarType t) {
  TORCH_CHECK(t == at::kQInt8 || t == at::kQUInt8 || t == at::kQInt32, fn, " on xxnpu supports torch.qint8, ",
              "torch.quint8 and torch.qint32 (as CUDA does), got ", t);
}

// `t` on `device` with dtype `dtype`: a no-op when it already is.
at::Tensor OnDevice(const at::Tensor& t, c10::Device device, at::ScalarType dtype) {
  return t.to(device, dtype);
}

// Shapes a 1-D per-channel parameter as [1, ..., C, ..., 1] so it broadcasts along `axis`.
at::Tensor ChannelView(const at::Tensor& p, int64_t ndim, int64_t axis) {
  std::vector<int64_t> shape(static_cast<size_t>(ndim), 1);
  shape[static_cast<size_t>(axis)] = p.numel();
  return p.view(shape);
}

// CUDA's per-channel zero point check, which ATen's generic code leaves to PrivateUse1's
// kernel (it would otherwise read the device tensor on the host): two reductions on the
// device and one read back each; the message is the CPU's.
template <typename T>
void CheckZeroPointsOnDevice(const char* fn, const at::Tensor& zero_points) {
  if (zero_points.numel() == 0) return;
  const int64_t hi = zero_points.max().item<int64_t>();
  const int64_t lo = zero_points.min().item<int64_t>();
  TORCH_CHECK(hi <= std::numeric_limits<T>::max(), fn, " zero_point ", hi, " is above upper bound.");
  TORCH_CHECK(lo >= std::numeric_limits<T>::min(), fn, " zero_point ", lo, " is below lower bound.");
}

// dst = src element by element, reinterpreting bytes of equal size (int8 <-> qint8, ...).
void CopyElements(const char* name, const at::Tensor& dst, const at::Tensor& src) {
  TORCH_INTERNAL_ASSERT(dst.element_size() == src.element_size());
  if (dst.numel() == 0) return;
  auto iter = at::TensorIteratorConfig()
                  .add_output(dst)
                  .add_const_input(src)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .build();
  auto launch = [&](auto tag) {
    using E = decltype(tag);
    LaunchTensorIterator(name, iter, [](char** d, const int64_t* s, int64_t n0, int64_t n1) {
      ForEachElement<2>(d, s, n0, n1, [](char** p) { At<E>(p[0]) = At<const E>(p[1]); });
    });
  };
  switch (dst.element_size()) {
    case 1: launch(uint8_t{}); break;
    case 4: launch(uint32_t{}); break;
    default: TORCH_CHECK(false, name, ": unsupported element size ", dst.element_size());
  }
}

// ---------------------------------------------------------------------------------------
// Quantize / dequantize kernels: the PrivateUse1 entries of ATen's affine-quantizer stubs.

void QuantizePerTensor(const at::Tensor& rtensor, at::Tensor& qtensor, double scale, int64_t zero_point) {
  CheckNotSubByte("quantize_per_tensor", qtensor.scalar_type());
  const c10::DeviceGuard guard(qtensor.device());
  auto iter = at::TensorIteratorConfig()
                  .add_output(qtensor)
                  .add_const_input(rtensor)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .build();
  const float inv_scale = 1.0f / static_cast<float>(scale);
  AT_DISPATCH_QINT_TYPES(qtensor.scalar_type(), "xxnpu_quantize_per_tensor", [&] {
    using T = underlying_t;
    LaunchTensorIterator("xxnpu::quantize_per_tensor", iter,
                         [inv_scale, zero_point](char** d, const int64_t* s, int64_t n0, int64_t n1) {
      ForEachElement<2>(d, s, n0, n1, [&](char** p) {
        At<T>(p[0]) = sizeof(T) == 1 ? QuantizeValueFused<T>(At<const float>(p[1]), inv_scale, zero_point)
                                     : QuantizeValue<T>(At<const float>(p[1]), inv_scale, zero_point);
      });
    });
  });
}

void DequantizePerTensor(const at::Tensor& qtensor, at::Tensor& rtensor, double scale, int64_t zero_point) {
  CheckNotSubByte("dequantize", qtensor.scalar_type());
  const c10::DeviceGuard guard(qtensor.device());
  auto iter = at::TensorIteratorConfig()
                  .add_output(rtensor)
                  .add_const_input(qtensor)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .build();
  const float sc = static_cast<float>(scale);
  AT_DISPATCH_QINT_TYPES(qtensor.scalar_type(), "xxnpu_dequantize_per_tensor", [&] {
    using T = underlying_t;
    LaunchTensorIterator("xxnpu::dequantize_per_tensor", iter,
                         [sc, zero_point](char** d, const int64_t* s, int64_t n0, int64_t n1) {
      ForEachElement<2>(d, s, n0, n1, [&](char** p) {
        At<float>(p[0]) = static_cast<float>(static_cast<int64_t>(At<const T>(p[1])) - zero_point) * sc;
      });
    });
  });
}

// Integer zero points (PerChannelAffine): scales double, zero points int64, as the
// quantizer stores them.
void QuantizePerChannel(const at::Tensor& rtensor, at::Tensor& qtensor, const at::Tensor& scales,
                        const at::Tensor& zero_points, int64_t axis) {
  static constexpr auto kFn = "quantize_tensor_per_channel_affine";
  CheckNotSubByte(kFn, qtensor.scalar_type());
  const c10::DeviceGuard guard(qtensor.device());
  const at::Tensor sc = OnDevice(scales, qtensor.device(), at::kDouble);
  const at::Tensor zp = OnDevice(zero_points, qtensor.device(), at::kLong);
  auto iter = at::TensorIteratorConfig()
                  .add_output(qtensor)
                  .add_const_input(rtensor)
                  .add_owned_const_input(ChannelView(sc, rtensor.dim(), axis))
                  .add_owned_const_input(ChannelView(zp, rtensor.dim(), axis))
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .build();
  AT_DISPATCH_QINT_TYPES(qtensor.scalar_type(), "xxnpu_quantize_per_channel", [&] {
    using T = underlying_t;
    CheckZeroPointsOnDevice<T>(kFn, zp);
    LaunchTensorIterator("xxnpu::quantize_per_channel", iter, [](char** d, const int64_t* s, int64_t n0, int64_t n1) {
      ForEachElement<4>(d, s, n0, n1, [](char** p) {
        const float inv_scale = 1.0f / static_cast<float>(At<const double>(p[2]));
        At<T>(p[0]) = QuantizeValue<T>(At<const float>(p[1]), inv_scale, At<const int64_t>(p[3]));
      });
    });
  });
}

void DequantizePerChannel(const at::Tensor& qtensor, at::Tensor& rtensor, const at::Tensor& scales,
                          const at::Tensor& zero_points, int64_t axis) {
  static constexpr auto kFn = "dequantize_tensor_per_channel_affine";
  CheckNotSubByte(kFn, qtensor.scalar_type());
  const c10::DeviceGuard guard(qtensor.device());
  const at::Tensor sc = OnDevice(scales, qtensor.device(), at::kDouble);
  const at::Tensor zp = OnDevice(zero_points, qtensor.device(), at::kLong);
  auto iter = at::TensorIteratorConfig()
                  .add_output(rtensor)
                  .add_const_input(qtensor)
                  .add_owned_const_input(ChannelView(sc, qtensor.dim(), axis))
                  .add_owned_const_input(ChannelView(zp, qtensor.dim(), axis))
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .build();
  AT_DISPATCH_QINT_TYPES(qtensor.scalar_type(), "xxnpu_dequantize_per_channel", [&] {
    using T = underlying_t;
    CheckZeroPointsOnDevice<T>(kFn, zp);
    LaunchTensorIterator("xxnpu::dequantize_per_channel", iter, [](char** d, const int64_t* s, int64_t n0, int64_t n1) {
      ForEachElement<4>(d, s, n0, n1, [](char** p) {
        At<float>(p[0]) = static_cast<float>(static_cast<int64_t>(At<const T>(p[1])) - At<const int64_t>(p[3])) *
                          static_cast<float>(At<const double>(p[2]));
      });
    });
  });
}

// Float zero points (PerChannelAffineFloatQParams): q = lrintf(x / scale + zero_point),
// with the CPU's guard against a zero scale.
void QuantizePerChannelFloatQParams(const at::Tensor& rtensor, at::Tensor& qtensor, const at::Tensor& scales,
                                    const at::Tensor& zero_points, int64_t axis) {
  CheckNotSubByte("quantize_tensor_per_channel_float_qparams", qtensor.scalar_type());
  const c10::DeviceGuard guard(qtensor.device());
  const at::Tensor sc = OnDevice(scales, qtensor.device(), at::kFloat);
  const at::Tensor zp = OnDevice(zero_points, qtensor.device(), at::kFloat);
  auto iter = at::TensorIteratorConfig()
                  .add_output(qtensor)
                  .add_const_input(rtensor)
                  .add_owned_const_input(ChannelView(sc, rtensor.dim(), axis))
                  .add_owned_const_input(ChannelView(zp, rtensor.dim(), axis))
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .build();
  AT_DISPATCH_QINT_TYPES(qtensor.scalar_type(), "xxnpu_quantize_per_channel_float_qparams", [&] {
    using T = underlying_t;
    LaunchTensorIterator("xxnpu::quantize_per_channel_float_qparams", iter,
                         [](char** d, const int64_t* s, int64_t n0, int64_t n1) {
      ForEachElement<4>(d, s, n0, n1, [](char** p) {
        constexpr int64_t kMin = std::numeric_limits<T>::min();
        constexpr int64_t kMax = std::numeric_limits<T>::max();
        const float scale = At<const float>(p[2]);
        const float inv_scale = scale == 0 ? 1.0f : 1.0f / scale;
        const int64_t q = std::lrintf(At<const float>(p[1]) * inv_scale + At<const float>(p[3]));
        At<T>(p[0]) = static_cast<T>(q < kMin ? kMin : (q > kMax ? kMax : q));
      });
    });
  });
}

void DequantizePerChannelFloatQParams(const at::Tensor& qtensor, at::Tensor& rtensor, const at::Tensor& scales,
                                      const at::Tensor& zero_points, int64_t axis) {
  CheckNotSubByte("dequantize_tensor_per_channel_float_qparams", qtensor.scalar_type());
  const c10::DeviceGuard guard(qtensor.device());
  const at::Tensor sc = OnDevice(scales, qtensor.device(), at::kFloat);
  const at::Tensor zp = OnDevice(zero_points, qtensor.device(), at::kFloat);
  auto iter = at::TensorIteratorConfig()
                  .add_output(rtensor)
                  .add_const_input(qtensor)
                  .add_owned_const_input(ChannelView(sc, qtensor.dim(), axis))
                  .add_owned_const_input(ChannelView(zp, qtensor.dim(), axis))
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .build();
  AT_DISPATCH_QINT_TYPES(qtensor.scalar_type(), "xxnpu_dequantize_per_channel_float_qparams", [&] {
    using T = underlying_t;
    LaunchTensorIterator("xxnpu::dequantize_per_channel_float_qparams", iter,
                         [](char** d, const int64_t* s, int64_t n0, int64_t n1) {
      ForEachElement<4>(d, s, n0, n1, [](char** p) {
        At<float>(p[0]) = (static_cast<float>(At<const T>(p[1])) - At<const float>(p[3])) * At<const float>(p[2]);
      });
    });
  });
}

// Sub-byte dtypes (quint4x2, quint2x4): CUDA has no kernel either; a clear error instead
// of DispatchStub's internal assert.
void RejectSubByteQuantize(const at::Tensor& rtensor, at::Tensor& qtensor, float scale, float zero_point) {
  CheckNotSubByte("quantize_per_tensor", qtensor.scalar_type());
}
void RejectSubByteDequantize(const at::Tensor& qtensor, at::Tensor& rtensor, float scale, float zero_point) {
  CheckNotSubByte("dequantize", qtensor.scalar_type());
}

// ---------------------------------------------------------------------------------------
// fake_quantize_* kernels: the PrivateUse1 entries of ATen's fake-quant stubs. Same
// expressions, in the same types, as the CPU kernels, so results match bit for bit.

// Per-tensor fake quantization of one element: output and mask.
template <typename scalar_t>
void FakeQuantElement(char** p, float sc, float inv_scale, int64_t z_point, int64_t quant_min, int64_t quant_max) {
  const scalar_t x = At<const scalar_t>(p[2]);
  const auto qval_f = z_point + std::nearbyint(x * inv_scale);
  const auto qval = static_cast<int64_t>(std::fmin(std::fmax(qval_f, quant_min), quant_max));
  At<scalar_t>(p[0]) = (qval - z_point) * sc;
  At<bool>(p[1]) = (quant_min <= qval_f) && (qval_f <= quant_max);
}

at::TensorIterator FakeQuantIterator(at::Tensor& output, at::Tensor& mask, const at::Tensor& input) {
  return at::TensorIteratorConfig()
      .add_output(output)
      .add_output(mask)
      .add_const_input(input)
      .check_all_same_dtype(false)
      .build();
}

void FakeQuantTensorCachemask(at::Tensor& output, at::Tensor& mask, const at::Tensor& input, float sc,
                              int64_t z_point, int64_t quant_min, int64_t quant_max) {
  const c10::DeviceGuard guard(input.device());
  auto iter = FakeQuantIterator(output, mask, input);
  const float inv_scale = 1.0f / sc;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "xxnpu_fake_quantize_tensor", [&] {
    LaunchTensorIterator("xxnpu::fake_quantize_per_tensor", iter,
                         [=](char** d, const int64_t* s, int64_t n0, int64_t n1) {
      ForEachElement<3>(d, s, n0, n1, [&](char** p) {
        FakeQuantElement<scalar_t>(p, sc, inv_scale, z_point, quant_min, quant_max);
      });
    });
  });
}

// The qparams and the enable flag are device tensors: read in the kernel (no host sync),
// as CUDA does; the CPU reads them with item(), same values.
void FakeQuantTensorCachemaskTensorQParams(at::Tensor& output, at::Tensor& mask, const at::Tensor& input,
                                           const at::Tensor& scale, const at::Tensor& zero_point,
                                           const at::Tensor& fake_quant_enabled, int64_t quant_min,
                                           int64_t quant_max) {
  const c10::DeviceGuard guard(input.device());
  TORCH_CHECK(scale.numel() >= 1 && zero_point.numel() >= 1 && fake_quant_enabled.numel() >= 1,
              "fake_quantize_per_tensor_affine expects one-element scale, zero_point and fake_quant_enabled, got ",
              scale.numel(), ", ", zero_point.numel(), " and ", fake_quant_enabled.numel(), " elements");
  const at::Tensor sc = OnDevice(scale.reshape(-1), input.device(), at::kFloat);
  const at::Tensor zp = OnDevice(zero_point.reshape(-1), input.device(), at::kLong);
  const at::Tensor on = OnDevice(fake_quant_enabled.reshape(-1), input.device(), at::kLong);
  const float* sc_ptr = sc.const_data_ptr<float>();
  const int64_t* zp_ptr = zp.const_data_ptr<int64_t>();
  const int64_t* on_ptr = on.const_data_ptr<int64_t>();
  auto iter = FakeQuantIterator(output, mask, input);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "xxnpu_fake_quantize_tensor_qparams",
                                  [&] {
    LaunchTensorIterator("xxnpu::fake_quantize_per_tensor", iter,
                         [=](char** d, const int64_t* s, int64_t n0, int64_t n1) {
      const float scale_v = static_cast<float>(*DeviceView(sc_ptr));
      // The CPU takes the zero point through Scalar::toInt (an int32).
      const int64_t z_point = static_cast<int>(*DeviceView(zp_ptr));
      const bool enabled = static_cast<int>(*DeviceView(on_ptr)) != 0;
      const float inv_scale = 1.0f / scale_v;
      ForEachElement<3>(d, s, n0, n1, [&](char** p) {
        if (enabled) {
          FakeQuantElement<scalar_t>(p, scale_v, inv_scale, z_point, quant_min, quant_max);
        } else {
          At<scalar_t>(p[0]) = At<const scalar_t>(p[2]);
          At<bool>(p[1]) = true;
        }
      });
    });
  });
}

// Gradients of the learnable per-tensor fake quantization: operands
// (dX, dScale, dZeroPoint, X, dY), all float.
void FakeQuantGradLearnableTensor(at::TensorIterator& iter, float scale, float inv_scale, int64_t zero_point,
                                  int64_t quant_min, int64_t quant_max, float grad_factor) {
  const c10::DeviceGuard guard(iter.device(0));
  const float dscale_small = static_cast<float>(quant_min - zero_point);
  const float dscale_big = static_cast<float>(quant_max - zero_point);
  LaunchTensorIterator("xxnpu::fake_quantize_learnable_per_tensor_grad", iter,
                       [=](char** d, const int64_t* s, int64_t n0, int64_t n1) {
    ForEachElement<5>(d, s, n0, n1, [&](char** p) {
      const float x = At<const float>(p[3]);
      const float dy = At<const float>(p[4]);
      const int64_t xqi = std::nearbyint(zero_point + x * inv_scale);
      At<float>(p[0]) = dy * (xqi >= quant_min && xqi <= quant_max);
      const float xfqi = static_cast<float>((std::max(std::min(xqi, quant_max), quant_min) - zero_point) * scale);
      if (xqi < quant_min || xqi > quant_max) {
        At<float>(p[2]) = dy * (-1) * scale * grad_factor;
        At<float>(p[1]) = ((xqi < quant_min) ? (dy * dscale_small) : (dy * dscale_big)) * grad_factor;
      } else {
        At<float>(p[2]) = 0;
        At<float>(p[1]) = dy * (xfqi - x) * inv_scale * grad_factor;
      }
    });
  });
}

// Per-channel fake quantization: `iter` is (out, self, scale, zero_point), `iter_mask`
// (mask, self, scale, zero_point); scale is float, the zero point int32 or floating.
void FakeQuantPerChannelCachemask(at::TensorIterator& iter, at::TensorIterator& iter_mask, int64_t quant_min,
                                  int64_t quant_max) {
  const c10::DeviceGuard guard(iter.device(0));
  const at::ScalarType zp_type = iter.input_dtype(2);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, iter.dtype(0), "xxnpu_fake_quantize_channel", [&] {
    using self_t = scalar_t;
    if (at::isFloatingType(zp_type)) {
      AT_DISPATCH_FLOATING_TYPES_AND_HALF(zp_type, "xxnpu_fake_quantize_channel_zero_point", [&] {
        using zp_t = scalar_t;
        LaunchTensorIterator("xxnpu::fake_quantize_per_channel_mask", iter_mask,
                             [=](char** d, const int64_t* s, int64_t n0, int64_t n1) {
          ForEachElement<4>(d, s, n0, n1, [&](char** p) {
            const self_t x = At<const self_t>(p[1]);
            const float inv_scale = 1.0f / At<const float>(p[2]);
            const zp_t zero_point = At<const zp_t>(p[3]);
            const auto qval = std::lrintf(zero_point + (x * inv_scale));
            At<bool>(p[0]) = (quant_min <= qval) && (qval <= quant_max);
          });
        });
        LaunchTensorIterator("xxnpu::fake_quantize_per_channel", iter,
                             [=](char** d, const int64_t* s, int64_t n0, int64_t n1) {
          ForEachElement<4>(d, s, n0, n1, [&](char** p) {
            const self_t x = At<const self_t>(p[1]);
            const float scale = At<const float>(p[2]);
            const float inv_scale = 1.0f / scale;
            const zp_t zero_point = At<const zp_t>(p[3]);
            At<self_t>(p[0]) =
                (std::fmin(std::fmax(std::lrintf(zero_point + x * inv_scale), quant_min), quant_max) - zero_point) *
                scale;
          });
        });
      });
    } else {
      TORCH_CHECK(zp_type == at::kInt, "fake_quantize_per_channel: zero_point must be int32 or floating, got ",
                  zp_type);
      LaunchTensorIterator("xxnpu::fake_quantize_per_channel_mask", iter_mask,
                           [=](char** d, const int64_t* s, int64_t n0, int64_t n1) {
        ForEachElement<4>(d, s, n0, n1, [&](char** p) {
          const self_t x = At<const self_t>(p[1]);
          const float inv_scale = 1.0f / At<const float>(p[2]);
          const int32_t zero_point = At<const int32_t>(p[3]);
          const auto qval = static_cast<int64_t>(zero_point + std::nearbyint(x * inv_scale));
          At<bool>(p[0]) = (quant_min <= qval) && (qval <= quant_max);
        });
      });
      LaunchTensorIterator("xxnpu::fake_quantize_per_channel", iter,
                           [=](char** d, const int64_t* s, int64_t n0, int64_t n1) {
        ForEachElement<4>(d, s, n0, n1, [&](char** p) {
          const self_t x = At<const self_t>(p[1]);
          const float scale = At<const float>(p[2]);
          const float inv_scale = 1.0f / scale;
          const int32_t zero_point = At<const int32_t>(p[3]);
          At<self_t>(p[0]) =
              (std::fmin(std::fmax(static_cast<int64_t>(zero_point + std::nearbyint(x * inv_scale)), quant_min),
                         quant_max) -
               zero_point) *
              scale;
        });
      });
    }
  });
}

// Gradients of the learnable per-channel fake quantization: operands
// (dX, dScale, dZeroPoint, X, dY, scale, zero_point), all float.
void FakeQuantGradLearnableChannel(at::TensorIterator& iter, int64_t quant_min, int64_t quant_max,
                                   float grad_factor) {
  const c10::DeviceGuard guard(iter.device(0));
  LaunchTensorIterator("xxnpu::fake_quantize_learnable_per_channel_grad", iter,
                       [=](char** d, const int64_t* s, int64_t n0, int64_t n1) {
    ForEachElement<7>(d, s, n0, n1, [&](char** p) {
      const float x = At<const float>(p[3]);
      const float dy = At<const float>(p[4]);
      const float scale = At<const float>(p[5]);
      const float zero_point = At<const float>(p[6]);
      const float inv_scale = 1.0f / scale;
      const float dscale_small = quant_min - zero_point;
      const float dscale_big = quant_max - zero_point;
      const int64_t xqi = std::nearbyint(zero_point + x * inv_scale);
      At<float>(p[0]) = dy * (xqi >= quant_min && xqi <= quant_max);
      const float xfqi = ((std::max(std::min(xqi, quant_max), quant_min) - zero_point) * scale);
      if (xqi < quant_min || xqi > quant_max) {
        At<float>(p[2]) = dy * (-1) * scale * grad_factor;
        At<float>(p[1]) = ((xqi < quant_min) ? (dy * dscale_small) : (dy * dscale_big)) * grad_factor;
      } else {
        At<float>(p[2]) = 0;
        At<float>(p[1]) = dy * (xfqi - x) * inv_scale * grad_factor;
      }
    });
  });
}

}  // namespace
}  // namespace xxnpu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_tensor_affine_stub, &xxnpu::QuantizePerTensor)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_tensor_affine_stub, &xxnpu::DequantizePerTensor)
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_channel_affine_stub, &xxnpu::QuantizePerChannel)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_channel_affine_stub, &xxnpu::DequantizePerChannel)
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_channel_float_qparams_stub, &xxnpu::QuantizePerChannelFloatQParams)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_channel_float_qparams_stub,
                              &xxnpu::DequantizePerChannelFloatQParams)
REGISTER_PRIVATEUSE1_DISPATCH(quantize_tensor_per_tensor_affine_sub_byte_stub, &xxnpu::RejectSubByteQuantize)
REGISTER_PRIVATEUSE1_DISPATCH(dequantize_tensor_per_tensor_affine_sub_byte_stub, &xxnpu::RejectSubByteDequantize)
REGISTER_PRIVATEUSE1_DISPATCH(fake_quant_tensor_cachemask_stub, &xxnpu::FakeQuantTensorCachemask)
REGISTER_PRIVATEUSE1_DISPATCH(fake_quant_tensor_cachemask_tensor_qparams_stub,
                              &xxnpu::FakeQuantTensorCachemaskTensorQParams)
REGISTER_PRIVATEUSE1_DISPATCH(fake_quant_grad_learnable_tensor_stub, &xxnpu::FakeQuantGradLearnableTensor)
REGISTER_PRIVATEUSE1_DISPATCH(fake_quant_per_channel_cachemask_stub, &xxnpu::FakeQuantPerChannelCachemask)
REGISTER_PRIVATEUSE1_DISPATCH(fake_quant_grad_learnable_channel_stub, &xxnpu::FakeQuantGradLearnableChannel)
}  // namespace at::native

namespace xxnpu {
namespace {

// ---------------------------------------------------------------------------------------
// Ops. ATen's generic functions allocate quantized storage from the allocator's current
// device (at::new_qtensor), so each one that allocates runs under a guard for the device
// it allocates on, as CUDA's generated registrations do.

// Runs an ATen function of (self, ...) with self's device current.
template <auto Fn>
struct OnSelfDevice;
template <typename R, typename... A, R (*Fn)(const at::Tensor&, A...)>
struct OnSelfDevice<Fn> {
  static R call(const at::Tensor& self, A... args) {
    const c10::DeviceGuard guard(self.device());
    return Fn(self, std::forward<A>(args)...);
  }
};

// `device` if it names an xxnpu device with an index: the device to make current.
std::optional<c10::Device> XxnpuDevice(std::optional<c10::Device> device) {
  if (device.has_value() && device->is_privateuseone() && device->has_index()) return device;
  return std::nullopt;
}

at::Tensor EmptyAffineQuantized(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                std::optional<at::Layout> layout, std::optional<c10::Device> device,
                                std::optional<bool> pin_memory, double scale, int64_t zero_point,
                                std::optional<at::MemoryFormat> memory_format) {
  const c10::OptionalDeviceGuard guard(XxnpuDevice(device));
  return at::native::empty_affine_quantized(size, dtype, layout, device, pin_memory, scale, zero_point,
                                            memory_format);
}

// The quantizer keeps its scales and zero points on the tensor's own device, so that a
// kernel never reads parameters from another memory space: `.cpu()` of an xxnpu tensor
// (or `.to("xxnpu")` of a CPU one) arrives here with the source's parameters.
at::Tensor EmptyPerChannelAffineQuantized(c10::IntArrayRef size, const at::Tensor& scales,
                                          const at::Tensor& zero_points, int64_t axis,
                                          std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                                          std::optional<c10::Device> device, std::optional<bool> pin_memory,
                                          std::optional<at::MemoryFormat> memory_format) {
  const c10::OptionalDeviceGuard guard(XxnpuDevice(device));
  const c10::Device target = device.value_or(scales.device());
  return at::native::empty_per_channel_affine_quantized(size, scales.to(target), zero_points.to(target), axis, dtype,
                                                        layout, device, pin_memory, memory_format);
}

at::Tensor EmptyUnknownQuantized(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                 std::optional<at::Layout> layout, std::optional<c10::Device> device,
                                 std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  const c10::OptionalDeviceGuard guard(XxnpuDevice(device));
  return at::native::empty_unknown_quantized(size, dtype, layout, device, pin_memory, memory_format);
}

at::Tensor EmptyStridedUnknownQuantized(c10::IntArrayRef size, c10::IntArrayRef stride,
                                        std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                                        std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  const c10::OptionalDeviceGuard guard(XxnpuDevice(device));
  return at::native::empty_strided_unknown_quantized(size, stride, dtype, layout, device, pin_memory);
}

at::Tensor EmptyLikeQuantized(const at::Tensor& self, std::optional<at::ScalarType> dtype,
                              std::optional<at::Layout> layout, std::optional<c10::Device> device,
                              std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  const c10::DeviceGuard guard(XxnpuDevice(device).value_or(self.device()));
  return at::native::empty_like_quantized(self, dtype, layout, device, pin_memory, memory_format);
}

// CUDA's int_repr: the stored integers, in the underlying dtype, as a device kernel.
at::Tensor IntRepr(const at::Tensor& self) {
  CheckNotSubByte("int_repr", self.scalar_type());
  const c10::DeviceGuard guard(self.device());
  at::Tensor dst = at::empty(self.sizes(), self.options().dtype(c10::toUnderlying(self.scalar_type())),
                             self.suggest_memory_format());
  CopyElements("xxnpu::int_repr", dst, self);
  return dst;
}

at::Tensor MakePerTensorQuantized(const at::Tensor& self, double scale, int64_t zero_point) {
  const c10::DeviceGuard guard(self.device());
  at::Tensor dst = at::_empty_affine_quantized(self.sizes(), self.options().dtype(c10::toQIntType(self.scalar_type())),
                                               scale, zero_point, self.suggest_memory_format());
  CopyElements("xxnpu::make_per_tensor_quantized", dst, self);
  return dst;
}

at::Tensor MakePerChannelQuantized(const at::Tensor& self, const at::Tensor& scales, const at::Tensor& zero_points,
                                   int64_t axis) {
  const c10::DeviceGuard guard(self.device());
  at::Tensor dst = at::_empty_per_channel_affine_quantized(
      self.sizes(), scales, zero_points, axis, self.options().dtype(c10::toQIntType(self.scalar_type())));
  CopyElements("xxnpu::make_per_channel_quantized", dst, self);
  return dst;
}

// A dense tensor of the underlying integer dtype over q's storage, sizes and strides, so
// the dense copy path (any strides, host <-> device) moves quantized bytes.
at::Tensor DenseAlias(const at::Tensor& q) {
  const at::ScalarType dtype = c10::toUnderlying(q.scalar_type());
  const c10::DispatchKey key = c10::computeDispatchKey(dtype, at::kStrided, q.device());
  at::Tensor t = at::detail::make_tensor<at::TensorImpl>(c10::Storage(q.storage()), c10::DispatchKeySet(key),
                                                         c10::scalarTypeToTypeMeta(dtype));
  t.unsafeGetTensorImpl()->set_sizes_and_strides(q.sizes(), q.strides(), q.storage_offset());
  return t;
}

// The quantizer of `q` with its per-channel parameters moved to `device`.
at::QuantizerPtr QuantizerOn(const at::Tensor& q, c10::Device device) {
  at::QuantizerPtr quantizer = q.quantizer();
  if (q.qscheme() == at::kPerTensorAffine) return quantizer;
  const auto* per_channel = static_cast<const at::PerChannelAffineQuantizer*>(quantizer.get());
  if (per_channel->scales().device() == device && per_channel->zero_points().device() == device) return quantizer;
  return at::make_per_channel_affine_quantizer(per_channel->scales().to(device), per_channel->zero_points().to(device),
                                               per_channel->axis(), q.scalar_type());
}

// Tensor.copy_ with a quantized tensor and an xxnpu side. ATen's copy_ hands any copy that
// involves an xxnpu tensor to _copy_from before its own quantized handling, so this does
// what that handling does (copy_impl in ATen/native/Copy.cpp), with the same messages:
// float -> quantized quantizes with the destination's parameters; quantized -> quantized
// takes the source's quantizer and copies the stored integers.
at::Tensor QuantizedCopyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const at::Tensor& src = self;
  if (!dst.is_quantized()) {
    TORCH_CHECK(false, "Copying from quantized Tensor to non-quantized Tensor is not allowed, please use dequantize ",
                "to get a float Tensor from a quantized Tensor");
  }
  if (!src.is_quantized()) {
    TORCH_CHECK(src.scalar_type() == at::kFloat, "Quantized copy only works with kFloat as source Tensor");
    TORCH_CHECK(dst.is_contiguous() && src.is_contiguous(),
                "Quantized copy only works with contiguous and NHWC Tensors");
    TORCH_CHECK(dst.sizes().equals(src.sizes()), "Quantized copy only works with Tensors with the same shape");
    const at::Tensor src_here = src.to(dst.device());
    at::Tensor out = dst;
    if (dst.qscheme() == at::kPerTensorAffine) {
      at::native::quantize_tensor_per_tensor_affine(src_here, out, dst.q_scale(), dst.q_zero_point());
    } else {
      at::native::quantize_tensor_per_channel_affine(src_here, out, dst.q_per_channel_scales().to(dst.device()),
                                                     dst.q_per_channel_zero_points().to(dst.device()),
                                                     dst.q_per_channel_axis());
    }
    return dst;
  }
  TORCH_CHECK(dst.qscheme() == src.qscheme(), "Quantized Copy only works with same qscheme");
  TORCH_CHECK(dst.scalar_type() == src.scalar_type(), "Quantized Copy expects the same dtype, got ",
              src.scalar_type(), " to ", dst.scalar_type());
  CheckNotSubByte("quantized copy", src.scalar_type());
  at::set_quantizer_(dst, QuantizerOn(src, dst.device()));
  if (dst.numel() == 0) return dst;
  at::Tensor out = DenseAlias(dst);
  out.copy_(DenseAlias(src), non_blocking);
  return dst;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("quantize_per_tensor", &OnSelfDevice<&at::native::quantize_per_tensor>::call);
  m.impl("quantize_per_tensor.tensor_qparams", &OnSelfDevice<&at::native::quantize_per_tensor_tensor_qparams>::call);
  m.impl("quantize_per_tensor_dynamic", &OnSelfDevice<&at::native::quantize_per_tensor_dynamic>::call);
  m.impl("quantize_per_channel", &OnSelfDevice<&at::native::quantize_per_channel>::call);
  m.impl("dequantize.self", &at::native::dequantize_cpu_or_cuda);
  m.impl("_make_per_tensor_quantized_tensor", &MakePerTensorQuantized);
  m.impl("_make_per_channel_quantized_tensor", &MakePerChannelQuantized);
  // A non-quantized dtype reaches the dense key: the CPU's error, not a fallback.
  m.impl("_empty_affine_quantized", &at::native::empty_affine_quantized_other_backends_stub);
  m.impl("_empty_per_channel_affine_quantized", &at::native::empty_per_channel_affine_quantized_other_backends_stub);
  m.impl("fake_quantize_per_tensor_affine_cachemask",
         &OnSelfDevice<&at::native::fake_quantize_per_tensor_affine_cachemask>::call);
  m.impl("_fake_quantize_per_tensor_affine_cachemask_tensor_qparams",
         &OnSelfDevice<&at::native::_fake_quantize_per_tensor_affine_cachemask_tensor_qparams>::call);
  m.impl("_fake_quantize_learnable_per_tensor_affine",
         &OnSelfDevice<&at::native::_fake_quantize_learnable_per_tensor_affine>::call);
  m.impl("_fake_quantize_learnable_per_tensor_affine_backward",
         &OnSelfDevice<&at::native::_fake_quantize_learnable_per_tensor_affine_backward>::call);
  m.impl("fake_quantize_per_channel_affine_cachemask",
         &OnSelfDevice<&at::native::fake_quantize_per_channel_affine_cachemask>::call);
  m.impl("_fake_quantize_learnable_per_channel_affine",
         &OnSelfDevice<&at::native::_fake_quantize_learnable_per_channel_affine>::call);
  m.impl("_fake_quantize_learnable_per_channel_affine_backward",
         &OnSelfDevice<&at::native::_fake_quantize_learnable_per_channel_affine_backward>::call);
}

// What native_functions.yaml registers for QuantizedCUDA, minus the cuDNN/CUDA-kernel
// ops listed in docs/pytorch-integration.md ("Quantized tensors").
TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("empty.memory_format", &EmptyUnknownQuantized);
  m.impl("empty_strided", &EmptyStridedUnknownQuantized);
  m.impl("_empty_affine_quantized", &EmptyAffineQuantized);
  m.impl("_empty_per_channel_affine_quantized", &EmptyPerChannelAffineQuantized);
  m.impl("empty_quantized", &at::native::empty_quantized);
  m.impl("empty_like", &EmptyLikeQuantized);
  m.impl("as_strided", &at::native::as_strided_qtensorimpl);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("squeeze", static_cast<at::Tensor (*)(const at::Tensor&)>(&at::native::squeeze_quantized));
  m.impl("squeeze.dim", static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(&at::native::squeeze_quantized));
  m.impl("squeeze.dims",
         static_cast<at::Tensor (*)(const at::Tensor&, at::IntArrayRef)>(&at::native::squeeze_quantized));
  m.impl("unsqueeze", &at::native::unsqueeze_quantized);
  m.impl("unfold", &at::native::unfold);
  m.impl("set_.source_Storage_storage_offset", &at::native::set_storage_quantized_);
  m.impl("fill_.Scalar", static_cast<at::Tensor& (*)(at::Tensor&, const at::Scalar&)>(&at::native::fill_quantized_));
  m.impl("fill_.Tensor", static_cast<at::Tensor& (*)(at::Tensor&, const at::Tensor&)>(&at::native::fill_quantized_));
  m.impl("clone", &OnSelfDevice<&at::native::quantized_clone>::call);
  m.impl("dequantize.self", &OnSelfDevice<&at::native::dequantize_quantized>::call);
  m.impl("int_repr", &IntRepr);
  m.impl("q_scale", &at::native::q_scale_quant);
  m.impl("q_zero_point", &at::native::q_zero_point_quant);
  m.impl("q_per_channel_scales", &at::native::q_per_channel_scales);
  m.impl("q_per_channel_zero_points", &at::native::q_per_channel_zero_points);
  m.impl("q_per_channel_axis", &at::native::q_per_channel_axis);
  m.impl("qscheme", &at::native::qscheme_quant);
  m.impl("max.dim", &OnSelfDevice<&at::native::qmax>::call);
  m.impl("min.dim", &OnSelfDevice<&at::native::qmin>::call);
  m.impl("_copy_from", &QuantizedCopyFrom);
}

}  // namespace
}  // namespace xxnpu
