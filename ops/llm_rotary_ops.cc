// torch.ops.xxnpu.rotary_embedding and rotary_embedding_ (vLLM's layout, NeoX and GPT-J
// pairings): an xxnpu kernel, a CPU reference and a Meta kernel each; see llm_common.h and
// docs/llm-ops.md.
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
#include "ops/fast_math.h"
#include "ops/llm_common.h"

namespace xxnpu::llm {
namespace {

// ================================================================== rotary_embedding
// vLLM's layout: positions [*P] (int32/int64); query [*P, num_heads * head_size] or
// [*P, num_heads, head_size]; key likewise with its own head count; cos_sin_cache
// [max_position, rot_dim] = [cos | sin], rot_dim even and <= head_size (dims past rot_dim
// pass through). is_neox rotates the pairs (i, i + rot_dim/2); otherwise (GPT-J) the
// pairs (2i, 2i + 1). The cache may be float32 or the query's dtype.

struct RopeGeom {
  int64_t tokens = 0, head_size = 0, rot_dim = 0, max_pos = 0;
};

void CheckRopeArgs(const char* op, const at::Tensor& positions, const at::Tensor& query, const at::Tensor& key,
                   int64_t head_size, const at::Tensor& cache) {
  CheckIndexDtype(op, "positions", positions);
  CheckFloatDtype(op, "query", query);
  CheckSameDtype(op, "key", key, "query", query);
  CheckFloatDtype(op, "cos_sin_cache", cache);
  TORCH_CHECK(cache.scalar_type() == query.scalar_type() || cache.scalar_type() == at::kFloat, op,
              ": cos_sin_cache must be float32 or the query's dtype (", query.scalar_type(), "), got ",
              cache.scalar_type());
  TORCH_CHECK(head_size > 0, op, ": head_size must be positive, got ", head_size);
  CheckDim(op, "cos_sin_cache", cache, 2, "[max_position, rot_dim]");
  const c10::SymInt rot_dim = cache.sym_size(1);
  TORCH_CHECK(rot_dim % 2 == 0 && rot_dim > 0 && rot_dim <= head_size, op,
              ": cos_sin_cache's last dimension (rot_dim) must be even and in (0, head_size=", head_size, "], got ",
              rot_dim);
  const int64_t pd = positions.dim();
  const std::array<std::pair<const char*, const at::Tensor*>, 2> operands{{{"query", &query}, {"key", &key}}};
  for (const auto& [name, t] : operands) {
    TORCH_CHECK(t->dim() == pd + 1 || t->dim() == pd + 2, op, ": ", name, " must be positions.shape + [num_heads * ",
                "head_size] or + [num_heads, head_size]; positions has shape ", positions.sym_sizes(), ", ", name,
                " has shape ", t->sym_sizes());
    TORCH_CHECK(t->sym_sizes().slice(0, pd) == positions.sym_sizes(), op, ": ", name, "'s leading dimensions ",
                t->sym_sizes().slice(0, pd), " must match positions' shape ", positions.sym_sizes());
    c10::SymInt per_token = 1;
    for (int64_t d = pd; d < t->dim(); ++d) per_token = per_token * t->sym_size(d);
    TORCH_CHECK(per_token % head_size == 0 && (t->dim() == pd + 1 || t->sym_size(-1) == head_size), op, ": ", name,
                "'s per-token shape ", t->sym_sizes().slice(pd), " is not a whole number of heads of head_size ",
                head_size);
  }
}

// The concrete geometry (CPU and xxnpu kernels, after CheckRopeArgs).
RopeGeom MakeRopeGeom(const at::Tensor& positions, int64_t head_size, const at::Tensor& cache) {
  RopeGeom g;
  g.tokens = positions.numel();
  g.head_size = head_size;
  g.rot_dim = cache.size(1);
  g.max_pos = cache.size(0);
  return g;
}

// Reference rotation (float32) of x viewed as [tokens, heads, head_size]; returns x's
// shape and dtype.
at::Tensor RopeRef(const at::Tensor& positions, const at::Tensor& x, const RopeGeom& g, const at::Tensor& cache,
                   bool is_neox) {
  const at::Tensor xf = x.reshape({g.tokens, -1, g.head_size}).to(at::kFloat);
  const int64_t half = g.rot_dim / 2;
  const at::Tensor cs = cache.index_select(0, positions.reshape(-1)).to(at::kFloat);
  const at::Tensor cos = cs.slice(1, 0, half).unsqueeze(1);
  const at::Tensor sin = cs.slice(1, half, g.rot_dim).unsqueeze(1);
  const at::Tensor rot = xf.slice(-1, 0, g.rot_dim);
  const at::Tensor pass = xf.slice(-1, g.rot_dim, g.head_size);
  at::Tensor rotated;
  if (is_neox) {
    const at::Tensor x1 = rot.slice(-1, 0, half), x2 = rot.slice(-1, half, g.rot_dim);
    rotated = at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
  } else {
    const at::Tensor x1 = rot.slice(-1, 0, g.rot_dim, 2), x2 = rot.slice(-1, 1, g.rot_dim, 2);
    rotated = at::stack({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1).flatten(-2);
  }
  return at::cat({rotated, pass}, -1).to(x.scalar_type()).reshape(x.sizes()).contiguous();
}

void CheckRopePositionsCpu(const char* op, const at::Tensor& positions, const RopeGeom& g) {
  if (positions.numel() == 0) return;
  const int64_t lo = positions.min().item<int64_t>(), hi = positions.max().item<int64_t>();
  TORCH_CHECK(lo >= 0 && hi < g.max_pos, op, ": positions must be in [0, ", g.max_pos,
              ") (the cos_sin_cache's rows), got values in [", lo, ", ", hi, "]");
}

std::tuple<at::Tensor, at::Tensor> RopeCpu(const at::Tensor& positions, const at::Tensor& query,
                                           const at::Tensor& key, int64_t head_size, const at::Tensor& cache,
                                           bool is_neox) {
  constexpr const char* kOp = "xxnpu::rotary_embedding";
  CheckRopeArgs(kOp, positions, query, key, head_size, cache);
  const RopeGeom g = MakeRopeGeom(positions, head_size, cache);
  CheckRopePositionsCpu(kOp, positions, g);
  return {RopeRef(positions, query, g, cache, is_neox), RopeRef(positions, key, g, cache, is_neox)};
}

std::tuple<at::Tensor, at::Tensor> RopeMeta(const at::Tensor& positions, const at::Tensor& query,
                                            const at::Tensor& key, int64_t head_size, const at::Tensor& cache, bool) {
  CheckRopeArgs("xxnpu::rotary_embedding", positions, query, key, head_size, cache);
  return {at::empty_symint(query.sym_sizes(), query.options()), at::empty_symint(key.sym_sizes(), key.options())};
}

void RopeInplaceCpu(const at::Tensor& positions, at::Tensor& query, at::Tensor& key, int64_t head_size,
                    const at::Tensor& cache, bool is_neox) {
  constexpr const char* kOp = "xxnpu::rotary_embedding_";
  CheckRopeArgs(kOp, positions, query, key, head_size, cache);
  const RopeGeom g = MakeRopeGeom(positions, head_size, cache);
  CheckRopePositionsCpu(kOp, positions, g);
  query.copy_(RopeRef(positions, query, g, cache, is_neox));
  key.copy_(RopeRef(positions, key, g, cache, is_neox));
}

void RopeInplaceMeta(const at::Tensor& positions, at::Tensor& query, at::Tensor& key, int64_t head_size,
                     const at::Tensor& cache, bool) {
  CheckRopeArgs("xxnpu::rotary_embedding_", positions, query, key, head_size, cache);
}

// One operand of the device kernel: [tokens, heads, head_size] with element strides.
struct RopeOperand {
  const void* in = nullptr;
  void* out = nullptr;
  int64_t heads = 0;
  int64_t in_s[3] = {0, 0, 0};
  int64_t out_s[3] = {0, 0, 0};
};

// Strides of x as [tokens, heads, head_size] if a view allows it.
std::optional<std::vector<int64_t>> TokenHeadStrides(const at::Tensor& x, const RopeGeom& g) {
  const int64_t heads = g.tokens == 0 ? 0 : x.numel() / (g.tokens * g.head_size);
  return at::detail::computeStride(x.sizes(), x.strides(), at::IntArrayRef{g.tokens, heads, g.head_size});
}

template <typename T, typename C>
void RopeRow(const RopeOperand& o, int64_t t, const C* c, int64_t cs1, int64_t half, int64_t rot_dim,
             int64_t head_size, bool is_neox, bool copy_pass) {
  const T* in = static_cast<const T*>(DeviceView(o.in));
  T* out = static_cast<T*>(DeviceView(o.out));
  for (int64_t h = 0; h < o.heads; ++h) {
    const T* xi = in + t * o.in_s[0] + h * o.in_s[1];
    T* xo = out + t * o.out_s[0] + h * o.out_s[1];
    if (is_neox && o.in_s[2] == 1 && o.out_s[2] == 1 && cs1 == 1) {  // dense: vectorizes
      for (int64_t i = 0; i < half; ++i) {
        const float cos = static_cast<float>(c[i]), sin = static_cast<float>(c[half + i]);
        const float x1 = static_cast<float>(xi[i]), x2 = static_cast<float>(xi[half + i]);
        xo[i] = static_cast<T>(x1 * cos - x2 * sin);
        xo[half + i] = static_cast<T>(x2 * cos + x1 * sin);
      }
      if (copy_pass) {
        for (int64_t i = rot_dim; i < head_size; ++i) xo[i] = xi[i];
      }
      continue;
    }
    for (int64_t i = 0; i < half; ++i) {
      const int64_t i1 = is_neox ? i : 2 * i;
      const int64_t i2 = is_neox ? i + half : 2 * i + 1;
      const float cos = static_cast<float>(c[i * cs1]), sin = static_cast<float>(c[(half + i) * cs1]);
      const float x1 = static_cast<float>(xi[i1 * o.in_s[2]]), x2 = static_cast<float>(xi[i2 * o.in_s[2]]);
      xo[i1 * o.out_s[2]] = static_cast<T>(x1 * cos - x2 * sin);
      xo[i2 * o.out_s[2]] = static_cast<T>(x2 * cos + x1 * sin);
    }
    if (copy_pass) {
      for (int64_t i = rot_dim; i < head_size; ++i) xo[i * o.out_s[2]] = xi[i * o.in_s[2]];
    }
  }
}

// Rotates query/key (in: `q_in`, `k_in`) into `q_out`, `k_out` (the same tensors when in place).
void LaunchRope(const char* op, const at::Tensor& positions, const at::Tensor& q_in, const at::Tensor& k_in,
                const at::Tensor& q_out, const at::Tensor& k_out, const RopeGeom& g, const at::Tensor& cache,
                bool is_neox) {
  if (g.tokens == 0) return;
  auto make = [&](const at::Tensor& in, const at::Tensor& out) {
    const auto si = TokenHeadStrides(in, g);
    const auto so = TokenHeadStrides(out, g);
    TORCH_CHECK(si && so, op, ": query and key are rotated in place, so they must be viewable as [tokens, heads, ",
                "head_size] without a copy; got shape ", in.sizes(), " with strides ", in.strides());
    RopeOperand o;
    o.in = in.const_data_ptr();
    o.out = out.data_ptr();
    o.heads = in.numel() / (g.tokens * g.head_size);
    for (int d = 0; d < 3; ++d) {
      o.in_s[d] = (*si)[d];
      o.out_s[d] = (*so)[d];
    }
    return o;
  };
  const RopeOperand q = make(q_in, q_out), k = make(k_in, k_out);
  const at::Tensor pos = positions.reshape(-1);
  const IndexRef pref = MakeIndexRef(pos);
  const bool copy_pass = !q_in.is_same(q_out);
  const int64_t half = g.rot_dim / 2, rot_dim = g.rot_dim, head_size = g.head_size, max_pos = g.max_pos;
  const int64_t cs0 = cache.stride(0), cs1 = cache.stride(1);
  const int64_t heads = q.heads + k.heads;
  const int64_t elems = g.tokens * heads * head_size;
  DispatchFloat(q_in.scalar_type(), op, [&](auto qtag) {
    using T = decltype(qtag);
    DispatchFloat(cache.scalar_type(), op, [&](auto ctag) {
      using C = decltype(ctag);
      if constexpr (std::is_same_v<C, float> || std::is_same_v<C, T>) {
        const C* cp = cache.const_data_ptr<C>();
        const uint64_t bytes = 2 * elems * sizeof(T) + g.tokens * (rot_dim * sizeof(C) + (pref.is64 ? 8 : 4));
        LaunchItems(op, q_in.device(), g.tokens, heads * head_size, bytes, 3 * g.tokens * heads * rot_dim,
                    [=](int64_t t0, int64_t t1) -> absl::Status {
          const C* cv = DeviceView(cp);
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t p = pref.Load(t);
            if (p < 0 || p >= max_pos) {
              return absl::OutOfRangeError(absl::StrCat(op, ": positions[", t, "] = ", p,
                                                        " is outside the cos_sin_cache's rows [0, ", max_pos, ")"));
            }
            const C* c = cv + p * cs0;
            RopeRow<T>(q, t, c, cs1, half, rot_dim, head_size, is_neox, copy_pass);
            RopeRow<T>(k, t, c, cs1, half, rot_dim, head_size, is_neox, copy_pass);
          }
          return absl::OkStatus();
        });
      }
    });
  });
}

std::tuple<at::Tensor, at::Tensor> RopeXxnpu(const at::Tensor& positions, const at::Tensor& query,
                                             const at::Tensor& key, int64_t head_size, const at::Tensor& cache,
                                             bool is_neox) {
  constexpr const char* kOp = "xxnpu::rotary_embedding";
  CheckRopeArgs(kOp, positions, query, key, head_size, cache);
  const RopeGeom g = MakeRopeGeom(positions, head_size, cache);
  CheckDevices(kOp, {{"query", &query}, {"key", &key}, {"positions", &positions}, {"cos_sin_cache", &cache}});
  const c10::DeviceGuard guard(query.device());
  at::Tensor q_out = at::empty(query.sizes(), query.options());
  at::Tensor k_out = at::empty(key.sizes(), key.options());
  // Inputs that do not view as [tokens, heads, head_size] are first copied (on the device).
  const at::Tensor q_in = TokenHeadStrides(query, g) ? query : query.contiguous();
  const at::Tensor k_in = TokenHeadStrides(key, g) ? key : key.contiguous();
  LaunchRope(kOp, positions, q_in, k_in, q_out, k_out, g, cache, is_neox);
  return {q_out, k_out};
}

void RopeInplaceXxnpu(const at::Tensor& positions, at::Tensor& query, at::Tensor& key, int64_t head_size,
                      const at::Tensor& cache, bool is_neox) {
  constexpr const char* kOp = "xxnpu::rotary_embedding_";
  CheckRopeArgs(kOp, positions, query, key, head_size, cache);
  const RopeGeom g = MakeRopeGeom(positions, head_size, cache);
  CheckDevices(kOp, {{"query", &query}, {"key", &key}, {"positions", &positions}, {"cos_sin_cache", &cache}});
  at::assert_no_overlap(query, key);
  const c10::DeviceGuard guard(query.device());
  LaunchRope(kOp, positions, query, key, query, key, g, cache, is_neox);
}

TORCH_LIBRARY_FRAGMENT(xxnpu, m) {
  m.def("rotary_embedding(Tensor positions, Tensor query, Tensor key, int head_size, Tensor cos_sin_cache, "
        "bool is_neox) -> (Tensor, Tensor)");
  m.def("rotary_embedding_(Tensor positions, Tensor(a!) query, Tensor(b!) key, int head_size, "
        "Tensor cos_sin_cache, bool is_neox) -> ()");
}

TORCH_LIBRARY_IMPL(xxnpu, PrivateUse1, m) {
  m.impl("rotary_embedding", &RopeXxnpu);
  m.impl("rotary_embedding_", &RopeInplaceXxnpu);
}

TORCH_LIBRARY_IMPL(xxnpu, CPU, m) {
  m.impl("rotary_embedding", &RopeCpu);
  m.impl("rotary_embedding_", &RopeInplaceCpu);
}

TORCH_LIBRARY_IMPL(xxnpu, Meta, m) {
  m.impl("rotary_embedding", &RopeMeta);
  m.impl("rotary_embedding_", &RopeInplaceMeta);
}

}  // namespace
}  // namespace xxnpu::llm
