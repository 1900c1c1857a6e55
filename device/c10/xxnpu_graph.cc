#include "device/c10/xxnpu_graph.h"

#include <c10/util/Exception.h>

#include <ATen/ops/empty.h>

#include <fstream>
#include <mutex>
#include <utility>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_allocator.h"
#include "device/c10/xxnpu_stream.h"
#include "device/generator/xxnpu_generator.h"

namespace xxnpu {
namespace {

// torch's "default" mode is the backend's choice: global, as torch.cuda.graph's default
// capture_error_mode, so that another thread's unsafe call cannot slip into the capture
// unnoticed.
StreamCaptureMode ToRuntimeMode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::Default:
    case at::GraphCaptureMode::Global:
      return StreamCaptureMode::kGlobal;
    case at::GraphCaptureMode::ThreadLocal:
      return StreamCaptureMode::kThreadLocal;
    case at::GraphCaptureMode::Relaxed:
      return StreamCaptureMode::kRelaxed;
  }
  TORCH_CHECK_VALUE(false, "xxnpu graph: unknown capture mode ", static_cast<int>(mode),
                    "; expected default, global, thread_local or relaxed");
}

thread_local std::vector<at::Generator> t_staged_generators;

XxnpuGeneratorImpl* Impl(const at::Generator& g) { return at::check_generator<XxnpuGeneratorImpl>(g); }

}  // namespace

void StageGeneratorsForNextCapture(std::vector<at::Generator> generators) {
  t_staged_generators = std::move(generators);
}

void XxnpuGraph::register_generator_state(const at::Generator& generator) {
  TORCH_CHECK(generator.defined(), "xxnpu graph register_generator_state: expected a generator, got None");
  TORCH_CHECK(generator.device().type() == c10::DeviceType::PrivateUse1,
              "xxnpu graph register_generator_state: expected an xxnpu generator, got one of device ",
              generator.device());
  TORCH_CHECK(!capturing_, "xxnpu graph register_generator_state: register generators before capture_begin");
  for (const RngState& r : rng_) {
    if (r.generator == generator) return;
  }
  rng_.push_back(RngState{generator, at::Tensor(), 0});
}

void XxnpuGraph::BeginRngCapture(uint64_t capture_id) {
  for (RngState& r : rng_) {
    std::lock_guard<std::mutex> lock(r.generator.mutex());
    Impl(r.generator)->capture_prologue(capture_id,
                                        reinterpret_cast<const uint64_t*>(r.device_state.data_ptr<int64_t>()));
  }
  rng_counting_ = true;
}

void XxnpuGraph::EndRngCapture() {
  if (!rng_counting_) return;
  rng_counting_ = false;
  for (RngState& r : rng_) {
    std::lock_guard<std::mutex> lock(r.generator.mutex());
    r.increment = Impl(r.generator)->capture_epilogue(capture_id_);
  }
}

XxnpuGraph::XxnpuGraph(const at::GraphImplArgs& args) : keep_graph_(args.keep_graph) {}

XxnpuGraph::~XxnpuGraph() {
  // A destructor cannot report; a failure here means the runtime is already gone (exit).
  (void)ReleaseAll();
}

void XxnpuGraph::capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode capture_mode) {
  TORCH_CHECK(!capturing_, "xxnpu graph: capture_begin while this graph is already capturing");
  TORCH_CHECK(graph_ == nullptr && exec_ == nullptr,
              "xxnpu graph: this graph already holds a capture; call reset() before capturing again");
  const StreamCaptureMode mode = ToRuntimeMode(capture_mode);
  const c10::DeviceIndex device = ResolveDeviceIndex(-1);
  const XxnpuStream stream = GetCurrentXxnpuStream(device);
  // The runtime refuses it too, but only torch's words say what to do about it.
  TORCH_CHECK(stream.id() != 0,
              "xxnpu graph: cannot capture on the default stream of xxnpu:", device,
              "; capture on a side stream (`with torch.xxnpu.stream(torch.xxnpu.Stream()):`, "
              "or use torch.xxnpu.graph, which does it for you)");
  const xxnpuStream_t handle = stream.handle();

  // The generators' device states are allocated before the capture, outside its pool.
  std::vector<at::Generator> staged = std::exchange(t_staged_generators, {});
  register_generator_state(GetDefaultXxnpuGenerator(device));
  for (const at::Generator& g : staged) {
    TORCH_CHECK(g.device() == c10::Device(c10::DeviceType::PrivateUse1, device),
                "xxnpu graph register_generator_state: the generator is on ", g.device(),
                " but the capture is on xxnpu:", static_cast<int>(device));
    register_generator_state(g);
  }
  for (RngState& r : rng_) {
    if (!r.device_state.defined()) {
      r.device_state = at::empty({2}, at::TensorOptions().dtype(at::kLong).device(c10::DeviceType::PrivateUse1, device));
    }
    r.increment = 0;
  }

  CheckOk(xxnpuStreamBeginCapture(handle, mode), "xxnpu graph capture_begin");
  const uint64_t capture_id = ValueOrThrow(xxnpuStreamGetCaptureInfo(handle)).id;
  capture_id_ = capture_id;
  BeginRngCapture(capture_id);

  // A graph without a shared pool gets one of its own, {capture id, 0}: never equal to a
  // graph_pool_handle() id, {0, n}.
  const MempoolId pool_id = (pool.first == 0 && pool.second == 0) ? MempoolId{capture_id, 0}
                                                                  : MempoolId{pool.first, pool.second};
  // Allocations on any stream of this capture (the origin and the streams forked from it
  // through events) come from the pool: a replay writes to the addresses captured.
  absl::Status routed = GetXxnpuAllocator()->ForDevice(device).BeginAllocateToPool(
      pool_id, [capture_id](xxnpuStream_t s) {
        absl::StatusOr<StreamCaptureInfo> info = xxnpuStreamGetCaptureInfo(s);
        return info.ok() && info->status != StreamCaptureStatus::kNone && info->id == capture_id;
      });
  if (!routed.ok()) {
    EndRngCapture();
    absl::StatusOr<xxnpuGraph_t> g = xxnpuStreamEndCapture(handle);
    if (g.ok()) (void)xxnpuGraphDestroy(*g);
    ThrowStatus(routed, "xxnpu graph capture_begin (private pool)");
  }
  device_ = device;
  capture_stream_ = handle;
  pool_ = pool_id;
  pool_set_ = true;
  holds_pool_ = true;
  capturing_ = true;
}

void XxnpuGraph::capture_end() {
  TORCH_CHECK(capturing_, "xxnpu graph: capture_end without a capture_begin");
  capturing_ = false;
  EndRngCapture();
  // End on the stream the capture began on even if the current stream changed since, so
  // that a mistake in the caller still leaves the stream usable.
  absl::StatusOr<xxnpuGraph_t> graph = xxnpuStreamEndCapture(capture_stream_);
  const absl::Status routed = GetXxnpuAllocator()->ForDevice(device_).EndAllocateToPool(pool_);
  if (!graph.ok() || !routed.ok()) {
    if (graph.ok()) (void)xxnpuGraphDestroy(*graph);
    // Whatever the capture allocated stays in the pool until those tensors are freed;
    // this graph no longer uses it.
    (void)GetXxnpuAllocator()->ForDevice(device_).ReleasePool(pool_);
    holds_pool_ = false;
    ThrowStatus(graph.ok() ? routed : graph.status(), "xxnpu graph capture failed");
  }
  graph_ = *graph;
  graph_id_ = ValueOrThrow(xxnpuGraphGetId(graph_));
  if (!keep_graph_) {
    instantiate();
    // The executable keeps what it needs; the graph is only kept for debug_dump.
    if (!debug_mode_) {
      CheckOk(xxnpuGraphDestroy(graph_), "xxnpu graph capture_end");
      graph_ = nullptr;
    }
  }
}

void XxnpuGraph::instantiate() {
  TORCH_CHECK(!capturing_, "xxnpu graph: instantiate during capture; call capture_end first");
  TORCH_CHECK(graph_ != nullptr,
              "xxnpu graph: instantiate needs a captured graph (capture with keep_graph=True, "
              "or after capture_end with keep_graph=False it is instantiated already)");
  if (exec_ != nullptr) {
    CheckOk(xxnpuGraphExecDestroy(exec_), "xxnpu graph instantiate");
    exec_ = nullptr;
  }
  exec_ = ValueOrThrow(xxnpuGraphInstantiate(graph_), "xxnpu graph instantiate");
}

void XxnpuGraph::replay() {
  TORCH_CHECK(!capturing_, "xxnpu graph: replay during its own capture");
  TORCH_CHECK(exec_ != nullptr || graph_ != nullptr,
              "xxnpu graph: replay without a successful capture (capture_begin/capture_end first)");
  if (exec_ == nullptr) instantiate();  // keep_graph=True: instantiated on first replay
  const xxnpuStream_t stream = CurrentXxnpuStreamHandle(device_);
  // Graph-safe RNG: this replay's numbers are the next `increment` values of each
  // generator, as if its ops ran eagerly now. The state is written on the replay's stream,
  // so it is in place when the graph's kernels read it and not before an earlier replay
  // on the stream has read its own.
  for (RngState& r : rng_) {
    if (r.increment == 0) continue;
    PhiloxSeeds seeds;
    {
      std::lock_guard<std::mutex> lock(r.generator.mutex());
      seeds = Impl(r.generator)->philox_reserve(r.increment);
    }
    uint64_t* state = reinterpret_cast<uint64_t*>(r.device_state.data_ptr<int64_t>());
    LaunchConfig cfg;
    cfg.name = "xxnpu::graph_rng_state";
    cfg.grid = Dim3{1, 1, 1};
    cfg.bytes = 2 * sizeof(uint64_t);
    const uint64_t seed = seeds.seed;
    const uint64_t offset = seeds.offset;
    CheckOk(xxnpuLaunchKernel(cfg, [state, seed, offset](BlockRange) {
      uint64_t* view = DeviceView(state);
      view[0] = seed;
      view[1] = offset;
      return absl::OkStatus();
    }, stream), "xxnpu graph replay (random state)");
  }
  CheckOk(xxnpuGraphLaunch(exec_, stream), "xxnpu graph replay");
}

absl::Status XxnpuGraph::ReleaseAll() {
  absl::Status first;
  auto keep = [&first](absl::Status s) {
    if (first.ok() && !s.ok()) first = std::move(s);
  };
  if (capturing_) {
    capturing_ = false;
    try {
      EndRngCapture();
    } catch (const std::exception& e) {
      keep(absl::InternalError(e.what()));
    }
    absl::StatusOr<xxnpuGraph_t> g = xxnpuStreamEndCapture(capture_stream_);
    if (g.ok()) keep(xxnpuGraphDestroy(*g));
    keep(GetXxnpuAllocator()->ForDevice(device_).EndAllocateToPool(pool_));
  }
  if (exec_ != nullptr) {
    keep(xxnpuGraphExecDestroy(exec_));
    exec_ = nullptr;
  }
  if (graph_ != nullptr) {
    keep(xxnpuGraphDestroy(graph_));
    graph_ = nullptr;
  }
  if (holds_pool_) {
    holds_pool_ = false;
    keep(GetXxnpuAllocator()->ForDevice(device_).ReleasePool(pool_));
  }
  graph_id_ = 0;
  // The registrations stay for the next capture; the device states go, with the rest of
  // the graph's memory (as for CUDA: reset a graph only once its replays have run).
  for (RngState& r : rng_) {
    r.device_state = at::Tensor();
    r.increment = 0;
  }
  return first;
}

void XxnpuGraph::reset() { CheckOk(ReleaseAll(), "xxnpu graph reset"); }

c10::MempoolId_t XxnpuGraph::pool() const {
  TORCH_CHECK(pool_set_, "xxnpu graph: pool() is known only once capture_begin has run");
  return {pool_.first, pool_.second};
}

void XxnpuGraph::enable_debug_mode() { debug_mode_ = true; }

void XxnpuGraph::debug_dump(const std::string& path) {
  TORCH_CHECK(graph_ != nullptr,
              "xxnpu graph: debug_dump needs the captured graph: call enable_debug_mode() before "
              "capturing (or capture with keep_graph=True)");
  const std::string dump = ValueOrThrow(xxnpuGraphDebugDump(graph_), "xxnpu graph debug_dump");
  std::ofstream out(path);
  TORCH_CHECK(out.good(), "xxnpu graph debug_dump: cannot open '", path, "' for writing");
  out << dump;
  TORCH_CHECK(out.good(), "xxnpu graph debug_dump: writing '", path, "' failed");
}

size_t XxnpuGraph::node_count() const {
  TORCH_CHECK(graph_ != nullptr, "xxnpu graph: node_count needs a kept graph (keep_graph or debug mode)");
  return ValueOrThrow(xxnpuGraphGetNodeCount(graph_));
}

uint32_t XxnpuGraph::graph_id() const {
  TORCH_CHECK(graph_id_ != 0, "xxnpu graph: graph_id needs a successful capture");
  return graph_id_;
}

bool IsCurrentStreamCapturing() {
  return ValueOrThrow(xxnpuStreamIsCapturing(CurrentXxnpuStreamHandle(-1))) != StreamCaptureStatus::kNone;
}

}  // namespace xxnpu

// The registry's key is c10::DeviceTypeName(PrivateUse1, /*lowercase=*/false), i.e. the
// renamed backend upper-cased ("XXNPU"), not the enum's name: REGISTER_GRAPH_IMPL(PrivateUse1,
// ...) would register a key torch never looks up once the backend is renamed. In namespace
// at: the macro names the registry's Registerer unqualified.
namespace at {
REGISTER_GRAPH_IMPL(XXNPU, xxnpu::XxnpuGraph);
}  // namespace at
