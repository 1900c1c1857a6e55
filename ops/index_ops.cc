// Indexing and data-movement ops on xxnpu: cat, index_select, gather, scatter
// (+ scatter_add), advanced indexing (index / index_put_), nonzero, masked_select,
// tril/triu, arange, linspace, repeat_interleave, cumsum, sort, topk.
//
// Moving elements does not depend on their type, only on their size: those kernels are
// instantiated per element size (1, 2, 4, 8 bytes), not per dtype, which keeps this file's
// compile time and code size down. Ops that compute (scatter_add, cumsum, sort) dispatch
// on dtype. Ops whose output size depends on the data (nonzero, masked_select) count on
// the device and synchronize, as CUDA does.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ExpandUtils.h>
#include <ATen/OpMathType.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/cat_meta.h>
#include <ATen/ops/cumsum_meta.h>
#include <ATen/ops/gather_meta.h>
#include <ATen/ops/scatter_add_meta.h>
#include <ATen/ops/scatter_meta.h>
#include <ATen/ops/sort_meta.h>
#include <ATen/ops/topk_meta.h>
#include <ATen/ops/tril_meta.h>
#include <ATen/ops/triu_meta.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/cpu_fallback.h"
#include "ops/out_checks.h"
#include "ops/xxnpu_tensor.h"

namespace xxnpu {
namespace {

// ---------------------------------------------------------------------------------------
// Helpers

// Launches body(begin, end) over `n` work items, `per_block` items per grid block.
template <typename F>
void LaunchItems(const char* name, c10::DeviceIndex device, int64_t n, int64_t per_block, uint64_t bytes, F body) {
  if (n <= 0) return;
  per_block = std::max<int64_t>(1, per_block);
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid = Dim3{static_cast<uint32_t>((n + per_block - 1) / per_block), 1, 1};
  cfg.bytes = bytes;
  CheckOk(xxnpuLaunchKernel(cfg, [body = std::move(body), n, per_block](BlockRange r) {
    return body(r.begin * per_block, std::min(n, r.end * per_block));
  }, CurrentXxnpuStreamHandle(device)), name);
}

char* View(const at::Tensor& t) { return static_cast<char*>(DeviceView(t.data_ptr())); }
const char* ConstView(const at::Tensor& t) { return static_cast<const char*>(DeviceView(t.const_data_ptr())); }

// Calls f.template operator()<T>() with T an unsigned integer of `bytes` bytes.
template <typename F>
void BySize(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    case 16: f(std::pair<uint64_t, uint64_t>{}); break;
    default: TORCH_CHECK(false, "xxnpu: unsupported element size ", bytes);
  }
}

at::Tensor LongIndexOn(const at::Tensor& index, const at::Tensor& like) {
  return index.to(like.device(), at::kLong).contiguous();
}

// An out-of-range index found by a kernel: the kernel stops before touching memory and
// fails the stream; the error comes from the next synchronizing call as the class the CPU
// raises for the op: IndexError (IndexOutOfRange) for index, index_put_ and
// index_select, RuntimeError (torch.AcceleratorError) for gather and scatter.
// `negatives` says whether the op accepts [-size, size).
absl::Status BadIndex(int64_t i, int64_t size, const char* what, bool negatives, bool index_error) {
  std::string message = std::string(what) + "(): index " + std::to_string(i) +
                        " is out of bounds for dimension with size " + std::to_string(size) +
                        " (expected an index in [" + std::to_string(negatives ? -size : 0) + ", " +
                        std::to_string(size) + "))";
  return index_error ? IndexOutOfRange(std::move(message)) : absl::OutOfRangeError(message);
}

#define XXNPU_INDEX_TYPES AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16

// ---------------------------------------------------------------------------------------
// cat

// Bytes one block of a contiguous cat copies.
constexpr int64_t kCatBytesPerBlock = 1 << 16;

// cat of contiguous inputs of out's dtype into a contiguous out, as one kernel whose
// blocks copy slices of every input at once: out is [outer, sum of the inputs' rows], input
// t a [outer, row_t] block of it (row_t = size_t(dim) * inner * element size). One copy
// per input would run them one after another, each on one thread. False when the inputs
// do not qualify (the caller then copies input by input).
bool CatContiguous(const at::MaterializedITensorListRef& tensors, int64_t dim,
                   const at::Tensor& out) {
  if (!out.is_contiguous() || out.numel() == 0) return false;
  std::vector<const char*> srcs;
  std::vector<int64_t> row_bytes;  // per input
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < out.dim(); ++d) {
    if (d < dim) outer *= out.size(d);
    if (d > dim) inner *= out.size(d);
  }
  int64_t out_row = 0;
  for (const at::Tensor& t : tensors) {
    if (t.dim() == 1 && t.size(0) == 0) continue;
    if (t.scalar_type() != out.scalar_type() || !t.is_contiguous()) return false;
    if (t.numel() == 0) continue;
    if (at::get_overlap_status(out, t) != at::MemOverlapStatus::No) return false;
    srcs.push_back(ConstView(t));
    row_bytes.push_back(t.size(dim) * inner * static_cast<int64_t>(out.element_size()));
    out_row += row_bytes.back();
  }
  if (srcs.empty()) return true;
  char* dst = View(out);
  // Work items: (row o, input t, chunk) flattened; with one row (dim 0) each input is cut
  // into chunks of kCatBytesPerBlock, else each item is a whole row of every input.
  std::vector<int64_t> first_chunk(srcs.size() + 1, 0);  // outer == 1: prefix sum of chunks
  for (size_t t = 0; t < srcs.size(); ++t) {
    first_chunk[t + 1] = first_chunk[t] + (outer == 1 ? (row_bytes[t] + kCatBytesPerBlock - 1) / kCatBytesPerBlock : 0);
  }
  const int64_t items = outer == 1 ? first_chunk.back() : outer;
  const int64_t per_block = outer == 1 ? 1 : std::max<int64_t>(1, kCatBytesPerBlock / std::max<int64_t>(1, out_row));
  LaunchItems("xxnpu::cat", out.device().index(), items, per_block, static_cast<uint64_t>(2 * out.nbytes()),
              [=](int64_t begin, int64_t end) {
    if (outer == 1) {
      for (int64_t c = begin; c < end; ++c) {
        const size_t t = std::upper_bound(first_chunk.begin(), first_chunk.end(), c) - first_chunk.begin() - 1;
        int64_t dst_off = 0;
        for (size_t u = 0; u < t; ++u) dst_off += row_bytes[u];
        const int64_t off = (c - first_chunk[t]) * kCatBytesPerBlock;
        std::memcpy(dst + dst_off + off, srcs[t] + off, std::min(kCatBytesPerBlock, row_bytes[t] - off));
      }
      return absl::OkStatus();
    }
    for (int64_t o = begin; o < end; ++o) {
      char* d = dst + o * out_row;
      for (size_t t = 0; t < srcs.size(); ++t) {
        std::memcpy(d, srcs[t] + o * row_bytes[t], row_bytes[t]);
        d += row_bytes[t];
      }
    }
    return absl::OkStatus();
  });
  return true;
}

at::Tensor& CatOut(const at::ITensorListRef& tensors_ref, int64_t dim, at::Tensor& out) {
  const auto tensors = tensors_ref.materialize();
  for (const at::Tensor& t : tensors) CheckSameDevice("cat", "tensors", t, out.device());
  CheckOutWithMeta<at::meta::structured_cat>(out, tensors_ref, dim);
  TORCH_CHECK(!tensors.empty(), "torch.cat(): expected a non-empty list of Tensors");
  // Legacy rule: 1-D empty tensors are skipped whatever the other shapes.
  const at::Tensor* ref = nullptr;
  for (const at::Tensor& t : tensors) {
    if (!(t.dim() == 1 && t.size(0) == 0)) {
      ref = &t;
      break;
    }
  }
  at::ScalarType dtype = tensors[0].get().scalar_type();
  for (const at::Tensor& t : tensors) dtype = at::promote_types(dtype, t.scalar_type());
  if (ref == nullptr) {
    at::native::resize_output(out, {0});
    return out;
  }
  dim = at::maybe_wrap_dim(dim, ref->dim());
  std::vector<int64_t> shape = ref->sizes().vec();
  shape[dim] = 0;
  int64_t number = -1;
  for (const at::Tensor& t : tensors) {
    ++number;
    if (t.dim() == 1 && t.size(0) == 0) continue;
    TORCH_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ", ref->dim(), " and ",
                t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) {
      TORCH_CHECK(d == dim || t.size(d) == ref->size(d), "Sizes of tensors must match except in dimension ", dim,
                  ". Expected size ", ref->size(d), " but got size ", t.size(d), " for tensor number ", number,
                  " in the list.");
    }
    CheckSameDevice("cat", "tensors", t, out.device());
    shape[dim] += t.size(dim);
  }
  TORCH_CHECK(at::canCast(dtype, out.scalar_type()), "torch.cat(): input types can't be cast to the desired output type ",
              out.scalar_type());
  const c10::DeviceGuard guard(out.device());
  at::native::resize_output(out, shape);
  if (CatContiguous(tensors, dim, out)) return out;
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    if (t.dim() == 1 && t.size(0) == 0) continue;
    out.narrow(dim, offset, t.size(dim)).copy_(t);  // one native copy kernel per input
    offset += t.size(dim);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// index_select

at::Tensor& IndexSelectOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index, got ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "index_select(): self and result must have the same scalar "
              "type, got ", self.scalar_type(), " and ", out.scalar_type());
  CheckSameDevice("index_select", "index", index, self.device());
  CheckSameDevice("index_select", "out", out, self.device());
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, index);
  const c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor src = self.dim() == 0 ? self.view({1}) : self.contiguous();
  // (A contiguous int64 index, the usual one, is used as it is: its data is the vector.)
  const at::Tensor idx = index.scalar_type() == at::kLong && index.is_contiguous() ? index : LongIndexOn(index, self);
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[dim] = idx.numel();
  at::native::resize_output(out, shape);
  at::Tensor target = out.is_contiguous() ? out : at::empty(shape, out.options());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < src.dim(); ++d) {
    if (d < dim) outer *= src.size(d);
    if (d > dim) inner *= src.size(d);
  }
  const int64_t src_dim = src.size(dim), n = idx.numel();
  const size_t row_bytes = static_cast<size_t>(inner) * self.element_size();
  const char* sp = ConstView(src);
  const int64_t* ip = reinterpret_cast<const int64_t*>(ConstView(idx));
  char* op = target.numel() ? View(target) : nullptr;
  // Item r is output row (o, j) = (r / n, r % n): one division per block, then the walk
  // steps (o, j). Rows of one element (inner == 1, index_select along the last dim) are
  // typed copies, not a memcpy call per element.
  const auto launch = [&](auto copy_row) {
    LaunchItems("xxnpu::index_select", self.device().index(), outer * n,
                std::max<int64_t>(1, 65536 / std::max<size_t>(1, row_bytes)), static_cast<uint64_t>(2 * target.nbytes()),
                [=](int64_t begin, int64_t end) {
      int64_t j = begin % n;
      const char* s = sp + (begin / n) * src_dim * static_cast<int64_t>(row_bytes);
      char* d = op + begin * static_cast<int64_t>(row_bytes);
      for (int64_t r = begin; r < end; ++r, d += row_bytes) {
        const int64_t i = ip[j];
        if (i < 0 || i >= src_dim) return BadIndex(i, src_dim, "index_select", false, true);
        copy_row(d, s + i * static_cast<int64_t>(row_bytes));
        if (++j == n) {
          j = 0;
          s += src_dim * static_cast<int64_t>(row_bytes);
        }
      }
      return absl::OkStatus();
    });
  };
  if (inner == 1) {
    BySize(self.element_size(), [&](auto tag) {
      using T = decltype(tag);
      launch([](char* d, const char* s) { *reinterpret_cast<T*>(d) = *reinterpret_cast<const T*>(s); });
    });
  } else {
    launch([row_bytes](char* d, const char* s) { std::memcpy(d, s, row_bytes); });
  }
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

at::Tensor IndexSelect(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  // The output at its final size when the arguments allow (resize_output is then a no-op):
  // one allocation instead of an empty tensor and a resize, a few µs of a 256 KB call.
  std::vector<int64_t> shape{0};
  if (self.dim() > 0 && index.dim() <= 1 && dim >= -self.dim() && dim < self.dim()) {
    shape = self.sizes().vec();
    shape[dim < 0 ? dim + self.dim() : dim] = index.numel();
  }
  at::Tensor out = at::empty(shape, self.options());
  return IndexSelectOut(self, dim, index, out);
}

// ---------------------------------------------------------------------------------------
// gather / scatter: for each element c of `index`, the element of self/out at c with
// c[dim] replaced by index[c].

void CheckGatherScatter(const char* op, const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  CheckSameDevice(op, "index", index, self.device());
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
              "(): Expected dtype int32 or int64 for index, got ", index.scalar_type());
  TORCH_CHECK(index.dim() == self.dim() || index.numel() == 0 || (self.dim() == 0 && index.dim() <= 1), op,
              "(): Index tensor must have the same number of dimensions as input tensor");
  for (int64_t d = 0; d < index.dim() && index.dim() == self.dim(); ++d) {
    TORCH_CHECK(d == dim || index.size(d) <= self.size(d), op, "(): Size does not match at dimension ", d,
                " expected index ", index.sizes(), " to be no larger than self ", self.sizes(),
                " apart from dimension ", dim);
  }
}

// Gather and scatter walk `index` as rows along its last dim: the coordinate arithmetic
// (divisions by every dim's size) runs once per row, not once per element, and the inner
// loop steps through each operand by a fixed stride, so a contiguous gather/scatter along
// the last dim is a tight loop. `data` is the tensor the index selects in (gather's self,
// scatter's out), `other` the one walked at the index's own coordinates (gather's out,
// scatter's src; absent for scatter's value form). All three are viewed as at least 1-D.
struct IndexRows {
  int64_t rows = 1, cols = 1;
  std::vector<int64_t> sizes;                              // index's sizes but the last
  std::vector<int64_t> data_strides, idx_strides, other_strides;  // per row dim, elements
  int64_t data_col = 0, idx_col = 0, other_col = 0;        // strides along the last dim
  int64_t dim_stride = 0, dim_size = 1;                    // data's stride and size along `dim`
  // Element offsets of row r's first element in each operand.
  void Offsets(int64_t r, int64_t& data, int64_t& idx, int64_t& other) const {
    data = idx = other = 0;
    for (size_t d = sizes.size(); d-- > 0;) {
      const int64_t c = r % sizes[d];
      r /= sizes[d];
      data += c * data_strides[d];
      idx += c * idx_strides[d];
      other += c * other_strides[d];
    }
  }
};

at::Tensor AtLeast1d(const at::Tensor& t) { return t.dim() == 0 ? t.view({1}) : t; }

// `data`'s coordinate along `dim` comes from the index, so its stride there counts as 0.
IndexRows MakeIndexRows(const at::Tensor& data0, int64_t dim, const at::Tensor& idx0, const at::Tensor& other0) {
  const at::Tensor data = AtLeast1d(data0), idx = AtLeast1d(idx0);
  const at::Tensor other = other0.defined() ? AtLeast1d(other0) : at::Tensor();
  IndexRows g;
  const int64_t nd = idx.dim();
  g.dim_stride = data.stride(dim);
  g.dim_size = data.size(dim);
  auto data_stride = [&](int64_t d) { return d == dim ? 0 : data.stride(d); };
  for (int64_t d = 0; d + 1 < nd; ++d) {
    g.sizes.push_back(idx.size(d));
    g.data_strides.push_back(data_stride(d));
    g.idx_strides.push_back(idx.stride(d));
    g.other_strides.push_back(other.defined() ? other.stride(d) : 0);
    g.rows *= idx.size(d);
  }
  g.cols = idx.size(nd - 1);
  g.data_col = data_stride(nd - 1);
  g.idx_col = idx.stride(nd - 1);
  g.other_col = other.defined() ? other.stride(nd - 1) : 0;
  return g;
}

// Elements a gather/scatter block handles.
constexpr int64_t kIndexElementsPerBlock = 16384;

// The dense row case of gather/scatter, the common one (along the last dim, index and
// other operand contiguous there): a loop with no stride arithmetic whose only branch is
// the range check, which is never taken until a bad index (nothing is read or written
// through it). Measured on 1024 x 1024 float32 (one thread): a separate branch-free check
// pass costs as much as the copy (64-bit compares do not vectorize at the baseline ISA),
// the fused loop no more than the copy alone. The general walk above is ~3x slower per
// element: its four multiplies and strides per element, not memory.
bool DenseRows(const IndexRows& g) { return g.data_col == 0 && g.idx_col == 1 && g.other_col == 1; }

bool InRange(int64_t i, int64_t size) { return static_cast<uint64_t>(i) < static_cast<uint64_t>(size); }

// out[k] = data[idx[k] * stride] for k < n; returns the first k whose index is outside
// [0, size) (the elements before it are written), or -1.
template <typename T>
int64_t GatherRow(T* out, const T* data, const int64_t* idx, int64_t n, int64_t stride, int64_t size) {
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = idx[k];
    if (!InRange(i, size)) return k;
    out[k] = stride == 1 ? data[i] : data[i * stride];
  }
  return -1;
}

at::Tensor& GatherOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad,
                      at::Tensor& out) {
  CheckSameDevice("gather", "index", index, self.device());
  CheckOutWithMeta<at::meta::structured_gather>(out, self, dim, index, sparse_grad);
  dim = at::maybe_wrap_dim(dim, self.dim());
  CheckGatherScatter("gather", self, dim, index);
  const c10::DeviceGuard guard(self.device());
  at::native::resize_output(out, index.sizes());
  if (index.numel() == 0) return out;
  const at::Tensor idx = LongIndexOn(index, self);
  const IndexRows g = MakeIndexRows(self, dim, idx, out);
  const int64_t n = idx.numel();
  const char* sp = ConstView(self);
  const int64_t* ip = reinterpret_cast<const int64_t*>(ConstView(idx));
  char* op = View(out);
  const bool dense = DenseRows(g);
  BySize(self.element_size(), [&](auto tag) {
    using T = decltype(tag);
    LaunchItems("xxnpu::gather", self.device().index(), g.rows,
                std::max<int64_t>(1, kIndexElementsPerBlock / g.cols), static_cast<uint64_t>(n * (2 * sizeof(T) + 8)),
                [=](int64_t begin, int64_t end) {
      const T* s = reinterpret_cast<const T*>(sp);
      T* o = reinterpret_cast<T*>(op);
      for (int64_t r = begin; r < end; ++r) {
        int64_t soff, ioff, ooff;
        g.Offsets(r, soff, ioff, ooff);
        if (dense) {
          const int64_t bad = GatherRow(o + ooff, s + soff, ip + ioff, g.cols, g.dim_stride, g.dim_size);
          if (bad >= 0) return BadIndex(ip[ioff + bad], g.dim_size, "gather", false, false);
          continue;
        }
        for (int64_t k = 0; k < g.cols; ++k) {
          const int64_t i = ip[ioff + k * g.idx_col];
          if (i < 0 || i >= g.dim_size) return BadIndex(i, g.dim_size, "gather", false, false);
          o[ooff + k * g.other_col] = s[soff + k * g.data_col + i * g.dim_stride];
        }
      }
      return absl::OkStatus();
    });
  });
  return out;
}

// dst[idx[k] * stride] = src[k] (or value; += with `add`, in k order) for k < n: the dense
// row of scatter and scatter_add. Returns the first k whose index is outside [0, size)
// (nothing is written through it), or -1.
template <typename T>
int64_t ScatterRow(T* dst, const T* src, T value, const int64_t* idx, int64_t n, int64_t stride, int64_t size,
                   bool add) {
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = idx[k];
    if (!InRange(i, size)) return k;
    T& d = stride == 1 ? dst[i] : dst[i * stride];
    const T x = src ? src[k] : value;
    if (!add) {
      d = x;
    } else if constexpr (std::is_same_v<T, bool>) {
      d = d || x;
    } else {
      d = static_cast<T>(d + x);
    }
  }
  return -1;
}

// out = self (copied unless in place), then scatter src (or value) along dim. With `add`,
// every output element must see its additions in index order whatever the thread count:
// blocks then own disjoint output slices (whole slices along dim 0 when dim != 0, column
// ranges when dim == 0), and a 1-D scatter_add runs as one block.
void ScatterInto(const char* name, at::Tensor& out, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                 const std::optional<at::Scalar>& value, bool add) {
  if (index.numel() == 0) return;
  const at::Tensor idx = LongIndexOn(index, out);
  const IndexRows g = MakeIndexRows(out, dim, idx, src);
  const int64_t n = idx.numel();
  const int64_t* ip = reinterpret_cast<const int64_t*>(ConstView(idx));
  const char* sp = src.defined() ? ConstView(src) : nullptr;
  char* op = View(out);
  // Work items: rows (groups of whole dim-0 slices for add), or columns for add along dim 0.
  const bool by_columns = add && dim == 0 && !g.sizes.empty();
  int64_t items = g.rows, per_block = std::max<int64_t>(1, kIndexElementsPerBlock / g.cols);
  if (by_columns) {
    items = g.cols;
    per_block = std::max<int64_t>(1, kIndexElementsPerBlock / g.rows);
  } else if (add && g.sizes.empty()) {
    per_block = items;  // 1-D along dim 0: one block
  } else if (add) {
    const int64_t slice = g.rows / g.sizes[0];  // rows per dim-0 slice
    per_block = slice * std::max<int64_t>(1, kIndexElementsPerBlock / (slice * g.cols));
  }
  const bool dense = !by_columns && DenseRows(g);
  AT_DISPATCH_V2(out.scalar_type(), "xxnpu_scatter", AT_WRAP([&] {
    const scalar_t v = value ? value->to<scalar_t>() : scalar_t(0);
    LaunchItems(name, out.device().index(), items, per_block, static_cast<uint64_t>(n * (2 * sizeof(scalar_t) + 8)),
                [=](int64_t begin, int64_t end) {
      const scalar_t* s = reinterpret_cast<const scalar_t*>(sp);
      scalar_t* o = reinterpret_cast<scalar_t*>(op);
      const int64_t r0 = by_columns ? 0 : begin, r1 = by_columns ? g.rows : end;
      const int64_t c0 = by_columns ? begin : 0, c1 = by_columns ? end : g.cols;
      for (int64_t r = r0; r < r1; ++r) {
        int64_t doff, ioff, soff;
        g.Offsets(r, doff, ioff, soff);
        if (dense) {
          const int64_t* ir = ip + ioff;
          const int64_t bad = ScatterRow<scalar_t>(o + doff, s ? s + soff : nullptr, v, ir, g.cols, g.dim_stride,
                                                   g.dim_size, add);
          if (bad >= 0) return BadIndex(ir[bad], g.dim_size, "scatter", false, false);
          continue;
        }
        for (int64_t k = c0; k < c1; ++k) {
          const int64_t i = ip[ioff + k * g.idx_col];
          if (i < 0 || i >= g.dim_size) return BadIndex(i, g.dim_size, "scatter", false, false);
          const scalar_t x = s ? s[soff + k * g.other_col] : v;
          scalar_t& dst = o[doff + k * g.data_col + i * g.dim_stride];
          if (add) {
            if constexpr (std::is_same_v<scalar_t, bool>) {
              dst = dst || x;
            } else {
              dst = static_cast<scalar_t>(dst + x);
            }
          } else {
            dst = x;
          }
        }
      }
      return absl::OkStatus();
    });
  }), XXNPU_INDEX_TYPES, AT_EXPAND(AT_COMPLEX_TYPES), at::kBool);
}

at::Tensor& ScatterCommon(const char* name, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& src, const std::optional<at::Scalar>& value, bool add, at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  CheckGatherScatter(name, self, dim, index);
  CheckSameDevice(name, "src", src, self.device());
  TORCH_CHECK(!src.defined() || src.scalar_type() == self.scalar_type(), name,
              "(): Expected self.dtype to be equal to src.dtype");
  const c10::DeviceGuard guard(self.device());
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  ScatterInto(name, out, dim, index, src.defined() ? src.to(out.device()) : src, value, add);
  return out;
}

at::Tensor& ScatterSrcOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          at::Tensor& out) {
  CheckSameDevice("scatter", "index", index, self.device());
  CheckSameDevice("scatter", "src", src, self.device());
  CheckOutWithMeta<at::meta::structured_scatter_src>(out, self, dim, index, src);
  return ScatterCommon("xxnpu::scatter", self, dim, index, src, std::nullopt, false, out);
}
at::Tensor& ScatterValueOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Scalar& value,
                            at::Tensor& out) {
  CheckSameDevice("scatter", "index", index, self.device());
  CheckOutWithMeta<at::meta::structured_scatter_value>(out, self, dim, index, value);
  return ScatterCommon("xxnpu::scatter", self, dim, index, at::Tensor(), value, false, out);
}
at::Tensor& ScatterAddOut(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          at::Tensor& out) {
  CheckSameDevice("scatter_add", "index", index, self.device());
  CheckSameDevice("scatter_add", "src", src, self.device());
  CheckOutWithMeta<at::meta::structured_scatter_add>(out, self, dim, index, src);
  return ScatterCommon("xxnpu::scatter_add", self, dim, index, src, std::nullopt, true, out);
}

// ---------------------------------------------------------------------------------------
// Advanced indexing: self[indices] and self[indices] = values.
//
// Bool/byte masks become their nonzero() coordinates; the long index tensors broadcast to
// one shape B. Indexed dims that are adjacent keep their place in the result; otherwise B
// goes first (NumPy's rule). `self` is permuted so that the indexed dims are contiguous in
// the dim order, which makes the element walk uniform.

struct AdvancedIndex {
  at::Tensor src;                   // self, permuted: [before..., indexed..., after...]
  std::vector<at::Tensor> indices;  // int64, broadcast to B, contiguous, on the device
  int64_t before = 0;               // leading non-indexed dims of src
  std::vector<int64_t> indexed_sizes, indexed_strides;
  std::vector<int64_t> result_shape;  // before + B + after
  std::vector<int64_t> b_shape;
};

AdvancedIndex MakeAdvancedIndex(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& raw) {
  std::vector<at::Tensor> idx;  // per dim of self, undefined if not indexed
  for (const std::optional<at::Tensor>& o : raw) {
    const at::Tensor t = o.has_value() ? *o : at::Tensor();
    if (t.defined() && (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte)) {
      // A mask over the next t.dim() dims: one long index per masked dim.
      const int64_t start = static_cast<int64_t>(idx.size());
      TORCH_CHECK(start + t.dim() <= self.dim(), "too many indices for tensor of dimension ", self.dim());
      for (int64_t d = 0; d < t.dim(); ++d) {
        TORCH_CHECK(t.size(d) == self.size(start + d), "The shape of the mask ", t.sizes(), " at index ", d,
                    " does not match the shape of the indexed tensor ", self.sizes(), " at index ", start + d);
      }
      const at::Tensor nz = t.to(self.device()).nonzero();
      for (int64_t d = 0; d < t.dim(); ++d) idx.push_back(nz.select(1, d));
    } else {
      TORCH_CHECK(!t.defined() || t.scalar_type() == at::kLong || t.scalar_type() == at::kInt,
                  "tensors used as indices must be long, int, byte or bool tensors");
      idx.push_back(t);
    }
  }
  TORCH_CHECK(static_cast<int64_t>(idx.size()) <= self.dim(), "too many indices for tensor of dimension ", self.dim(),
              " (got ", idx.size(), ")");
  idx.resize(self.dim());
  std::vector<at::Tensor> defined;
  std::vector<int64_t> indexed_dims, other_dims;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (idx[d].defined()) {
      defined.push_back(idx[d]);
      indexed_dims.push_back(d);
    } else {
      other_dims.push_back(d);
    }
  }
  TORCH_CHECK(!defined.empty(), "index: expected at least one index tensor");
  const bool adjacent = indexed_dims.back() - indexed_dims.front() + 1 == static_cast<int64_t>(indexed_dims.size());
  AdvancedIndex ai;
  std::vector<int64_t> perm;
  if (adjacent) {
    ai.before = indexed_dims.front();
    for (int64_t d = 0; d < self.dim(); ++d) perm.push_back(d);
  } else {
    ai.before = 0;
    perm = indexed_dims;
    perm.insert(perm.end(), other_dims.begin(), other_dims.end());
  }
  ai.src = self.permute(perm);
  const auto broadcast = at::broadcast_tensors(defined);
  ai.b_shape = broadcast[0].sizes().vec();
  for (size_t k = 0; k < broadcast.size(); ++k) {
    ai.indices.push_back(LongIndexOn(broadcast[k], self));
    ai.indexed_sizes.push_back(self.size(indexed_dims[k]));
    ai.indexed_strides.push_back(self.stride(indexed_dims[k]));
  }
  const int64_t nidx = static_cast<int64_t>(indexed_dims.size());
  for (int64_t d = 0; d < ai.before; ++d) ai.result_shape.push_back(ai.src.size(d));
  ai.result_shape.insert(ai.result_shape.end(), ai.b_shape.begin(), ai.b_shape.end());
  for (int64_t d = ai.before + nidx; d < ai.src.dim(); ++d) ai.result_shape.push_back(ai.src.size(d));
  return ai;
}

// Element offset in src for each result element, computed on the device; shared by index
// and index_put. `visit(result_linear, src_offset)` returns absl::Status.
struct AdvancedWalk {
  std::vector<int64_t> before_sizes, before_strides, after_sizes, after_strides;
  std::vector<const int64_t*> idx;
  std::vector<int64_t> idx_sizes, idx_strides;
  int64_t b_numel = 1, after_numel = 1;
  absl::Status SrcOffset(int64_t linear, int64_t& off) const {
    int64_t a = linear % after_numel, rest = linear / after_numel;
    const int64_t b = rest % b_numel;
    int64_t pre = rest / b_numel;
    off = 0;
    for (size_t d = after_sizes.size(); d-- > 0;) {
      off += (a % after_sizes[d]) * after_strides[d];
      a /= after_sizes[d];
    }
    for (size_t d = before_sizes.size(); d-- > 0;) {
      off += (pre % before_sizes[d]) * before_strides[d];
      pre /= before_sizes[d];
    }
    for (size_t k = 0; k < idx.size(); ++k) {
      int64_t i = idx[k][b];
      if (i < -idx_sizes[k] || i >= idx_sizes[k]) return BadIndex(i, idx_sizes[k], "index", true, true);
      if (i < 0) i += idx_sizes[k];
      off += i * idx_strides[k];
    }
    return absl::OkStatus();
  }
};

AdvancedWalk MakeWalk(const AdvancedIndex& ai) {
  AdvancedWalk w;
  const int64_t nidx = static_cast<int64_t>(ai.indices.size());
  for (int64_t d = 0; d < ai.before; ++d) {
    w.before_sizes.push_back(ai.src.size(d));
    w.before_strides.push_back(ai.src.stride(d));
  }
  for (int64_t d = ai.before + nidx; d < ai.src.dim(); ++d) {
    w.after_sizes.push_back(ai.src.size(d));
    w.after_strides.push_back(ai.src.stride(d));
    w.after_numel *= ai.src.size(d);
  }
  for (int64_t s : ai.b_shape) w.b_numel *= s;
  for (const at::Tensor& t : ai.indices) w.idx.push_back(reinterpret_cast<const int64_t*>(ConstView(t)));
  w.idx_sizes = ai.indexed_sizes;
  w.idx_strides = ai.indexed_strides;
  return w;
}

at::Tensor& IndexOut(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  const c10::DeviceGuard guard(self.device());
  const AdvancedIndex ai = MakeAdvancedIndex(self, indices);
  ResizeOut(out, ai.result_shape, {}, self.options());
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  for (const std::optional<at::Tensor>& i : indices) {
    if (i.has_value() && i->defined()) at::assert_no_overlap(out, *i);
  }
  if (out.numel() == 0) return out;
  at::Tensor target = out.is_contiguous() ? out : at::empty(ai.result_shape, out.options());
  const AdvancedWalk w = MakeWalk(ai);
  if (w.b_numel == 0) return out;
  const char* sp = ConstView(ai.src);
  char* op = View(target);
  BySize(self.element_size(), [&](auto tag) {
    using T = decltype(tag);
    LaunchItems("xxnpu::index", self.device().index(), target.numel(), 16384,
                static_cast<uint64_t>(target.numel() * (2 * sizeof(T) + 8)), [=](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        int64_t off = 0;
        absl::Status s = w.SrcOffset(e, off);
        if (!s.ok()) return s;
        reinterpret_cast<T*>(op)[e] = reinterpret_cast<const T*>(sp)[off];
      }
      return absl::OkStatus();
    });
  });
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

at::Tensor& IndexPutImpl(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                         const at::Tensor& values, bool accumulate, bool) {
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), "Index put requires the source and destination dtypes "
              "match, got ", self.scalar_type(), " for the destination and ", values.scalar_type(), " for the source.");
  // A 0-dim value on the CPU is a scalar (as on the CPU and CUDA); other values must be here.
  if (values.dim() > 0) CheckSameDevice("index_put_", "values", values, self.device());
  at::assert_no_overlap(self, values);
  for (const std::optional<at::Tensor>& i : indices) {
    if (i.has_value() && i->defined()) at::assert_no_overlap(self, *i);
  }
  const c10::DeviceGuard guard(self.device());
  const AdvancedIndex ai = MakeAdvancedIndex(self, indices);
  const AdvancedWalk w = MakeWalk(ai);
  int64_t n = 1;
  for (int64_t s : ai.result_shape) n *= s;
  if (n == 0) return self;
  const at::Tensor v = values.to(self.device(), self.scalar_type()).expand(ai.result_shape).contiguous();
  const char* vp = ConstView(v);
  char* dp = static_cast<char*>(DeviceView(ai.src.data_ptr()));
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_index_put", AT_WRAP([&] {
    // Accumulation runs as one block: repeated indices add up without races.
    LaunchItems(accumulate ? "xxnpu::index_put_accumulate" : "xxnpu::index_put", self.device().index(), n,
                accumulate ? n : 16384, static_cast<uint64_t>(n * (2 * sizeof(scalar_t) + 8)),
                [=](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        int64_t off = 0;
        absl::Status s = w.SrcOffset(e, off);
        if (!s.ok()) return s;
        scalar_t& dst = reinterpret_cast<scalar_t*>(dp)[off];
        const scalar_t x = reinterpret_cast<const scalar_t*>(vp)[e];
        if (accumulate) {
          if constexpr (std::is_same_v<scalar_t, bool>) {
            dst = dst || x;
          } else {
            dst = static_cast<scalar_t>(dst + x);
          }
        } else {
          dst = x;
        }
      }
      return absl::OkStatus();
    });
  }), XXNPU_INDEX_TYPES, AT_EXPAND(AT_COMPLEX_TYPES), at::kBool);
  return self;
}

// ---------------------------------------------------------------------------------------
// nonzero / masked_select: count (synchronizes, as on CUDA), then fill in order.

at::Tensor& NonzeroOut(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long but got ",
              out.scalar_type());
  CheckOutDevice(out, self.device());
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  const c10::DeviceGuard guard(self.device());
  const at::Tensor flags = self.ne(0).contiguous();  // bool, native
  const int64_t count = flags.sum().item<int64_t>();
  const int64_t nd = self.dim();
  at::native::resize_output(out, {count, nd});
  if (count == 0 || nd == 0) {
    if (nd == 0 && count > 0) at::native::resize_output(out, {count, 0});
    return out;
  }
  at::Tensor target = out.is_contiguous() ? out : at::empty({count, nd}, out.options());
  const bool* fp = reinterpret_cast<const bool*>(ConstView(flags));
  int64_t* op = reinterpret_cast<int64_t*>(View(target));
  const std::vector<int64_t> sizes = self.sizes().vec();
  const int64_t numel = self.numel();
  LaunchItems("xxnpu::nonzero", self.device().index(), 1, 1, static_cast<uint64_t>(numel + count * nd * 8),
              [=](int64_t, int64_t) {
    int64_t row = 0;
    std::vector<int64_t> coord(sizes.size(), 0);
    for (int64_t e = 0; e < numel; ++e) {
      if (fp[e]) {
        for (size_t d = 0; d < sizes.size(); ++d) op[row * nd + static_cast<int64_t>(d)] = coord[d];
        ++row;
      }
      for (size_t d = sizes.size(); d-- > 0;) {
        if (++coord[d] < sizes[d]) break;
        coord[d] = 0;
      }
    }
    return absl::OkStatus();
  });
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

at::Tensor Nonzero(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return NonzeroOut(self, out);
}

at::Tensor& MaskedSelectOut(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same scalar type");
  // The dispatcher comes here when any operand is on xxnpu. A CPU mask is moved to the
  // device below, but a CPU self would be read as device memory (the fuzzer's crash).
  if (!self.device().is_privateuseone()) CheckSameDevice("masked_select", "self", self, mask.device());
  CheckOutDevice(out, self.device());
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  const c10::DeviceGuard guard(self.device());
  const at::Tensor mask_here = mask.to(self.device());
  auto expanded = at::expand_outplace(self, mask_here);
  const at::Tensor src = std::get<0>(expanded)->contiguous();
  const at::Tensor m = std::get<1>(expanded)->contiguous();
  const int64_t count = m.sum().item<int64_t>();
  at::native::resize_output(out, {count});
  if (count == 0) return out;
  at::Tensor target = out.is_contiguous() ? out : at::empty({count}, out.options());
  const bool* mp = reinterpret_cast<const bool*>(ConstView(m));
  const char* sp = ConstView(src);
  char* op = View(target);
  const int64_t numel = src.numel();
  BySize(self.element_size(), [&](auto tag) {
    using T = decltype(tag);
    LaunchItems("xxnpu::masked_select", self.device().index(), 1, 1, static_cast<uint64_t>(numel * (1 + sizeof(T))),
                [=](int64_t, int64_t) {
      int64_t j = 0;
      for (int64_t e = 0; e < numel; ++e) {
        if (mp[e]) reinterpret_cast<T*>(op)[j++] = reinterpret_cast<const T*>(sp)[e];
      }
      return absl::OkStatus();
    });
  });
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

at::Tensor MaskedSelect(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor out = at::empty({0}, self.options());
  return MaskedSelectOut(self, mask, out);
}

// ---------------------------------------------------------------------------------------
// tril / triu over the last two dims.

template <bool kLower>
at::Tensor& TriOut(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  if constexpr (kLower) {
    CheckOutWithMeta<at::meta::structured_tril>(out, self, diagonal);
  } else {
    CheckOutWithMeta<at::meta::structured_triu>(out, self, diagonal);
  }
  const c10::DeviceGuard guard(self.device());
  const at::Tensor src = self.contiguous();
  at::native::resize_output(out, self.sizes());
  at::Tensor target = out.is_contiguous() && !out.is_same(self) ? out : at::empty(self.sizes(), out.options());
  const int64_t m = self.size(-2), n = self.size(-1), rows = self.numel() / std::max<int64_t>(1, n);
  if (self.numel() == 0) return out;
  const char* sp = ConstView(src);
  char* op = View(target);
  BySize(self.element_size(), [&](auto tag) {
    using T = decltype(tag);
    LaunchItems(kLower ? "xxnpu::tril" : "xxnpu::triu", self.device().index(), rows,
                std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)), static_cast<uint64_t>(2 * self.nbytes()),
                [=](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t i = r % m;
        const T* s = reinterpret_cast<const T*>(sp) + r * n;
        T* d = reinterpret_cast<T*>(op) + r * n;
        for (int64_t j = 0; j < n; ++j) {
          const bool keep = kLower ? (j - i <= diagonal) : (j - i >= diagonal);
          d[j] = keep ? s[j] : T{};
        }
      }
      return absl::OkStatus();
    });
  });
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

// ---------------------------------------------------------------------------------------
// arange

at::Tensor& ArangeOut(const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, at::Tensor& out) {
  const double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
  TORCH_CHECK(st != 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "unsupported range: ", s, " -> ", e);
  TORCH_CHECK(((st > 0) && (e >= s)) || ((st < 0) && (e <= s)), "upper bound and larger bound inconsistent with step sign");
  int64_t size;
  if (out.scalar_type() == at::kLong) {
    // As ATen: for int64 results the bounds and step are truncated to integers first.
    const int64_t a = start.to<int64_t>(), b = end.to<int64_t>(), c = step.to<int64_t>();
    TORCH_CHECK(c != 0, "step must be nonzero");
    const int64_t sgn = (c > 0) - (c < 0);
    size = static_cast<int64_t>(std::ceil(static_cast<double>((b - a + c - sgn) / c)));
  } else {
    size = static_cast<int64_t>(std::ceil((e - s) / st));
  }
  TORCH_CHECK(size >= 0, "invalid size, possible overflow?");
  const c10::DeviceGuard guard(out.device());
  if (out.numel() != size) at::native::resize_output(out, {size});
  at::Tensor target = out.is_contiguous() ? out : at::empty({size}, out.options());
  char* op = size ? View(target) : nullptr;
  AT_DISPATCH_V2(out.scalar_type(), "xxnpu_arange", AT_WRAP([&] {
    const bool integral = at::isIntegralType(out.scalar_type(), true);
    const int64_t si = integral ? start.to<int64_t>() : 0, sti = integral ? step.to<int64_t>() : 0;
    LaunchItems("xxnpu::arange", out.device().index(), size, 65536, static_cast<uint64_t>(size * sizeof(scalar_t)),
                [=](int64_t begin, int64_t end_) {
      scalar_t* p = reinterpret_cast<scalar_t*>(op);
      for (int64_t i = begin; i < end_; ++i) {
        p[i] = integral ? static_cast<scalar_t>(si + i * sti) : static_cast<scalar_t>(s + static_cast<double>(i) * st);
      }
      return absl::OkStatus();
    });
  }), XXNPU_INDEX_TYPES);
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

at::Tensor& LinspaceOut(const at::Scalar& start, const at::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (at::isComplexType(out.scalar_type())) return FallbackFor<at::_ops::linspace_out>::call(start, end, steps, out);
  const c10::DeviceGuard guard(out.device());
  if (out.numel() != steps) at::native::resize_output(out, {steps});
  at::Tensor target = out.is_contiguous() ? out : at::empty({steps}, out.options());
  char* op = steps ? View(target) : nullptr;
  AT_DISPATCH_V2(out.scalar_type(), "xxnpu_linspace", AT_WRAP([&] {
    // The CPU backend's arithmetic: start and end first converted to the result's dtype
    // (4.3 is 4 for an integer result), the step in double for integers and in the dtype
    // itself otherwise (each half/bfloat16 operation rounded), from both ends so that the
    // last value is exactly `end`. One step gives the start.
    using step_t = std::conditional_t<std::is_integral_v<scalar_t>, double, scalar_t>;
    const scalar_t a = start.to<scalar_t>(), b = end.to<scalar_t>();
    const step_t step = steps > 1 ? (static_cast<step_t>(b) - static_cast<step_t>(a)) / (steps - 1) : step_t(0);
    LaunchItems("xxnpu::linspace", out.device().index(), steps, 65536, static_cast<uint64_t>(steps * sizeof(scalar_t)),
                [=](int64_t begin, int64_t end_) {
      scalar_t* p = reinterpret_cast<scalar_t*>(op);
      for (int64_t i = begin; i < end_; ++i) {
        p[i] = steps == 1 || i < steps / 2 ? static_cast<scalar_t>(a + step * i)
                                           : static_cast<scalar_t>(b - step * (steps - i - 1));
      }
      return absl::OkStatus();
    });
  }), XXNPU_INDEX_TYPES);
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

// repeat_interleave(repeats): index i repeated repeats[i] times. The output size is the
// sum of repeats: read back (a synchronization, as on CUDA) unless output_size is given.
at::Tensor RepeatInterleave(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == at::kLong || repeats.scalar_type() == at::kInt,
              "repeats has to be Long or Int tensor");
  const c10::DeviceGuard guard(repeats.device());
  const at::Tensor r = repeats.to(at::kLong).contiguous();
  if (r.numel() > 0) TORCH_CHECK(r.min().item<int64_t>() >= 0, "repeats can not be negative");
  const int64_t total = output_size.has_value() ? output_size->expect_int() : (r.numel() ? r.sum().item<int64_t>() : 0);
  at::Tensor out = at::empty({total}, r.options());
  if (total == 0 || r.numel() == 0) return out;
  const int64_t* rp = reinterpret_cast<const int64_t*>(ConstView(r));
  int64_t* op = reinterpret_cast<int64_t*>(View(out));
  const int64_t n = r.numel();
  LaunchItems("xxnpu::repeat_interleave", r.device().index(), 1, 1, static_cast<uint64_t>((n + total) * 8),
              [=](int64_t, int64_t) {
    int64_t j = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < rp[i]; ++k) {
        if (j >= total) return absl::InvalidArgumentError("repeat_interleave: output_size is smaller than the sum of repeats");
        op[j++] = i;
      }
    }
    if (j != total) return absl::InvalidArgumentError("repeat_interleave: output_size does not match the sum of repeats");
    return absl::OkStatus();
  });
  return out;
}

// ---------------------------------------------------------------------------------------
// Row ops along a dim: cumsum, sort, topk. Input made contiguous, viewed as [outer, D, inner].

struct Rows {
  int64_t outer = 1, dim = 1, inner = 1;
};
Rows RowsOf(const at::Tensor& t, int64_t dim) {
  Rows r;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim) r.outer *= t.size(d);
    if (d > dim) r.inner *= t.size(d);
  }
  r.dim = t.dim() == 0 ? 1 : t.size(dim);
  return r;
}

at::Tensor& CumsumOut(const at::Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, at::Tensor& out) {
  const at::ScalarType t = dtype ? *dtype : out.scalar_type();
  if (at::isComplexType(t) || t == at::kBool) return FallbackFor<at::_ops::cumsum_out>::call(self, dim, dtype, out);
  CheckOutWithMeta<at::meta::structured_cumsum>(out, self, dim, dtype);
  const c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor src = self.to(t).contiguous();
  at::native::resize_output(out, self.sizes());
  at::Tensor target = out.is_contiguous() && out.scalar_type() == t ? out : at::empty(self.sizes(), src.options());
  const Rows r = RowsOf(src, dim);
  if (src.numel() == 0) return out;
  AT_DISPATCH_V2(t, "xxnpu_cumsum", AT_WRAP([&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* sp = reinterpret_cast<const scalar_t*>(ConstView(src));
    scalar_t* op = reinterpret_cast<scalar_t*>(View(target));
    LaunchItems("xxnpu::cumsum", self.device().index(), r.outer * r.inner, std::max<int64_t>(1, 16384 / r.dim),
                static_cast<uint64_t>(2 * src.nbytes()), [=](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t base = (row / r.inner) * r.dim * r.inner + row % r.inner;
        acc_t acc = 0;
        for (int64_t d = 0; d < r.dim; ++d) {
          acc += static_cast<acc_t>(sp[base + d * r.inner]);
          op[base + d * r.inner] = static_cast<scalar_t>(acc);
        }
      }
      return absl::OkStatus();
    });
  }), XXNPU_INDEX_TYPES);
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

// Sort keys. Each value maps to an unsigned integer whose unsigned order is the CPU's order
// of the values (NaN the largest, NaNs equal to each other, -0.0 equal to 0.0), so a row sorts
// with plain integer compares, or by radix, instead of a NaN-aware float compare.
template <typename T>
struct SortKeyOf {
  using type = uint32_t;  // every type of 4 bytes or fewer (bool, integers, half, bfloat16, float)
};
template <>
struct SortKeyOf<int64_t> {
  using type = uint64_t;
};
template <>
struct SortKeyOf<double> {
  using type = uint64_t;
};

// The unsigned integer of a type's size.
template <size_t Bytes>
using UintOfSize = std::conditional_t<
    Bytes == 1, uint8_t, std::conditional_t<Bytes == 2, uint16_t, std::conditional_t<Bytes == 4, uint32_t, uint64_t>>>;

// A float type's exponent bits (all ones: infinity, or NaN with a nonzero mantissa).
template <typename T>
constexpr UintOfSize<sizeof(T)> ExponentMask() {
  if constexpr (std::is_same_v<T, double>) {
    return 0x7FF0000000000000ull;
  } else if constexpr (std::is_same_v<T, float>) {
    return 0x7F800000u;
  } else if constexpr (std::is_same_v<T, at::Half>) {
    return 0x7C00u;
  } else {
    static_assert(std::is_same_v<T, at::BFloat16>, "SortKey: an unknown float type");
    return 0x7F80u;
  }
}

// Works on the value's own bits with integer ops only (no conversion to float, no branch), so
// topk's loop filling a row of 32-bit keys vectorizes. The key is computed at the type's width and put in
// the top of the 32- or 64-bit word: a narrow type's low key bytes are then all 0 and the radix
// sort skips them (bfloat16 and half take 2 passes, 1-byte types 1).
template <typename T>
typename SortKeyOf<T>::type SortKey(T v) {
  using K = typename SortKeyOf<T>::type;
  using U = UintOfSize<sizeof(T)>;
  constexpr int kBits = 8 * sizeof(U);
  constexpr U kSign = static_cast<U>(U{1} << (kBits - 1));
  constexpr U kOnes = static_cast<U>(~U{0});
  U u;
  std::memcpy(&u, &v, sizeof(u));
  U key;
  if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) {
    key = u;
  } else if constexpr (std::is_integral_v<T>) {
    key = static_cast<U>(u ^ kSign);  // two's complement to offset binary: signed order as unsigned
  } else {
    // IEEE sign-magnitude to an unsigned order: negatives (all bits flipped, so larger
    // magnitudes go lower) below positives (sign bit set).
    const U magnitude = static_cast<U>(u & static_cast<U>(~kSign));
    const U negative = static_cast<U>(U{0} - static_cast<U>(u >> (kBits - 1)));
    key = static_cast<U>(u ^ static_cast<U>(negative | kSign));
    key = magnitude == 0 ? kSign : key;  // -0.0 takes 0.0's key: they tie (then go by index), as on CPU
    key = magnitude > ExponentMask<T>() ? kOnes : key;  // every NaN: one key, above +inf's
  }
  return static_cast<K>(static_cast<K>(key) << (8 * (sizeof(K) - sizeof(U))));
}

// Sorts packed words (key << 32 | index) by key only, stably: LSD radix, one byte of the key
// per pass. The words arrive in index order, so stability yields (key, index) order, the
// tie rule of both sort paths. A pass is skipped when every key shares its byte (the low
// bytes of narrow types' keys, see SortKey). Returns a or tmp, whichever holds the result.
const uint64_t* RadixSortByHigh32(uint64_t* a, uint64_t* tmp, int64_t n) {
  uint32_t count[4][256] = {};
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t key = static_cast<uint32_t>(a[i] >> 32);
    ++count[0][key & 255];
    ++count[1][(key >> 8) & 255];
    ++count[2][(key >> 16) & 255];
    ++count[3][key >> 24];
  }
  uint64_t* src = a;
  uint64_t* dst = tmp;
  for (int pass = 0; pass < 4; ++pass) {
    uint32_t* c = count[pass];
    const int shift = 32 + 8 * pass;
    if (c[(src[0] >> shift) & 255] == static_cast<uint32_t>(n)) continue;
    uint32_t sum = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t t = c[b];
      c[b] = sum;
      sum += t;
    }
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t w = src[i];
      dst[c[(w >> shift) & 255]++] = w;
    }
    std::swap(src, dst);
  }
  return src;
}

// Orders the k smallest of a[0, n) first, sorted. Elements are unique (they carry their
// index), so every algorithm here gives the same result and needs no stability. A small k
// takes the heap (one compare per element against the heap's top, almost always false); a
// large k selects first, then sorts only the k.
template <typename W>
void SortSmallestK(W* a, int64_t n, int64_t k) {
  if (k >= n) {
    std::sort(a, a + n);
  } else if (k <= 64) {
    std::partial_sort(a, a + k, a + n);
  } else {
    std::nth_element(a, a + k, a + n);
    std::sort(a, a + k);
  }
}

// topk's selection works on blocks of 16 keys or more: SmallestKByBlockMinimums.
constexpr int64_t kTopkBlock = 16;

// Blocks of 64 keys where that still leaves 2k blocks, else 32, else 16. Fewer blocks make
// the selection among their minimums cheaper; 2k of them keep the bound tight (about 1.4k
// candidates for random data). Measured on the standalone copy (1024 floats, k = 8):
// 1.2 us a row with blocks of 64 against 1.4 us with 16.
int64_t TopkBlockSize(int64_t n, int64_t k) {
  for (int64_t block : {64, 32}) {
    if ((n + block - 1) / block >= 2 * k) return block;
  }
  return kTopkBlock;
}

// The k smallest (key << 32 | index) words of keys[0, n), sorted, into out[0, k); out holds
// n words, mins twice the number of 16-key blocks; needs k <= that number. The k-th
// smallest of the blocks' minimums, T, bounds the answer: those k blocks each hold a key
// <= T, so the k smallest keys are all <= T. Only keys <= T become candidates (for random
// data about k of them), found in the few blocks whose minimum is <= T, and only they are
// sorted. This replaces a heap update for each element that beats the heap's top (about
// k ln(n/k) of them, each a few branch misses). Measured single-threaded on a standalone copy
// (1024 random floats, k = 8, a loaded machine): 1.4-2.0 us a row against 2.25 us for the
// heap. Ties at T are all candidates and the candidates sort by (key, index), so ties stay
// in index order.
void SmallestKByBlockMinimums(const uint32_t* keys, int64_t n, int64_t k, uint32_t* mins, uint64_t* out) {
  const int64_t block = TopkBlockSize(n, k);
  const int64_t blocks = (n + block - 1) / block;
  uint32_t* selected = mins + blocks;  // a copy for nth_element; mins stays in block order
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * block, end = std::min(n, begin + block);
    uint32_t m = keys[begin];
    for (int64_t j = begin + 1; j < end; ++j) m = std::min(m, keys[j]);
    mins[b] = selected[b] = m;
  }
  std::nth_element(selected, selected + (k - 1), selected + blocks);
  const uint32_t bound = selected[k - 1];
  int64_t count = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    if (mins[b] > bound) continue;  // no key in the block is a candidate
    const int64_t begin = b * block, end = std::min(n, begin + block);
    for (int64_t j = begin; j < end; ++j) {
      if (keys[j] <= bound) out[count++] = (static_cast<uint64_t>(keys[j]) << 32) | static_cast<uint64_t>(j);
    }
  }
  SortSmallestK(out, count, k);
}

// A key with its index, for 8-byte keys (and rows too long to pack an index into 32 bits).
template <typename K>
struct KeyIndex {
  K key;
  int64_t index;
  bool operator<(const KeyIndex& o) const { return key < o.key || (key == o.key && index < o.index); }
};

// Rows shorter than this sort by std::sort; the radix sort's four 256-bucket histograms cost
// more than the compares they save.
constexpr int64_t kRadixMinRow = 64;

// Sorts (or selects the top k of) each row into values/indices (contiguous [outer, k, inner]).
// Per row: one pass (strided when inner > 1) turns the row into (key, index) words in a
// contiguous per-block buffer, the words are sorted, and values are read back by index.
// Sorting by (key, index) puts ties in index order, which is the CPU's stable order, so
// the stable and unstable sorts (and topk) give the same answer. Descending flips the keys'
// bits: NaN then comes first and ties still go lower index first.
void SortRows(const char* name, const at::Tensor& src, int64_t dim, int64_t k, bool descending,
              const at::Tensor& values, const at::Tensor& indices) {
  const Rows r = RowsOf(src, dim);
  if (src.numel() == 0 || k == 0) return;
  AT_DISPATCH_V2(src.scalar_type(), "xxnpu_sort", AT_WRAP([&] {
    using K = typename SortKeyOf<scalar_t>::type;
    const scalar_t* sp = reinterpret_cast<const scalar_t*>(ConstView(src));
    scalar_t* vp = reinterpret_cast<scalar_t*>(View(values));
    int64_t* ip = reinterpret_cast<int64_t*>(View(indices));
    const K flip = descending ? ~K{0} : K{0};
    // Packing needs a 32-bit key and an index below 2^32 (and the radix counts are 32-bit).
    const bool packed = r.dim < (int64_t{1} << 32);
    // About 4096 elements a block: the benchmark's 1024-wide rows go 4 to a block (16 blocks
    // at 256 KB, 4096 at 64 MB). The compute pool hands blocks out in chunks of a quarter of a
    // thread's share, so many small blocks cost little, and a row of 4096 or more is a block.
    LaunchItems(name, src.device().index(), r.outer * r.inner, std::max<int64_t>(1, 4096 / r.dim),
                static_cast<uint64_t>(src.nbytes() + values.nbytes() + indices.nbytes()),
                [=](int64_t begin, int64_t end) {
      const int64_t n = r.dim;
      auto write = [&](int64_t o, int64_t in, const scalar_t* s, auto index_of) {
        for (int64_t j = 0; j < k; ++j) {
          const int64_t idx = index_of(j);
          const int64_t dst = o * k * r.inner + j * r.inner + in;
          vp[dst] = s[idx * r.inner];  // the original value: -0.0 and NaN payloads survive
          ip[dst] = idx;
        }
      };
      if constexpr (sizeof(K) == 4) {
        if (packed) {
          std::vector<uint64_t> buf(static_cast<size_t>(k < n || n < kRadixMinRow ? n : 2 * n));
          // topk's keys and block minimums (SmallestKByBlockMinimums).
          std::vector<uint32_t> keybuf(static_cast<size_t>(k < n ? n + 2 * ((n + kTopkBlock - 1) / kTopkBlock) : 0));
          for (int64_t row = begin; row < end; ++row) {
            const int64_t o = row / r.inner, in = row % r.inner;
            const scalar_t* s = sp + o * n * r.inner + in;
            uint64_t* w = buf.data();
            if (k < n && k <= (n + kTopkBlock - 1) / kTopkBlock) {
              uint32_t* keys = keybuf.data();
              if (r.inner == 1) {
                // Keys alone (32-bit, no packing) so this loop vectorizes.
                for (int64_t d = 0; d < n; ++d) keys[d] = static_cast<uint32_t>(SortKey(s[d]) ^ flip);
              } else {
                for (int64_t d = 0; d < n; ++d) keys[d] = static_cast<uint32_t>(SortKey(s[d * r.inner]) ^ flip);
              }
              SmallestKByBlockMinimums(keys, n, k, keys + n, w);
              write(o, in, s, [&](int64_t j) { return static_cast<int64_t>(w[j] & 0xffffffffu); });
              continue;
            }
            for (int64_t d = 0; d < n; ++d) {
              w[d] = (static_cast<uint64_t>(SortKey(s[d * r.inner]) ^ flip) << 32) | static_cast<uint64_t>(d);
            }
            const uint64_t* sorted = w;
            if (k == n && n >= kRadixMinRow) {
              sorted = RadixSortByHigh32(w, w + n, n);
            } else {
              SortSmallestK(w, n, k);
            }
            write(o, in, s, [&](int64_t j) { return static_cast<int64_t>(sorted[j] & 0xffffffffu); });
          }
          return absl::OkStatus();
        }
      }
      {
        std::vector<KeyIndex<K>> buf(static_cast<size_t>(n));
        for (int64_t row = begin; row < end; ++row) {
          const int64_t o = row / r.inner, in = row % r.inner;
          const scalar_t* s = sp + o * n * r.inner + in;
          for (int64_t d = 0; d < n; ++d) buf[d] = {static_cast<K>(SortKey(s[d * r.inner]) ^ flip), d};
          SortSmallestK(buf.data(), n, k);
          write(o, in, s, [&](int64_t j) { return buf[j].index; });
        }
      }
      return absl::OkStatus();
    });
  }), XXNPU_INDEX_TYPES, at::kBool);
}

std::tuple<at::Tensor&, at::Tensor&> SortOut(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                             bool descending, at::Tensor& values, at::Tensor& indices) {
  if (at::isComplexType(self.scalar_type())) {
    return FallbackFor<at::_ops::sort_values_stable>::call(self, stable, dim, descending, values, indices);
  }
  CheckOutsWithMeta<at::meta::structured_sort_stable>(values, indices, self, stable, dim, descending);
  const c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  const at::Tensor src = self.contiguous();
  at::native::resize_output(values, self.sizes());
  at::native::resize_output(indices, self.sizes());
  at::Tensor v = values.is_contiguous() ? values : at::empty(self.sizes(), values.options());
  at::Tensor i = indices.is_contiguous() ? indices : at::empty(self.sizes(), indices.options());
  // Ties come out in index order either way, so `stable` needs no separate path.
  SortRows("xxnpu::sort", src, dim, self.dim() == 0 ? 1 : self.size(dim), descending, v, i);
  if (!v.is_same(values)) values.copy_(v);
  if (!i.is_same(indices)) indices.copy_(i);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> TopkOut(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                                             at::Tensor& values, at::Tensor& indices) {
  if (at::isComplexType(self.scalar_type())) {
    return FallbackFor<at::_ops::topk_values>::call(self, k, dim, largest, true, values, indices);
  }
  CheckOutsWithMeta<at::meta::structured_topk>(values, indices, self, k, dim, largest, sorted);
  const c10::DeviceGuard guard(self.device());
  dim = at::maybe_wrap_dim(dim, self.dim());
  const int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  TORCH_CHECK(k >= 0 && k <= n, "selected index k out of range");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[dim] = k;
  const at::Tensor src = self.contiguous();
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  at::Tensor v = values.is_contiguous() ? values : at::empty(shape, values.options());
  at::Tensor i = indices.is_contiguous() ? indices : at::empty(shape, indices.options());
  SortRows("xxnpu::topk", src, dim, k, largest, v, i);  // always sorted: a superset of sorted=False
  if (!v.is_same(values)) values.copy_(v);
  if (!i.is_same(indices)) indices.copy_(i);
  return {values, indices};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cat.out", &CatOut);
  m.impl("index_select", &IndexSelect);
  m.impl("index_select.out", &IndexSelectOut);
  m.impl("gather.out", &GatherOut);
  m.impl("scatter.src_out", &ScatterSrcOut);
  m.impl("scatter.value_out", &ScatterValueOut);
  m.impl("scatter_add.out", &ScatterAddOut);
  m.impl("index.Tensor_out", &IndexOut);
  m.impl("_index_put_impl_", &IndexPutImpl);
  m.impl("nonzero", &Nonzero);
  m.impl("nonzero.out", &NonzeroOut);
  m.impl("masked_select", &MaskedSelect);
  m.impl("masked_select.out", &MaskedSelectOut);
  m.impl("tril.out", &TriOut<true>);
  m.impl("triu.out", &TriOut<false>);
  m.impl("arange.start_out", &ArangeOut);
  m.impl("linspace.out", &LinspaceOut);
  m.impl("repeat_interleave.Tensor", &RepeatInterleave);
  m.impl("cumsum.out", &CumsumOut);
  m.impl("sort.values_stable", &SortOut);
  m.impl("topk.values", &TopkOut);
}

}  // namespace
}  // namespace xxnpu
