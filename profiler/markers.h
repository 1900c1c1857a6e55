// NVTX-like markers for xxnpu: ranges and instant marks that land in the device timeline
// (as ActivityKind::kMarker records the Kineto plugin turns into annotations). Used by
// torch.xxnpu.markers.range_push/range_pop/mark, the legacy ProfilerStubs and
// emit_xxnpu(). Torch-free.
#ifndef TORCH_XXNPU_PROFILER_MARKERS_H_
#define TORCH_XXNPU_PROFILER_MARKERS_H_

#include <string_view>

namespace xxnpu {

// Opens a range on this host thread; returns its nesting depth (0 for the outermost).
int MarkerRangePush(std::string_view name);
// Closes this thread's innermost range and records it; returns the depth it had, or -1
// if no range was open (as nvtxRangePop).
int MarkerRangePop();
// An instant marker.
void MarkerMark(std::string_view name);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_PROFILER_MARKERS_H_
