// Activity tracing for the xxnpu runtime, in the spirit of CUPTI's activity API.
//
// The runtime (and the caching allocator) describe what happens as ActivityRecords:
// kernels, copies and sets executed on the device; runtime API calls on host threads;
// host waits on the device; allocations and frees. A profiler enables the kinds it
// wants, pushes external correlation ids (e.g. the ATen op's id) around host calls, and
// collects the records.
//
// Cost model (the hot path is every kernel launch):
//   - disabled kind: one relaxed atomic load;
//   - enabled: the record is written into a buffer owned by the writing thread (a
//     single-producer ring), no lock and no allocation after the thread's first record;
//   - a full ring drops the record and counts it (DroppedRecords), never blocks.
// Timestamps are written in the trace clock (device/clock.h: TraceClockNow, the TSC on
// x86-64, the counter torch.profiler stamps its own events with) and handed out either
// converted to Unix-epoch nanoseconds (ActivityCollect) or as written
// (ActivityCollectTraceClock, for a profiler that converts them with its own function).
//
// Torch-free: abseil only. Thread-safe.
#ifndef TORCH_XXNPU_DEVICE_ACTIVITY_TRACE_H_
#define TORCH_XXNPU_DEVICE_ACTIVITY_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace xxnpu {

enum class ActivityKind : uint8_t {
  kKernel = 0,       // device: a kernel's execution on a stream
  kMemcpy = 1,       // device: a copy's execution on a stream
  kMemset = 2,       // device: a memset's execution on a stream
  kRuntime = 3,      // host: a runtime API call (launch, async copy, malloc, ...)
  kSynchronization = 4,  // host: a wait for the device (stream/event/device sync)
  kMemory = 5,       // host: a runtime allocation (bytes > 0) or free (bytes < 0)
  kMarker = 6,       // host: a user range or instant marker (range push/pop/mark)
  // host: a caching-allocator block handed out (bytes > 0) or returned (bytes < 0). A kind
  // of its own, so a profiler that learns of blocks another way (torch.profiler does,
  // through c10::reportMemoryUsageToProfiler) does not pay two records per tensor.
  kCachingAllocator = 7,
  kCount = 8,
};
const char* ActivityKindName(ActivityKind kind);

// External correlation ids are kept per host thread and per kind, as a stack.
enum class ExternalCorrelationKind : uint8_t {
  kDefault = 0,  // torch.profiler's op correlation id
  kUser = 1,     // torch.profiler's user-annotation (record_function) correlation id
  kCount = 2,
};

// One record. Fields not meaningful for a kind are zero / -1 / nullptr.
struct ActivityRecord {
  ActivityKind kind = ActivityKind::kKernel;
  // For kMemcpy: MemcpyKind as an integer (see runtime.h). For kSynchronization: what was
  // waited for (SyncKind). For kMemory: 0 (kCachingAllocator records: 1).
  uint8_t subkind = 0;
  // Device records (kKernel, kMemcpy, kMemset) of work run by a graph launch
  // (device/graph.h): the graph's id (xxnpuGraphGetId); 0 for work not from a graph. Sits
  // in what was padding, as does graph_node_id below.
  uint32_t graph_id = 0;
  // Name of the kernel / API call / marker: a string that outlives the process.
  const char* name = nullptr;
  // Unix-epoch ns from ActivityCollect; trace-clock readings while in the rings and from
  // ActivityCollectTraceClock (the names predate the trace clock).
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // == start_ns for instant records (kMemory, marks)
  // Runtime-assigned, unique per API call; a device record carries the id of the API
  // call that queued it (so a launch and its kernel share it).
  uint64_t correlation_id = 0;
  // The top of the issuing host thread's external-id stacks when the API call was made
  // (0 if empty).
  uint64_t external_id[static_cast<int>(ExternalCorrelationKind::kCount)] = {0, 0};
  int32_t device = -1;
  int32_t stream = -1;      // stream id (xxnpuStreamGetId), device records and waits
  int32_t thread_id = 0;    // OS thread id (gettid) of the host thread, host records
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  // A stream waiting on an event (kSynchronization, SyncKind::kStreamWaitEvent): the stream
  // the event was recorded on (-1: unknown). Sits in what was padding: the record stays 136
  // bytes.
  int32_t wait_stream = -1;
  uint64_t flops = 0;
  int64_t bytes = 0;        // copy/set/kernel bytes; kMemory: +allocated / -freed
  union {
    uint64_t address = 0;          // kMemory: the device address
    // kStreamWaitEvent: the correlation id of the xxnpuEventRecord call that recorded the
    // event waited on (0: that call was not traced). Kineto's "Stream Wait Event" names it
    // (wait_on_cuda_event_record_corr_id), so a trace reader can find which work the
    // waiting stream depended on.
    uint64_t wait_correlation_id;
    // Device records with graph_id != 0: the node's id in its graph (its index in capture
    // order, from 0, as xxnpuGraphDebugDump numbers them).
    uint64_t graph_node_id;
  };
  union {
    // kMemory: device totals after the event (for memory timelines).
    uint64_t total_allocated = 0;
    // kKernel: LaunchConfig::fused_nodes (nullptr: none), a string that outlives the process.
    const char* fused_nodes;
  };
  uint64_t total_reserved = 0;
};

enum class SyncKind : uint8_t {
  kStreamSynchronize = 0,
  kEventSynchronize = 1,
  kDeviceSynchronize = 2,
  kStreamWaitEvent = 3,  // recorded on the device, when a stream starts waiting
  kMemcpyBlocking = 4,   // a copy whose host side is pageable / a synchronous copy
};

// -------- control (cold path)

// Turns recording of `kind` on or off. Records of kinds that are off are not written.
void ActivityEnable(ActivityKind kind);
void ActivityDisable(ActivityKind kind);
bool ActivityEnabled(ActivityKind kind);  // hot path: a relaxed atomic load
bool ActivityAnyEnabled();                // whether any kind is on (the same load)
void ActivityDisableAll();
// Capacity, in records, of each thread's ring (default 65536; 64..2^24). Applies to rings
// created after the call.
void ActivitySetBufferRecords(size_t records);

// Moves every record written so far (by all threads, including ones that have exited)
// into `out` (appended), sorted by start_ns. Returns how many were appended.
// Timestamps converted to Unix-epoch ns along the line through two clock pairs, one read
// when tracing was turned on (or at the last collect / clear, whichever was later) and
// one now: off by tens of nanoseconds at most against NowNs().
size_t ActivityCollect(std::vector<ActivityRecord>* out);
// The same, timestamps as written (trace clock). torch.profiler's Kineto plugin takes
// these and converts them with the function torch converts its own events with, so both
// sides of the trace agree to the tick.
size_t ActivityCollectTraceClock(std::vector<ActivityRecord>* out);
// Rewrites the timestamps of records [first, last) through `convert` (trace clock to Unix
// ns); an instant record stays instant.
template <typename Convert>
void ActivityConvertTimes(ActivityRecord* first, ActivityRecord* last, const Convert& convert) {
  for (ActivityRecord* r = first; r != last; ++r) {
    const int64_t start = r->start_ns, end = r->end_ns;
    r->start_ns = convert(start);
    r->end_ns = end == start ? r->start_ns : convert(end);
  }
}
// Records dropped because a ring was full, since the last call (which resets it).
uint64_t ActivityTakeDroppedCount();
// Discards everything written so far and resets the dropped count.
void ActivityClear();

// -------- correlation

void ActivityPushExternalCorrelationId(ExternalCorrelationKind kind, uint64_t id);
// Returns the popped id (0 if the stack was empty).
uint64_t ActivityPopExternalCorrelationId(ExternalCorrelationKind kind);
// Fills record->external_id from the calling thread's stacks.
void ActivityCaptureExternalIds(ActivityRecord* record);
// A new process-unique correlation id (never 0).
uint64_t ActivityNextCorrelationId();

// -------- writing (hot path)

// Appends a copy of `record` to the calling thread's ring if its kind is enabled.
void ActivityRecordEmit(const ActivityRecord& record);

// The calling thread's OS id (gettid), cached.
int32_t CurrentThreadId();

// -------- testing

// How many per-thread rings the registry holds: live threads that have recorded, plus
// exited threads whose records have not been collected yet. For tests that check the
// rings of exited threads are freed.
size_t ActivityRegisteredRingCountForTesting();

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_ACTIVITY_TRACE_H_
