// torch's device-generic graph API (at::GraphImplInterface, torch.accelerator.Graph) for
// xxnpu, on the runtime's stream capture (device/graph.h) and the caching allocator's
// private pools. torch.xxnpu.XXNPUGraph / torch.xxnpu.graph are built on the same class.
//
// One XxnpuGraph holds at most one capture: capture_begin puts the current stream of the
// current device in capture mode and routes the allocations of the capture's streams to
// the graph's private pool; capture_end turns the capture into a graph (instantiated
// unless keep_graph); replay queues it on the current stream as one command; reset (or the
// destructor) frees the graph and gives the pool back.
//
// Graph-safe RNG, as CUDAGraph's: the capturing device's default generator (and any
// generator registered with register_generator_state) count what the captured random ops
// reserve (XxnpuGeneratorImpl::capture_prologue); each replay first takes that many
// values from the generator and writes the (seed, offset) it got into the graph's device
// state, which the captured kernels read, so replays draw fresh numbers and advance the
// generator as the same ops run eagerly would.
#ifndef TORCH_XXNPU_DEVICE_C10_XXNPU_GRAPH_H_
#define TORCH_XXNPU_DEVICE_C10_XXNPU_GRAPH_H_

#include <ATen/core/Generator.h>
#include <ATen/core/GraphImplInterface.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "device/caching_allocator.h"
#include "device/graph.h"
#include "device/runtime.h"

namespace xxnpu {

class XxnpuGraph final : public at::GraphImplInterface {
 public:
  explicit XxnpuGraph(const at::GraphImplArgs& args = {});
  ~XxnpuGraph() override;
  XxnpuGraph(const XxnpuGraph&) = delete;
  XxnpuGraph& operator=(const XxnpuGraph&) = delete;

  void capture_begin(c10::MempoolId_t pool = {0, 0},
                     at::GraphCaptureMode capture_mode = at::GraphCaptureMode::Default) override;
  void capture_end() override;
  void instantiate() override;
  void replay() override;
  void reset() override;
  c10::MempoolId_t pool() const override;
  void enable_debug_mode() override;
  void debug_dump(const std::string& path) override;

  // For tests and the profiler: the captured graph's node count and runtime graph id
  // (kernel records of its replays carry it). Need a graph kept (keep_graph or debug mode).
  size_t node_count() const;
  uint32_t graph_id() const;

  // Adds a generator of the graph's device whose random ops may be captured (the default
  // generator always is). Before capture_begin only; registering twice is a no-op.
  void register_generator_state(const at::Generator& generator);

 private:
  struct RngState {
    at::Generator generator;
    at::Tensor device_state;  // 2 x int64 on the device: {seed, offset} for a replay
    uint64_t increment = 0;   // what one replay takes from the generator
  };
  void BeginRngCapture(uint64_t capture_id);
  void EndRngCapture();

  // Releases everything this object holds; never throws (runs in the destructor too).
  // Returns the first failure, for reset() to report.
  absl::Status ReleaseAll();

  const bool keep_graph_;
  bool debug_mode_ = false;
  c10::DeviceIndex device_ = -1;
  xxnpuStream_t capture_stream_ = nullptr;
  bool capturing_ = false;
  bool holds_pool_ = false;  // one use of pool_ taken by capture_begin, not yet released
  bool pool_set_ = false;    // capture_begin has run at least once
  MempoolId pool_{0, 0};
  xxnpuGraph_t graph_ = nullptr;
  xxnpuGraphExec_t exec_ = nullptr;
  uint32_t graph_id_ = 0;
  uint64_t capture_id_ = 0;
  bool rng_counting_ = false;  // the generators count for capture_id_
  std::vector<RngState> rng_;
};

// torch.accelerator.Graph gives no access to its GraphImplInterface, so torch.xxnpu's
// XXNPUGraph.register_generator_state stages its generators here, for the calling thread:
// the next capture_begin on this thread takes (and clears) them.
void StageGeneratorsForNextCapture(std::vector<at::Generator> generators);

// Whether the current stream of the current xxnpu device is capturing (an invalidated
// capture counts: work queued on it is refused, not run).
bool IsCurrentStreamCapturing();

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_C10_XXNPU_GRAPH_H_
