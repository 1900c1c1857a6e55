#include "profiler/record_conversion.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "profiler/trace_activity.h"

namespace xxnpu::profiler {
namespace {

using libkineto::ActivityType;

constexpr int kDefaultIds = static_cast<int>(ExternalCorrelationKind::kDefault);
constexpr int kUserIds = static_cast<int>(ExternalCorrelationKind::kUser);

// kMarker subkinds, as profiler/markers.cc writes them.
constexpr uint8_t kMarkerRange = 0;
constexpr uint8_t kMarkerMark = 1;

bool IsDeviceWork(ActivityKind kind) {
  return kind == ActivityKind::kKernel || kind == ActivityKind::kMemcpy || kind == ActivityKind::kMemset;
}

// A device-side wait (a stream held until an event completes) rather than a host wait.
bool IsDeviceWait(const ActivityRecord& r) {
  return r.kind == ActivityKind::kSynchronization && r.subkind == static_cast<uint8_t>(SyncKind::kStreamWaitEvent);
}

bool Wanted(const ActivityRecord& r, const ConversionOptions& o) {
  switch (r.kind) {
    case ActivityKind::kKernel: return o.kernels;
    case ActivityKind::kMemcpy: return o.memcpy;
    case ActivityKind::kMemset: return o.memset;
    case ActivityKind::kRuntime:
    case ActivityKind::kSynchronization:
    case ActivityKind::kMemory: return o.runtime;
    case ActivityKind::kMarker: return o.markers && (r.subkind == kMarkerRange || r.subkind == kMarkerMark);
    default: return false;
  }
}

bool InWindow(const ActivityRecord& r, const ConversionOptions& o) {
  return r.start_ns >= o.window_start_ns && r.end_ns <= o.window_end_ns && r.end_ns >= r.start_ns;
}

// A marker range is recorded when it is popped: one pushed before the capture started
// and popped inside it is kept, clipped to the window's start.
bool MarkerInWindow(const ActivityRecord& r, const ConversionOptions& o) {
  if (r.subkind == kMarkerRange) {
    return r.end_ns >= o.window_start_ns && r.end_ns <= o.window_end_ns && r.end_ns >= r.start_ns;
  }
  return InWindow(r, o);
}

// The marker ranges of one host thread, nested (push/pop is a per-thread stack), for
// finding the ranges that enclose a launch made by that thread.
class ThreadRanges {
 public:
  void Add(int64_t start, int64_t end, size_t marker) { ranges_.push_back({start, end, marker, -1}); }

  // Sorts (outer ranges first on equal starts) and links every range to its parent.
  void Finish() {
    std::sort(ranges_.begin(), ranges_.end(), [](const Range& a, const Range& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<int> open;
    for (int i = 0; i < static_cast<int>(ranges_.size()); ++i) {
      while (!open.empty() && ranges_[open.back()].end < ranges_[i].end) open.pop_back();
      ranges_[i].parent = open.empty() ? -1 : open.back();
      open.push_back(i);
    }
  }

  // Calls fn(marker) for every range that contains `t`, innermost first.
  template <typename Fn>
  void ForEachEnclosing(int64_t t, Fn&& fn) const {
    // The last range starting at or before t; the ranges containing t are it or its
    // ancestors (nesting), so walk up to the first that still contains t.
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), t,
                               [](int64_t v, const Range& r) { return v < r.start; });
    int i = static_cast<int>(it - ranges_.begin()) - 1;
    while (i >= 0 && ranges_[i].end < t) i = ranges_[i].parent;
    for (; i >= 0; i = ranges_[i].parent) fn(ranges_[i].marker);
  }

 private:
  struct Range {
    int64_t start;
    int64_t end;
    size_t marker;  // index into the converted marker list
    int parent;
  };
  std::vector<Range> ranges_;
};

// Kineto's flow ids are 32-bit; the runtime's correlation ids are process-unique 64-bit
// counters that start at 1, so the low 32 bits are unique within any realistic trace.
uint32_t FlowId(uint64_t correlation_id) { return static_cast<uint32_t>(correlation_id); }

// int32 like GenericTraceActivity::id and the callback's argument.
int32_t OpId(uint64_t external_id) { return static_cast<int32_t>(external_id); }

double Round3(double x) { return std::round(x * 1000.0) / 1000.0; }

// absl::StrCat rather than chained std::string operator+, on which GCC 12 at -O3 reports a
// false -Wrestrict (an error under --config=ci --config=opt).
std::string Dim3Json(const uint32_t d[3]) { return absl::StrCat("[", d[0], ", ", d[1], ", ", d[2], "]"); }

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

const char* NameOf(const ActivityRecord& r) { return r.name != nullptr ? r.name : "xxnpu (unnamed)"; }

// Kineto's name for a stream waiting on an event (CUPTI's sync type), on the device row.
constexpr char kStreamWaitEventName[] = "Stream Wait Event";

const char* SyncKindName(uint8_t subkind) {
  switch (static_cast<SyncKind>(subkind)) {
    case SyncKind::kStreamSynchronize: return "stream";
    case SyncKind::kEventSynchronize: return "event";
    case SyncKind::kDeviceSynchronize: return "device";
    case SyncKind::kStreamWaitEvent: return "stream_wait_event";
    case SyncKind::kMemcpyBlocking: return "memcpy";
  }
  return "unknown";
}

void AddBandwidth(TraceActivity& a, const char* key, int64_t bytes, int64_t dur_ns) {
  if (bytes > 0 && dur_ns > 0) a.Add(key, Round3(static_cast<double>(bytes) / static_cast<double>(dur_ns)));
}

// Spans of device work grouped by a key (a range and the stream it ran on): the first
// start and the last end of the activities added under the key.
template <typename Key>
class SpanMap {
 public:
  void Extend(const Key& key, int64_t start, int64_t end) {
    auto [it, inserted] = spans_.try_emplace(key, start, end);
    if (!inserted) {
      it->second.first = std::min(it->second.first, start);
      it->second.second = std::max(it->second.second, end);
    }
  }
  auto begin() const { return spans_.begin(); }
  auto end() const { return spans_.end(); }

 private:
  std::map<Key, std::pair<int64_t, int64_t>> spans_;
};

// One conversion: a handler per record kind, each appending the activity for its record,
// then the GPU user-annotation spans collected along the way. Kineto's own device plugins
// have the same shape (one handler per CUPTI/roctracer record kind).
class RecordConverter {
 public:
  RecordConverter(const ConversionOptions& options, const LinkedActivityFn& linked,
                  libkineto::CpuTraceBuffer* buffer)
      : options_(options), linked_(linked), buffer_(buffer),
        project_markers_(options.markers && options.user_annotations) {}

  ConversionResult Run(const std::vector<ActivityRecord>& records) {
    IndexFlowEnds(records);
    for (const ActivityRecord& r : records) Convert(r);
    EmitRecordFunctionAnnotations();
    EmitMarkerAnnotations(records);
    return result_;
  }

 private:
  // Which runtime calls and device activities survive the window, so that a flow arrow
  // is drawn only when both of its ends are in the trace.
  void IndexFlowEnds(const std::vector<ActivityRecord>& records) {
    launches_.reserve(records.size() / 2);
    device_ops_.reserve(records.size() / 2);
    for (const ActivityRecord& r : records) {
      if (r.correlation_id == 0 || !Wanted(r, options_) || !InWindow(r, options_)) continue;
      if (r.kind == ActivityKind::kRuntime) launches_.insert(r.correlation_id);
      if (IsDeviceWork(r.kind)) device_ops_.insert(r.correlation_id);
    }
  }

  void Convert(const ActivityRecord& r) {
    if (project_markers_ && r.kind == ActivityKind::kRuntime && r.correlation_id != 0) {
      launch_site_.emplace(r.correlation_id, std::make_pair(r.thread_id, r.start_ns));
    }
    if (!Wanted(r, options_)) return;
    if (r.kind == ActivityKind::kMarker) {
      OnMarker(r);  // its own window rule
      return;
    }
    if (!InWindow(r, options_)) {
      ++result_.out_of_window;
      return;
    }
    switch (r.kind) {
      case ActivityKind::kKernel:
      case ActivityKind::kMemcpy:
      case ActivityKind::kMemset: OnDeviceWork(r); break;
      case ActivityKind::kRuntime: OnRuntimeCall(r); break;
      case ActivityKind::kSynchronization: OnSynchronization(r); break;
      case ActivityKind::kMemory: OnRuntimeMemory(r); break;
      default: break;
    }
  }

  // Not USER_ANNOTATION / CPU_INSTANT_EVENT: torch's post-processing takes activities of
  // those types for its own, warns that it does not know them and leaves them out of the
  // table. A host-side PrivateUse1 type makes a CPU row that nests like a record_function
  // range (and an "X" event on the thread's row in the trace).
  void OnMarker(const ActivityRecord& r) {
    if (!MarkerInWindow(r, options_)) {
      ++result_.out_of_window;
      return;
    }
    const bool range = r.subkind == kMarkerRange;
    TraceActivity& a = Emit(ActivityType::PRIVATEUSE1_RUNTIME, NameOf(r));
    a.startTime = std::max(r.start_ns, options_.window_start_ns);
    a.endTime = range ? r.end_ns : a.startTime;
    PlaceOnHostRow(a, r);
    a.AddQuoted("marker", range ? "range" : "mark");
    if (r.device >= 0) a.Add("device", r.device);
    ++result_.markers;
    if (range && project_markers_) {
      ranges_by_thread_[r.thread_id].Add(a.startTime, a.endTime, marker_ranges_.size());
      marker_ranges_.push_back(NameOf(r));
    }
  }

  // Kernels, copies and fills: on the device row, linked to their op, with their size
  // and bandwidth, and the end of their launch's flow arrow.
  void OnDeviceWork(const ActivityRecord& r) {
    const ActivityType type = r.kind == ActivityKind::kKernel   ? ActivityType::CONCURRENT_KERNEL
                              : r.kind == ActivityKind::kMemcpy ? ActivityType::GPU_MEMCPY
                                                                : ActivityType::GPU_MEMSET;
    TraceActivity& a = EmitTimed(type, NameOf(r), r);
    PlaceOnDeviceRow(a, r);
    LinkToOp(a, r);
    if (a.linked == nullptr) ++result_.device_unlinked;
    AddDeviceIds(a, r);
    // Work run by a graph replay: which graph and which of its nodes, under the names
    // Kineto gives CUPTI's graph kernels, so a trace reader can group a replay's kernels.
    if (r.graph_id != 0) {
      a.Add("graph id", static_cast<int64_t>(r.graph_id));
      a.Add("graph node id", static_cast<int64_t>(r.graph_node_id));
    }
    const int64_t dur = r.end_ns - r.start_ns;
    if (r.kind == ActivityKind::kKernel) {
      a.AddJson("grid", Dim3Json(r.grid));
      a.AddJson("block", Dim3Json(r.block));
      a.Add("bytes", r.bytes);
      a.Add("flops", r.flops);
      AddBandwidth(a, "achieved GB/s", r.bytes, dur);
      if (r.flops > 0 && dur > 0) {
        a.Add("achieved GFLOP/s", Round3(static_cast<double>(r.flops) / static_cast<double>(dur)));
      }
      // A generated kernel names what it fused (torch.compile: the FX nodes).
      if (r.fused_nodes != nullptr) a.AddQuoted("fused nodes", r.fused_nodes);
    } else {
      a.Add("bytes", r.bytes);
      AddBandwidth(a, "memory bandwidth (GB/s)", r.bytes, dur);
    }
    const uint32_t flow_id = FlowId(r.correlation_id);
    if (flow_id != 0 && launches_.count(r.correlation_id) != 0) {
      SetFlow(a, flow_id, /*start=*/false);
      ++result_.flows;
    }
    if (options_.user_annotations && r.external_id[kUserIds] != 0) {
      user_spans_.Extend({r.external_id[kUserIds], r.device, r.stream}, r.start_ns, r.end_ns);
    }
  }

  // A runtime call on its host thread, linked to its op; the start of a flow arrow when
  // the device work it launched is in the trace.
  void OnRuntimeCall(const ActivityRecord& r) {
    TraceActivity& a = EmitTimed(ActivityType::PRIVATEUSE1_RUNTIME, NameOf(r), r);
    PlaceOnHostRow(a, r);
    LinkToOp(a, r);
    AddHostIds(a, r);
    const uint32_t flow_id = FlowId(r.correlation_id);
    if (flow_id != 0 && device_ops_.count(r.correlation_id) != 0) SetFlow(a, flow_id, /*start=*/true);
    last_runtime_[r.thread_id] = &a;
  }

  // A host blocked on the device ("<api> (wait)" on its thread, linked to its op), or a
  // stream held until an event completes (CUDA_SYNC on the device row: not the op's work).
  // The device-side wait is Kineto's "Stream Wait Event" as CUPTI reports it: named by the
  // sync kind (not the API), with the stream the awaited event was recorded on and the
  // correlation id of the call that recorded it, which is what trace readers (HTA's
  // critical path, torch.profiler._trace_validator) follow to the work waited for.
  void OnSynchronization(const ActivityRecord& r) {
    if (IsDeviceWait(r)) {
      TraceActivity& a = EmitTimed(ActivityType::CUDA_SYNC, kStreamWaitEventName, r);
      PlaceOnDeviceRow(a, r);
      AddDeviceIds(a, r);
      a.AddQuoted("cuda_sync_kind", kStreamWaitEventName);
      a.Add("wait_on_stream", r.wait_stream);
      a.Add("wait_on_cuda_event_record_corr_id",
                    r.wait_correlation_id != 0 ? static_cast<int64_t>(r.wait_correlation_id) : -1);
      a.AddQuoted("wait", SyncKindName(r.subkind));
      return;
    }
    TraceActivity& a = EmitTimed(ActivityType::PRIVATEUSE1_RUNTIME, std::string(NameOf(r)) + " (wait)", r);
    PlaceOnHostRow(a, r);
    LinkToOp(a, r);
    AddHostIds(a, r);
    a.AddQuoted("wait", SyncKindName(r.subkind));
  }

  // Runtime segments annotate the xxnpuMalloc/xxnpuFree call around them. Caching-
  // allocator blocks (ActivityKind::kCachingAllocator, which the plugin does not enable)
  // reach torch through c10::reportMemoryUsageToProfiler, as [memory] events.
  void OnRuntimeMemory(const ActivityRecord& r) {
    if (r.subkind != 0) return;
    auto it = last_runtime_.find(r.thread_id);
    if (it == last_runtime_.end()) return;
    TraceActivity& call = *it->second;
    if (r.start_ns < call.startTime || r.start_ns > call.endTime) return;
    call.Add("bytes", r.bytes);
    call.AddQuoted("address", Hex(r.address));
    call.Add("total reserved", r.total_reserved);
  }

  // record_function ranges projected onto each stream they launched work on (what
  // CUPTI's GPU user annotations show): named after the range, id = its correlation id.
  void EmitRecordFunctionAnnotations() {
    for (const auto& [key, span] : user_spans_) {
      const auto& [user_id, device, stream] = key;
      const libkineto::ITraceActivity* range = Linked(user_id);
      if (range == nullptr) continue;
      TraceActivity& a = EmitAnnotation(range->name(), device, stream, span);
      a.id = OpId(user_id);
    }
  }

  // Marker ranges projected onto the streams that ran the device work launched inside
  // them (on the range's thread).
  void EmitMarkerAnnotations(const std::vector<ActivityRecord>& records) {
    if (marker_ranges_.empty()) return;
    for (auto& [thread, ranges] : ranges_by_thread_) ranges.Finish();
    SpanMap<std::tuple<size_t, int32_t, int32_t>> marker_spans;  // (marker, device, stream)
    for (const ActivityRecord& r : records) {
      if (!IsDeviceWork(r.kind) || !Wanted(r, options_) || !InWindow(r, options_)) continue;
      auto site = launch_site_.find(r.correlation_id);
      if (site == launch_site_.end()) continue;
      auto thread = ranges_by_thread_.find(site->second.first);
      if (thread == ranges_by_thread_.end()) continue;
      thread->second.ForEachEnclosing(site->second.second, [&](size_t marker) {
        marker_spans.Extend({marker, r.device, r.stream}, r.start_ns, r.end_ns);
      });
    }
    for (const auto& [key, span] : marker_spans) {
      const auto& [marker, device, stream] = key;
      TraceActivity& a = EmitAnnotation(marker_ranges_[marker], device, stream, span);
      a.AddQuoted("marker", "range");
    }
  }

  // ---- building blocks

  TraceActivity& Emit(ActivityType type, const std::string& name) {
    auto activity = std::make_unique<TraceActivity>(buffer_->span, type, name);
    TraceActivity& a = *activity;
    buffer_->activities.push_back(std::move(activity));
    ++result_.activities;
    return a;
  }

  TraceActivity& EmitTimed(ActivityType type, const std::string& name, const ActivityRecord& r) {
    TraceActivity& a = Emit(type, name);
    a.startTime = r.start_ns;
    a.endTime = r.end_ns;
    return a;
  }

  // On the stream's row but without args.stream, as Kineto's own GPU user annotations: a
  // trace reader that finds args.stream takes the event for device work (HTA counts every
  // event with one as a kernel).
  TraceActivity& EmitAnnotation(const std::string& name, int32_t device, int32_t stream,
                                       const std::pair<int64_t, int64_t>& span) {
    TraceActivity& a = Emit(ActivityType::GPU_USER_ANNOTATION, name);
    a.startTime = span.first;
    a.endTime = span.second;
    a.device = device;
    a.resource = stream;
    a.threadId = stream;
    return a;
  }

  void PlaceOnDeviceRow(TraceActivity& a, const ActivityRecord& r) {
    a.device = r.device;
    a.resource = r.stream;
    a.threadId = r.stream;
    result_.devices.insert(r.device);
    result_.streams.emplace(r.device, r.stream);
  }

  void PlaceOnHostRow(TraceActivity& a, const ActivityRecord& r) const {
    a.device = options_.host_pid;
    a.resource = r.thread_id;
    a.threadId = r.thread_id;
  }

  const libkineto::ITraceActivity* Linked(uint64_t external_id) const {
    const int32_t id = OpId(external_id);
    return (id != 0 && linked_) ? linked_(id) : nullptr;
  }

  // Linked to the innermost op; failing that, to the innermost record_function range.
  // Work not launched by an aten op (a graph replay: `with record_function("step"):
  // g.replay()`) then counts as the range's device time in key_averages, instead of
  // belonging to nothing.
  void LinkToOp(TraceActivity& a, const ActivityRecord& r) const {
    const uint64_t owner = r.external_id[kDefaultIds] != 0 ? r.external_id[kDefaultIds] : r.external_id[kUserIds];
    a.id = OpId(owner);
    a.linked = Linked(owner);
  }

  // Device activities: args.stream is their row (Kineto's convention, which HTA uses to
  // tell device work from host events).
  static void AddDeviceIds(TraceActivity& a, const ActivityRecord& r) {
    if (r.device >= 0) a.Add("device", r.device);
    if (r.stream >= 0) a.Add("stream", r.stream);
    if (r.correlation_id != 0) a.Add("correlation", r.correlation_id);
  }

  // Host-side events (runtime calls, waits) name the stream they queued on or waited for
  // "target stream", never "stream": Kineto's runtime events carry no args.stream, and
  // readers such as HTA take any event that has one for device work.
  static void AddHostIds(TraceActivity& a, const ActivityRecord& r) {
    if (r.device >= 0) a.Add("device", r.device);
    if (r.stream >= 0) a.Add("target stream", r.stream);
    if (r.correlation_id != 0) a.Add("correlation", r.correlation_id);
  }

  // ac2g arrow: starts on the launch (runtime call), ends on the device activity.
  static void SetFlow(TraceActivity& a, uint32_t id, bool start) {
    a.flow.id = id;
    a.flow.type = libkineto::kLinkAsyncCpuGpu;
    a.flow.start = start ? 1 : 0;
  }

  const ConversionOptions& options_;
  const LinkedActivityFn& linked_;
  libkineto::CpuTraceBuffer* buffer_;
  const bool project_markers_;
  ConversionResult result_;

  // Probed for every device record and runtime call (a capture's stop time on the user's
  // thread): open addressing, one allocation per rehash.
  absl::flat_hash_set<uint64_t> launches_;    // correlation ids of emitted runtime calls
  absl::flat_hash_set<uint64_t> device_ops_;  // correlation ids of emitted device activities
  // The latest runtime event of each host thread, for runtime memory records.
  absl::flat_hash_map<int32_t, TraceActivity*> last_runtime_;
  SpanMap<std::tuple<uint64_t, int32_t, int32_t>> user_spans_;  // (user id, device, stream)
  // Marker ranges per host thread (for their device projection) and where each launch
  // was made: runtime correlation id -> (host thread, time of the call).
  std::vector<const char*> marker_ranges_;  // names of the projected ranges
  std::unordered_map<int32_t, ThreadRanges> ranges_by_thread_;
  absl::flat_hash_map<uint64_t, std::pair<int32_t, int64_t>> launch_site_;
};

}  // namespace

ConversionResult ConvertRecords(const std::vector<ActivityRecord>& records, const ConversionOptions& options,
                                const LinkedActivityFn& linked, libkineto::CpuTraceBuffer* buffer) {
  return RecordConverter(options, linked, buffer).Run(records);
}

}  // namespace xxnpu::profiler
