// index_add on xxnpu: out[..., index[j], ...] += alpha * source[..., j, ...].
//
// It is index_select's backward, so every model that gathers rows by index needs it in its
// backward pass; packed sequences do (pack_padded_sequence(enforce_sorted=False) reorders
// the batch with index_select). Blocks own disjoint ranges of the (outer, inner)
// positions and walk the index in order, so repeated indices add up without atomics and
// the result does not depend on the number of compute threads.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/OpMathType.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/cpu_fallback.h"
#include "ops/xxnpu_tensor.h"

namespace xxnpu {
namespace {

constexpr const char* kName = "xxnpu::index_add";
// Output elements a block owns (it reads index.numel() source elements for each).
constexpr int64_t kElementsPerBlock = 16384;

int64_t SizeAt(const at::Tensor& t, int64_t dim) { return t.dim() == 0 ? 1 : t.size(dim); }

// ATen's checks for index_add (index_add_meta), with its messages.
void CheckIndexAdd(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                   const at::Tensor& out) {
  TORCH_CHECK(index.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_add_(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_add_(): self (", self.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_add_(): self (", self.scalar_type(),
              ") and out (", out.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source.dim(), "index_add_(): Indexing dim ", dim, " is out of bounds of the source "
              "tensor with dim ", source.dim());
  TORCH_CHECK(index.numel() == SizeAt(source, dim), "index_add_(): Number of indices (", index.numel(),
              ") should be equal to source.size(dim) (", SizeAt(source, dim), ")");
  TORCH_CHECK(self.dim() == source.dim() || self.dim() == 0 || source.dim() == 0,
              "index_add_(): self and source must have the same number of dimensions, got ", self.dim(), " and ",
              source.dim());
  for (int64_t d = 0; d < std::max(self.dim(), source.dim()); ++d) {
    if (d == dim) continue;
    TORCH_CHECK(SizeAt(self, d) == SizeAt(source, d), "index_add_(): self and source must have the same size at "
                "dimension ", d, "; self has size ", SizeAt(self, d), ", source has size ", SizeAt(source, d));
  }
  CheckSameDevice("index_add", "index", index, self.device());
  CheckSameDevice("index_add", "source", source, self.device());
  CheckSameDevice("index_add", "out", out, self.device());
}

at::Tensor& IndexAddOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                        const at::Scalar& alpha, at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  CheckIndexAdd(self, dim, index, source, out);
  if (self.scalar_type() == at::kBool || at::isComplexType(self.scalar_type())) {
    return FallbackFor<at::_ops::index_add_out>::call(self, dim, index, source, alpha, out);
  }
  const c10::DeviceGuard guard(self.device());
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  if (index.numel() == 0 || out.numel() == 0) return out;
  at::Tensor target = out.is_contiguous() ? out : out.contiguous();
  const at::Tensor src = source.contiguous();
  const at::Tensor idx = index.to(at::kLong).contiguous().view(-1);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < target.dim(); ++d) {
    if (d < dim) outer *= target.size(d);
    if (d > dim) inner *= target.size(d);
  }
  const int64_t out_dim = SizeAt(target, dim), n = idx.numel(), positions = outer * inner;
  AT_DISPATCH_V2(target.scalar_type(), "xxnpu_index_add", AT_WRAP([&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t a = alpha.to<opmath_t>();
    scalar_t* op = static_cast<scalar_t*>(DeviceView(target.data_ptr()));
    const scalar_t* sp = static_cast<const scalar_t*>(DeviceView(src.const_data_ptr()));
    const int64_t* ip = static_cast<const int64_t*>(DeviceView(idx.const_data_ptr()));
    const int64_t per_block = std::max<int64_t>(1, kElementsPerBlock / n);
    LaunchConfig cfg;
    cfg.name = kName;
    cfg.grid = Dim3{static_cast<uint32_t>((positions + per_block - 1) / per_block), 1, 1};
    cfg.bytes = static_cast<uint64_t>((2 * n * positions) * sizeof(scalar_t) + n * sizeof(int64_t));
    cfg.flops = static_cast<uint64_t>(2 * n * positions);
    CheckOk(xxnpuLaunchKernel(cfg, [=](BlockRange r) -> absl::Status {
      const int64_t p0 = r.begin * per_block, p1 = std::min(positions, r.end * per_block);
      // Positions [p0, p1) as runs of contiguous inner elements within one outer slice.
      for (int64_t p = p0; p < p1;) {
        const int64_t o = p / inner, k0 = p % inner, k1 = std::min(inner, k0 + (p1 - p));
        for (int64_t j = 0; j < n; ++j) {
          // The CPU's rule: no negative indices.
          const int64_t i = ip[j];
          if (i < 0 || i >= out_dim) {
            return absl::OutOfRangeError("index_add: index " + std::to_string(i) + " is out of range for dimension "
                                         "size " + std::to_string(out_dim));
          }
          scalar_t* dst = op + (o * out_dim + i) * inner;
          const scalar_t* s = sp + (o * n + j) * inner;
          for (int64_t k = k0; k < k1; ++k) {
            dst[k] = static_cast<scalar_t>(static_cast<opmath_t>(dst[k]) + a * static_cast<opmath_t>(s[k]));
          }
        }
        p += k1 - k0;
      }
      return absl::OkStatus();
    }, CurrentXxnpuStreamHandle(self.device().index())), kName);
  }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16);
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index_add.out", &IndexAddOut);
}

}  // namespace
}  // namespace xxnpu
