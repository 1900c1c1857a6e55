#include "profiler/markers.h"

#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "device/activity_trace.h"
#include "device/clock.h"
#include "device/runtime.h"

namespace xxnpu {
namespace {

// Activity records keep `const char*` names for the life of the process: intern them.
// Marker names are few and repeat (op names, user labels), so the set stays small.
const char* Intern(std::string_view name) {
  static auto* mu = new std::mutex();
  static auto* names = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(*mu);
  return names->emplace(name).first->c_str();
}

struct OpenRange {
  const char* name;
  int64_t start_ns;
};
thread_local std::vector<OpenRange> t_ranges;

void Emit(const char* name, int64_t start, int64_t end, uint8_t subkind) {
  ActivityRecord r;
  r.kind = ActivityKind::kMarker;
  r.subkind = subkind;  // 0: range, 1: instant mark
  r.name = name;
  r.start_ns = start;
  r.end_ns = end;
  auto device = xxnpuGetDevice();
  r.device = device.ok() ? *device : 0;
  r.thread_id = CurrentThreadId();
  ActivityCaptureExternalIds(&r);
  ActivityRecordEmit(r);
}

}  // namespace

int MarkerRangePush(std::string_view name) {
  t_ranges.push_back({Intern(name), NowNs()});
  return static_cast<int>(t_ranges.size()) - 1;
}

int MarkerRangePop() {
  if (t_ranges.empty()) return -1;
  const OpenRange r = t_ranges.back();
  t_ranges.pop_back();
  if (ActivityEnabled(ActivityKind::kMarker)) Emit(r.name, r.start_ns, NowNs(), 0);
  return static_cast<int>(t_ranges.size());
}

void MarkerMark(std::string_view name) {
  if (!ActivityEnabled(ActivityKind::kMarker)) return;
  const int64_t now = NowNs();
  Emit(Intern(name), now, now, 1);
}

}  // namespace xxnpu
