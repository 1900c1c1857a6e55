// Implementation of the activity-tracing buffers behind device/activity_trace.h: the
// per-kind enable mask, one single-producer/single-consumer ring per writing host
// thread, the registry the collector drains, and the per-thread external-correlation
// stacks.
//
// Synchronisation is std::atomic / std::mutex only, never absl::Mutex: Debian's abseil
// is not built with ThreadSanitizer instrumentation, so tsan would see its locking as
// unsynchronised and report false races.
//
// Who touches what:
//   - a ring's producer is its owning thread (ActivityRecordEmit); it never locks;
//   - a ring's consumer is whoever holds CollectMutex (ActivityCollect/ActivityClear);
//   - RegistryMutex guards the list of rings. A thread takes it once, at its first
//     record; the collector takes it only to snapshot and prune the list, never while
//     draining, so a new thread's first record waits for a list copy at most.
#include "device/activity_trace.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/container/inlined_vector.h"
#include "device/clock.h"

namespace xxnpu {
namespace {

// The rings copy records as raw bytes and hand out storage that was never constructed.
static_assert(std::is_trivially_copyable_v<ActivityRecord>);
static_assert(std::is_trivially_destructible_v<ActivityRecord>);
// Every thread's ring holds 65536 of them by default: new fields go into padding.
static_assert(sizeof(ActivityRecord) == 136, "ActivityRecord grew");

constexpr int kNumKinds = static_cast<int>(ActivityKind::kCount);
constexpr int kNumExternalKinds = static_cast<int>(ExternalCorrelationKind::kCount);
static_assert(kNumKinds <= 32, "the enable mask is a uint32_t");

constexpr size_t kDefaultRingRecords = 65536;
constexpr size_t kMinRingRecords = 64;
constexpr size_t kMaxRingRecords = size_t{1} << 24;

// Keeps the producer's and the consumer's indices on different cache lines, so a
// collection does not slow down every emit on that thread.
constexpr size_t kCacheLine = 64;

std::atomic<uint32_t> g_enabled_mask{0};
std::atomic<size_t> g_ring_records{kDefaultRingRecords};
std::atomic<uint64_t> g_dropped{0};
std::atomic<uint64_t> g_next_correlation_id{1};

// A bounded single-producer/single-consumer queue of records. head_ and tail_ count
// records ever written / ever consumed (they never wrap in practice: 2^64 records), so
// full and empty are unambiguous without wasting a slot.
class alignas(kCacheLine) Ring {
 public:
  explicit Ring(size_t capacity)
      : capacity_(capacity),
        // Raw storage, not `new ActivityRecord[n]`: constructing every slot would touch
        // all of the ring's pages (~9 MB by default) up front; untouched pages cost
        // nothing until a thread actually writes that many records.
        slots_(static_cast<ActivityRecord*>(::operator new(capacity * sizeof(ActivityRecord)))) {}
  ~Ring() { ::operator delete(slots_); }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // Producer side. Returns false (and writes nothing) when the ring is full.
  bool TryPush(const ActivityRecord& record) {
    const uint64_t head = head_.load(std::memory_order_relaxed);  // only we write it
    if (head - cached_tail_ >= capacity_) {
      // Re-reading the consumer's index only when the stale copy says "full" keeps its
      // cache line out of the common path. Acquire: the consumer has finished copying
      // the slots it released before we overwrite them.
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head - cached_tail_ >= capacity_) return false;
    }
    std::memcpy(static_cast<void*>(&slots_[write_index_]), &record, sizeof(ActivityRecord));
    // A separate wrapped index avoids a division by a capacity that is not a power of
    // two (capacities are honoured exactly so drop counts are predictable).
    if (++write_index_ == capacity_) write_index_ = 0;
    head_.store(head + 1, std::memory_order_release);  // publishes the slot
    return true;
  }

  // Consumer side (caller holds CollectMutex). A lower bound while the producer runs.
  size_t Pending() const {
    return static_cast<size_t>(head_.load(std::memory_order_acquire) -
                               tail_.load(std::memory_order_relaxed));
  }

  // Consumer side (caller holds CollectMutex): appends everything published so far to
  // `out`, or discards it if `out` is null. Returns how many records were consumed.
  size_t Drain(std::vector<ActivityRecord>* out) {
    const uint64_t head = head_.load(std::memory_order_acquire);
    const uint64_t tail = tail_.load(std::memory_order_relaxed);  // only consumers write it
    const size_t n = static_cast<size_t>(head - tail);
    if (n == 0) return 0;
    if (out != nullptr) {
      const size_t start = static_cast<size_t>(tail % capacity_);
      const size_t first = std::min(n, capacity_ - start);
      out->insert(out->end(), slots_ + start, slots_ + start + first);
      out->insert(out->end(), slots_, slots_ + (n - first));
    }
    // Release: our reads of the slots happen before the producer may reuse them.
    tail_.store(head, std::memory_order_release);
    return n;
  }

  // Set by the owning thread as it exits; after that the ring only needs draining.
  void MarkOwnerExited() { owner_exited_.store(true, std::memory_order_release); }
  // Acquire: once true, every record the owner wrote is visible to the next Drain.
  bool OwnerExited() const { return owner_exited_.load(std::memory_order_acquire); }

 private:
  const size_t capacity_;
  ActivityRecord* const slots_;
  std::atomic<bool> owner_exited_{false};

  // Producer-owned line.
  alignas(kCacheLine) std::atomic<uint64_t> head_{0};
  uint64_t cached_tail_ = 0;
  size_t write_index_ = 0;

  // Consumer-owned line.
  alignas(kCacheLine) std::atomic<uint64_t> tail_{0};
};

// Process-lifetime state, deliberately leaked: threads still running (or exiting) while
// static destructors run may emit, and must not find a destroyed registry.
struct Registry {
  std::mutex collect_mu;  // serialises consumers; emitters never take it
  std::mutex rings_mu;    // guards `rings`; emitters take it once per thread
  // Only ever appended to by registration; only ever pruned by a consumer holding
  // collect_mu. So a snapshot taken under collect_mu stays a prefix of `rings` until
  // that consumer prunes it.
  std::vector<std::shared_ptr<Ring>> rings;
};

Registry& GetRegistry() {
  static Registry* const registry = new Registry;
  return *registry;
}

// The hot path's view of this thread's ring: trivially destructible, so reading it
// needs no thread_local initialisation guard.
thread_local Ring* t_ring = nullptr;
// Set once this thread's ring holder is destroyed (thread exit): a later emit from
// another thread_local destructor is dropped rather than creating a ring nobody owns.
thread_local bool t_ring_released = false;

// Shares ownership of the ring with the registry; its destruction at thread exit is
// what tells the collector that the ring can be freed once drained.
struct RingHolder {
  std::shared_ptr<Ring> ring;
  ~RingHolder() {
    if (ring) ring->MarkOwnerExited();
    t_ring = nullptr;
    t_ring_released = true;
  }
};

// Cold path: first record of this thread.
ABSL_ATTRIBUTE_NOINLINE Ring* AttachRingToThisThread() {
  if (t_ring_released) return nullptr;
  // Function-local so that its destructor is registered only for threads that record.
  thread_local RingHolder holder;
  auto ring = std::make_shared<Ring>(g_ring_records.load(std::memory_order_relaxed));
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.rings_mu);
    registry.rings.push_back(ring);
  }
  holder.ring = std::move(ring);
  t_ring = holder.ring.get();
  return t_ring;
}

ABSL_ATTRIBUTE_NOINLINE void EmitFirstRecord(const ActivityRecord& record) {
  Ring* ring = AttachRingToThisThread();
  if (ring == nullptr || !ring->TryPush(record)) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

// Where ActivityCollect's conversion to Unix time starts: a pair read no later than the
// oldest record it will convert (when tracing was turned on, or at the last drain,
// whichever came last). Cold path: enable, collect, clear.
std::mutex g_anchor_mu;
TraceClockPair g_anchor = MeasureTraceClockPair();

void SetConversionAnchor(TraceClockPair pair) {
  std::lock_guard<std::mutex> lock(g_anchor_mu);
  g_anchor = pair;
}

TraceClockPair ConversionAnchor() {
  std::lock_guard<std::mutex> lock(g_anchor_mu);
  return g_anchor;
}

// Drains every ring into `out` (or discards if null) and frees the rings of exited
// threads, which hold nothing more after this drain.
size_t DrainAll(std::vector<ActivityRecord>* out) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> collect_lock(registry.collect_mu);

  std::vector<std::shared_ptr<Ring>> snapshot;
  {
    std::lock_guard<std::mutex> lock(registry.rings_mu);
    snapshot = registry.rings;
  }
  // Read before draining: a ring whose owner had already exited is complete, so this
  // drain empties it for good. An owner that exits during the drain is pruned next time.
  std::vector<char> exited(snapshot.size());
  size_t pending = 0;
  for (size_t i = 0; i < snapshot.size(); ++i) {
    exited[i] = snapshot[i]->OwnerExited();
    pending += snapshot[i]->Pending();
  }
  if (out != nullptr) out->reserve(out->size() + pending);

  size_t drained = 0;
  for (const auto& ring : snapshot) drained += ring->Drain(out);

  {
    std::lock_guard<std::mutex> lock(registry.rings_mu);
    size_t kept = 0;
    for (size_t i = 0; i < registry.rings.size(); ++i) {
      if (i < snapshot.size() && exited[i]) continue;
      registry.rings[kept++] = std::move(registry.rings[i]);
    }
    registry.rings.resize(kept);
  }
  // `snapshot` goes out of scope after rings_mu is released: pruned rings (megabytes)
  // are freed without blocking a registering thread.
  return drained;
}

// External correlation stacks. The tops are mirrored in a trivially destructible array
// so that capturing them (every API call) is two plain thread-local loads.
thread_local uint64_t t_external_top[kNumExternalKinds] = {};

using ExternalStack = absl::InlinedVector<uint64_t, 8>;
ExternalStack& ExternalStackFor(int kind) {
  thread_local ExternalStack stacks[kNumExternalKinds];
  return stacks[kind];
}

bool ValidExternalKind(ExternalCorrelationKind kind) {
  return static_cast<int>(kind) < kNumExternalKinds;
}

thread_local int32_t t_thread_id = 0;

}  // namespace

const char* ActivityKindName(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::kKernel:
      return "kernel";
    case ActivityKind::kMemcpy:
      return "memcpy";
    case ActivityKind::kMemset:
      return "memset";
    case ActivityKind::kRuntime:
      return "runtime";
    case ActivityKind::kSynchronization:
      return "synchronization";
    case ActivityKind::kMemory:
      return "memory";
    case ActivityKind::kMarker:
      return "marker";
    case ActivityKind::kCachingAllocator:
      return "caching_allocator";
    case ActivityKind::kCount:
      break;
  }
  return "unknown";
}

void ActivityEnable(ActivityKind kind) {
  const int k = static_cast<int>(kind);
  if (k >= kNumKinds) return;
  // Tracing starting: the conversion of what it records starts from here (cold path).
  if (g_enabled_mask.load(std::memory_order_relaxed) == 0) SetConversionAnchor(MeasureTraceClockPair());
  g_enabled_mask.fetch_or(uint32_t{1} << k, std::memory_order_relaxed);
}

void ActivityDisable(ActivityKind kind) {
  const int k = static_cast<int>(kind);
  if (k >= kNumKinds) return;
  g_enabled_mask.fetch_and(~(uint32_t{1} << k), std::memory_order_relaxed);
}

bool ActivityAnyEnabled() { return g_enabled_mask.load(std::memory_order_relaxed) != 0; }

bool ActivityEnabled(ActivityKind kind) {
  const int k = static_cast<int>(kind);
  // Relaxed: a record racing with Enable/Disable may go either way, which is all a
  // profiler start/stop can expect; nothing else is published through the mask.
  return k < kNumKinds && ((g_enabled_mask.load(std::memory_order_relaxed) >> k) & 1u) != 0;
}

void ActivityDisableAll() { g_enabled_mask.store(0, std::memory_order_relaxed); }

void ActivitySetBufferRecords(size_t records) {
  g_ring_records.store(std::clamp(records, kMinRingRecords, kMaxRingRecords),
                       std::memory_order_relaxed);
}

size_t ActivityCollectTraceClock(std::vector<ActivityRecord>* out) {
  const size_t first = out->size();
  const size_t n = DrainAll(out);
  // Every record in the rings was written after this moment's pair: the next collect
  // converts from here.
  SetConversionAnchor(MeasureTraceClockPair());
  // Stable: records with equal timestamps keep each thread's emission order (e.g. an
  // instant marker written right after the launch it annotates).
  std::stable_sort(out->begin() + static_cast<std::ptrdiff_t>(first), out->end(),
                   [](const ActivityRecord& a, const ActivityRecord& b) {
                     return a.start_ns < b.start_ns;
                   });
  return n;
}

size_t ActivityCollect(std::vector<ActivityRecord>* out) {
  const size_t first = out->size();
  const TraceClockToUnix to_unix(ConversionAnchor(), MeasureTraceClockPair());
  const size_t n = ActivityCollectTraceClock(out);
  ActivityConvertTimes(out->data() + first, out->data() + out->size(), to_unix);
  return n;
}

uint64_t ActivityTakeDroppedCount() {
  return g_dropped.exchange(0, std::memory_order_relaxed);
}

void ActivityClear() {
  DrainAll(nullptr);
  SetConversionAnchor(MeasureTraceClockPair());
  g_dropped.store(0, std::memory_order_relaxed);
}

size_t ActivityRegisteredRingCountForTesting() {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.rings_mu);
  return registry.rings.size();
}

void ActivityPushExternalCorrelationId(ExternalCorrelationKind kind, uint64_t id) {
  if (!ValidExternalKind(kind)) return;
  const int k = static_cast<int>(kind);
  ExternalStackFor(k).push_back(id);
  t_external_top[k] = id;
}

uint64_t ActivityPopExternalCorrelationId(ExternalCorrelationKind kind) {
  if (!ValidExternalKind(kind)) return 0;
  const int k = static_cast<int>(kind);
  ExternalStack& stack = ExternalStackFor(k);
  // Unbalanced pops happen (a profiler started inside a range); they must not crash.
  if (stack.empty()) return 0;
  const uint64_t id = stack.back();
  stack.pop_back();
  t_external_top[k] = stack.empty() ? 0 : stack.back();
  return id;
}

void ActivityCaptureExternalIds(ActivityRecord* record) {
  for (int k = 0; k < kNumExternalKinds; ++k) record->external_id[k] = t_external_top[k];
}

uint64_t ActivityNextCorrelationId() {
  // Relaxed: only uniqueness matters, not ordering with other memory.
  return g_next_correlation_id.fetch_add(1, std::memory_order_relaxed);
}

void ActivityRecordEmit(const ActivityRecord& record) {
  if (!ActivityEnabled(record.kind)) return;
  Ring* ring = t_ring;
  if (ABSL_PREDICT_FALSE(ring == nullptr)) {
    EmitFirstRecord(record);
    return;
  }
  if (ABSL_PREDICT_FALSE(!ring->TryPush(record))) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

int32_t CurrentThreadId() {
  if (ABSL_PREDICT_FALSE(t_thread_id == 0)) {
    // A forked child's only thread inherits the parent's cached id; forget it there.
    static std::once_flag atfork_once;
    std::call_once(atfork_once, [] {
      pthread_atfork(nullptr, nullptr, [] { t_thread_id = 0; });
    });
    t_thread_id = static_cast<int32_t>(syscall(SYS_gettid));
  }
  return t_thread_id;
}

}  // namespace xxnpu
