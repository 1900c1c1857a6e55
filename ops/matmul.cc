// Matrix products on xxnpu: mm, bmm, addmm, baddbmm, mv, addmv, dot (torch.matmul,
// F.linear, einsum and SDPA's math path reach them).
//
// The device kernel calls a BLAS GEMM instead of a hand-written loop: the standard Fortran
// `sgemm_`/`dgemm_` entry points of the BLAS torch's CPU build links and exports (MKL in
// the pip wheel), so the kernel runs the same code the CPU backend does, and swapping in
// another BLAS (Debian's OpenBLAS, a chip vendor's library) is a link change. Measured
// (docs/adding-an-op.md): at 1024^3 float32 on one thread, a cache-friendly hand-written
// loop (i-k-j, -O3 -march=native) reaches 4.0 GFLOP/s, the BLAS 50 GFLOP/s.
//
// float16/bfloat16 operands are widened to float32 on the device, multiplied, and rounded
// back (accumulation in float32, as CUDA's cuBLAS does by default).
//
// Threading: a product is cut into tiles of C (row blocks or column blocks, see TileGemm)
// that the device's compute threads take as the blocks of the kernel's grid, and each tile
// is one single-threaded BLAS call. Left to itself, MKL would start an OpenMP team of its
// own from the stream thread on the cores the compute threads, the host thread and the
// other streams are using; the compute threads are the device's cores.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <vector>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "ops/cpu_blas.h"
#include "ops/cpu_fallback.h"
#include "ops/vec_kernels.h"
#include "ops/xxnpu_tensor.h"

extern "C" {
void dgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k, const double* alpha,
            const double* a, const int* lda, const double* b, const int* ldb, const double* beta, double* c,
            const int* ldc);
}

namespace xxnpu {
namespace {

// How a [rows, cols] matrix with strides (sr, sc) can be handed to BLAS: row-major with
// leading dim `ld` (trans = false) or column-major (trans = true).
struct MatrixLayout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 1;
};

MatrixLayout LayoutOf(int64_t rows, int64_t cols, int64_t sr, int64_t sc) {
  MatrixLayout l;
  if ((sc == 1 || cols == 1) && (rows == 1 || sr >= std::max<int64_t>(1, cols))) {
    l = {true, false, rows == 1 ? std::max<int64_t>(1, cols) : sr};
  } else if ((sr == 1 || rows == 1) && (cols == 1 || sc >= std::max<int64_t>(1, rows))) {
    l = {true, true, cols == 1 ? std::max<int64_t>(1, rows) : sc};
  }
  if (l.ok && l.ld > INT_MAX) l.ok = false;
  return l;
}

// A batch of row-major products C[b] = alpha * A[b] @ B[b] + beta * C[b] (C row-major),
// cut into `tiles` tiles per batch item: blocks of `tile` rows of C (split_rows) or of
// `tile` columns.
struct Gemm {
  at::ScalarType dtype;
  int64_t batch, m, n, k;
  const char* a;
  const char* b;
  char* c;  // device views
  int64_t batch_stride_a, batch_stride_b, batch_stride_c;  // elements
  MatrixLayout la, lb;
  int64_t ldc;
  double alpha, beta;
  bool split_rows = true;
  int64_t tile = 1, tiles = 1;
  // Few rows of A against B = W^T with W's rows dense: VecKernels::dot_rows instead of
  // the BLAS (see SmallM).
  bool dot_rows = false;
};

// Whether the product is a linear layer's x @ W^T with at most kDotRowsMaxM rows of x in
// float32 or bfloat16 (a decode step's projections): then dot products of x's rows with
// W's rows read W once, straight from its storage; the BLAS packs W first (a copy of all
// of it per call), and for bfloat16 RunGemm widens all of it to float first.
bool SmallM(const Gemm& g) {
  return (g.dtype == at::kFloat || g.dtype == at::kBFloat16) && g.m <= kDotRowsMaxM && g.k > 0 && !g.la.trans &&
         g.lb.trans;
}

// Below this many flops a tile is not worth a share of its own. Handing a share to a
// compute thread costs a few microseconds now that the launcher polls for the pool worker
// (it cost ~10 us, a 0.5 MFLOP BLAS call, when this was 512 K); at 128 K a decode step's
// [4, 256] @ [256, 256] splits in four (it ran whole on one thread) and its
// [4, 256] @ [256, 384] in four even tiles (it was 256 + 128): the graphed Llama decode
// ran 3-4% more tokens/s.
constexpr int64_t kMinTileFlops = 128 * 1024;
// Tiles per batch item at most: two per compute thread even out uneven shares; more
// make each BLAS call smaller and repack the shared operand more often (a prefill's
// [74, 256] @ [256, 1408], loaded machine: 16 column tiles 87 GFLOP/s, 4 tiles 91-95;
// 160 GFLOP/s with 4 tiles on a quiet one).
int64_t MaxTiles() {
  static const int64_t tiles = [] {
    // Every device runs the same number of compute threads (the runtime's configuration).
    const absl::StatusOr<DeviceProperties> p = xxnpuGetDeviceProperties(0);
    return 2 * std::max<int64_t>(1, p.ok() ? p->compute_units : 1);
  }();
  return tiles;
}

// Chooses how to cut the product. Each tile re-reads the operand it shares with the other
// tiles (all of B for row blocks, all of A for column blocks), so cut the dimension whose
// shared operand is the smaller: columns when m < n (a decode step's [4, 256] @ [256, 1408]
// reads A 4 times instead of B), rows otherwise.
void TileGemm(Gemm& g) {
  g.dot_rows = SmallM(g);
  g.split_rows = g.m >= g.n && !g.dot_rows;
  const int64_t dim = g.split_rows ? g.m : g.n;
  const int64_t per_unit = std::max<int64_t>(1, 2 * g.k * (g.split_rows ? g.n : g.m));  // flops of one row/column
  // Column tiles stay a multiple of 16 elements, so that tiles do not share C's cache lines.
  const int64_t align = g.split_rows ? 1 : 16;
  int64_t tile = std::max<int64_t>(align, (kMinTileFlops + per_unit - 1) / per_unit);
  // float16/bfloat16 tiles each widen the shared operand to float (RunGemm): tiles of at
  // least 128 rows or columns keep that below ~1% of the tile's multiply-adds.
  if (g.dtype == at::kHalf || g.dtype == at::kBFloat16) tile = std::max<int64_t>(tile, 128);
  const int64_t max_tiles = MaxTiles();
  tile = std::max(tile, (dim + max_tiles - 1) / max_tiles);
  tile = (tile + align - 1) / align * align;
  g.tile = std::min(tile, std::max<int64_t>(1, dim));
  g.tiles = std::max<int64_t>(1, (dim + g.tile - 1) / g.tile);
}

// The sub-product of tile `t`: the same operands offset to its rows or columns.
Gemm TileOf(const Gemm& g, int64_t t, size_t elem) {
  Gemm s = g;
  s.batch = 1;
  const int64_t lo = t * g.tile;
  if (g.split_rows) {
    s.m = std::min(g.tile, g.m - lo);
    s.a += static_cast<int64_t>(elem) * lo * (g.la.trans ? 1 : g.la.ld);
    s.c += static_cast<int64_t>(elem) * lo * g.ldc;
  } else {
    s.n = std::min(g.tile, g.n - lo);
    s.b += static_cast<int64_t>(elem) * lo * (g.lb.trans ? g.lb.ld : 1);
    s.c += static_cast<int64_t>(elem) * lo;
  }
  return s;
}

template <typename T, typename F>
void BlasGemm(F gemm, const Gemm& g, const T* a, const T* b, T* c, const MatrixLayout& la, const MatrixLayout& lb,
              int64_t ldc) {
  // Row-major C = A B is column-major C^T = B^T A^T: swap the operands.
  const char ta = la.trans ? 'T' : 'N', tb = lb.trans ? 'T' : 'N';
  const int m = static_cast<int>(g.n), n = static_cast<int>(g.m), k = static_cast<int>(g.k);
  const int lda = static_cast<int>(lb.ld), ldb = static_cast<int>(la.ld), ldcc = static_cast<int>(ldc);
  const T alpha = static_cast<T>(g.alpha), beta = static_cast<T>(g.beta);
  gemm(&tb, &ta, &m, &n, &k, &alpha, b, &lda, a, &ldb, &beta, c, &ldcc);
}

// Widens a strided [rows, cols] matrix to dense row-major float.
template <typename T>
void Widen(const T* src, const MatrixLayout& l, int64_t rows, int64_t cols, std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      dst[i * cols + j] = static_cast<float>(l.trans ? src[j * l.ld + i] : src[i * l.ld + j]);
    }
  }
}

// One batch item's tile (g.batch == 1, offsets applied by TileOf).
template <typename T>
void RunGemm(const Gemm& g) {
  const T* a = reinterpret_cast<const T*>(g.a);
  const T* b = reinterpret_cast<const T*>(g.b);
  T* c = reinterpret_cast<T*>(g.c);
  if (g.k == 0) {  // BLAS does not scale C when k == 0 on every implementation
    for (int64_t r = 0; r < g.m; ++r) {
      for (int64_t s = 0; s < g.n; ++s) {
        T& v = c[r * g.ldc + s];
        v = g.beta == 0 ? T(0) : static_cast<T>(static_cast<double>(v) * g.beta);
      }
    }
    return;
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, c10::BFloat16>) {
    if (g.dot_rows) {
      // B = W^T: column j of B is row j of W.
      HostVecKernels().dot_rows(std::is_same_v<T, float> ? VecDtype::kFloat : VecDtype::kBFloat16, g.m, g.n, g.k,
                                a, g.la.ld, b, g.lb.ld, c, g.ldc, static_cast<float>(g.alpha),
                                static_cast<float>(g.beta));
      return;
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    BlasGemm<float>(sgemm_, g, a, b, c, g.la, g.lb, g.ldc);
  } else if constexpr (std::is_same_v<T, double>) {
    BlasGemm<double>(dgemm_, g, a, b, c, g.la, g.lb, g.ldc);
  } else {
    thread_local std::vector<float> fa, fb, fc;
    Widen(a, g.la, g.m, g.k, fa);
    Widen(b, g.lb, g.k, g.n, fb);
    fc.resize(static_cast<size_t>(g.m * g.n));
    if (g.beta != 0) {
      for (int64_t r = 0; r < g.m; ++r) {
        for (int64_t s = 0; s < g.n; ++s) fc[r * g.n + s] = static_cast<float>(c[r * g.ldc + s]);
      }
    }
    const MatrixLayout dense_a{true, false, std::max<int64_t>(1, g.k)};
    const MatrixLayout dense_b{true, false, std::max<int64_t>(1, g.n)};
    BlasGemm<float>(sgemm_, g, fa.data(), fb.data(), fc.data(), dense_a, dense_b, std::max<int64_t>(1, g.n));
    for (int64_t r = 0; r < g.m; ++r) {
      for (int64_t s = 0; s < g.n; ++s) c[r * g.ldc + s] = static_cast<T>(fc[r * g.n + s]);
    }
  }
}

bool BlasDtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// out (3-D, [batch, m, n], already holding beta's addend if beta != 0) =
// alpha * a @ b + beta * out, with a [batch, m, k], b [batch, k, n] on xxnpu.
void LaunchBatchedGemm(const char* name, const at::Tensor& a_in, const at::Tensor& b_in, const at::Tensor& out,
                       double alpha, double beta) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a_in.size(2);
  if (out.numel() == 0) return;
  TORCH_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, name, ": matrix dimensions above 2^31 are not supported");
  at::Tensor a = a_in, b = b_in;
  MatrixLayout la = LayoutOf(m, k, a.stride(1), a.stride(2));
  if (!la.ok) {
    a = a.contiguous();
    la = LayoutOf(m, k, a.stride(1), a.stride(2));
  }
  MatrixLayout lb = LayoutOf(k, n, b.stride(1), b.stride(2));
  if (!lb.ok) {
    b = b.contiguous();
    lb = LayoutOf(k, n, b.stride(1), b.stride(2));
  }
  const MatrixLayout lc = LayoutOf(m, n, out.stride(1), out.stride(2));
  TORCH_INTERNAL_ASSERT(lc.ok && !lc.trans, name, ": result must be row-major");

  Gemm g{};
  g.dtype = out.scalar_type();
  g.batch = batch;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = static_cast<const char*>(DeviceView(a.const_data_ptr()));
  g.b = static_cast<const char*>(DeviceView(b.const_data_ptr()));
  g.c = static_cast<char*>(DeviceView(out.data_ptr()));
  g.batch_stride_a = a.stride(0);
  g.batch_stride_b = b.stride(0);
  g.batch_stride_c = out.stride(0);
  g.la = la;
  g.lb = lb;
  g.ldc = lc.ld;
  g.alpha = alpha;
  g.beta = beta;

  TileGemm(g);

  LaunchConfig cfg;
  cfg.name = name;
  // One block per tile of each batch item; the compute threads share them out.
  const int64_t blocks = batch * g.tiles;
  TORCH_CHECK(blocks <= INT_MAX, name, ": at most 2^31 matrices per call are supported, got ", batch);
  cfg.grid = Dim3{static_cast<uint32_t>(blocks), 1, 1};
  cfg.flops = static_cast<uint64_t>(2 * batch * m * n * k);
  cfg.bytes = static_cast<uint64_t>((a.numel() + b.numel() + out.numel() * (beta != 0 ? 2 : 1)) * out.element_size());
  CheckOk(xxnpuLaunchKernel(cfg, [g](BlockRange r) {
    const SingleThreadedBlas one_thread;
    AT_DISPATCH_V2(g.dtype, "xxnpu_gemm", AT_WRAP([&] {
      for (int64_t t = r.begin; t < r.end; ++t) {
        Gemm item = g;
        const int64_t i = t / g.tiles;
        item.a += static_cast<int64_t>(sizeof(scalar_t)) * i * g.batch_stride_a;
        item.b += static_cast<int64_t>(sizeof(scalar_t)) * i * g.batch_stride_b;
        item.c += static_cast<int64_t>(sizeof(scalar_t)) * i * g.batch_stride_c;
        RunGemm<scalar_t>(TileOf(item, t % g.tiles, sizeof(scalar_t)));
      }
    }), at::kFloat, at::kDouble, at::kHalf, at::kBFloat16);
    return absl::OkStatus();
  }, CurrentXxnpuStreamHandle(out.device().index())), name);
}

void CheckMatmulOperands(const char* name, const at::Tensor& a, const at::Tensor& b, const at::Tensor& out) {
  CheckSameDevice(name, "mat2", b, a.device());
  CheckSameDevice(name, "out", out, a.device());
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), name, ": expected both operands to have the same dtype, but got ",
              a.scalar_type(), " != ", b.scalar_type());
  TORCH_CHECK(out.scalar_type() == a.scalar_type(), name, ": expected out dtype ", a.scalar_type(), " but got ",
              out.scalar_type());
}

// out = beta * self + alpha * (a @ b) for 3-D operands; self broadcastable to out.
void Baddbmm3d(const char* name, const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, double beta,
               double alpha, at::Tensor& out) {
  const c10::DeviceGuard guard(out.device());
  const std::vector<int64_t> shape = {a.size(0), a.size(1), b.size(2)};
  at::native::resize_output(out, shape);
  // The BLAS writes a row-major result; anything else goes through a temporary.
  const MatrixLayout lc = LayoutOf(shape[1], shape[2], out.stride(1), out.stride(2));
  const bool direct = lc.ok && !lc.trans;
  at::Tensor target = direct ? out : at::empty(shape, out.options());
  if (self.defined() && beta != 0) {
    if (!self.is_same(target)) target.copy_(self.expand(shape));
  }
  LaunchBatchedGemm(name, a, b, target, alpha, self.defined() ? beta : 0.0);
  if (!direct) out.copy_(target);
}

// An operand that out= overlaps, copied first. The out= kernels resize `out` before the
// device reads the operands, so an operand that is (part of) `out` could change shape or
// storage under the kernel, which then reads past it (XXNPU_MEMCHECK caught baddbmm doing
// so). Reading a copy gives the un-aliased result; the CPU's own result for such a call is
// undefined, or an error once its resize changed the operand's shape.
at::Tensor CopyIfOverlapsOut(const at::Tensor& operand, const at::Tensor& out) {
  if (!operand.defined() || at::get_overlap_status(out, operand) == at::MemOverlapStatus::No) return operand;
  return operand.clone();
}

at::Tensor& MmOut(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  TORCH_CHECK(self.dim() == 2, "self must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", self.size(0), "x",
              self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  if (!BlasDtype(self.scalar_type())) return FallbackFor<at::_ops::mm_out>::call(self, mat2, out);
  CheckMatmulOperands("mm", self, mat2, out);
  const at::Tensor a = CopyIfOverlapsOut(self, out), b = CopyIfOverlapsOut(mat2, out);
  at::native::resize_output(out, {a.size(0), b.size(1)});
  at::Tensor out3 = out.unsqueeze(0);
  Baddbmm3d("xxnpu::mm", at::Tensor(), a.unsqueeze(0), b.unsqueeze(0), 0.0, 1.0, out3);
  return out;
}

at::Tensor& BmmOut(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  TORCH_CHECK(self.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(mat2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(self.size(0) == mat2.size(0) && self.size(2) == mat2.size(1),
              "Expected size for first two dimensions of batch2 tensor to be: [", self.size(0), ", ", self.size(2),
              "] but got: [", mat2.size(0), ", ", mat2.size(1), "].");
  if (!BlasDtype(self.scalar_type())) return FallbackFor<at::_ops::bmm_out>::call(self, mat2, out);
  CheckMatmulOperands("bmm", self, mat2, out);
  Baddbmm3d("xxnpu::bmm", at::Tensor(), CopyIfOverlapsOut(self, out), CopyIfOverlapsOut(mat2, out), 0.0, 1.0, out);
  return out;
}

at::Tensor& AddmmOut(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                     const at::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(mat1.dim() == 2 && mat2.dim() == 2, "addmm: expected 2-D matrices, got ", mat1.dim(), "-D and ",
              mat2.dim(), "-D");
  TORCH_CHECK(mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", mat1.size(0), "x",
              mat1.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  if (!BlasDtype(mat1.scalar_type())) return FallbackFor<at::_ops::addmm_out>::call(self, mat1, mat2, beta, alpha, out);
  CheckMatmulOperands("addmm", mat1, mat2, out);
  CheckSameDevice("addmm", "self", self, out.device());
  const at::Tensor a = CopyIfOverlapsOut(mat1, out), b = CopyIfOverlapsOut(mat2, out);
  at::native::resize_output(out, {a.size(0), b.size(1)});
  at::Tensor out3 = out.unsqueeze(0);
  const at::Tensor self2 = self.dim() <= 2 ? self.expand({a.size(0), b.size(1)}) : self;
  Baddbmm3d("xxnpu::addmm", self2.unsqueeze(0), a.unsqueeze(0), b.unsqueeze(0), beta.toDouble(), alpha.toDouble(),
            out3);
  return out;
}

at::Tensor& BaddbmmOut(const at::Tensor& self, const at::Tensor& b1, const at::Tensor& b2, const at::Scalar& beta,
                       const at::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(b1.dim() == 3 && b2.dim() == 3, "baddbmm: batch1 and batch2 must be 3D tensors");
  TORCH_CHECK(b1.size(0) == b2.size(0) && b1.size(2) == b2.size(1), "baddbmm: incompatible shapes ", b1.sizes(),
              " and ", b2.sizes());
  if (!BlasDtype(b1.scalar_type())) return FallbackFor<at::_ops::baddbmm_out>::call(self, b1, b2, beta, alpha, out);
  CheckMatmulOperands("baddbmm", b1, b2, out);
  CheckSameDevice("baddbmm", "self", self, out.device());
  Baddbmm3d("xxnpu::baddbmm", self, CopyIfOverlapsOut(b1, out), CopyIfOverlapsOut(b2, out), beta.toDouble(),
            alpha.toDouble(), out);
  return out;
}

at::Tensor& AddmvOut(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                     const at::Scalar& alpha, at::Tensor& out) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ", self.dim(), ", ",
              mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0), "size mismatch, got input (", self.size(0), "), mat (", mat.size(0), "x",
              mat.size(1), "), vec (", vec.size(0), ")");
  if (!BlasDtype(mat.scalar_type())) return FallbackFor<at::_ops::addmv_out>::call(self, mat, vec, beta, alpha, out);
  CheckMatmulOperands("addmv", mat, vec, out);
  CheckSameDevice("addmv", "self", self, out.device());
  const at::Tensor m = CopyIfOverlapsOut(mat, out), v = CopyIfOverlapsOut(vec, out);
  at::native::resize_output(out, {m.size(0)});
  at::Tensor out3 = out.view({1, m.size(0), 1});
  const at::Tensor self3 = self.expand({m.size(0)}).view({1, m.size(0), 1});
  Baddbmm3d("xxnpu::addmv", self3, m.unsqueeze(0), v.unsqueeze(0).unsqueeze(2), beta.toDouble(), alpha.toDouble(),
            out3);
  return out;
}

at::Tensor Dot(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.dim() == 1 && other.dim() == 1, "1D tensors expected, but got ", self.dim(), "D and ",
              other.dim(), "D tensors");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              self.scalar_type(), " and ", other.scalar_type());
  TORCH_CHECK(self.numel() == other.numel(), "inconsistent tensor size, expected tensor [", self.numel(),
              "] and src [", other.numel(), "] to have the same number of elements, but got ", self.numel(), " and ",
              other.numel(), " elements respectively");
  CheckSameDevice("dot", "tensor", other, self.device());
  if (!BlasDtype(self.scalar_type())) return FallbackFor<at::_ops::dot>::call(self, other);
  at::Tensor out = at::empty({1, 1, 1}, self.options());
  Baddbmm3d("xxnpu::dot", at::Tensor(), self.unsqueeze(0).unsqueeze(0), other.unsqueeze(0).unsqueeze(2), 0.0, 1.0,
            out);
  return out.view(at::IntArrayRef{});  // a 0-dim result ({} alone would pick view(dtype))
}

// torch._weight_int8pack_mm, the int8 weight-only linear (torchao's int8 weight-only
// form): out[i, j] = (A[i] . B[j]) * scales[j], A [M, K] float32/bfloat16/float16 (rows
// contiguous), B [N, K] int8, scales [N] in A's dtype, out [M, N] in A's dtype; float
// accumulation and one rounding, as the CPU kernel.
//
// The kernel's blocks take tiles of B's rows. Up to kDotRowsMaxM rows of A (a decode
// step): the dot-row kernel reads the tile's bytes and widens them in registers
// (dot_rows_int8_weight). More (a prefill): the tile is widened to float32 in a
// per-thread buffer (up to 4 MiB, kept for the next call) and multiplied by the BLAS. B is
// read from memory once, at one byte a weight; the scales then multiply the float sums.
struct Int8WeightGemm {
  at::ScalarType dtype;  // A's, the scales' and out's
  int64_t m, n, k;
  const char* a;  // device views
  int64_t lda;    // elements
  const int8_t* b;
  const char* scales;
  char* out;
  int64_t tile;  // rows of B per tile
};

// Rows of B per tile: two tiles per compute thread when N allows. Above kDotRowsMaxM rows
// of A a tile is widened to float for the BLAS, which packs all of A again for every
// tile: tiles of up to 1 M floats (4 MiB) keep that repacking to a few percent of the
// multiply-adds (at 16 rows a tile, a [296, 4096] x [4096, 4096] spent more time packing
// A than multiplying: 1.3x the float linear's time, against 1.1x now).
int64_t Int8WeightTileRows(int64_t m, int64_t n, int64_t k) {
  int64_t rows = (n + MaxTiles() - 1) / MaxTiles();
  if (m > kDotRowsMaxM) rows = std::min(rows, std::max<int64_t>(16, (int64_t{1} << 20) / std::max<int64_t>(1, k)));
  return std::max<int64_t>(1, std::min(rows, n));
}

template <typename T>
void RunInt8WeightTile(const Int8WeightGemm& g, int64_t tile_index) {
  const int64_t n0 = tile_index * g.tile, tn = std::min(g.tile, g.n - n0);
  thread_local std::vector<float> w, a, c;
  const int8_t* b = g.b + n0 * g.k;
  // A as float rows: itself when it is float32, else widened (every tile widens it: A is
  // the small operand, M x K against the tile's M x tn x K multiply-adds).
  const float* af = reinterpret_cast<const float*>(g.a);
  int64_t lda = g.lda;
  if constexpr (!std::is_same_v<T, float>) {
    a.resize(static_cast<size_t>(g.m * g.k));
    const T* src = reinterpret_cast<const T*>(g.a);
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.k; ++j) a[i * g.k + j] = static_cast<float>(src[i * g.lda + j]);
    }
    af = a.data();
    lda = g.k;
  }
  c.resize(static_cast<size_t>(g.m * tn));
  if (g.m <= kDotRowsMaxM) {
    // The bytes straight into the dot products, widened in registers.
    HostVecKernels().dot_rows_int8_weight(g.m, tn, g.k, af, lda, b, g.k, c.data(), tn);
  } else {
    w.resize(static_cast<size_t>(tn * g.k));
    for (int64_t i = 0; i < tn * g.k; ++i) w[i] = static_cast<float>(b[i]);
    Gemm t{};
    t.m = g.m;
    t.n = tn;
    t.k = g.k;
    t.alpha = 1.0;
    t.beta = 0.0;
    // B's tile as the right operand [K, tn]: column j is row j of the widened tile.
    BlasGemm<float>(sgemm_, t, af, w.data(), c.data(), MatrixLayout{true, false, lda}, MatrixLayout{true, true, g.k},
                    tn);
  }
  const T* scales = reinterpret_cast<const T*>(g.scales) + n0;
  T* out = reinterpret_cast<T*>(g.out) + n0;
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < tn; ++j) out[i * g.n + j] = static_cast<T>(c[i * tn + j] * static_cast<float>(scales[j]));
  }
}

at::Tensor WeightInt8packMm(const at::Tensor& A, const at::Tensor& B, const at::Tensor& scales) {
  // The CPU kernel's checks and messages (named for the op, not the CPU).
  constexpr const char* kOp = "_weight_int8pack_mm";
  CheckSameDevice(kOp, "B", B, A.device());
  CheckSameDevice(kOp, "scales", scales, A.device());
  TORCH_CHECK(A.dtype() == at::kBFloat16 || A.dtype() == at::kHalf || A.dtype() == at::kFloat, kOp,
              " : expect A to be either 32-bit or 16-bit float tensor.");
  TORCH_CHECK(A.dim() == 2, kOp, " : expect A to be 2D tensor.");
  TORCH_CHECK(A.stride(1) == 1, kOp, " : A must be contiguous on the last dimension.");
  TORCH_CHECK(B.dtype() == at::kChar, kOp, " : expect B to be int8 tensor.");
  TORCH_CHECK(B.is_contiguous(), kOp, " : expect B to be contiguous.");
  TORCH_CHECK(B.size(1) == A.size(1), kOp, " : expect B.size(1) == ", A.size(1));
  TORCH_CHECK(scales.dim() == 1 && scales.size(0) == B.size(0), kOp, " : expect scales to be 1d tensor with size ",
              B.size(0));
  TORCH_CHECK(scales.scalar_type() == A.scalar_type(), "expected scalar type ", A.scalar_type(), " but found ",
              scales.scalar_type());
  const c10::DeviceGuard guard(A.device());
  const int64_t m = A.size(0), n = B.size(0), k = A.size(1);
  at::Tensor out = at::empty({m, n}, A.options());
  if (out.numel() == 0) return out;
  if (k == 0) return out.zero_();
  TORCH_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, kOp, ": matrix dimensions above 2^31 are not supported");
  const at::Tensor s = scales.contiguous();
  Int8WeightGemm g{A.scalar_type(),
                   m,
                   n,
                   k,
                   static_cast<const char*>(DeviceView(A.const_data_ptr())),
                   A.stride(0),
                   static_cast<const int8_t*>(DeviceView(B.const_data_ptr())),
                   static_cast<const char*>(DeviceView(s.const_data_ptr())),
                   static_cast<char*>(DeviceView(out.data_ptr())),
                   Int8WeightTileRows(m, n, k)};
  LaunchConfig cfg;
  cfg.name = "xxnpu::weight_int8pack_mm";
  cfg.grid = Dim3{static_cast<uint32_t>((n + g.tile - 1) / g.tile), 1, 1};
  cfg.flops = static_cast<uint64_t>(2 * m * n * k);
  cfg.bytes = static_cast<uint64_t>(n * k + (m * k + n + m * n) * A.element_size());
  CheckOk(xxnpuLaunchKernel(cfg, [g](BlockRange r) {
    const SingleThreadedBlas one_thread;
    AT_DISPATCH_V2(g.dtype, "xxnpu_weight_int8pack_mm", AT_WRAP([&] {
      for (int64_t t = r.begin; t < r.end; ++t) RunInt8WeightTile<scalar_t>(g, t);
    }), at::kFloat, at::kHalf, at::kBFloat16);
    return absl::OkStatus();
  }, CurrentXxnpuStreamHandle(A.device().index())), kOp);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_weight_int8pack_mm", &WeightInt8packMm);
  m.impl("mm.out", &MmOut);
  m.impl("bmm.out", &BmmOut);
  m.impl("addmm.out", &AddmmOut);
  m.impl("baddbmm.out", &BaddbmmOut);
  m.impl("addmv.out", &AddmvOut);
  m.impl("dot", &Dot);
}

}  // namespace
}  // namespace xxnpu
