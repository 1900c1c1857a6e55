#include "device/simulator/capture.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace xxnpu::internal {
namespace {

// The calling thread's interaction mode (xxnpuThreadExchangeStreamCaptureMode).
thread_local StreamCaptureMode t_interaction_mode = StreamCaptureMode::kGlobal;

const char* ModeName(StreamCaptureMode mode) {
  switch (mode) {
    case StreamCaptureMode::kGlobal: return "global";
    case StreamCaptureMode::kThreadLocal: return "thread-local";
    case StreamCaptureMode::kRelaxed: return "relaxed";
  }
  return "?";
}

// Appends `more` to the sorted set `deps`.
void MergeDeps(std::vector<uint32_t>* deps, const std::vector<uint32_t>& more) {
  deps->insert(deps->end(), more.begin(), more.end());
  std::sort(deps->begin(), deps->end());
  deps->erase(std::unique(deps->begin(), deps->end()), deps->end());
}

}  // namespace

CaptureRegistry& CaptureRegistry::Get() {
  // Never destroyed: device threads may run graphs while static destructors run.
  static CaptureRegistry* registry = new CaptureRegistry();
  return *registry;
}

StreamCaptureMode CaptureRegistry::ExchangeThreadMode(StreamCaptureMode mode) {
  return std::exchange(t_interaction_mode, mode);
}

CaptureRegistry::Capture* CaptureRegistry::CaptureOfLocked(StreamImpl* s) {
  auto it = stream_capture_.find(s);
  return it == stream_capture_.end() ? nullptr : it->second;
}

absl::Status CaptureRegistry::IllegalLocked(absl::Span<Capture* const> captures, const char* api,
                                            const std::string& what) {
  const Capture& first = *captures.front();
  absl::Status error = absl::FailedPreconditionError(absl::StrCat(
      api, ": ", what, " is not allowed while stream capture ", first.id, " (begun on stream ", first.origin->id,
      " of xxnpu:", first.device, " in ", ModeName(first.mode),
      " mode) is underway; the capture is invalidated (xxnpuStreamEndCapture will fail)"));
  for (Capture* c : captures) {
    if (c->invalidated.ok()) c->invalidated = error;
  }
  return error;
}

absl::Status CaptureRegistry::InvalidatedError(const Capture& c, const char* api) {
  return absl::FailedPreconditionError(absl::StrCat(
      api, ": stream capture ", c.id, " was invalidated by an earlier illegal call (", c.invalidated.message(),
      "); end it with xxnpuStreamEndCapture"));
}

absl::Status CaptureRegistry::CheckDefaultStreamLocked(StreamImpl* s, const char* api) {
  if (!s->is_default) return absl::OkStatus();
  const std::thread::id me = std::this_thread::get_id();
  std::vector<Capture*> culprits;
  for (const auto& c : captures_) {
    if (c->device != s->device) continue;
    if (c->mode == StreamCaptureMode::kGlobal || (c->owner == me && c->mode != StreamCaptureMode::kRelaxed)) {
      culprits.push_back(c.get());
    }
  }
  if (culprits.empty()) return absl::OkStatus();
  return IllegalLocked(culprits, api,
                       absl::StrCat("work on the default stream of xxnpu:", s->device,
                                    " (it stands for CUDA's legacy stream, which would join the capture; use "
                                    "a created stream)"));
}

absl::Status CaptureRegistry::Begin(StreamImpl* s, StreamCaptureMode mode) {
  if (mode != StreamCaptureMode::kGlobal && mode != StreamCaptureMode::kThreadLocal &&
      mode != StreamCaptureMode::kRelaxed) {
    return absl::InvalidArgumentError(absl::StrCat("xxnpuStreamBeginCapture: unknown capture mode ",
                                                   static_cast<int>(mode),
                                                   "; expected kGlobal, kThreadLocal or kRelaxed"));
  }
  if (s->is_default) {
    return absl::InvalidArgumentError(absl::StrCat(
        "xxnpuStreamBeginCapture: stream ", s->id, " is the default stream of xxnpu:", s->device,
        ", which cannot be captured (as CUDA's legacy stream); capture on a stream from xxnpuStreamCreate"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (const Capture* c = CaptureOfLocked(s)) {
    return absl::FailedPreconditionError(absl::StrCat("xxnpuStreamBeginCapture: stream ", s->id,
                                                      " is already capturing (stream capture ", c->id, ")"));
  }
  auto c = std::make_unique<Capture>();
  c->id = next_capture_id_++;
  c->mode = mode;
  c->origin = s;
  c->device = s->device;
  c->owner = std::this_thread::get_id();
  c->graph = std::make_shared<GraphData>();
  c->graph->device = s->device;
  c->tails[s] = {};
  stream_capture_[s] = c.get();
  captures_.push_back(std::move(c));
  g_captures_underway.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

int CaptureRegistry::UnjoinedStreamLocked(const Capture& c) {
  // Everything the origin stream's tail depends on, directly or not.
  absl::flat_hash_set<uint32_t> reached;
  std::vector<uint32_t> todo = c.tails.at(c.origin);
  while (!todo.empty()) {
    const uint32_t n = todo.back();
    todo.pop_back();
    if (!reached.insert(n).second) continue;
    for (uint32_t d : c.graph->nodes[n].deps) todo.push_back(d);
  }
  for (const auto& [stream, tail] : c.tails) {
    if (stream == c.origin) continue;
    for (uint32_t n : tail) {
      if (!reached.contains(n)) return stream->id;
    }
  }
  return -1;
}

void CaptureRegistry::RemoveLocked(Capture* c) {
  for (const auto& [stream, tail] : c->tails) stream_capture_.erase(stream);
  for (EventImpl* e : c->events) {
    auto it = events_.find(e);
    if (it != events_.end() && it->second.capture == c) events_.erase(it);
  }
  std::erase_if(captures_, [c](const std::unique_ptr<Capture>& p) { return p.get() == c; });
  g_captures_underway.fetch_sub(1, std::memory_order_relaxed);
}

absl::StatusOr<GraphImpl*> CaptureRegistry::End(StreamImpl* s) {
  // A failed capture's nodes are freed after the lock is released: a kernel body's
  // destructor may call the runtime (free a tensor, record an event), which takes it.
  std::shared_ptr<GraphData> doomed;
  std::lock_guard<std::mutex> lock(mu_);
  Capture* c = CaptureOfLocked(s);
  if (c == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("xxnpuStreamEndCapture: stream ", s->id, " is not capturing (xxnpuStreamBeginCapture first)"));
  }
  if (c->origin != s) {
    Capture* const culprit[] = {c};
    return IllegalLocked(culprit, "xxnpuStreamEndCapture",
                         absl::StrCat("ending the capture on stream ", s->id,
                                      ", which joined it (end it on the stream that began it)"));
  }
  if (c->mode != StreamCaptureMode::kRelaxed && c->owner != std::this_thread::get_id()) {
    // As CUDA's cudaErrorStreamCaptureWrongThread: the capture goes on, spoilt.
    Capture* const culprit[] = {c};
    return IllegalLocked(culprit, "xxnpuStreamEndCapture",
                         "ending the capture from a thread other than the one that began it (only a relaxed-mode "
                         "capture may be)");
  }
  absl::Status status = c->invalidated;
  if (status.ok()) {
    if (int unjoined = UnjoinedStreamLocked(*c); unjoined >= 0) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "stream ", unjoined, " forked from the capture was not joined back into stream ", s->id,
          " (record an event on it after its last work and make stream ", s->id, " wait on it)"));
    }
  }
  const uint64_t id = c->id;
  std::shared_ptr<GraphData> graph = std::move(c->graph);
  RemoveLocked(c);
  if (!status.ok()) {
    doomed = std::move(graph);
    return absl::FailedPreconditionError(
        absl::StrCat("xxnpuStreamEndCapture: stream capture ", id, " failed: ", status.message()));
  }
  graph->graph_id = next_graph_id_++;
  if (next_graph_id_ == 0) next_graph_id_ = 1;  // 0 means "not from a graph" in records
  auto handle = std::make_unique<GraphImpl>();
  handle->data = std::move(graph);
  GraphImpl* raw = handle.get();
  graphs_.emplace(raw, std::move(handle));
  return raw;
}

StreamCaptureInfo CaptureRegistry::Info(StreamImpl* s) {
  std::lock_guard<std::mutex> lock(mu_);
  const Capture* c = CaptureOfLocked(s);
  if (c == nullptr) return {};
  return {c->invalidated.ok() ? StreamCaptureStatus::kActive : StreamCaptureStatus::kInvalidated, c->id};
}

absl::StatusOr<bool> CaptureRegistry::CaptureNode(StreamImpl* s, const char* api,
                                                  absl::FunctionRef<absl::Status(GraphNode&)> fill) {
  std::lock_guard<std::mutex> lock(mu_);
  Capture* c = CaptureOfLocked(s);
  if (c == nullptr) {
    if (absl::Status st = CheckDefaultStreamLocked(s, api); !st.ok()) return st;
    return false;
  }
  if (!c->invalidated.ok()) return InvalidatedError(*c, api);
  GraphNode node;
  if (absl::Status st = fill(node); !st.ok()) {
    Capture* const culprit[] = {c};
    return IllegalLocked(culprit, api, std::string(st.message()));
  }
  std::vector<uint32_t>& tail = c->tails[s];
  GraphNode& added = c->graph->AddNode();
  const uint32_t id = added.id;
  added = std::move(node);
  added.id = id;
  added.deps = std::move(tail);
  tail.assign(1, id);
  return true;
}

absl::StatusOr<bool> CaptureRegistry::RecordEvent(StreamImpl* s, EventImpl* e, const char* api) {
  std::lock_guard<std::mutex> lock(mu_);
  Capture* c = CaptureOfLocked(s);
  if (c == nullptr) {
    if (absl::Status st = CheckDefaultStreamLocked(s, api); !st.ok()) return st;
    events_.erase(e);  // its latest record is an ordinary one from now on
    return false;
  }
  if (!c->invalidated.ok()) return InvalidatedError(*c, api);
  EventMark& mark = events_[e];
  mark.capture = c;
  mark.deps = c->tails[s];
  c->events.push_back(e);
  return true;
}

absl::StatusOr<bool> CaptureRegistry::WaitEvent(StreamImpl* s, EventImpl* e, bool recorded_eagerly,
                                                const char* api) {
  std::lock_guard<std::mutex> lock(mu_);
  Capture* c = CaptureOfLocked(s);
  auto mark = events_.find(e);
  if (mark != events_.end()) {
    Capture* ec = mark->second.capture;
    if (!ec->invalidated.ok()) return InvalidatedError(*ec, api);
    if (c == nullptr) {
      // A fork: `s` joins the capture, its work from now on depending on the event's
      // position.
      Capture* const culprit[] = {ec};
      if (s->is_default) {
        return IllegalLocked(culprit, api, "the default stream waiting on an event recorded in a capture");
      }
      if (s->device != ec->device) {
        return IllegalLocked(culprit, api,
                             absl::StrCat("stream ", s->id, " of xxnpu:", s->device,
                                          " joining a capture on xxnpu:", ec->device, " (graphs span one device)"));
      }
      stream_capture_[s] = ec;
      ec->tails[s] = mark->second.deps;
      return true;
    }
    if (c != ec) {
      Capture* const culprits[] = {c, ec};
      return IllegalLocked(culprits, api,
                           absl::StrCat("a stream of stream capture ", c->id, " waiting on an event recorded in capture ",
                                        ec->id, " (it would merge two captures)"));
    }
    MergeDeps(&c->tails[s], mark->second.deps);
    return true;
  }
  if (c == nullptr) {
    if (absl::Status st = CheckDefaultStreamLocked(s, api); !st.ok()) return st;
    return false;
  }
  if (!c->invalidated.ok()) return InvalidatedError(*c, api);
  if (!recorded_eagerly) return true;  // never recorded: nothing to wait for, as eagerly
  Capture* const culprit[] = {c};
  return IllegalLocked(culprit, api,
                       "a capturing stream waiting on an event recorded outside the capture (a graph cannot "
                       "depend on work outside it; CUDA's cudaErrorStreamCaptureIsolation)");
}

absl::Status CaptureRegistry::CheckUnsafeCall(const char* api) {
  const StreamCaptureMode mode = t_interaction_mode;
  if (mode == StreamCaptureMode::kRelaxed) return absl::OkStatus();
  const std::thread::id me = std::this_thread::get_id();
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Capture*> culprits;
  for (const auto& c : captures_) {
    const bool mine = c->owner == me;
    if ((mine && c->mode != StreamCaptureMode::kRelaxed) ||
        (!mine && mode == StreamCaptureMode::kGlobal && c->mode == StreamCaptureMode::kGlobal)) {
      culprits.push_back(c.get());
    }
  }
  if (culprits.empty()) return absl::OkStatus();
  return IllegalLocked(culprits, api,
                       absl::StrCat("this potentially unsafe call (by a thread in ", ModeName(mode),
                                    " interaction mode; see xxnpuThreadExchangeStreamCaptureMode)"));
}

absl::Status CaptureRegistry::CheckStreamWait(StreamImpl* s, const char* api) {
  std::lock_guard<std::mutex> lock(mu_);
  Capture* c = CaptureOfLocked(s);
  if (c == nullptr) return absl::OkStatus();
  Capture* const culprit[] = {c};
  return IllegalLocked(culprit, api, absl::StrCat("waiting for (or destroying) capturing stream ", s->id));
}

absl::Status CaptureRegistry::CheckDeviceWait(int device, const char* api) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Capture*> culprits;
  for (const auto& c : captures_) {
    if (c->device == device) culprits.push_back(c.get());
  }
  if (culprits.empty()) return absl::OkStatus();
  return IllegalLocked(culprits, api, absl::StrCat("waiting for xxnpu:", device, ", which has a capturing stream,"));
}

absl::Status CaptureRegistry::CheckEventWait(EventImpl* e, const char* api) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = events_.find(e);
  if (it == events_.end()) return absl::OkStatus();
  Capture* const culprit[] = {it->second.capture};
  return IllegalLocked(culprit, api, "waiting for (or querying) an event recorded in the capture");
}

void CaptureRegistry::ForgetEvent(EventImpl* e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.erase(e);
}

absl::StatusOr<std::shared_ptr<const GraphData>> CaptureRegistry::ResolveGraph(xxnpuGraph_t graph,
                                                                                const char* api) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = graphs_.find(graph);
  if (it == graphs_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        api, ": 0x", absl::Hex(reinterpret_cast<uintptr_t>(graph)),
        " is not a live xxnpu graph (expected one returned by xxnpuStreamEndCapture and not destroyed)"));
  }
  return it->second->data;
}

absl::Status CaptureRegistry::DestroyGraph(xxnpuGraph_t graph) {
  std::unique_ptr<GraphImpl> doomed;  // freed outside the lock (it may free the nodes)
  std::lock_guard<std::mutex> lock(mu_);
  auto it = graphs_.find(graph);
  if (it == graphs_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("xxnpuGraphDestroy: 0x", absl::Hex(reinterpret_cast<uintptr_t>(graph)),
                     " is not a live xxnpu graph (destroyed already?)"));
  }
  doomed = std::move(it->second);
  graphs_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<GraphExecImpl*> CaptureRegistry::Instantiate(xxnpuGraph_t graph) {
  auto data = ResolveGraph(graph, "xxnpuGraphInstantiate");
  if (!data.ok()) return data.status();
  auto handle = std::make_unique<GraphExecImpl>();
  handle->exec = std::make_shared<ExecutableGraph>(*std::move(data));
  std::lock_guard<std::mutex> lock(mu_);
  handle->exec->exec_id = next_exec_id_++;
  GraphExecImpl* raw = handle.get();
  execs_.emplace(raw, std::move(handle));
  return raw;
}

absl::StatusOr<std::shared_ptr<ExecutableGraph>> CaptureRegistry::ResolveExec(xxnpuGraphExec_t exec,
                                                                               const char* api) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        api, ": 0x", absl::Hex(reinterpret_cast<uintptr_t>(exec)),
        " is not a live executable graph (expected one returned by xxnpuGraphInstantiate and not destroyed)"));
  }
  return it->second->exec;
}

absl::Status CaptureRegistry::DestroyExec(xxnpuGraphExec_t exec) {
  std::unique_ptr<GraphExecImpl> doomed;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("xxnpuGraphExecDestroy: 0x", absl::Hex(reinterpret_cast<uintptr_t>(exec)),
                     " is not a live executable graph (destroyed already?)"));
  }
  doomed = std::move(it->second);
  execs_.erase(it);
  return absl::OkStatus();
}

GraphLiveCounts CaptureRegistry::LiveCounts() {
  GraphLiveCounts counts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    counts.graphs = static_cast<int64_t>(graphs_.size());
    counts.execs = static_cast<int64_t>(execs_.size());
  }
  counts.node_lists = GraphData::live_lists.load(std::memory_order_relaxed);
  counts.nodes = GraphData::live_nodes.load(std::memory_order_relaxed);
  return counts;
}

}  // namespace xxnpu::internal
