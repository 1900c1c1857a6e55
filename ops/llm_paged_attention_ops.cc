// The paged KV cache: torch.ops.xxnpu.reshape_and_cache (writes keys and values into
// cache slots) and paged_attention (decode attention over a block table; dot products
// through the BLAS torch links, sgemm_). An xxnpu kernel, a CPU reference and a Meta
// kernel each. Index values that live on the device (slot_mapping, block_tables, seq_lens)
// are checked by the kernel, which fails with kOutOfRange: an AcceleratorError at the next
// synchronising call, naming the kernel and the value. See llm_common.h, docs/llm-ops.md.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/c10/torch_status.h"
#include "device/runtime.h"
#include "ops/cpu_blas.h"
#include "ops/fast_math.h"
#include "ops/llm_common.h"


namespace xxnpu::llm {
namespace {

// ================================================================== reshape_and_cache
// key, value [num_tokens, num_kv_heads, head_size] are written into key_cache, value_cache
// [num_blocks, block_size, num_kv_heads, head_size] (vLLM's flash layout) at the slots
// slot_mapping [num_tokens] gives (slot = block * block_size + offset). A negative slot
// skips its token (padding), as in vLLM.

void CheckReshapeAndCacheArgs(const char* op, const at::Tensor& key, const at::Tensor& value,
                              const at::Tensor& key_cache, const at::Tensor& value_cache,
                              const at::Tensor& slot_mapping) {
  CheckFloatDtype(op, "key", key);
  CheckSameDtype(op, "value", value, "key", key);
  CheckSameDtype(op, "key_cache", key_cache, "key", key);
  CheckSameDtype(op, "value_cache", value_cache, "key", key);
  CheckIndexDtype(op, "slot_mapping", slot_mapping);
  CheckDim(op, "key", key, 3, "[num_tokens, num_kv_heads, head_size]");
  TORCH_CHECK(value.sym_sizes() == key.sym_sizes(), op, ": value must have key's shape ", key.sym_sizes(), ", got ",
              value.sym_sizes());
  CheckDim(op, "key_cache", key_cache, 4, "[num_blocks, block_size, num_kv_heads, head_size]");
  TORCH_CHECK(value_cache.sym_sizes() == key_cache.sym_sizes(), op, ": value_cache must have key_cache's shape ",
              key_cache.sym_sizes(), ", got ", value_cache.sym_sizes());
  TORCH_CHECK(key_cache.sym_size(2) == key.sym_size(1) && key_cache.sym_size(3) == key.sym_size(2), op,
              ": key_cache's [num_kv_heads, head_size] = ", key_cache.sym_sizes().slice(2), " must match key's ",
              key.sym_sizes().slice(1));
  CheckDim(op, "slot_mapping", slot_mapping, 1, "[num_tokens]");
  TORCH_CHECK(slot_mapping.sym_size(0) == key.sym_size(0), op, ": slot_mapping has ", slot_mapping.sym_size(0),
              " entries for ", key.sym_size(0), " tokens");
}

void ReshapeAndCacheCpu(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                        at::Tensor& value_cache, const at::Tensor& slot_mapping) {
  constexpr const char* kOp = "xxnpu::reshape_and_cache";
  CheckReshapeAndCacheArgs(kOp, key, value, key_cache, value_cache, slot_mapping);
  const int64_t block_size = key_cache.size(1), slots = key_cache.size(0) * block_size;
  const at::Tensor keep = (slot_mapping >= 0).nonzero().squeeze(1);
  const at::Tensor s = slot_mapping.index_select(0, keep).to(at::kLong);
  if (s.numel() == 0) return;
  const int64_t hi = s.max().item<int64_t>();
  TORCH_CHECK(hi < slots, kOp, ": slot_mapping holds slot ", hi, ", outside the cache's ", slots,
              " slots (num_blocks ", key_cache.size(0), " x block_size ", block_size, ")");
  c10::List<std::optional<at::Tensor>> idx;
  idx.push_back(s.div(block_size, "floor"));
  idx.push_back(s.remainder(block_size));
  key_cache.index_put_(idx, key.index_select(0, keep));
  value_cache.index_put_(idx, value.index_select(0, keep));
}

void ReshapeAndCacheMeta(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                         at::Tensor& value_cache, const at::Tensor& slot_mapping) {
  CheckReshapeAndCacheArgs("xxnpu::reshape_and_cache", key, value, key_cache, value_cache, slot_mapping);
}

void ReshapeAndCacheXxnpu(const at::Tensor& key, const at::Tensor& value, at::Tensor& key_cache,
                          at::Tensor& value_cache, const at::Tensor& slot_mapping) {
  constexpr const char* kOp = "xxnpu::reshape_and_cache";
  CheckReshapeAndCacheArgs(kOp, key, value, key_cache, value_cache, slot_mapping);
  CheckDevices(kOp, {{"key", &key}, {"value", &value}, {"key_cache", &key_cache}, {"value_cache", &value_cache},
                     {"slot_mapping", &slot_mapping}});
  at::assert_no_overlap(key_cache, value_cache);
  const c10::DeviceGuard guard(key.device());
  const int64_t tokens = key.size(0), heads = key.size(1), hs = key.size(2);
  const int64_t num_blocks = key_cache.size(0), block_size = key_cache.size(1);
  const IndexRef sref = MakeIndexRef(slot_mapping);
  const std::array<int64_t, 3> ks{key.stride(0), key.stride(1), key.stride(2)};
  const std::array<int64_t, 3> vs{value.stride(0), value.stride(1), value.stride(2)};
  const std::array<int64_t, 4> kcs{key_cache.stride(0), key_cache.stride(1), key_cache.stride(2), key_cache.stride(3)};
  const std::array<int64_t, 4> vcs{value_cache.stride(0), value_cache.stride(1), value_cache.stride(2),
                                   value_cache.stride(3)};
  DispatchFloat(key.scalar_type(), kOp, [&](auto tag) {
    using T = decltype(tag);
    const T* kp = key.const_data_ptr<T>();
    const T* vp = value.const_data_ptr<T>();
    T* kcp = key_cache.data_ptr<T>();
    T* vcp = value_cache.data_ptr<T>();
    LaunchItems(kOp, key.device(), tokens, 2 * heads * hs, 4 * tokens * heads * hs * sizeof(T), 0,
                [=](int64_t t0, int64_t t1) -> absl::Status {
      const T* kv = DeviceView(kp);
      const T* vv = DeviceView(vp);
      T* kcv = DeviceView(kcp);
      T* vcv = DeviceView(vcp);
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t slot = sref.Load(t);
        if (slot < 0) continue;
        if (slot >= num_blocks * block_size) {
          return absl::OutOfRangeError(absl::StrCat(kOp, ": slot_mapping[", t, "] = ", slot,
                                                    " is outside the cache's ", num_blocks * block_size,
                                                    " slots (num_blocks ", num_blocks, " x block_size ", block_size,
                                                    ")"));
        }
        const int64_t b = slot / block_size, off = slot % block_size;
        for (int64_t h = 0; h < heads; ++h) {
          const T* ki = kv + t * ks[0] + h * ks[1];
          const T* vi = vv + t * vs[0] + h * vs[1];
          T* ko = kcv + b * kcs[0] + off * kcs[1] + h * kcs[2];
          T* vo = vcv + b * vcs[0] + off * vcs[1] + h * vcs[2];
          for (int64_t i = 0; i < hs; ++i) {
            ko[i * kcs[3]] = ki[i * ks[2]];
            vo[i * vcs[3]] = vi[i * vs[2]];
          }
        }
      }
      return absl::OkStatus();
    });
  });
}

// ================================================================== paged_attention

// Column-major single-precision GEMM, C = alpha * op(A) op(B) + beta * C, from the BLAS
// torch's CPU build links and exports (MKL in the pip wheel; the Fortran entry point):
// the attention's dot products run the code the CPU backend's matmul runs, ~20-40x a
// plain loop (which gets no wider than SSE2 in a portable build).
void Sgemm(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  const int ilda = static_cast<int>(lda), ildb = static_cast<int>(ldb), ildc = static_cast<int>(ldc);
  sgemm_(&transa, &transb, &im, &in, &ik, &alpha, a, &ilda, b, &ildb, &beta, c, &ildc);
}

// The n rows (tokens) of one cache block for one kv head, row stride `row_stride`,
// element stride `elem_stride`, as a float32 matrix with dense rows for Sgemm: the cache
// memory itself when it already is one, else converted into `scratch`. Returns the
// matrix and its leading dimension.
template <typename T>
std::pair<const float*, int64_t> BlockAsFloat(const T* p, int64_t n, int64_t D, int64_t row_stride,
                                              int64_t elem_stride, std::vector<float>& scratch) {
  if constexpr (std::is_same_v<T, float>) {
    if (elem_stride == 1 && row_stride >= D && row_stride <= INT_MAX) return {p, row_stride};
  }
  scratch.resize(n * D);
  for (int64_t t = 0; t < n; ++t) LoadFloats(p + t * row_stride, elem_stride, D, &scratch[t * D]);
  return {scratch.data(), D};
}
// Decode attention: query [num_seqs, num_heads, head_size] attends, per sequence s, to the
// first seq_lens[s] tokens of its paged K/V: token t lives in block block_tables[s][t /
// block_size], at offset t % block_size, of key_cache/value_cache [num_blocks, block_size,
// num_kv_heads, head_size]. Grouped-query heads: query head h reads kv head
// h / (num_heads / num_kv_heads). out = softmax(q . k * scale) @ v; a sequence of length 0
// gives zeros. A prefill is the same op with one "sequence" per prompt token (seq_lens
// 1..n over the same block table): causal attention.

struct PagedGeom {
  int64_t seqs = 0, heads = 0, kv_heads = 0, head_size = 0, num_blocks = 0, block_size = 0, max_blocks = 0;
};

void CheckPagedAttentionArgs(const char* op, const at::Tensor& query, const at::Tensor& key_cache,
                                  const at::Tensor& value_cache, const at::Tensor& block_tables,
                                  const at::Tensor& seq_lens) {
  CheckFloatDtype(op, "query", query);
  CheckSameDtype(op, "key_cache", key_cache, "query", query);
  CheckSameDtype(op, "value_cache", value_cache, "query", query);
  CheckIndexDtype(op, "block_tables", block_tables);
  CheckIndexDtype(op, "seq_lens", seq_lens);
  CheckDim(op, "query", query, 3, "[num_seqs, num_heads, head_size]");
  CheckDim(op, "key_cache", key_cache, 4, "[num_blocks, block_size, num_kv_heads, head_size]");
  TORCH_CHECK(value_cache.sym_sizes() == key_cache.sym_sizes(), op, ": value_cache must have key_cache's shape ",
              key_cache.sym_sizes(), ", got ", value_cache.sym_sizes());
  const c10::SymInt seqs = query.sym_size(0), heads = query.sym_size(1), kv_heads = key_cache.sym_size(2);
  TORCH_CHECK(key_cache.sym_size(3) == query.sym_size(2), op, ": key_cache's head_size ", key_cache.sym_size(3),
              " differs from query's ", query.sym_size(2));
  TORCH_CHECK(kv_heads > 0 && heads % kv_heads == 0, op, ": query's ", heads,
              " heads must be a multiple of the cache's ", kv_heads, " kv heads (grouped-query attention)");
  CheckDim(op, "block_tables", block_tables, 2, "[num_seqs, max_blocks_per_seq]");
  TORCH_CHECK(block_tables.sym_size(0) == seqs, op, ": block_tables has ", block_tables.sym_size(0), " rows for ",
              seqs, " sequences");
  CheckDim(op, "seq_lens", seq_lens, 1, "[num_seqs]");
  TORCH_CHECK(seq_lens.sym_size(0) == seqs, op, ": seq_lens has ", seq_lens.sym_size(0), " entries for ", seqs,
              " sequences");
}

PagedGeom MakePagedGeom(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& block_tables) {
  PagedGeom g;
  g.seqs = query.size(0);
  g.heads = query.size(1);
  g.head_size = query.size(2);
  g.num_blocks = key_cache.size(0);
  g.block_size = key_cache.size(1);
  g.kv_heads = key_cache.size(2);
  g.max_blocks = block_tables.size(1);
  return g;
}

// Batched over the sequences (a handful of ATen ops whatever their number): every
// sequence's table is gathered to its full max_blocks * block_size tokens and the tokens
// past its length are masked out of the softmax.
at::Tensor PagedAttentionCpu(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                             const at::Tensor& block_tables, const at::Tensor& seq_lens, double scale) {
  constexpr const char* kOp = "xxnpu::paged_attention";
  CheckPagedAttentionArgs(kOp, query, key_cache, value_cache, block_tables, seq_lens);
  const PagedGeom g = MakePagedGeom(query, key_cache, block_tables);
  if (query.numel() == 0) return at::zeros(query.sizes(), query.options());
  const int64_t max_len = g.max_blocks * g.block_size, group = g.heads / g.kv_heads;
  const at::Tensor lens = seq_lens.to(at::kLong);
  const at::Tensor tables = block_tables.to(at::kLong);
  for (int64_t s = 0; s < g.seqs; ++s) {
    const int64_t len = lens[s].item<int64_t>();
    TORCH_CHECK(len >= 0 && len <= max_len, kOp, ": seq_lens[", s, "] = ", len, " does not fit the block table's ",
                g.max_blocks, " blocks of ", g.block_size, " tokens");
  }
  // Only the blocks a sequence uses must be valid (the rest of its row may be padding).
  const at::Tensor used = at::arange(g.max_blocks, lens.options()).mul(g.block_size).unsqueeze(0) <
                          lens.unsqueeze(1);                                    // [S, M]
  const at::Tensor bad = used & ((tables < 0) | (tables >= g.num_blocks));
  if (bad.any().item<bool>()) {
    const at::Tensor where = bad.nonzero()[0];
    const int64_t s = where[0].item<int64_t>(), j = where[1].item<int64_t>();
    TORCH_CHECK(false, kOp, ": block_tables[", s, "][", j, "] = ", tables[s][j].item<int64_t>(),
                " is outside the cache's ", g.num_blocks, " blocks");
  }
  const at::Tensor safe = at::where(used, tables, at::zeros_like(tables)).flatten();
  // [S * M, BS, KVH, D] -> [S, KVH, max_len, D] in float32.
  auto gather = [&](const at::Tensor& cache) {
    return cache.index_select(0, safe).to(at::kFloat).view({g.seqs, max_len, g.kv_heads, g.head_size})
        .permute({0, 2, 1, 3});
  };
  const at::Tensor k = gather(key_cache), v = gather(value_cache);
  // Query heads kvh * group + j read kv head kvh: [S, KVH, group, D].
  const at::Tensor q = query.to(at::kFloat).reshape({g.seqs, g.kv_heads, group, g.head_size});
  const at::Tensor past = at::arange(max_len, lens.options()).view({1, 1, 1, max_len}) >=
                          lens.view({g.seqs, 1, 1, 1});
  const at::Tensor scores = at::matmul(q, k.transpose(2, 3)).mul(scale).masked_fill(past, -INFINITY);
  // A sequence of length 0 has no keys: its row is all -inf (softmax NaN); it gives zeros.
  const at::Tensor p = at::softmax(scores, -1).masked_fill((lens == 0).view({g.seqs, 1, 1, 1}), 0.0);
  return at::matmul(p, v).reshape({g.seqs, g.heads, g.head_size}).to(query.scalar_type());
}

at::Tensor PagedAttentionMeta(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                              const at::Tensor& block_tables, const at::Tensor& seq_lens, double) {
  CheckPagedAttentionArgs("xxnpu::paged_attention", query, key_cache, value_cache, block_tables, seq_lens);
  return at::empty_symint(query.sym_sizes(), query.options());
}

at::Tensor PagedAttentionXxnpu(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                               const at::Tensor& block_tables, const at::Tensor& seq_lens, double scale) {
  constexpr const char* kOp = "xxnpu::paged_attention";
  CheckPagedAttentionArgs(kOp, query, key_cache, value_cache, block_tables, seq_lens);
  const PagedGeom g = MakePagedGeom(query, key_cache, block_tables);
  CheckDevices(kOp, {{"query", &query}, {"key_cache", &key_cache}, {"value_cache", &value_cache},
                     {"block_tables", &block_tables}, {"seq_lens", &seq_lens}});
  const c10::DeviceGuard guard(query.device());
  at::Tensor out = at::empty(query.sizes(), query.options());
  if (out.numel() == 0) return out;
  const IndexRef bt = MakeIndexRef(block_tables);
  const IndexRef sl = MakeIndexRef(seq_lens);
  const std::array<int64_t, 3> qs{query.stride(0), query.stride(1), query.stride(2)};
  const std::array<int64_t, 4> kcs{key_cache.stride(0), key_cache.stride(1), key_cache.stride(2), key_cache.stride(3)};
  const std::array<int64_t, 4> vcs{value_cache.stride(0), value_cache.stride(1), value_cache.stride(2),
                                   value_cache.stride(3)};
  const float fscale = static_cast<float>(scale);
  TORCH_CHECK(g.max_blocks * g.block_size * std::max<int64_t>(1, g.heads) <= INT_MAX, kOp,
              ": a sequence's ", g.max_blocks * g.block_size, " tokens x ", g.heads,
              " heads exceed the BLAS's 32-bit sizes");
  // Work item: one (sequence, kv head), so each K/V row is read once for its query group.
  // The cost figures assume full block tables (the lengths are on the device).
  const int64_t items = g.seqs * g.kv_heads;
  const int64_t max_len = g.max_blocks * g.block_size;
  const uint64_t flops = 4ull * g.seqs * g.heads * max_len * g.head_size;
  DispatchFloat(query.scalar_type(), kOp, [&](auto tag) {
    using T = decltype(tag);
    const uint64_t bytes = (2ull * g.seqs * g.heads * g.head_size + 2ull * items * max_len * g.head_size) * sizeof(T);
    const T* qp = query.const_data_ptr<T>();
    const T* kp = key_cache.const_data_ptr<T>();
    const T* vp = value_cache.const_data_ptr<T>();
    T* op = out.data_ptr<T>();
    LaunchItems(kOp, query.device(), items, max_len * g.head_size * (g.heads / g.kv_heads), bytes, flops,
                [=](int64_t i0, int64_t i1) -> absl::Status {
      const T* qv = DeviceView(qp);
      const T* kv = DeviceView(kp);
      const T* vv = DeviceView(vp);
      T* ov = DeviceView(op);
      const int64_t D = g.head_size, group = g.heads / g.kv_heads;
      const SingleThreadedBlas single_threaded_blas;
      // Scratch of this compute thread (a GPU block's shared memory).
      thread_local std::vector<float> qf, block, scores, acc;
      qf.resize(group * D);
      acc.resize(group * D);
      for (int64_t item = i0; item < i1; ++item) {
        const int64_t s = item / g.kv_heads, kvh = item % g.kv_heads;
        const int64_t len = sl.Load(s);
        if (len < 0 || len > max_len) {
          return absl::OutOfRangeError(absl::StrCat(kOp, ": seq_lens[", s, "] = ", len,
                                                    " does not fit the block table's ", g.max_blocks, " blocks of ",
                                                    g.block_size, " tokens"));
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        scores.resize(std::max<int64_t>(1, group * len));
        for (int64_t j = 0; j < group; ++j) {
          const T* q = qv + s * qs[0] + (kvh * group + j) * qs[1];
          for (int64_t d = 0; d < D; ++d) qf[j * D + d] = static_cast<float>(q[d * qs[2]]) * fscale;
        }
        // Pass 1, block by block: scores[j][t] = (q_j * scale) . k_t for the group's heads:
        // column-major S^T (n x group, ld len) = K_block (n x D) . Q^T (D x group).
        for (int64_t bi = 0; bi * g.block_size < len; ++bi) {
          const int64_t b = bt.Load(s, bi);
          if (b < 0 || b >= g.num_blocks) {
            return absl::OutOfRangeError(absl::StrCat(kOp, ": block_tables[", s, "][", bi, "] = ", b,
                                                      " is outside the cache's ", g.num_blocks, " blocks"));
          }
          const int64_t t0 = bi * g.block_size, n = std::min(g.block_size, len - t0);
          const auto [kp, ldk] = BlockAsFloat(kv + b * kcs[0] + kvh * kcs[2], n, D, kcs[1], kcs[3], block);
          Sgemm('T', 'N', n, group, D, 1.0f, kp, ldk, qf.data(), D, 0.0f, &scores[t0], len);
        }
        // Softmax per head, in place.
        for (int64_t j = 0; j < group && len > 0; ++j) {
          float* sc = &scores[j * len];
          const float m = *std::max_element(sc, sc + len);
          float sum = 0.0f;
          for (int64_t t = 0; t < len; ++t) {
            sc[t] = ExpF(sc[t] - m);
            sum += sc[t];
          }
          const float inv = 1.0f / sum;
          for (int64_t t = 0; t < len; ++t) sc[t] *= inv;
        }
        // Pass 2 (the block table was validated in pass 1): acc_j += sum_t p_j[t] v_t:
        // column-major acc^T (D x group) += V_block^T (D x n) . P^T (n x group, ld len).
        for (int64_t bi = 0; bi * g.block_size < len; ++bi) {
          const int64_t b = bt.Load(s, bi);
          const int64_t t0 = bi * g.block_size, n = std::min(g.block_size, len - t0);
          const auto [vp, ldv] = BlockAsFloat(vv + b * vcs[0] + kvh * vcs[2], n, D, vcs[1], vcs[3], block);
          Sgemm('N', 'N', D, group, n, 1.0f, vp, ldv, &scores[t0], len, 1.0f, acc.data(), D);
        }
        for (int64_t j = 0; j < group; ++j) {
          T* o = ov + (s * g.heads + kvh * group + j) * D;
          for (int64_t d = 0; d < D; ++d) o[d] = static_cast<T>(acc[j * D + d]);
        }
      }
      return absl::OkStatus();
    });
  });
  return out;
}

TORCH_LIBRARY_FRAGMENT(xxnpu, m) {
  m.def("reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
        "Tensor slot_mapping) -> ()");
  m.def("paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor block_tables, "
        "Tensor seq_lens, float scale) -> Tensor");
}

TORCH_LIBRARY_IMPL(xxnpu, PrivateUse1, m) {
  m.impl("reshape_and_cache", &ReshapeAndCacheXxnpu);
  m.impl("paged_attention", &PagedAttentionXxnpu);
}

TORCH_LIBRARY_IMPL(xxnpu, CPU, m) {
  m.impl("reshape_and_cache", &ReshapeAndCacheCpu);
  m.impl("paged_attention", &PagedAttentionCpu);
}

TORCH_LIBRARY_IMPL(xxnpu, Meta, m) {
  m.impl("reshape_and_cache", &ReshapeAndCacheMeta);
  m.impl("paged_attention", &PagedAttentionMeta);
}

}  // namespace
}  // namespace xxnpu::llm
