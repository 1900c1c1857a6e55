#include "profiler/record_conversion.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace xxnpu::profiler {
namespace {

using libkineto::ActivityType;
using libkineto::GenericTraceActivity;

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

std::string Dim3Json(const uint32_t d[3]) {
  return "[" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) + "]";
}

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

const char* NameOf(const ActivityRecord& r) { return r.name != nullptr ? r.name : "xxnpu (unnamed)"; }

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

void AddBandwidth(GenericTraceActivity& a, const char* key, int64_t bytes, int64_t dur_ns) {
  if (bytes > 0 && dur_ns > 0) a.addMetadata(key, Round3(static_cast<double>(bytes) / static_cast<double>(dur_ns)));
}

}  // namespace

ConversionResult ConvertRecords(const std::vector<ActivityRecord>& records, const ConversionOptions& options,
                                const LinkedActivityFn& linked, libkineto::CpuTraceBuffer* buffer) {
  ConversionResult result;
  auto link = [&](uint64_t external_id) -> const libkineto::ITraceActivity* {
    const int32_t id = OpId(external_id);
    return (id != 0 && linked) ? linked(id) : nullptr;
  };

  // Pass 1: which runtime calls and which device activities survive the window, so that a
  // flow arrow is drawn only when both of its ends are in the trace.
  std::unordered_set<uint64_t> launches;  // correlation ids of emitted runtime calls
  std::unordered_set<uint64_t> device_ops;  // correlation ids of emitted device activities
  for (const ActivityRecord& r : records) {
    if (r.correlation_id == 0 || !Wanted(r, options) || !InWindow(r, options)) continue;
    if (r.kind == ActivityKind::kRuntime) launches.insert(r.correlation_id);
    if (IsDeviceWork(r.kind)) device_ops.insert(r.correlation_id);
  }

  // GPU user annotations: (user id, device, stream) -> [first start, last end].
  std::map<std::tuple<uint64_t, int32_t, int32_t>, std::pair<int64_t, int64_t>> user_spans;
  // The latest runtime event of each host thread, for runtime memory records.
  std::unordered_map<int32_t, GenericTraceActivity*> last_runtime;

  auto emit = [&](ActivityType type, const std::string& name) -> GenericTraceActivity& {
    buffer->emplace_activity(buffer->span, type, name);
    ++result.activities;
    return *buffer->activities.back();
  };

  // Marker ranges per host thread (for their device projection) and where each launch
  // was made: runtime correlation id -> (host thread, time of the call).
  std::vector<const char*> marker_ranges;  // names of the projected ranges
  std::unordered_map<int32_t, ThreadRanges> ranges_by_thread;
  std::unordered_map<uint64_t, std::pair<int32_t, int64_t>> launch_site;
  const bool project_markers = options.markers && options.user_annotations;

  for (const ActivityRecord& r : records) {
    if (project_markers && r.kind == ActivityKind::kRuntime && r.correlation_id != 0) {
      launch_site.emplace(r.correlation_id, std::make_pair(r.thread_id, r.start_ns));
    }
    if (!Wanted(r, options)) continue;
    if (r.kind == ActivityKind::kMarker) {
      if (!MarkerInWindow(r, options)) {
        ++result.out_of_window;
        continue;
      }
      // Not USER_ANNOTATION / CPU_INSTANT_EVENT: torch's post-processing takes activities
      // of those types for its own, warns that it does not know them and leaves them out of
      // the table. A host-side PrivateUse1 type makes a CPU row that nests like a
      // record_function range (and an "X" event on the thread's row in the trace).
      const bool range = r.subkind == kMarkerRange;
      GenericTraceActivity& a = emit(ActivityType::PRIVATEUSE1_RUNTIME, NameOf(r));
      a.startTime = std::max(r.start_ns, options.window_start_ns);
      a.endTime = range ? r.end_ns : a.startTime;
      a.device = options.host_pid;
      a.resource = r.thread_id;
      a.threadId = r.thread_id;
      a.addMetadataQuoted("marker", range ? "range" : "mark");
      if (r.device >= 0) a.addMetadata("device", r.device);
      ++result.markers;
      if (range && project_markers) {
        ranges_by_thread[r.thread_id].Add(a.startTime, a.endTime, marker_ranges.size());
        marker_ranges.push_back(NameOf(r));
      }
      continue;
    }
    if (!InWindow(r, options)) {
      ++result.out_of_window;
      continue;
    }
    if (r.kind == ActivityKind::kMemory) {
      // Runtime segments annotate the xxnpuMalloc/xxnpuFree call around them.
      // Caching-allocator blocks (ActivityKind::kCachingAllocator, which the plugin does not
      // enable) reach torch through c10::reportMemoryUsageToProfiler, as [memory] events.
      if (r.subkind != 0) continue;
      auto it = last_runtime.find(r.thread_id);
      if (it == last_runtime.end()) continue;
      GenericTraceActivity& call = *it->second;
      if (r.start_ns < call.startTime || r.start_ns > call.endTime) continue;
      call.addMetadata("bytes", r.bytes);
      call.addMetadataQuoted("address", Hex(r.address));
      call.addMetadata("total reserved", r.total_reserved);
      continue;
    }

    const bool device_side = IsDeviceWork(r.kind) || IsDeviceWait(r);
    ActivityType type = ActivityType::PRIVATEUSE1_RUNTIME;
    std::string name = NameOf(r);
    switch (r.kind) {
      case ActivityKind::kKernel: type = ActivityType::CONCURRENT_KERNEL; break;
      case ActivityKind::kMemcpy: type = ActivityType::GPU_MEMCPY; break;
      case ActivityKind::kMemset: type = ActivityType::GPU_MEMSET; break;
      case ActivityKind::kSynchronization:
        if (IsDeviceWait(r)) {
          type = ActivityType::CUDA_SYNC;
        } else {
          name += " (wait)";
        }
        break;
      default: break;
    }

    GenericTraceActivity& a = emit(type, name);
    a.startTime = r.start_ns;
    a.endTime = r.end_ns;
    if (device_side) {
      a.device = r.device;
      a.resource = r.stream;
      a.threadId = r.stream;
      result.devices.insert(r.device);
      result.streams.emplace(r.device, r.stream);
    } else {
      a.device = options.host_pid;
      a.resource = r.thread_id;
      a.threadId = r.thread_id;
    }

    // Link to the ATen op (device wait: left unlinked, it is not the op's work).
    if (!IsDeviceWait(r)) {
      a.id = OpId(r.external_id[kDefaultIds]);
      a.linked = link(r.external_id[kDefaultIds]);
      if (IsDeviceWork(r.kind) && a.linked == nullptr) ++result.device_unlinked;
    }

    if (r.device >= 0) a.addMetadata("device", r.device);
    if (r.stream >= 0) a.addMetadata("stream", r.stream);
    if (r.correlation_id != 0) a.addMetadata("correlation", r.correlation_id);

    switch (r.kind) {
      case ActivityKind::kKernel: {
        a.addMetadata("grid", Dim3Json(r.grid));
        a.addMetadata("block", Dim3Json(r.block));
        a.addMetadata("bytes", r.bytes);
        a.addMetadata("flops", r.flops);
        const int64_t dur = r.end_ns - r.start_ns;
        AddBandwidth(a, "achieved GB/s", r.bytes, dur);
        if (r.flops > 0 && dur > 0) {
          a.addMetadata("achieved GFLOP/s", Round3(static_cast<double>(r.flops) / static_cast<double>(dur)));
        }
        break;
      }
      case ActivityKind::kMemcpy:
      case ActivityKind::kMemset:
        a.addMetadata("bytes", r.bytes);
        AddBandwidth(a, "memory bandwidth (GB/s)", r.bytes, r.end_ns - r.start_ns);
        break;
      case ActivityKind::kSynchronization:
        a.addMetadataQuoted("wait", SyncKindName(r.subkind));
        break;
      default: break;
    }

    // ac2g arrow: starts on the launch (runtime call), ends on the device activity.
    const uint32_t flow_id = FlowId(r.correlation_id);
    if (flow_id != 0) {
      if (r.kind == ActivityKind::kRuntime && device_ops.count(r.correlation_id) != 0) {
        a.flow.id = flow_id;
        a.flow.type = libkineto::kLinkAsyncCpuGpu;
        a.flow.start = 1;
      } else if (IsDeviceWork(r.kind) && launches.count(r.correlation_id) != 0) {
        a.flow.id = flow_id;
        a.flow.type = libkineto::kLinkAsyncCpuGpu;
        a.flow.start = 0;
        ++result.flows;
      }
    }

    if (r.kind == ActivityKind::kRuntime) last_runtime[r.thread_id] = &a;
    if (options.user_annotations && IsDeviceWork(r.kind) && r.external_id[kUserIds] != 0) {
      auto [it, inserted] = user_spans.try_emplace({r.external_id[kUserIds], r.device, r.stream}, r.start_ns, r.end_ns);
      if (!inserted) {
        it->second.first = std::min(it->second.first, r.start_ns);
        it->second.second = std::max(it->second.second, r.end_ns);
      }
    }
  }

  // record_function ranges projected onto each stream they launched work on (what CUPTI's
  // GPU user annotations show): named after the range, id = its correlation id.
  for (const auto& [key, span] : user_spans) {
    const auto& [user_id, device, stream] = key;
    const libkineto::ITraceActivity* range = link(user_id);
    if (range == nullptr) continue;
    GenericTraceActivity& a = emit(ActivityType::GPU_USER_ANNOTATION, range->name());
    a.startTime = span.first;
    a.endTime = span.second;
    a.id = OpId(user_id);
    a.device = device;
    a.resource = stream;
    a.threadId = stream;
    a.addMetadata("device", device);
    a.addMetadata("stream", stream);
  }

  // Marker ranges projected onto the streams that ran the device work launched inside
  // them (on the range's thread): (marker, device, stream) -> [first start, last end].
  if (!marker_ranges.empty()) {
    for (auto& [thread, ranges] : ranges_by_thread) ranges.Finish();
    std::map<std::tuple<size_t, int32_t, int32_t>, std::pair<int64_t, int64_t>> marker_spans;
    for (const ActivityRecord& r : records) {
      if (!IsDeviceWork(r.kind) || !Wanted(r, options) || !InWindow(r, options)) continue;
      auto site = launch_site.find(r.correlation_id);
      if (site == launch_site.end()) continue;
      auto thread = ranges_by_thread.find(site->second.first);
      if (thread == ranges_by_thread.end()) continue;
      thread->second.ForEachEnclosing(site->second.second, [&](size_t marker) {
        auto [it, inserted] = marker_spans.try_emplace({marker, r.device, r.stream}, r.start_ns, r.end_ns);
        if (!inserted) {
          it->second.first = std::min(it->second.first, r.start_ns);
          it->second.second = std::max(it->second.second, r.end_ns);
        }
      });
    }
    for (const auto& [key, span] : marker_spans) {
      const auto& [marker, device, stream] = key;
      GenericTraceActivity& a = emit(ActivityType::GPU_USER_ANNOTATION, marker_ranges[marker]);
      a.startTime = span.first;
      a.endTime = span.second;
      a.device = device;
      a.resource = stream;
      a.threadId = stream;
      a.addMetadata("device", device);
      a.addMetadata("stream", stream);
      a.addMetadataQuoted("marker", "range");
    }
  }
  return result;
}

}  // namespace xxnpu::profiler
