// Fused scaled-dot-product attention on xxnpu, through PyTorch's PrivateUse1 SDPA hook.
//
// F.scaled_dot_product_attention asks `_fused_sdp_choice_stub` for a backend. Ours answers
// OVERRIDEABLE where the kernels here apply, so sdpa calls
// `_scaled_dot_product_fused_attention_overrideable`, whose autograd formula calls
// `_scaled_dot_product_fused_attention_overrideable_backward`; everything else takes MATH
// (matmul + softmax + matmul, native kernels too). FusedUnsupportedReason lists the cases.
//
// Forward: one pass, flash-style. A work item is (batch, kv head, block of query rows),
// taking the query rows of every head of the GQA group at once so each K/V tile is read
// and widened once per group. Key tiles stream through an online softmax (running max and
// sum per row, the accumulator rescaled when the max moves): no [L, S] score matrix. The
// tile products go through the BLAS torch links (sgemm_, as matmul.cc and paged_attention
// do: ~12x a hand-written loop on this ISA); the softmax loops are written to vectorize.
// Everything accumulates in float32. The kernel saves logsumexp [B, H, L] (float32).
// Backward: probabilities recomputed tile by tile from that logsumexp, in two kernels
// (dq over query blocks; dk, dv over key blocks, summed over the group's query heads) so
// neither needs atomics; the mask gradient, when asked for, is dS summed to the mask's shape.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/cpu_blas.h"
#include "ops/xxnpu_tensor.h"


namespace xxnpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Query rows per work item, over the heads of a GQA group: large enough for the BLAS to
// run at speed, small enough that the score tile ([rows, kBlockKeys] floats, 64 KB) stays
// in the L2 cache.
constexpr int64_t kBlockRows = 128;
constexpr int64_t kBlockKeys = 128;

// ================================================================== backend choice

bool FusedDtype(at::ScalarType t) { return t == at::kFloat || t == at::kHalf || t == at::kBFloat16; }

// Whether `mask` (right-aligned) broadcasts to [B, H, L, S].
bool MaskBroadcasts(const at::Tensor& mask, const std::array<int64_t, 4>& shape) {
  if (mask.dim() > 4) return false;
  const int64_t offset = 4 - mask.dim();
  for (int64_t d = 0; d < mask.dim(); ++d) {
    if (mask.size(d) != 1 && mask.size(d) != shape[offset + d]) return false;
  }
  return true;
}

// nullptr when the fused kernels cover this call; otherwise the case they leave to MATH.
// The math path then computes it, or raises the error the CPU raises for bad input.
const char* FusedUnsupportedReason(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                                   bool enable_gqa) {
  if (q.is_nested() || k.is_nested() || v.is_nested()) return "nested tensors";
  if (!q.device().is_privateuseone() || k.device() != q.device() || v.device() != q.device()) {
    return "query, key and value on different devices";
  }
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return "inputs that are not 4-D [batch, heads, seq_len, head_dim]";
  if (!FusedDtype(q.scalar_type()) || k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type()) {
    return "dtypes other than float32, float16 or bfloat16 shared by query, key and value";
  }
  if (dropout_p > 0.0) return "dropout (dropout_p > 0)";
  if (q.size(0) != k.size(0) || k.size(0) != v.size(0)) return "different batch sizes";
  if (k.size(1) != v.size(1) || k.size(2) != v.size(2)) return "key and value of different heads or lengths";
  if (q.size(3) != k.size(3) || q.size(3) == 0 || v.size(3) == 0) return "head dims that differ or are 0";
  if (q.size(1) != k.size(1) && (!enable_gqa || k.size(1) == 0 || q.size(1) % k.size(1) != 0)) {
    return "query heads that are not the key heads (or, with enable_gqa, a multiple of them)";
  }
  if (mask.has_value() && mask->defined()) {
    const at::Tensor& m = *mask;
    if (m.is_nested() || m.device() != q.device()) return "an attn_mask on another device";
    if (m.scalar_type() != at::kBool && m.scalar_type() != q.scalar_type()) {
      return "a float attn_mask of another dtype than query";
    }
    if (!MaskBroadcasts(m, {q.size(0), q.size(1), q.size(2), k.size(2)})) {
      return "an attn_mask that does not broadcast to [batch, heads, L, S]";
    }
  }
  return nullptr;
}

// The SDPA backend for xxnpu inputs (both the dispatch stub sdpa calls and the
// `_fused_sdp_choice` op torch.compile calls). It honours torch.nn.attention.sdpa_kernel:
// OVERRIDEABLE disabled (e.g. sdpa_kernel(SDPBackend.MATH)) means MATH.
int64_t FusedSdpChoice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                       std::optional<double> /*scale*/, bool enable_gqa) {
  const auto& ctx = at::globalContext();
  const char* reason = FusedUnsupportedReason(q, k, v, mask, dropout_p, is_causal, enable_gqa);
  if (reason == nullptr && ctx.userEnabledOverrideableSDP()) return static_cast<int64_t>(at::SDPBackend::overrideable);
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  TORCH_CHECK(false, "No available kernel. Aborting execution. On xxnpu the MATH backend is disabled and ",
              reason != nullptr ? std::string("the fused (OVERRIDEABLE) kernel does not support ") + reason
                                : std::string("so is the fused (OVERRIDEABLE) one"));
  return static_cast<int64_t>(at::SDPBackend::error);
}

// ================================================================== device helpers

void Sgemm(char transa, char transb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
           int64_t ldb, float beta, float* c, int64_t ldc) {
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  const int ilda = static_cast<int>(lda), ildb = static_cast<int>(ldb), ildc = static_cast<int>(ldc);
  const float alpha = 1.0f;
  sgemm_(&transa, &transb, &im, &in, &ik, &alpha, a, &ilda, b, &ildb, &beta, c, &ildc);
}

// exp(x) for float32 that the compiler vectorizes (std::exp is a scalar libm call): the
// Cephes expf scheme, exp(x) = 2^n exp(r), n = round(x / ln 2), a degree-6 polynomial on
// |r| <= ln 2 / 2, ~1 ulp. Below -87.3 it is 0 (the exact result is a denormal or less),
// so a masked score (-inf) gets a weight of exactly 0, as the CPU's softmax gives it.
// Branch-free; the selects become blends with -fno-trapping-math (ops/BUILD.bazel).
inline float ExpF(float x) {
  const bool underflow = x < -87.3f;
  float xc = underflow ? -87.3f : x;
  xc = xc > 88.7f ? 88.7f : xc;
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round by 1.5 * 2^23
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float result = p * std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return underflow ? 0.0f : result;
}

// Eight partial results so the loops vectorize (float max/sum do not reassociate alone).
inline float RowMax(const float* x, int64_t n) {
  float acc[8] = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  }
  for (; i < n; ++i) acc[0] = x[i] > acc[0] ? x[i] : acc[0];
  float m = acc[0];
  for (int j = 1; j < 8; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

// x[i] = exp(x[i] - shift); returns the sum.
inline float ExpShiftSum(float* x, int64_t n, float shift) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      x[i + j] = ExpF(x[i + j] - shift);
      acc[j] += x[i + j];
    }
  }
  for (; i < n; ++i) {
    x[i] = ExpF(x[i] - shift);
    acc[0] += x[i];
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

inline float Dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// rows x cols of `src` (strides in elements) into dense row-major float, times `mul`.
template <typename T>
void LoadTile(const T* src, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, float mul,
              float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* s = src + r * row_stride;
    float* d = dst + r * cols;
    if (col_stride == 1) {
      for (int64_t c = 0; c < cols; ++c) d[c] = static_cast<float>(s[c]) * mul;
    } else {
      for (int64_t c = 0; c < cols; ++c) d[c] = static_cast<float>(s[c * col_stride]) * mul;
    }
  }
}

// A K or V tile as a float matrix with dense rows for the BLAS: the tensor's own memory
// when it already is one (float32, unit column stride), else widened into `scratch`.
template <typename T>
const float* KvTile(const T* src, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                    std::vector<float>& scratch, int64_t* ld) {
  if constexpr (std::is_same_v<T, float>) {
    if ((col_stride == 1 || cols == 1) && row_stride >= cols && row_stride <= INT_MAX) {
      *ld = rows == 1 ? cols : row_stride;
      return src;
    }
  }
  scratch.resize(static_cast<size_t>(rows * cols));
  LoadTile(src, rows, cols, row_stride, col_stride, 1.0f, scratch.data());
  *ld = cols;
  return scratch.data();
}

template <typename T>
void StoreRow(const float* src, int64_t n, float mul, T* dst, int64_t stride) {
  if (stride == 1) {
    for (int64_t c = 0; c < n; ++c) dst[c] = static_cast<T>(src[c] * mul);
  } else {
    for (int64_t c = 0; c < n; ++c) dst[c * stride] = static_cast<T>(src[c] * mul);
  }
}

// ================================================================== geometry

using Strides = std::array<int64_t, 4>;  // elements, [batch, head, row, col]

Strides StridesOf(const at::Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

// What every kernel needs to know about a call; pointers are device addresses.
struct AttnGeom {
  int64_t B = 0, H = 0, Hk = 0, group = 1, L = 0, S = 0, E = 0, Ev = 0;
  int64_t bq = 1;   // query rows of one head per item
  int64_t nqb = 0;  // query blocks
  float scale = 1.0f;
  bool causal = false;
  bool has_mask = false;
  Strides q{}, k{}, v{}, m{};
  const void* qp = nullptr;
  const void* kp = nullptr;
  const void* vp = nullptr;
  const void* mp = nullptr;  // additive mask of query's dtype, strides broadcast to [B, H, L, S]
};

// Per compute thread (a GPU block's shared memory).
struct Scratch {
  std::vector<float> q, k, v, s, p, acc, acc2, o, m, l, lse, d;
};
Scratch& ThreadScratch() {
  thread_local Scratch s;
  return s;
}

// Keys of rows [i0, i0 + nq): all S, or under top-left causal masking the keys j <= i.
int64_t KeyEnd(const AttnGeom& g, int64_t i0, int64_t nq) { return g.causal ? std::min(g.S, i0 + nq) : g.S; }

// The scores tile s [R, nk] (R = group * nq rows, row r = head j * nq + (i - i0)) for
// keys [j0, j0 + nk): mask added, causal positions set to -inf (both apply when both are
// given, as in the CPU's SDPA; the math path rejects that combination).
template <typename T>
void MaskScores(const AttnGeom& g, int64_t b, int64_t hk, int64_t i0, int64_t nq, int64_t j0, int64_t nk,
                float* s) {
  const T* mask = g.has_mask ? DeviceView(static_cast<const T*>(g.mp)) : nullptr;
  const int64_t R = g.group * nq;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t h = hk * g.group + r / nq, i = i0 + r % nq;
    float* row = s + r * nk;
    if (mask != nullptr) {
      const T* mrow = mask + b * g.m[0] + h * g.m[1] + i * g.m[2] + j0 * g.m[3];
      if (g.m[3] == 1) {
        for (int64_t t = 0; t < nk; ++t) row[t] += static_cast<float>(mrow[t]);
      } else {
        for (int64_t t = 0; t < nk; ++t) row[t] += static_cast<float>(mrow[t * g.m[3]]);
      }
    }
    if (g.causal) {
      for (int64_t t = std::max<int64_t>(0, i - j0 + 1); t < nk; ++t) row[t] = kNegInf;
    }
  }
}

// Loads the R query rows of item (b, hk, i0, nq), times the softmax scale, into q.
template <typename T>
void LoadQueries(const AttnGeom& g, int64_t b, int64_t hk, int64_t i0, int64_t nq, float* q) {
  const T* qv = DeviceView(static_cast<const T*>(g.qp));
  for (int64_t j = 0; j < g.group; ++j) {
    const int64_t h = hk * g.group + j;
    LoadTile(qv + b * g.q[0] + h * g.q[1] + i0 * g.q[2], nq, g.E, g.q[2], g.q[3], g.scale, q + j * nq * g.E);
  }
}

// Runs `body(item)` over [begin, end), turning an exception into a failed kernel.
template <typename F>
absl::Status ForItems(int64_t begin, int64_t end, F&& body) {
  const SingleThreadedBlas single_threaded;
  try {
    for (int64_t item = begin; item < end; ++item) body(item);
  } catch (const c10::Error& e) {
    return absl::InternalError(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
  return absl::OkStatus();
}

void Launch(const char* name, c10::DeviceIndex device, int64_t items, uint64_t bytes, uint64_t flops,
            KernelBody body) {
  if (items == 0) return;
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid = Dim3{static_cast<uint32_t>(items), 1, 1};
  cfg.block = Dim3{static_cast<uint32_t>(kBlockRows), 1, 1};
  cfg.bytes = bytes;
  cfg.flops = flops;
  CheckOk(xxnpuLaunchKernel(cfg, std::move(body), CurrentXxnpuStreamHandle(device)), name);
}

// Item -> (b, hk, query block), heaviest query blocks (the last, under causal masking)
// first so the compute threads' dynamic chunks even out.
struct QueryItem {
  int64_t b, hk, i0, nq;
};
QueryItem QueryItemOf(const AttnGeom& g, int64_t item) {
  const int64_t qb = g.nqb - 1 - item % g.nqb, bh = item / g.nqb;
  const int64_t i0 = qb * g.bq;
  return {bh / g.Hk, bh % g.Hk, i0, std::min(g.bq, g.L - i0)};
}

// ================================================================== forward kernel

struct ForwardOut {
  void* out = nullptr;  // [B, H, L, Ev] of query's dtype
  Strides o{};
  float* lse = nullptr;  // [B, H, L] contiguous
};

template <typename T>
void ForwardItem(const AttnGeom& g, const ForwardOut& fo, int64_t item) {
  const auto [b, hk, i0, nq] = QueryItemOf(g, item);
  const int64_t R = g.group * nq, E = g.E, Ev = g.Ev;
  Scratch& sc = ThreadScratch();
  sc.q.resize(R * E);
  sc.s.resize(R * kBlockKeys);
  sc.acc.assign(R * Ev, 0.0f);
  sc.m.assign(R, kNegInf);
  sc.l.assign(R, 0.0f);
  LoadQueries<T>(g, b, hk, i0, nq, sc.q.data());
  const T* kv = DeviceView(static_cast<const T*>(g.kp)) + b * g.k[0] + hk * g.k[1];
  const T* vv = DeviceView(static_cast<const T*>(g.vp)) + b * g.v[0] + hk * g.v[1];
  const int64_t key_end = KeyEnd(g, i0, nq);
  for (int64_t j0 = 0; j0 < key_end; j0 += kBlockKeys) {
    const int64_t nk = std::min(kBlockKeys, key_end - j0);
    int64_t ldk = 0, ldv = 0;
    const float* kt = KvTile(kv + j0 * g.k[2], nk, E, g.k[2], g.k[3], sc.k, &ldk);
    const float* vt = KvTile(vv + j0 * g.v[2], nk, Ev, g.v[2], g.v[3], sc.v, &ldv);
    float* s = sc.s.data();
    // Row-major s [R, nk] = q [R, E] . k^T, as the column-major s^T = k . q^T.
    Sgemm('T', 'N', nk, R, E, kt, ldk, sc.q.data(), E, 0.0f, s, nk);
    MaskScores<T>(g, b, hk, i0, nq, j0, nk, s);
    for (int64_t r = 0; r < R; ++r) {
      float* row = s + r * nk;
      const float m_new = std::max(sc.m[r], RowMax(row, nk));
      if (m_new == kNegInf) {  // every key so far masked out: nothing to add yet
        std::fill(row, row + nk, 0.0f);
        continue;
      }
      const float correction = ExpF(sc.m[r] - m_new);  // 0 on the first unmasked tile
      const float sum = ExpShiftSum(row, nk, m_new);
      sc.l[r] = sc.l[r] * correction + sum;
      sc.m[r] = m_new;
      if (correction != 1.0f) {
        float* a = sc.acc.data() + r * Ev;
        for (int64_t c = 0; c < Ev; ++c) a[c] *= correction;
      }
    }
    // acc [R, Ev] += p [R, nk] . v [nk, Ev], as acc^T += v^T . p^T.
    Sgemm('N', 'N', Ev, R, nk, vt, ldv, s, nk, 1.0f, sc.acc.data(), Ev);
  }
  T* out = DeviceView(static_cast<T*>(fo.out));
  float* lse = DeviceView(fo.lse);
  for (int64_t r = 0; r < R; ++r) {
    const int64_t h = hk * g.group + r / nq, i = i0 + r % nq;
    // A row with every key masked out gives zeros, as the CPU does; its logsumexp is -inf.
    const float l = sc.l[r];
    StoreRow(sc.acc.data() + r * Ev, Ev, l > 0.0f ? 1.0f / l : 0.0f,
             out + b * fo.o[0] + h * fo.o[1] + i * fo.o[2], fo.o[3]);
    lse[(b * g.H + h) * g.L + i] = l > 0.0f ? sc.m[r] + std::log(l) : kNegInf;
  }
}

// ================================================================== backward kernels

struct BackwardArgs {
  const void* grad_out = nullptr;
  Strides go{};
  const void* out = nullptr;
  Strides o{};
  const float* lse = nullptr;  // [B, H, L] contiguous
  float* delta = nullptr;      // [B, H, L]: rowsum(dO * O), written by the dq kernel
  void* dq = nullptr;
  Strides dqs{};
  void* dk = nullptr;
  Strides dks{};
  void* dv = nullptr;
  Strides dvs{};
  float* dbias = nullptr;  // [B, H, L, S] contiguous, or null
};

// Probabilities p = exp(s - lse) of the R rows in place (rows with lse = -inf, all keys
// masked, are 0).
void Probabilities(const float* lse, int64_t R, int64_t nk, float* s) {
  for (int64_t r = 0; r < R; ++r) {
    float* row = s + r * nk;
    const float shift = lse[r];
    if (shift == kNegInf) {
      std::fill(row, row + nk, 0.0f);
    } else {
      for (int64_t t = 0; t < nk; ++t) row[t] = ExpF(row[t] - shift);
    }
  }
}

// dp [R, nk] <- p * (dp - delta): the scores' gradient dS.
void ScoreGrad(const float* p, const float* delta, int64_t R, int64_t nk, float* dp) {
  for (int64_t r = 0; r < R; ++r) {
    const float d = delta[r];
    const float* pr = p + r * nk;
    float* row = dp + r * nk;
    for (int64_t t = 0; t < nk; ++t) row[t] = pr[t] * (row[t] - d);
  }
}

// The R rows of dO (float) into `dst`, and their lse.
template <typename T>
void LoadGradRows(const AttnGeom& g, const BackwardArgs& a, int64_t b, int64_t hk, int64_t i0, int64_t nq,
                  float* dst, float* lse) {
  const T* go = DeviceView(static_cast<const T*>(a.grad_out));
  const float* lv = DeviceView(a.lse);
  for (int64_t j = 0; j < g.group; ++j) {
    const int64_t h = hk * g.group + j;
    LoadTile(go + b * a.go[0] + h * a.go[1] + i0 * a.go[2], nq, g.Ev, a.go[2], a.go[3], 1.0f, dst + j * nq * g.Ev);
    for (int64_t i = 0; i < nq; ++i) lse[j * nq + i] = lv[(b * g.H + h) * g.L + i0 + i];
  }
}

// Over query blocks: delta, dq (and the mask gradient).
template <typename T>
void BackwardDqItem(const AttnGeom& g, const BackwardArgs& a, int64_t item) {
  const auto [b, hk, i0, nq] = QueryItemOf(g, item);
  const int64_t R = g.group * nq, E = g.E, Ev = g.Ev;
  Scratch& sc = ThreadScratch();
  sc.q.resize(R * E);
  sc.o.resize(R * Ev);
  sc.lse.resize(R);
  sc.d.resize(R);
  sc.s.resize(R * kBlockKeys);
  sc.p.resize(R * kBlockKeys);
  sc.acc.assign(R * E, 0.0f);
  LoadQueries<T>(g, b, hk, i0, nq, sc.q.data());
  LoadGradRows<T>(g, a, b, hk, i0, nq, sc.o.data(), sc.lse.data());
  // delta = rowsum(dO * O), kept for the dk/dv kernel.
  {
    const T* ov = DeviceView(static_cast<const T*>(a.out));
    float* delta = DeviceView(a.delta);
    sc.acc2.resize(Ev);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t h = hk * g.group + r / nq, i = i0 + r % nq;
      LoadTile(ov + b * a.o[0] + h * a.o[1] + i * a.o[2], 1, Ev, 0, a.o[3], 1.0f, sc.acc2.data());
      sc.d[r] = Dot(sc.acc2.data(), sc.o.data() + r * Ev, Ev);
      delta[(b * g.H + h) * g.L + i] = sc.d[r];
    }
  }
  const T* kv = DeviceView(static_cast<const T*>(g.kp)) + b * g.k[0] + hk * g.k[1];
  const T* vv = DeviceView(static_cast<const T*>(g.vp)) + b * g.v[0] + hk * g.v[1];
  float* dbias = a.dbias != nullptr ? DeviceView(a.dbias) : nullptr;
  const int64_t key_end = KeyEnd(g, i0, nq);
  for (int64_t j0 = 0; j0 < key_end; j0 += kBlockKeys) {
    const int64_t nk = std::min(kBlockKeys, key_end - j0);
    int64_t ldk = 0, ldv = 0;
    const float* kt = KvTile(kv + j0 * g.k[2], nk, E, g.k[2], g.k[3], sc.k, &ldk);
    const float* vt = KvTile(vv + j0 * g.v[2], nk, Ev, g.v[2], g.v[3], sc.v, &ldv);
    float* s = sc.s.data();
    float* dp = sc.p.data();
    Sgemm('T', 'N', nk, R, E, kt, ldk, sc.q.data(), E, 0.0f, s, nk);
    MaskScores<T>(g, b, hk, i0, nq, j0, nk, s);
    Probabilities(sc.lse.data(), R, nk, s);
    // dp [R, nk] = dO [R, Ev] . v^T
    Sgemm('T', 'N', nk, R, Ev, vt, ldv, sc.o.data(), Ev, 0.0f, dp, nk);
    ScoreGrad(s, sc.d.data(), R, nk, dp);
    if (dbias != nullptr) {
      for (int64_t r = 0; r < R; ++r) {
        const int64_t h = hk * g.group + r / nq, i = i0 + r % nq;
        std::copy(dp + r * nk, dp + (r + 1) * nk, dbias + ((b * g.H + h) * g.L + i) * g.S + j0);
      }
    }
    // dq [R, E] += dS [R, nk] . k [nk, E] (scaled at the end).
    Sgemm('N', 'N', E, R, nk, kt, ldk, dp, nk, 1.0f, sc.acc.data(), E);
  }
  T* dq = DeviceView(static_cast<T*>(a.dq));
  for (int64_t r = 0; r < R; ++r) {
    const int64_t h = hk * g.group + r / nq, i = i0 + r % nq;
    StoreRow(sc.acc.data() + r * E, E, g.scale, dq + b * a.dqs[0] + h * a.dqs[1] + i * a.dqs[2], a.dqs[3]);
  }
}

// Over key blocks of one kv head: dk and dv, summed over the group's query heads.
template <typename T>
void BackwardDkDvItem(const AttnGeom& g, const BackwardArgs& a, int64_t item) {
  const int64_t nkb = (g.S + kBlockKeys - 1) / kBlockKeys;
  const int64_t kb = item % nkb, bh = item / nkb, b = bh / g.Hk, hk = bh % g.Hk;
  const int64_t j0 = kb * kBlockKeys, nk = std::min(kBlockKeys, g.S - j0);
  const int64_t E = g.E, Ev = g.Ev;
  Scratch& sc = ThreadScratch();
  const T* kv = DeviceView(static_cast<const T*>(g.kp)) + b * g.k[0] + hk * g.k[1];
  const T* vv = DeviceView(static_cast<const T*>(g.vp)) + b * g.v[0] + hk * g.v[1];
  int64_t ldk = 0, ldv = 0;
  const float* kt = KvTile(kv + j0 * g.k[2], nk, E, g.k[2], g.k[3], sc.k, &ldk);
  const float* vt = KvTile(vv + j0 * g.v[2], nk, Ev, g.v[2], g.v[3], sc.v, &ldv);
  sc.acc.assign(nk * E, 0.0f);
  sc.acc2.assign(nk * Ev, 0.0f);
  const float* delta = DeviceView(static_cast<const float*>(a.delta));
  // Under causal masking, query rows before j0 see none of these keys.
  for (int64_t qb = g.causal ? j0 / g.bq : 0; qb < g.nqb; ++qb) {
    const int64_t i0 = qb * g.bq, nq = std::min(g.bq, g.L - i0), R = g.group * nq;
    sc.q.resize(R * E);
    sc.o.resize(R * Ev);
    sc.lse.resize(R);
    sc.d.resize(R);
    sc.s.resize(R * nk);
    sc.p.resize(R * nk);
    LoadQueries<T>(g, b, hk, i0, nq, sc.q.data());
    LoadGradRows<T>(g, a, b, hk, i0, nq, sc.o.data(), sc.lse.data());
    for (int64_t j = 0; j < g.group; ++j) {
      const int64_t h = hk * g.group + j;
      std::copy(delta + (b * g.H + h) * g.L + i0, delta + (b * g.H + h) * g.L + i0 + nq, sc.d.data() + j * nq);
    }
    float* s = sc.s.data();
    float* dp = sc.p.data();
    Sgemm('T', 'N', nk, R, E, kt, ldk, sc.q.data(), E, 0.0f, s, nk);
    MaskScores<T>(g, b, hk, i0, nq, j0, nk, s);
    Probabilities(sc.lse.data(), R, nk, s);
    // dv [nk, Ev] += p^T [nk, R] . dO [R, Ev], as dv^T += dO^T . p.
    Sgemm('N', 'T', Ev, nk, R, sc.o.data(), Ev, s, nk, 1.0f, sc.acc2.data(), Ev);
    Sgemm('T', 'N', nk, R, Ev, vt, ldv, sc.o.data(), Ev, 0.0f, dp, nk);
    ScoreGrad(s, sc.d.data(), R, nk, dp);
    // dk [nk, E] += dS^T [nk, R] . (scale * q) [R, E].
    Sgemm('N', 'T', E, nk, R, sc.q.data(), E, dp, nk, 1.0f, sc.acc.data(), E);
  }
  T* dk = DeviceView(static_cast<T*>(a.dk));
  T* dv = DeviceView(static_cast<T*>(a.dv));
  for (int64_t t = 0; t < nk; ++t) {
    StoreRow(sc.acc.data() + t * E, E, 1.0f, dk + b * a.dks[0] + hk * a.dks[1] + (j0 + t) * a.dks[2], a.dks[3]);
    StoreRow(sc.acc2.data() + t * Ev, Ev, 1.0f, dv + b * a.dvs[0] + hk * a.dvs[1] + (j0 + t) * a.dvs[2], a.dvs[3]);
  }
}

// ================================================================== host side

template <typename F>
void DispatchFused(at::ScalarType t, F&& f) {
  switch (t) {
    case at::kFloat: f(float{}); break;
    case at::kHalf: f(c10::Half{}); break;
    case at::kBFloat16: f(c10::BFloat16{}); break;
    default: TORCH_CHECK(false, "xxnpu fused attention: unsupported dtype ", t);
  }
}

// The checks of a direct call of the ops (sdpa only calls them where FusedSdpChoice
// said OVERRIDEABLE), with what was expected and what was got.
void CheckFusedArgs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                    const at::Tensor& bias, double dropout_p, bool is_causal) {
  TORCH_CHECK(q.device().is_privateuseone(), op, ": query must be on an xxnpu device, got ", q.device());
  CheckSameDevice(op, "key", k, q.device());
  CheckSameDevice(op, "value", v, q.device());
  CheckSameDevice(op, "attn_bias", bias, q.device());
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
              ": expected 4-D query, key and value [batch, heads, seq_len, head_dim], got ", q.sizes(), ", ",
              k.sizes(), ", ", v.sizes());
  TORCH_CHECK(FusedDtype(q.scalar_type()), op, ": query must be float32, float16 or bfloat16, got ",
              q.scalar_type());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), op,
              ": expected key and value of query's dtype ", q.scalar_type(), ", got ", k.scalar_type(), " and ",
              v.scalar_type());
  TORCH_CHECK(dropout_p == 0.0, op, ": xxnpu's fused attention has no dropout (sdpa takes the math path ",
              "for dropout_p > 0), got dropout_p = ", dropout_p);
  TORCH_CHECK(q.size(0) == k.size(0) && k.size(0) == v.size(0), op, ": batch sizes differ: query ", q.size(0),
              ", key ", k.size(0), ", value ", v.size(0));
  TORCH_CHECK(k.size(1) == v.size(1) && k.size(2) == v.size(2), op,
              ": key and value must have the same heads and length, got ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(q.size(3) == k.size(3) && q.size(3) > 0 && v.size(3) > 0, op,
              ": expected query and key of the same non-zero head dim and a non-zero value head dim, got ",
              q.size(3), ", ", k.size(3), ", ", v.size(3));
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, op, ": query's ", q.size(1),
              " heads must be a multiple of key's ", k.size(1), " heads");
  if (bias.defined()) {
    TORCH_CHECK(bias.scalar_type() == q.scalar_type() || bias.scalar_type() == at::kBool, op,
                ": attn_bias must be bool or of query's dtype ", q.scalar_type(), ", got ", bias.scalar_type());
    TORCH_CHECK(MaskBroadcasts(bias, {q.size(0), q.size(1), q.size(2), k.size(2)}), op, ": attn_bias of shape ",
                bias.sizes(), " does not broadcast to [batch, heads, L, S] = ",
                at::IntArrayRef{q.size(0), q.size(1), q.size(2), k.size(2)});
  }
}

AttnGeom MakeGeom(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                  bool is_causal, std::optional<double> scale) {
  AttnGeom g;
  g.B = q.size(0);
  g.H = q.size(1);
  g.L = q.size(2);
  g.E = q.size(3);
  g.Hk = k.size(1);
  g.S = k.size(2);
  g.Ev = v.size(3);
  g.group = g.H / g.Hk;
  g.bq = std::max<int64_t>(1, std::min(g.L, kBlockRows / g.group));
  g.nqb = g.L == 0 ? 0 : (g.L + g.bq - 1) / g.bq;
  g.scale = static_cast<float>(scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(g.E)));
  g.causal = is_causal;
  g.q = StridesOf(q);
  g.k = StridesOf(k);
  g.v = StridesOf(v);
  g.qp = q.const_data_ptr();
  g.kp = k.const_data_ptr();
  g.vp = v.const_data_ptr();
  if (bias.defined()) {
    // Right-aligned broadcast strides: a broadcast dim reads the same element.
    g.has_mask = true;
    g.mp = bias.const_data_ptr();
    const int64_t offset = 4 - bias.dim();
    for (int64_t d = 0; d < 4; ++d) {
      const int64_t src = d - offset;
      g.m[d] = src < 0 || bias.size(src) == 1 ? 0 : bias.stride(src);
    }
  }
  for (int64_t s : {g.q[2], g.k[2], g.v[2]}) {
    TORCH_CHECK(s <= INT_MAX, "xxnpu fused attention: a row stride of ", s, " exceeds the BLAS's 32-bit sizes");
  }
  return g;
}

// A sdpa bool mask (True = attend) as the additive mask the kernels read.
at::Tensor AdditiveBias(const std::optional<at::Tensor>& bias, at::ScalarType dtype) {
  if (!bias.has_value() || !bias->defined()) return at::Tensor();
  if (bias->scalar_type() != at::kBool) return *bias;
  return at::where(*bias, at::zeros({}, bias->options().dtype(dtype)),
                   at::full({}, -std::numeric_limits<double>::infinity(), bias->options().dtype(dtype)));
}

// [B, H, L, Ev] laid out like query (so a [B, L, H, E] transposed query gives an output
// that is [B, L, H, Ev] in memory, as ATen's meta function allocates it).
at::Tensor OutputLike(const at::Tensor& q, int64_t ev) {
  std::array<int64_t, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return q.stride(a) > q.stride(b); });
  std::array<int64_t, 4> sizes{q.size(0), q.size(1), q.size(2), ev};
  std::array<int64_t, 4> strides{};
  int64_t step = 1;
  for (int64_t d = 3; d >= 0; --d) {
    strides[order[d]] = step;
    step *= std::max<int64_t>(1, sizes[order[d]]);
  }
  return NewXxnpuTensor(sizes, c10::IntArrayRef(strides), q.scalar_type());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor,
           at::Tensor>
FusedAttentionForward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                      bool /*return_debug_mask: only meaningful with dropout*/, std::optional<double> scale) {
  constexpr const char* kOp = "_scaled_dot_product_fused_attention_overrideable";
  const at::Tensor raw_bias = attn_bias.has_value() ? *attn_bias : at::Tensor();
  CheckFusedArgs(kOp, q, k, v, raw_bias, dropout_p, is_causal);
  const c10::DeviceGuard guard(q.device());
  const at::Tensor bias = AdditiveBias(attn_bias, q.scalar_type());
  const AttnGeom g = MakeGeom(q, k, v, bias, is_causal, scale);
  at::Tensor out = OutputLike(q, g.Ev);
  at::Tensor lse = NewXxnpuTensor({g.B, g.H, g.L}, std::nullopt, at::kFloat);
  ForwardOut fo;
  fo.out = out.data_ptr();
  fo.o = StridesOf(out);
  fo.lse = lse.data_ptr<float>();
  const int64_t items = g.B * g.Hk * g.nqb;
  const uint64_t causal_div = is_causal ? 2 : 1;
  const uint64_t flops = 2ull * g.B * g.H * g.L * g.S * (g.E + g.Ev) / causal_div;
  const uint64_t bytes = (q.numel() + k.numel() + v.numel() + out.numel()) * q.element_size() + lse.numel() * 4;
  DispatchFused(q.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    Launch("xxnpu::sdpa_flash_fwd", q.device().index(), items, bytes, flops,
           [g, fo](BlockRange r) { return ForItems(r.begin, r.end, [&](int64_t i) { ForwardItem<T>(g, fo, i); }); });
  });
  // No dropout, so no Philox state; but the op's meta function (what torch.compile traces
  // with) gives philox_seed and philox_offset as 0-dim int64 tensors, and Inductor's
  // generated code asserts every output's size and stride against it: undefined tensors
  // failed there ("expected Tensor()"). CUDA's flash attention returns the same two CPU
  // scalars when it has no dropout.
  at::Tensor philox_seed = at::zeros({}, at::kLong);
  at::Tensor philox_offset = at::zeros({}, at::kLong);
  return {out, lse, at::Tensor(), at::Tensor(), c10::SymInt(g.L), c10::SymInt(g.S), philox_seed, philox_offset,
          at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> FusedAttentionBackward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/,
    c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p, bool is_causal,
    const at::Tensor& /*philox_seed*/, const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  constexpr const char* kOp = "_scaled_dot_product_fused_attention_overrideable_backward";
  CheckFusedArgs(kOp, q, k, v, attn_bias, dropout_p, is_causal);
  CheckSameDevice(kOp, "grad_out", grad_out, q.device());
  CheckSameDevice(kOp, "out", out, q.device());
  CheckSameDevice(kOp, "logsumexp", logsumexp, q.device());
  const std::array<int64_t, 4> out_shape{q.size(0), q.size(1), q.size(2), v.size(3)};
  TORCH_CHECK(grad_out.sizes() == c10::IntArrayRef(out_shape) && out.sizes() == c10::IntArrayRef(out_shape), kOp,
              ": expected grad_out and out of shape ", c10::IntArrayRef(out_shape), ", got ", grad_out.sizes(),
              " and ", out.sizes());
  TORCH_CHECK(grad_out.scalar_type() == q.scalar_type() && out.scalar_type() == q.scalar_type(), kOp,
              ": expected grad_out and out of query's dtype ", q.scalar_type(), ", got ", grad_out.scalar_type(),
              " and ", out.scalar_type());
  TORCH_CHECK(logsumexp.scalar_type() == at::kFloat && logsumexp.is_contiguous() &&
                  logsumexp.sizes() == at::IntArrayRef({q.size(0), q.size(1), q.size(2)}),
              kOp, ": expected a contiguous float32 logsumexp of shape [", q.size(0), ", ", q.size(1), ", ", q.size(2),
              "], got ", logsumexp.scalar_type(), " ", logsumexp.sizes());
  const c10::DeviceGuard guard(q.device());
  const at::Tensor bias = AdditiveBias(attn_bias.defined() ? std::optional<at::Tensor>(attn_bias) : std::nullopt,
                                       q.scalar_type());
  const AttnGeom g = MakeGeom(q, k, v, bias, is_causal, scale);
  at::Tensor dq = at::empty_like(q);
  at::Tensor dk = at::empty_like(k);
  at::Tensor dv = at::empty_like(v);
  const bool want_dbias = grad_input_mask[3] && attn_bias.defined() && attn_bias.scalar_type() != at::kBool;
  at::Tensor dbias_full;
  if (want_dbias) dbias_full = at::zeros({g.B, g.H, g.L, g.S}, q.options().dtype(at::kFloat));
  if (g.B * g.H == 0 || (g.L == 0 && g.S == 0)) {
    return {dq, dk, dv, want_dbias ? at::zeros_like(attn_bias) : at::Tensor()};
  }
  at::Tensor delta = NewXxnpuTensor({g.B, g.H, g.L}, std::nullopt, at::kFloat);
  BackwardArgs a;
  a.grad_out = grad_out.const_data_ptr();
  a.go = StridesOf(grad_out);
  a.out = out.const_data_ptr();
  a.o = StridesOf(out);
  a.lse = logsumexp.const_data_ptr<float>();
  a.delta = delta.data_ptr<float>();
  a.dq = dq.data_ptr();
  a.dqs = StridesOf(dq);
  a.dk = dk.data_ptr();
  a.dks = StridesOf(dk);
  a.dv = dv.data_ptr();
  a.dvs = StridesOf(dv);
  a.dbias = want_dbias ? dbias_full.data_ptr<float>() : nullptr;
  const uint64_t causal_div = is_causal ? 2 : 1;
  const uint64_t score_flops = 2ull * g.B * g.H * g.L * g.S / causal_div;
  const uint64_t esz = q.element_size();
  const int64_t nkb = (g.S + kBlockKeys - 1) / kBlockKeys;
  DispatchFused(q.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    // dq needs S, dP and dS . k: 2E + 2Ev per score; dk/dv recompute S and dP and add
    // p^T dO and dS^T q.
    Launch("xxnpu::sdpa_flash_bwd_dq", q.device().index(), g.B * g.Hk * g.nqb,
           (q.numel() * 2 + k.numel() + v.numel() + 2 * out.numel()) * esz, score_flops * (2 * g.E + g.Ev),
           [g, a](BlockRange r) { return ForItems(r.begin, r.end, [&](int64_t i) { BackwardDqItem<T>(g, a, i); }); });
    Launch("xxnpu::sdpa_flash_bwd_dkdv", q.device().index(), g.B * g.Hk * nkb,
           (q.numel() + 2 * k.numel() + 2 * v.numel() + out.numel()) * esz, score_flops * (2 * g.E + 2 * g.Ev),
           [g, a](BlockRange r) {
             return ForItems(r.begin, r.end, [&](int64_t i) { BackwardDkDvItem<T>(g, a, i); });
           });
  });
  at::Tensor dbias;
  if (want_dbias) dbias = at::sum_to(dbias_full, attn_bias.sizes()).to(attn_bias.scalar_type());
  return {dq, dk, dv, dbias};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", &FusedSdpChoice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", &FusedAttentionForward);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", &FusedAttentionBackward);
}

}  // namespace
}  // namespace xxnpu

// F.scaled_dot_product_attention reads the backend from this stub, not from the op.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &xxnpu::FusedSdpChoice)
}  // namespace at::native
