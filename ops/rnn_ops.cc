// Fused RNN cells on xxnpu: _thnn_fused_lstm_cell, _thnn_fused_gru_cell and their backward
// ops, the pointwise heart of nn.LSTM / nn.GRU / LSTMCell / GRUCell.
//
// ATen's RNN.cpp sends CUDA, XPU and PrivateUse1 inputs through these ops (the gate matmuls
// stay ordinary mm calls), and they have no CPU kernel, so without them nn.LSTM on xxnpu
// cannot run at all. Each op is one device kernel on the current stream. The semantics
// (gate order, workspace layout, outputs) are CUDA's, because autograd's formulas in
// derivatives.yaml are written against them:
//   LSTM: gates [i, f, g, o]; workspace [B, 4H] = the activated gates.
//   GRU:  gates [r, z, n]; workspace [B, 5H] = [r, z, n, hx, hidden n-gate incl. bias].
// half/bfloat16 compute in float (at::opmath_type), as CUDA's accscalar_t does; float
// sigmoid/tanh are the vectorizable forms of ops/fast_math.h.
// The backward kernels give each block a range of hidden units over the whole batch, so
// the bias gradients (column sums) come out of the same kernel, in a fixed order.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <tuple>

#include "absl/status/status.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/xxnpu_tensor.h"
#include "ops/fast_math.h"

namespace xxnpu {
namespace {

// Elements a block touches: big enough to hide a block's overhead, small enough to
// spread a step of a realistic RNN over the compute threads.
constexpr int64_t kElementsPerBlock = 16384;
// Hidden units whose bias sums a backward block keeps on its stack at once.
constexpr int64_t kColumnTile = 64;

constexpr const char* kLstmOp = "_thnn_fused_lstm_cell";
constexpr const char* kLstmBackwardOp = "_thnn_fused_lstm_cell_backward_impl";
constexpr const char* kGruOp = "_thnn_fused_gru_cell";
constexpr const char* kGruBackwardOp = "_thnn_fused_gru_cell_backward";

// Queues `name` over `items` work items of `item_elems` elements each; body(begin, end)
// runs items [begin, end) on a compute thread.
template <typename Body>
void LaunchItems(const char* name, c10::Device device, int64_t items, int64_t item_elems, uint64_t bytes,
                 uint64_t flops, Body body) {
  if (items <= 0) return;
  const int64_t per_block = std::max<int64_t>(1, kElementsPerBlock / std::max<int64_t>(1, item_elems));
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid = Dim3{static_cast<uint32_t>((items + per_block - 1) / per_block), 1, 1};
  cfg.bytes = bytes;
  cfg.flops = flops;
  CheckOk(xxnpuLaunchKernel(cfg, [body, per_block, items](BlockRange r) -> absl::Status {
    body(r.begin * per_block, std::min(items, r.end * per_block));
    return absl::OkStatus();
  }, CurrentXxnpuStreamHandle(device.index())), name);
}

template <typename T>
T* Dev(const at::Tensor& t) {
  return static_cast<T*>(DeviceView(t.data_ptr()));
}
template <typename T>
const T* ConstDev(const at::Tensor& t) {
  return t.defined() ? static_cast<const T*>(DeviceView(t.const_data_ptr())) : nullptr;
}

// float (also half/bfloat16's opmath) takes the vectorizable forms; double stays exact.
inline float Sigmoid(float x) { return SigmoidF(x); }
inline double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline float Tanh(float x) { return TanhF(x); }
inline double Tanh(double x) { return std::tanh(x); }

// ------------------------------------------------------------------ argument checks
// CUDA's checks (same device, dtype and the shapes below), with messages that say
// which argument was expected how and what it was.

void CheckFloating(const char* op, const char* arg, const at::Tensor& t) {
  const auto s = t.scalar_type();
  TORCH_CHECK(s == at::kFloat || s == at::kDouble || s == at::kHalf || s == at::kBFloat16, op,
              ": expected a float32, float64, float16 or bfloat16 ", arg, ", got ", s);
}

void CheckArg(const char* op, const char* arg, const at::Tensor& t, const at::Tensor& ref, c10::IntArrayRef shape,
              const char* layout) {
  if (!t.defined()) return;
  CheckSameDevice(op, arg, t, ref.device());
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), op, ": expected ", arg, " to have the dtype of the gates (",
              ref.scalar_type(), "), got ", t.scalar_type());
  TORCH_CHECK(t.sizes().equals(shape), op, ": expected ", arg, " of shape ", shape, " ", layout, ", got ", t.sizes());
}

// [batch, gates * hidden] gates; returns hidden.
int64_t CheckGates(const char* op, const at::Tensor& input_gates, const at::Tensor& hidden_gates, int64_t gates) {
  TORCH_CHECK(input_gates.device().is_privateuseone(), op, ": expected input_gates on an xxnpu device, got ",
              input_gates.device());
  CheckFloating(op, "input_gates", input_gates);
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.size(1) % gates == 0, op, ": expected input_gates of shape [batch, ",
              gates, " * hidden_size], got ", input_gates.sizes());
  CheckArg(op, "hidden_gates", hidden_gates, input_gates, input_gates.sizes(), "(the shape of input_gates)");
  return input_gates.size(1) / gates;
}

at::Tensor Contig(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? t->contiguous() : at::Tensor();
}

// ================================================================== LSTM

std::tuple<at::Tensor, at::Tensor, at::Tensor> FusedLstmCell(const at::Tensor& input_gates_in,
                                                             const at::Tensor& hidden_gates_in,
                                                             const at::Tensor& cx_in,
                                                             const std::optional<at::Tensor>& input_bias_opt,
                                                             const std::optional<at::Tensor>& hidden_bias_opt) {
  const int64_t hidden = CheckGates(kLstmOp, input_gates_in, hidden_gates_in, 4);
  const int64_t batch = input_gates_in.size(0);
  const at::Tensor ib = Contig(input_bias_opt), hb = Contig(hidden_bias_opt);
  TORCH_CHECK(ib.defined() == hb.defined(), kLstmOp, ": expected both biases or neither, got ",
              ib.defined() ? "input_bias only" : "hidden_bias only");
  CheckArg(kLstmOp, "cx", cx_in, input_gates_in, {batch, hidden}, "[batch, hidden_size]");
  CheckArg(kLstmOp, "input_bias", ib, input_gates_in, {4 * hidden}, "[4 * hidden_size]");
  CheckArg(kLstmOp, "hidden_bias", hb, input_gates_in, {4 * hidden}, "[4 * hidden_size]");

  const c10::DeviceGuard guard(input_gates_in.device());
  const at::Tensor ig = input_gates_in.contiguous(), hg = hidden_gates_in.contiguous(), cx = cx_in.contiguous();
  const at::ScalarType dtype = ig.scalar_type();
  at::Tensor hy = NewXxnpuTensor({batch, hidden}, std::nullopt, dtype);
  at::Tensor cy = NewXxnpuTensor({batch, hidden}, std::nullopt, dtype);
  at::Tensor workspace = NewXxnpuTensor({batch, 4 * hidden}, std::nullopt, dtype);
  const int64_t n = batch * hidden;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "xxnpu_lstm_cell", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* igp = ConstDev<scalar_t>(ig);
    const scalar_t* hgp = ConstDev<scalar_t>(hg);
    const scalar_t* cxp = ConstDev<scalar_t>(cx);
    const scalar_t* ibp = ConstDev<scalar_t>(ib);
    const scalar_t* hbp = ConstDev<scalar_t>(hb);
    scalar_t* hyp = Dev<scalar_t>(hy);
    scalar_t* cyp = Dev<scalar_t>(cy);
    scalar_t* wsp = Dev<scalar_t>(workspace);
    LaunchItems("xxnpu::lstm_cell", ig.device(), n, 1, static_cast<uint64_t>((8 + 2 + 4 + 2) * n * sizeof(scalar_t)),
                static_cast<uint64_t>(30 * n), [=](int64_t e0, int64_t e1) {
      // Walk [e0, e1) row by row so the inner loop is over contiguous hidden units.
      for (int64_t e = e0; e < e1;) {
        const int64_t b = e / hidden, j0 = e % hidden, j1 = std::min(hidden, j0 + (e1 - e));
        const scalar_t* ir = igp + b * 4 * hidden;
        const scalar_t* hr = hgp + b * 4 * hidden;
        scalar_t* wr = wsp + b * 4 * hidden;
        for (int64_t j = j0; j < j1; ++j) {
          acc_t g[4];
          for (int k = 0; k < 4; ++k) {
            const int64_t c = k * hidden + j;
            g[k] = static_cast<acc_t>(ir[c]) + static_cast<acc_t>(hr[c]);
            if (ibp != nullptr) g[k] += static_cast<acc_t>(ibp[c]) + static_cast<acc_t>(hbp[c]);
          }
          const acc_t i = Sigmoid(g[0]), f = Sigmoid(g[1]), c = Tanh(g[2]), o = Sigmoid(g[3]);
          const acc_t cnew = f * static_cast<acc_t>(cxp[b * hidden + j]) + i * c;
          cyp[b * hidden + j] = static_cast<scalar_t>(cnew);
          hyp[b * hidden + j] = static_cast<scalar_t>(o * Tanh(cnew));
          wr[j] = static_cast<scalar_t>(i);
          wr[hidden + j] = static_cast<scalar_t>(f);
          wr[2 * hidden + j] = static_cast<scalar_t>(c);
          wr[3 * hidden + j] = static_cast<scalar_t>(o);
        }
        e += j1 - j0;
      }
    });
  });
  return {hy, cy, workspace};
}

// Returns (grad_gates [B, 4H], grad_cx [B, H], grad_bias [4H] or undefined); the composite
// _thnn_fused_lstm_cell_backward hands grad_gates and grad_bias to both gate inputs and
// both biases.
std::tuple<at::Tensor, at::Tensor, at::Tensor> FusedLstmCellBackward(const std::optional<at::Tensor>& grad_hy_opt,
                                                                     const std::optional<at::Tensor>& grad_cy_opt,
                                                                     const at::Tensor& cx_in, const at::Tensor& cy_in,
                                                                     const at::Tensor& workspace_in, bool has_bias) {
  const at::Tensor ghy = Contig(grad_hy_opt), gcy = Contig(grad_cy_opt);
  if (!ghy.defined() && !gcy.defined()) return {};
  TORCH_CHECK(workspace_in.device().is_privateuseone(), kLstmBackwardOp,
              ": expected workspace on an xxnpu device, got ", workspace_in.device());
  CheckFloating(kLstmBackwardOp, "workspace", workspace_in);
  TORCH_CHECK(workspace_in.dim() == 2 && workspace_in.size(1) % 4 == 0, kLstmBackwardOp,
              ": expected workspace of shape [batch, 4 * hidden_size], got ", workspace_in.sizes());
  const int64_t batch = workspace_in.size(0), hidden = workspace_in.size(1) / 4;
  CheckArg(kLstmBackwardOp, "grad_hy", ghy, workspace_in, {batch, hidden}, "[batch, hidden_size]");
  CheckArg(kLstmBackwardOp, "grad_cy", gcy, workspace_in, {batch, hidden}, "[batch, hidden_size]");
  CheckArg(kLstmBackwardOp, "cx", cx_in, workspace_in, {batch, hidden}, "[batch, hidden_size]");
  CheckArg(kLstmBackwardOp, "cy", cy_in, workspace_in, {batch, hidden}, "[batch, hidden_size]");

  const c10::DeviceGuard guard(workspace_in.device());
  const at::Tensor ws = workspace_in.contiguous(), cx = cx_in.contiguous(), cy = cy_in.contiguous();
  const at::ScalarType dtype = ws.scalar_type();
  at::Tensor grad_gates = NewXxnpuTensor({batch, 4 * hidden}, std::nullopt, dtype);
  at::Tensor grad_cx = NewXxnpuTensor({batch, hidden}, std::nullopt, dtype);
  at::Tensor grad_bias = has_bias ? NewXxnpuTensor({4 * hidden}, std::nullopt, dtype) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "xxnpu_lstm_cell_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* ghp = ConstDev<scalar_t>(ghy);
    const scalar_t* gcp = ConstDev<scalar_t>(gcy);
    const scalar_t* cxp = ConstDev<scalar_t>(cx);
    const scalar_t* cyp = ConstDev<scalar_t>(cy);
    const scalar_t* wsp = ConstDev<scalar_t>(ws);
    scalar_t* ggp = Dev<scalar_t>(grad_gates);
    scalar_t* gcxp = Dev<scalar_t>(grad_cx);
    scalar_t* gbp = has_bias ? Dev<scalar_t>(grad_bias) : nullptr;
    const int64_t n = batch * hidden;
    LaunchItems("xxnpu::lstm_cell_backward", ws.device(), hidden, 4 * batch,
                static_cast<uint64_t>((4 + 4 + 2 + 2 + 1) * n * sizeof(scalar_t)), static_cast<uint64_t>(25 * n),
                [=](int64_t j_begin, int64_t j_end) {
      for (int64_t t0 = j_begin; t0 < j_end; t0 += kColumnTile) {
        const int64_t t1 = std::min(j_end, t0 + kColumnTile);
        acc_t sums[4][kColumnTile] = {};
        for (int64_t b = 0; b < batch; ++b) {
          const scalar_t* w = wsp + b * 4 * hidden;
          scalar_t* gg = ggp + b * 4 * hidden;
          for (int64_t j = t0; j < t1; ++j) {
            const int64_t k = b * hidden + j;
            const acc_t i = w[j], f = w[hidden + j], c = w[2 * hidden + j], o = w[3 * hidden + j];
            const acc_t go = ghp != nullptr ? static_cast<acc_t>(ghp[k]) : acc_t(0);
            const acc_t gc = gcp != nullptr ? static_cast<acc_t>(gcp[k]) : acc_t(0);
            const acc_t tcy = Tanh(static_cast<acc_t>(cyp[k]));
            const acc_t dcy = go * o * (acc_t(1) - tcy * tcy) + gc;
            const acc_t d[4] = {dcy * c * (acc_t(1) - i) * i, dcy * static_cast<acc_t>(cxp[k]) * (acc_t(1) - f) * f,
                                dcy * i * (acc_t(1) - c * c), go * tcy * (acc_t(1) - o) * o};
            for (int q = 0; q < 4; ++q) {
              gg[q * hidden + j] = static_cast<scalar_t>(d[q]);
              sums[q][j - t0] += d[q];
            }
            gcxp[k] = static_cast<scalar_t>(dcy * f);
          }
        }
        if (gbp != nullptr) {
          for (int q = 0; q < 4; ++q) {
            for (int64_t j = t0; j < t1; ++j) gbp[q * hidden + j] = static_cast<scalar_t>(sums[q][j - t0]);
          }
        }
      }
    });
  });
  return {grad_gates, grad_cx, grad_bias};
}

// ================================================================== GRU

std::tuple<at::Tensor, at::Tensor> FusedGruCell(const at::Tensor& input_gates_in, const at::Tensor& hidden_gates_in,
                                                const at::Tensor& hx_in,
                                                const std::optional<at::Tensor>& input_bias_opt,
                                                const std::optional<at::Tensor>& hidden_bias_opt) {
  const int64_t hidden = CheckGates(kGruOp, input_gates_in, hidden_gates_in, 3);
  const int64_t batch = input_gates_in.size(0);
  const at::Tensor ib = Contig(input_bias_opt), hb = Contig(hidden_bias_opt);
  TORCH_CHECK(ib.defined() == hb.defined(), kGruOp, ": expected both biases or neither, got ",
              ib.defined() ? "input_bias only" : "hidden_bias only");
  CheckArg(kGruOp, "hx", hx_in, input_gates_in, {batch, hidden}, "[batch, hidden_size]");
  CheckArg(kGruOp, "input_bias", ib, input_gates_in, {3 * hidden}, "[3 * hidden_size]");
  CheckArg(kGruOp, "hidden_bias", hb, input_gates_in, {3 * hidden}, "[3 * hidden_size]");

  const c10::DeviceGuard guard(input_gates_in.device());
  const at::Tensor ig = input_gates_in.contiguous(), hg = hidden_gates_in.contiguous(), hx = hx_in.contiguous();
  const at::ScalarType dtype = ig.scalar_type();
  at::Tensor hy = NewXxnpuTensor({batch, hidden}, std::nullopt, dtype);
  at::Tensor workspace = NewXxnpuTensor({batch, 5 * hidden}, std::nullopt, dtype);
  const int64_t n = batch * hidden;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "xxnpu_gru_cell", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* igp = ConstDev<scalar_t>(ig);
    const scalar_t* hgp = ConstDev<scalar_t>(hg);
    const scalar_t* hxp = ConstDev<scalar_t>(hx);
    const scalar_t* ibp = ConstDev<scalar_t>(ib);
    const scalar_t* hbp = ConstDev<scalar_t>(hb);
    scalar_t* hyp = Dev<scalar_t>(hy);
    scalar_t* wsp = Dev<scalar_t>(workspace);
    LaunchItems("xxnpu::gru_cell", ig.device(), n, 1, static_cast<uint64_t>((6 + 1 + 1 + 5) * n * sizeof(scalar_t)),
                static_cast<uint64_t>(25 * n), [=](int64_t e0, int64_t e1) {
      for (int64_t e = e0; e < e1;) {
        const int64_t b = e / hidden, j0 = e % hidden, j1 = std::min(hidden, j0 + (e1 - e));
        const scalar_t* ir = igp + b * 3 * hidden;
        const scalar_t* hr = hgp + b * 3 * hidden;
        scalar_t* wr = wsp + b * 5 * hidden;
        for (int64_t j = j0; j < j1; ++j) {
          acc_t in_g[3], h_g[3];
          for (int k = 0; k < 3; ++k) {
            const int64_t c = k * hidden + j;
            in_g[k] = static_cast<acc_t>(ir[c]);
            h_g[k] = static_cast<acc_t>(hr[c]);
            if (ibp != nullptr) {
              in_g[k] += static_cast<acc_t>(ibp[c]);
              h_g[k] += static_cast<acc_t>(hbp[c]);
            }
          }
          const acc_t r = Sigmoid(in_g[0] + h_g[0]);
          const acc_t z = Sigmoid(in_g[1] + h_g[1]);
          const acc_t ng = Tanh(in_g[2] + r * h_g[2]);
          const acc_t h = static_cast<acc_t>(hxp[b * hidden + j]);
          hyp[b * hidden + j] = static_cast<scalar_t>(ng + z * (h - ng));
          wr[j] = static_cast<scalar_t>(r);
          wr[hidden + j] = static_cast<scalar_t>(z);
          wr[2 * hidden + j] = static_cast<scalar_t>(ng);
          wr[3 * hidden + j] = hxp[b * hidden + j];
          wr[4 * hidden + j] = static_cast<scalar_t>(h_g[2]);
        }
        e += j1 - j0;
      }
    });
  });
  return {hy, workspace};
}

// Returns (grad_input_gates, grad_hidden_gates [B, 3H], grad_hx [B, H], grad_input_bias,
// grad_hidden_bias [3H] or undefined).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> FusedGruCellBackward(
    const at::Tensor& grad_hy_in, const at::Tensor& workspace_in, bool has_bias) {
  TORCH_CHECK(workspace_in.device().is_privateuseone(), kGruBackwardOp,
              ": expected workspace on an xxnpu device, got ", workspace_in.device());
  CheckFloating(kGruBackwardOp, "workspace", workspace_in);
  TORCH_CHECK(workspace_in.dim() == 2 && workspace_in.size(1) % 5 == 0, kGruBackwardOp,
              ": expected workspace of shape [batch, 5 * hidden_size], got ", workspace_in.sizes());
  const int64_t batch = workspace_in.size(0), hidden = workspace_in.size(1) / 5;
  TORCH_CHECK(grad_hy_in.defined(), kGruBackwardOp, ": expected a defined grad_hy");
  CheckArg(kGruBackwardOp, "grad_hy", grad_hy_in, workspace_in, {batch, hidden}, "[batch, hidden_size]");

  const c10::DeviceGuard guard(workspace_in.device());
  const at::Tensor ws = workspace_in.contiguous(), ghy = grad_hy_in.contiguous();
  const at::ScalarType dtype = ws.scalar_type();
  at::Tensor grad_ig = NewXxnpuTensor({batch, 3 * hidden}, std::nullopt, dtype);
  at::Tensor grad_hg = NewXxnpuTensor({batch, 3 * hidden}, std::nullopt, dtype);
  at::Tensor grad_hx = NewXxnpuTensor({batch, hidden}, std::nullopt, dtype);
  at::Tensor grad_ib = has_bias ? NewXxnpuTensor({3 * hidden}, std::nullopt, dtype) : at::Tensor();
  at::Tensor grad_hb = has_bias ? NewXxnpuTensor({3 * hidden}, std::nullopt, dtype) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "xxnpu_gru_cell_backward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* ghp = ConstDev<scalar_t>(ghy);
    const scalar_t* wsp = ConstDev<scalar_t>(ws);
    scalar_t* gip = Dev<scalar_t>(grad_ig);
    scalar_t* ghgp = Dev<scalar_t>(grad_hg);
    scalar_t* ghxp = Dev<scalar_t>(grad_hx);
    scalar_t* gibp = has_bias ? Dev<scalar_t>(grad_ib) : nullptr;
    scalar_t* ghbp = has_bias ? Dev<scalar_t>(grad_hb) : nullptr;
    const int64_t n = batch * hidden;
    LaunchItems("xxnpu::gru_cell_backward", ws.device(), hidden, 8 * batch,
                static_cast<uint64_t>((1 + 5 + 3 + 3 + 1) * n * sizeof(scalar_t)), static_cast<uint64_t>(20 * n),
                [=](int64_t j_begin, int64_t j_end) {
      for (int64_t t0 = j_begin; t0 < j_end; t0 += kColumnTile) {
        const int64_t t1 = std::min(j_end, t0 + kColumnTile);
        // [r, z, n of the input gates, n of the hidden gates]; r and z are shared.
        acc_t sums[4][kColumnTile] = {};
        for (int64_t b = 0; b < batch; ++b) {
          const scalar_t* w = wsp + b * 5 * hidden;
          scalar_t* gi = gip + b * 3 * hidden;
          scalar_t* gh = ghgp + b * 3 * hidden;
          for (int64_t j = t0; j < t1; ++j) {
            const int64_t k = b * hidden + j;
            const acc_t r = w[j], z = w[hidden + j], ng = w[2 * hidden + j], h = w[3 * hidden + j],
                        hn = w[4 * hidden + j];
            const acc_t go = ghp[k];
            const acc_t gz = go * (h - ng) * (acc_t(1) - z) * z;
            const acc_t gn = go * (acc_t(1) - z) * (acc_t(1) - ng * ng);
            const acc_t ghn = gn * r;
            const acc_t gr = gn * hn * (acc_t(1) - r) * r;
            gi[j] = gh[j] = static_cast<scalar_t>(gr);
            gi[hidden + j] = gh[hidden + j] = static_cast<scalar_t>(gz);
            gi[2 * hidden + j] = static_cast<scalar_t>(gn);
            gh[2 * hidden + j] = static_cast<scalar_t>(ghn);
            ghxp[k] = static_cast<scalar_t>(go * z);
            sums[0][j - t0] += gr;
            sums[1][j - t0] += gz;
            sums[2][j - t0] += gn;
            sums[3][j - t0] += ghn;
          }
        }
        if (gibp != nullptr) {
          for (int64_t j = t0; j < t1; ++j) {
            const int64_t c = j - t0;
            gibp[j] = ghbp[j] = static_cast<scalar_t>(sums[0][c]);
            gibp[hidden + j] = ghbp[hidden + j] = static_cast<scalar_t>(sums[1][c]);
            gibp[2 * hidden + j] = static_cast<scalar_t>(sums[2][c]);
            ghbp[2 * hidden + j] = static_cast<scalar_t>(sums[3][c]);
          }
        }
      }
    });
  });
  return {grad_ig, grad_hg, grad_hx, grad_ib, grad_hb};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", &FusedLstmCell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", &FusedLstmCellBackward);
  m.impl("_thnn_fused_gru_cell", &FusedGruCell);
  m.impl("_thnn_fused_gru_cell_backward", &FusedGruCellBackward);
}

}  // namespace
}  // namespace xxnpu
