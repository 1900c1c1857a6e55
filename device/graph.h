// Graphs: stream capture and replay in the xxnpu runtime, as CUDA graphs have them.
//
// Work queued on a capturing stream is recorded instead of run: xxnpuStreamBeginCapture
// puts a stream in capture mode; kernel launches (both forms), host functions, async
// copies and memsets queued on it become nodes of a graph, each depending on what was
// queued before it on its stream. Events make the edges: an event recorded on a capturing
// stream carries the stream's position, and a stream that waits on it depends on that
// position, which is also how a second stream joins the capture (fork) and how the origin
// stream waits for it again (join). xxnpuStreamEndCapture returns the graph;
// xxnpuGraphInstantiate makes it launchable and xxnpuGraphLaunch queues the whole graph
// on a stream as one command, which the device runs node after node in dependency order.
//
// What is illegal while capturing, as in CUDA (docs/device-runtime.md, "Graphs"): waiting
// for a capturing stream (synchronize, query), for the device that holds one, or for an
// event recorded in a capture; a synchronous copy or memset; the device's default stream
// while a global-mode capture is active on the device (it stands for CUDA's legacy
// stream, which would join every capture); and the "potentially unsafe" calls
// (xxnpuMalloc, xxnpuFree, synchronous copies) from a thread the capture modes forbid
// them. Each such call returns a FailedPrecondition error naming the capture, and
// invalidates the capture: later work on its streams is refused and
// xxnpuStreamEndCapture reports why. The device and every stream stay usable.
//
// Part of the runtime API (//device:runtime_api): declared here to keep runtime.h short;
// a driver implements these functions with the rest. Torch-free, thread-safe.
#ifndef TORCH_XXNPU_DEVICE_GRAPH_H_
#define TORCH_XXNPU_DEVICE_GRAPH_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/runtime_types.h"

namespace xxnpu {

// Opaque to everything above the driver, like streams and events.
struct GraphImpl;
struct GraphExecImpl;
using xxnpuGraph_t = GraphImpl*;
using xxnpuGraphExec_t = GraphExecImpl*;

// How a capture restricts the "potentially unsafe" calls (allocation, frees, synchronous
// copies) of host threads, CUDA's cudaStreamCaptureMode. A thread is forbidden them when
//   - it began a capture that is not kRelaxed and has not ended it, or
//   - its own interaction mode (xxnpuThreadExchangeStreamCaptureMode, initially kGlobal)
//     is kGlobal and another thread has a kGlobal capture underway.
// A thread whose interaction mode is kRelaxed is never forbidden them.
enum class StreamCaptureMode : uint8_t {
  kGlobal = 0,
  kThreadLocal = 1,
  kRelaxed = 2,
};

enum class StreamCaptureStatus : uint8_t {
  kNone = 0,         // not capturing
  kActive = 1,       // capturing
  kInvalidated = 2,  // capturing, but an illegal call spoilt it: EndCapture will fail
};

struct StreamCaptureInfo {
  StreamCaptureStatus status = StreamCaptureStatus::kNone;
  // Process-unique, never 0 while capturing (cudaStreamGetCaptureInfo's id): the streams
  // joined to one capture report the same id.
  uint64_t id = 0;
};

// ---------------------------------------------------------------- capture

// Starts capturing on `stream`, which must be a created stream (not a default stream:
// like CUDA's legacy stream it cannot be captured) and must not be capturing already.
absl::Status xxnpuStreamBeginCapture(xxnpuStream_t stream, StreamCaptureMode mode = StreamCaptureMode::kGlobal);
// Ends the capture begun on `stream` (from the thread that began it, unless kRelaxed) and
// returns its graph, owned by the caller (xxnpuGraphDestroy). Every stream joined to the
// capture leaves it. Fails if the capture was invalidated (naming the call that did it)
// or if a stream forked from it was not joined back into `stream`; the capture ends
// either way.
absl::StatusOr<xxnpuGraph_t> xxnpuStreamEndCapture(xxnpuStream_t stream);
absl::StatusOr<StreamCaptureStatus> xxnpuStreamIsCapturing(xxnpuStream_t stream);
absl::StatusOr<StreamCaptureInfo> xxnpuStreamGetCaptureInfo(xxnpuStream_t stream);
// Sets the calling thread's interaction mode to `*mode` and returns the previous one in
// `*mode` (use in push/pop fashion, as cudaThreadExchangeStreamCaptureMode).
absl::Status xxnpuThreadExchangeStreamCaptureMode(StreamCaptureMode* mode);

// ---------------------------------------------------------------- graphs

// Makes an executable graph of `graph`. The executable keeps what it needs: the graph may
// be destroyed afterwards, and may be instantiated again.
absl::StatusOr<xxnpuGraphExec_t> xxnpuGraphInstantiate(xxnpuGraph_t graph);
// Queues the whole graph on `stream` (of the graph's device) as one command. Its nodes
// run in dependency order, each kernel producing its kernel activity record (carrying
// graph_id and graph_node_id) correlated with this call's xxnpuGraphLaunch runtime
// record. A failing node fails the stream like an eager kernel (sticky error; the rest of
// the graph is skipped). Launches of one executable run in the order they were queued,
// also across streams.
absl::Status xxnpuGraphLaunch(xxnpuGraphExec_t exec, xxnpuStream_t stream);
// Safe while executables of the graph, or launches of them, are still queued.
absl::Status xxnpuGraphDestroy(xxnpuGraph_t graph);
// Safe while launches of `exec` are queued: they still run, and what they use is freed
// after the last one.
absl::Status xxnpuGraphExecDestroy(xxnpuGraphExec_t exec);

absl::StatusOr<size_t> xxnpuGraphGetNodeCount(xxnpuGraph_t graph);
// The process-unique id kernel records of the graph's replays carry (never 0).
absl::StatusOr<uint32_t> xxnpuGraphGetId(xxnpuGraph_t graph);
// One line per node: "node <id> <kind> '<name>' deps [<ids>]", for tests and debugging.
absl::StatusOr<std::string> xxnpuGraphDebugDump(xxnpuGraph_t graph);

// What graphs hold alive in the process, for leak tests: graphs and executables not yet
// destroyed, node lists still referenced (by a graph, an executable or a queued launch),
// and the nodes in them.
struct GraphLiveCounts {
  int64_t graphs = 0;
  int64_t execs = 0;
  int64_t node_lists = 0;
  int64_t nodes = 0;
};
GraphLiveCounts xxnpuGraphGetLiveCounts();

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_GRAPH_H_
