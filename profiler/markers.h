// NVTX-like markers for xxnpu: ranges and instant marks that land in the device timeline
// (as ActivityKind::kMarker records the Kineto plugin turns into annotations). Used by
// torch.xxnpu.markers.range_push/range_pop/mark, the legacy ProfilerStubs and
// emit_xxnpu(). Torch-free.
#ifndef TORCH_XXNPU_PROFILER_MARKERS_H_
#define TORCH_XXNPU_PROFILER_MARKERS_H_

#include <cstddef>
#include <string_view>

namespace xxnpu {

// Opens a range on this host thread; returns its nesting depth (0 for the outermost).
int MarkerRangePush(std::string_view name);
// Closes this thread's innermost range and records it; returns the depth it had, or -1
// if no range was open (as nvtxRangePop).
int MarkerRangePop();
// An instant marker.
void MarkerMark(std::string_view name);

// Records keep marker names by pointer. A profiler calls this when a capture starts: names
// interned for captures before the previous one are freed (their records must have been
// converted by then). Without it names are still bounded (16 MiB per generation; beyond,
// records get a fixed placeholder name).
void MarkerNewCapture();
// Bytes of marker names held (for tests and diagnostics).
size_t MarkerInternedBytes();

}  // namespace xxnpu

#endif  // TORCH_XXNPU_PROFILER_MARKERS_H_
