// One device kernel over whole lists of tensors (CUDA's multi_tensor_apply): the engine of
// the _foreach_* ops (foreach_ops.cc) and the fused optimizers (fused_optimizer_ops.cc).
//
// An optimizer step touches every parameter with the same few elementwise ops. Launched
// per tensor, a model with hundreds of parameters pays hundreds of launches per op; here
// the i-th tensors of every list (param i, grad i, state i, ...) are cut into chunks, each
// chunk is one block of a single launch, and the device's compute threads share the blocks.
//
// The caller guarantees what ATen's foreach fast route checks (can_use_fast_route): every
// tensor strided, non-overlapping and dense, the i-th tensors of all lists of the same size
// and strides. Then element k of a tensor's storage span is element k of its list-mates',
// whatever the layout, and a chunk is a plain [begin, begin + n) range of each.
#ifndef TORCH_XXNPU_OPS_MULTI_TENSOR_APPLY_H_
#define TORCH_XXNPU_OPS_MULTI_TENSOR_APPLY_H_

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"

namespace xxnpu::multi_tensor {

// Elements per block: big enough that a block's fixed cost (finding its tensor, a virtual
// call) vanishes, small enough that a 1M-element parameter feeds every compute thread.
inline constexpr int64_t kChunkElements = 32 * 1024;

// Elements [begin, begin + n) of the `tensor`-th tensors of every list.
struct Chunk {
  int64_t tensor;
  int64_t begin;
  int64_t n;
};

// The launch geometry of kLists lists: device-view base pointers per tensor and the chunks.
template <size_t kLists>
struct Plan {
  std::vector<std::array<char*, kLists>> base;  // [tensor][list]
  std::array<int64_t, kLists> element_size{};
  std::vector<Chunk> chunks;
  uint64_t numel = 0;  // elements per list, summed over the tensors
};

// `lists[l][i]` is the i-th tensor of list l; all lists have the same length and the i-th
// tensors the same numel. With `chunk_empty`, an empty tensor still gets one (empty)
// chunk, for kernels that must write a per-tensor result (a norm of nothing is 0).
template <size_t kLists>
Plan<kLists> MakePlan(const std::array<at::TensorList, kLists>& lists, bool chunk_empty = false) {
  Plan<kLists> plan;
  const size_t n = lists[0].size();
  plan.base.resize(n);
  for (size_t l = 0; l < kLists; ++l) {
    TORCH_INTERNAL_ASSERT(lists[l].size() == n, "multi_tensor::MakePlan: list ", l, " has ", lists[l].size(),
                          " tensors, list 0 has ", n);
    plan.element_size[l] = n ? static_cast<int64_t>(lists[l][0].element_size()) : 0;
  }
  for (size_t i = 0; i < n; ++i) {
    const int64_t numel = lists[0][i].numel();
    for (size_t l = 0; l < kLists; ++l) {
      // data_ptr of an empty tensor may be null: nothing is read through it.
      plan.base[i][l] = static_cast<char*>(DeviceView(lists[l][i].data_ptr()));
    }
    if (numel == 0 && chunk_empty) plan.chunks.push_back({static_cast<int64_t>(i), 0, 0});
    for (int64_t off = 0; off < numel; off += kChunkElements) {
      plan.chunks.push_back({static_cast<int64_t>(i), off, std::min(kChunkElements, numel - off)});
    }
    plan.numel += static_cast<uint64_t>(numel);
  }
  return plan;
}

// Launches `span` over every chunk of `plan` as one kernel on `stream`:
// span(char* const* ptrs, int64_t n, int64_t tensor) with ptrs[l] at the chunk's first
// element of list l. `span` must keep no tensor (raw pointers and values only): stream
// order protects the memory, as on CUDA. Nothing is launched for a plan without chunks.
template <size_t kLists, typename Span>
void Launch(const char* name, xxnpuStream_t stream, Plan<kLists> plan, uint64_t bytes, uint64_t flops, Span span) {
  if (plan.chunks.empty()) return;
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid = Dim3{static_cast<uint32_t>(plan.chunks.size()), 1, 1};
  cfg.block = Dim3{static_cast<uint32_t>(kChunkElements), 1, 1};
  cfg.bytes = bytes;
  cfg.flops = flops;
  CheckOk(xxnpuLaunchKernel(cfg, KernelBody([plan = std::move(plan), span = std::move(span)](BlockRange r) {
            for (int64_t b = r.begin; b < r.end; ++b) {
              const Chunk& c = plan.chunks[b];
              std::array<char*, kLists> ptrs;
              for (size_t l = 0; l < kLists; ++l) ptrs[l] = plan.base[c.tensor][l] + c.begin * plan.element_size[l];
              span(ptrs.data(), c.n, c.tensor);
            }
            return absl::OkStatus();
          }), stream), name);
}

}  // namespace xxnpu::multi_tensor

#endif  // TORCH_XXNPU_OPS_MULTI_TENSOR_APPLY_H_
