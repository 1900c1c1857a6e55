// Stream capture's bookkeeping (device/graph.h): which streams and events belong to which
// capture, the graph each capture builds, the rules for what is illegal meanwhile, and the
// graph / executable handles. runtime.cc asks it at each enqueue and wait while a capture
// is underway; stream_engine.cc runs what it builds (GraphData, ExecutableGraph).
//
// One mutex guards it all: captures are rare and short, and the eager path never takes it
// (CapturesUnderway below is its only cost there).
#ifndef TORCH_XXNPU_DEVICE_SIMULATOR_CAPTURE_H_
#define TORCH_XXNPU_DEVICE_SIMULATOR_CAPTURE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "device/graph.h"
#include "device/simulator/stream_engine.h"

namespace xxnpu {

// The handle types of device/graph.h.
struct GraphImpl {
  std::shared_ptr<const GraphData> data;
};
struct GraphExecImpl {
  std::shared_ptr<ExecutableGraph> exec;
};

namespace internal {

// How many captures are underway (begun, not yet ended) in the process. Every enqueue
// reads it once, relaxed, and asks the registry only when it is not zero: that load is
// all capture adds to the eager path. Relaxed is enough: a thread sees its own captures
// in program order, and another thread's only through the synchronization that ordered
// the two threads' calls anyway (without it, which of them came first is undefined, in
// CUDA too).
inline std::atomic<int> g_captures_underway{0};
inline bool CapturesUnderway() { return g_captures_underway.load(std::memory_order_relaxed) != 0; }

class CaptureRegistry {
 public:
  static CaptureRegistry& Get();

  absl::Status Begin(StreamImpl* s, StreamCaptureMode mode);
  absl::StatusOr<GraphImpl*> End(StreamImpl* s);
  StreamCaptureInfo Info(StreamImpl* s);

  // Work that `api` is about to queue on `s`. false: queue it as usual. true: `fill` has
  // described it as a node of the capture `s` belongs to, which now depends on it. An
  // error: the work is refused (an invalidated capture, the default stream during a global
  // capture, or `fill`'s own error, which invalidates the capture).
  absl::StatusOr<bool> CaptureNode(StreamImpl* s, const char* api, absl::FunctionRef<absl::Status(GraphNode&)> fill);
  // xxnpuEventRecord of `e` on `s`: true if it was captured (the event now stands for s's
  // position in the capture) rather than to be queued.
  absl::StatusOr<bool> RecordEvent(StreamImpl* s, EventImpl* e, const char* api);
  // xxnpuStreamWaitEvent: true if handled by the capture (an edge, or `s` joining it).
  // `recorded_eagerly`: the event's latest record (if any) is an ordinary queued one.
  absl::StatusOr<bool> WaitEvent(StreamImpl* s, EventImpl* e, bool recorded_eagerly, const char* api);

  // The illegal calls. Each error names the capture and invalidates it (all of them the
  // call conflicts with).
  // A "potentially unsafe" call (allocation, free, synchronous copy) by this thread.
  absl::Status CheckUnsafeCall(const char* api);
  // A host wait for (or the destruction of) stream `s`.
  absl::Status CheckStreamWait(StreamImpl* s, const char* api);
  // A host wait for the whole of `device`.
  absl::Status CheckDeviceWait(int device, const char* api);
  // A host wait for event `e`.
  absl::Status CheckEventWait(EventImpl* e, const char* api);
  // `e` is being destroyed: it no longer marks anything in a capture.
  void ForgetEvent(EventImpl* e);

  // Graph and executable handles: unknown or destroyed ones are clear errors (handles are
  // looked up, never dereferenced unchecked).
  absl::StatusOr<std::shared_ptr<const GraphData>> ResolveGraph(xxnpuGraph_t graph, const char* api);
  absl::Status DestroyGraph(xxnpuGraph_t graph);
  absl::StatusOr<GraphExecImpl*> Instantiate(xxnpuGraph_t graph);
  absl::StatusOr<std::shared_ptr<ExecutableGraph>> ResolveExec(xxnpuGraphExec_t exec, const char* api);
  absl::Status DestroyExec(xxnpuGraphExec_t exec);
  GraphLiveCounts LiveCounts();

  static StreamCaptureMode ExchangeThreadMode(StreamCaptureMode mode);

 private:
  struct Capture {
    uint64_t id = 0;
    StreamCaptureMode mode = StreamCaptureMode::kGlobal;
    StreamImpl* origin = nullptr;
    int device = 0;
    std::thread::id owner;
    absl::Status invalidated;  // OK while the capture is good
    std::shared_ptr<GraphData> graph;
    // The streams in the capture and, for each, the nodes the next work queued on it
    // depends on (its "tail"; empty before its first node).
    absl::flat_hash_map<StreamImpl*, std::vector<uint32_t>> tails;
    std::vector<EventImpl*> events;  // recorded in this capture (to forget at its end)
  };
  // An event whose latest record was captured: the capture and the position it marks.
  struct EventMark {
    Capture* capture = nullptr;
    std::vector<uint32_t> deps;
  };

  CaptureRegistry() = default;
  Capture* CaptureOfLocked(StreamImpl* s);
  // Invalidates `captures` (the first reason sticks) and returns the error of `api`:
  // "<api>: <what> (stream capture <id> ...): the capture is invalidated ...".
  absl::Status IllegalLocked(absl::Span<Capture* const> captures, const char* api, const std::string& what);
  // An error for work offered to an invalidated capture.
  static absl::Status InvalidatedError(const Capture& c, const char* api);
  // The default stream of a device may not be used while a global capture is underway on
  // the device, or while this thread captures on it (not relaxed): it stands for CUDA's
  // legacy stream, which would join every capture.
  absl::Status CheckDefaultStreamLocked(StreamImpl* s, const char* api);
  // Whether every node a stream forked from `c` ended on is an ancestor of the origin
  // stream's tail (the stream was joined back); otherwise the first such stream's id.
  int UnjoinedStreamLocked(const Capture& c);
  void RemoveLocked(Capture* c);

  std::mutex mu_;
  std::vector<std::unique_ptr<Capture>> captures_;
  absl::flat_hash_map<StreamImpl*, Capture*> stream_capture_;
  absl::flat_hash_map<EventImpl*, EventMark> events_;
  absl::flat_hash_map<GraphImpl*, std::unique_ptr<GraphImpl>> graphs_;
  absl::flat_hash_map<GraphExecImpl*, std::unique_ptr<GraphExecImpl>> execs_;
  uint64_t next_capture_id_ = 1;
  uint32_t next_graph_id_ = 1;
  uint64_t next_exec_id_ = 1;
};

}  // namespace internal
}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_SIMULATOR_CAPTURE_H_
