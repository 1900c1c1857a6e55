#include "profiler/markers.h"

#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "device/activity_trace.h"
#include "device/clock.h"
#include "device/runtime.h"

namespace xxnpu {
namespace {

// Activity records carry `const char*` names, which must stay valid until the capture's
// records have been converted. Names used to be interned for the life of the process, so
// `range(f"step {i}")` grew memory without bound (issue 21). Now:
//   - a name is interned only when a record is written (a marker while kMarker is being
//     recorded), never for ranges or marks outside a capture;
//   - names live in generations: MarkerNewCapture (at every capture's start) frees the
//     generation before the previous one, so a name stays valid through the capture it was
//     interned for and the one after (a marker racing a capture's start is safe);
//   - one generation holds at most kMaxGenerationBytes of names; beyond, records carry
//     kOverflowName (a capture with that many distinct names has no use for them).
constexpr size_t kMaxGenerationBytes = size_t{16} << 20;
constexpr char kOverflowName[] =
    "xxnpu marker (name not kept: over 16 MiB of distinct marker names in this capture)";

struct Generation {
  std::unordered_set<std::string> names;
  size_t bytes = 0;
};

struct NameTable {
  std::mutex mu;
  std::unique_ptr<Generation> current = std::make_unique<Generation>();
  std::unique_ptr<Generation> previous = std::make_unique<Generation>();
};

NameTable& Table() {
  static auto* table = new NameTable();
  return *table;
}

const char* Intern(std::string_view name) {
  NameTable& t = Table();
  std::lock_guard<std::mutex> lock(t.mu);
  // A name of the previous generation is still valid for this capture.
  if (auto it = t.previous->names.find(std::string(name)); it != t.previous->names.end()) return it->c_str();
  Generation& g = *t.current;
  auto it = g.names.find(std::string(name));
  if (it != g.names.end()) return it->c_str();
  if (g.bytes + name.size() + 1 > kMaxGenerationBytes) return kOverflowName;
  g.bytes += name.size() + 1;
  return g.names.emplace(name).first->c_str();
}

struct OpenRange {
  std::string name;  // owned: interned only if the range is recorded when it closes
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
  t_ranges.push_back({std::string(name), TraceClockNow()});
  return static_cast<int>(t_ranges.size()) - 1;
}

int MarkerRangePop() {
  if (t_ranges.empty()) return -1;
  OpenRange r = std::move(t_ranges.back());
  t_ranges.pop_back();
  if (ActivityEnabled(ActivityKind::kMarker)) Emit(Intern(r.name), r.start_ns, TraceClockNow(), 0);
  return static_cast<int>(t_ranges.size());
}

void MarkerMark(std::string_view name) {
  if (!ActivityEnabled(ActivityKind::kMarker)) return;
  const int64_t now = TraceClockNow();
  Emit(Intern(name), now, now, 1);
}

void MarkerNewCapture() {
  NameTable& t = Table();
  std::unique_ptr<Generation> expired;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    expired = std::move(t.previous);
    t.previous = std::move(t.current);
    t.current = std::make_unique<Generation>();
  }
  // `expired` is freed here, outside the lock.
}

size_t MarkerInternedBytes() {
  NameTable& t = Table();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.current->bytes + t.previous->bytes;
}

}  // namespace xxnpu
