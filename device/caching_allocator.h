// The xxnpu caching device allocator: the torch-free equivalent of CUDA's
// CUDACachingAllocator, one instance per device.
//
// Why it exists: a raw device allocation (xxnpuMalloc) is expensive and xxnpuFree waits
// for the whole device, so a framework that allocates a tensor per op cannot talk to the
// runtime directly. This allocator takes large segments from the device and carves
// blocks out of them, keeping freed blocks cached for reuse; steady-state Allocate/Free
// never reach the device.
//
// The policy follows CUDA's allocator so that memory numbers, OOM behaviour and
// snapshots read the same way to PyTorch users:
//   - request sizes are rounded up to kMinBlockSize (512 B);
//   - requests up to kSmallSize (1 MiB) are served from the small pool, whose segments
//     are kSmallBuffer (2 MiB); larger requests come from the large pool, whose segments
//     are kLargeBuffer (20 MiB) for requests below kMinLargeAlloc (10 MiB), else the
//     request rounded up to kRoundLarge (2 MiB);
//   - a pool is searched best-fit, ordered by (stream, size, address); a found block is
//     split when the rest is worth keeping (>= 512 B in the small pool, > 1 MiB in the
//     large pool); freed blocks merge with free neighbours of the same segment;
//   - blocks belong to the stream they were allocated on and are reused on that stream
//     as soon as they are freed (stream order makes that safe). RecordStream() declares
//     a use on another stream: the free then records a marker on each such stream and
//     the block only becomes reusable once all of them have completed;
//   - on a failed device allocation (or one beyond the memory fraction) the allocator
//     waits for pending markers, returns every fully free cached segment to the device
//     and retries once before failing with ResourceExhausted;
//   - private pools for graphs (CUDA's MempoolId_t pools, device/graph.h): between
//     BeginAllocateToPool and EndAllocateToPool, allocations on the streams a filter
//     accepts (the capturing ones) come from the pool's own segments. A replay writes to
//     the addresses it was captured with, so a pool's blocks, once freed, are reused only
//     by allocations into the same pool, never by other work, and the pool's memory is
//     never returned to the device (EmptyCache, out-of-memory) while a graph uses it.
//     Graphs given the same pool id share it; the last ReleasePool of its users releases
//     it. While any pool is being allocated to (a capture is underway), a free that needs
//     markers on other streams records them only when the last capture ends: a marker
//     recorded on a capturing stream would be captured, and querying it would invalidate
//     the capture (CUDA's allocator defers them the same way).
//
// The device is reached through an AllocatorBackend, so tests run the allocator against
// a fake device and production uses RuntimeAllocatorBackend (runtime_allocator_backend.h).
//
// Thread-safe: one lock per allocator guards all state. A SpinLock (device/spin_lock.h),
// since a small op's output takes it twice (alloc and free) and std::mutex's unlock costs
// an atomic read-modify-write each time; not absl::Mutex: Debian's abseil is not
// ThreadSanitizer-instrumented.
#ifndef TORCH_XXNPU_DEVICE_CACHING_ALLOCATOR_H_
#define TORCH_XXNPU_DEVICE_CACHING_ALLOCATOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/runtime.h"
#include "device/spin_lock.h"

namespace xxnpu {

// ------------------------------------------------------------------ size policy

inline constexpr size_t kMinBlockSize = 512;             // every size is a multiple
inline constexpr size_t kSmallSize = size_t{1} << 20;    // largest small-pool request
inline constexpr size_t kSmallBuffer = size_t{2} << 20;  // small-pool segment size
inline constexpr size_t kLargeBuffer = size_t{20} << 20; // segment for mid-size requests
inline constexpr size_t kMinLargeAlloc = size_t{10} << 20;  // from here: own segment
inline constexpr size_t kRoundLarge = size_t{2} << 20;   // granularity of own segments
inline constexpr size_t kNoMaxSplitSize = std::numeric_limits<size_t>::max();

// The size a request of `bytes` occupies (> 0 is assumed).
size_t CachingAllocatorRoundSize(size_t bytes);
// The segment the allocator requests from the device for a rounded size.
size_t CachingAllocatorSegmentSize(size_t rounded_size);

// ------------------------------------------------------------------ private pools

// A private pool's id, as c10's MempoolId_t: {0, 0} names no private pool (the default
// pools). NewMempoolId() gives {0, n}, a pool several graphs may share
// (torch.cuda.graph_pool_handle); a graph with a pool of its own may use {capture id, 0}.
using MempoolId = std::pair<uint64_t, uint64_t>;
MempoolId NewMempoolId();

// One private pool, for stats (CachingAllocator::PrivatePools).
struct PoolInfo {
  MempoolId id{0, 0};
  int use_count = 0;        // users (graphs) that have not released it
  bool allocating = false;  // between BeginAllocateToPool and EndAllocateToPool
  int64_t segments = 0;
  size_t reserved_bytes = 0;   // bytes of its segments
  size_t allocated_bytes = 0;  // bytes of its allocated blocks
  int64_t allocations = 0;     // its allocated blocks
};

// ------------------------------------------------------------------ backend

// Names a stream-order marker (an event recorded on a stream) of a backend.
using MarkerId = uint64_t;

// What the allocator needs from one device. Implementations must be thread-safe: the
// calls that may wait for the device or queue work on it (RawFree, RecordMarker,
// Synchronize) are made WITHOUT the allocator's lock, since a runtime may run other code
// on the waiting thread (the simulator destroys finished kernels' captures there) that
// frees memory into the same allocator; the others are made with it held.
class AllocatorBackend {
 public:
  virtual ~AllocatorBackend() = default;

  // The device index (for statistics, traces and error messages).
  virtual int Device() const = 0;
  // A new device allocation of exactly `bytes`. Running out of memory must be reported
  // as kResourceExhausted: that is what makes the allocator free its cache and retry.
  virtual absl::StatusOr<void*> RawAlloc(size_t bytes) = 0;
  virtual absl::Status RawFree(void* ptr) = 0;
  // Total device memory (bytes): the base of the memory fraction.
  virtual size_t Capacity() = 0;
  // Device memory not allocated by anyone (for OOM messages); best effort.
  virtual size_t FreeBytes() = 0;

  // Records a marker at the current end of `stream`'s queue.
  virtual absl::StatusOr<MarkerId> RecordMarker(xxnpuStream_t stream) = 0;
  // Whether the stream has executed everything queued before the marker.
  virtual absl::StatusOr<bool> MarkerDone(MarkerId marker) = 0;
  // The allocator is done with the marker (the backend may reuse it).
  virtual void ReleaseMarker(MarkerId marker) = 0;
  // Waits until every marker recorded so far has completed.
  virtual absl::Status Synchronize() = 0;

  // The stream's id for activity records (xxnpuStreamGetId); -1 when unknown.
  virtual int32_t StreamId(xxnpuStream_t stream) { return -1; }
};

// ------------------------------------------------------------------ statistics

// Same names and meanings as c10::CachingDeviceAllocator's, so a later layer can map
// them field by field.
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // sum of increases since the last ResetAccumulatedStats
  int64_t freed = 0;      // sum of decreases since the last ResetAccumulatedStats
};

enum class StatType : uint64_t {
  AGGREGATE = 0,
  SMALL_POOL = 1,
  LARGE_POOL = 2,
  NUM_TYPES = 3,
};
using StatArray = std::array<Stat, static_cast<size_t>(StatType::NUM_TYPES)>;

struct DeviceStats {
  StatArray allocation;            // allocations handed out and not yet freed (count)
  StatArray segment;               // device allocations held (count)
  StatArray active;                // blocks allocated or waiting for markers (count)
  StatArray inactive_split;        // free blocks that are part of a split segment
  StatArray allocated_bytes;       // bytes of allocated blocks (rounded sizes)
  StatArray reserved_bytes;        // bytes of segments held
  StatArray active_bytes;          // bytes of active blocks
  StatArray inactive_split_bytes;  // bytes of inactive split blocks
  StatArray requested_bytes;       // bytes asked for by callers of active blocks
  int64_t num_alloc_retries = 0;     // device allocations retried after freeing the cache
  int64_t num_ooms = 0;              // allocations that failed with out-of-memory
  int64_t num_sync_all_streams = 0;  // waits for all pending markers (OOM path)
  int64_t num_device_alloc = 0;      // backend RawAlloc successes
  int64_t num_device_free = 0;       // backend RawFree successes
  Stat oversize_allocations;  // allocations of blocks >= max_split_size
  Stat oversize_segments;     // segments >= max_split_size
  int64_t max_split_size = -1;  // -1: unlimited (blocks of any size may be split)
};

// ------------------------------------------------------------------ history / snapshot

// What happened, as in CUDA's device_traces (TraceEntry::Action).
enum class TraceAction : uint8_t {
  ALLOC = 0,           // a block was handed out
  FREE_REQUESTED = 1,  // Free() was called (the block may wait for markers)
  FREE_COMPLETED = 2,  // the block went back to the pool
  SEGMENT_ALLOC = 3,   // a device allocation (backend RawAlloc)
  SEGMENT_FREE = 4,    // a device free (backend RawFree)
  OOM = 5,             // an allocation failed; addr is the device's free bytes
};
// PyTorch's snapshot spelling: "alloc", "free_requested", "free_completed",
// "segment_alloc", "segment_free", "oom".
const char* TraceActionName(TraceAction action);

struct TraceEntry {
  TraceAction action = TraceAction::ALLOC;
  uint64_t addr = 0;
  size_t size = 0;
  xxnpuStream_t stream = nullptr;
  uint64_t context_id = 0;  // as passed to Allocate/Free (0 for segment events)
  int64_t time_ns = 0;      // NowNs() (device/clock.h)
};

enum class BlockState : uint8_t {
  kActiveAllocated = 0,    // handed out
  kActivePendingFree = 1,  // freed, waiting for markers on other streams
  kInactive = 2,           // free in the pool
};
// "active_allocated", "active_pending_free", "inactive" (PyTorch's snapshot spelling).
const char* BlockStateName(BlockState state);

struct BlockInfo {
  uint64_t address = 0;
  size_t size = 0;
  size_t requested_size = 0;  // 0 for inactive blocks
  BlockState state = BlockState::kInactive;
  // Active blocks: the context of the Allocate that handed it out. Inactive blocks: of
  // the Free that returned it (0 for never-allocated remainders).
  uint64_t context_id = 0;
};

struct SegmentInfo {
  uint64_t address = 0;
  size_t total_size = 0;
  size_t allocated_size = 0;  // bytes of kActiveAllocated blocks
  size_t active_size = 0;     // bytes of kActiveAllocated + kActivePendingFree blocks
  size_t requested_size = 0;  // requested bytes of active blocks
  xxnpuStream_t stream = nullptr;
  bool is_large = false;      // large pool (else small pool)
  MempoolId pool_id{0, 0};    // the private pool it belongs to ({0, 0}: none)
  std::vector<BlockInfo> blocks;  // by address, covering the segment exactly
};

struct MemorySnapshot {
  int device = 0;
  std::vector<SegmentInfo> segments;  // by address
  std::vector<TraceEntry> trace;      // oldest first; empty unless history is recorded
};

// ------------------------------------------------------------------ allocator

struct CachingAllocatorOptions {
  // Blocks of at least this size are never split, and serve only requests they exceed by
  // less than kLargeBuffer (CUDA's max_split_size_mb, in bytes). Limits fragmentation
  // from huge blocks. Values below kLargeBuffer are raised to it, as CUDA requires.
  size_t max_split_size = kNoMaxSplitSize;
};

class CachingAllocator {
 public:
  // `backend` is not owned and must outlive the allocator.
  explicit CachingAllocator(AllocatorBackend* backend, CachingAllocatorOptions options = {});
  explicit CachingAllocator(std::unique_ptr<AllocatorBackend> backend,
                            CachingAllocatorOptions options = {});
  // Returns every segment to the backend, including ones still holding allocations (their
  // pointers become invalid); waits for pending markers first.
  ~CachingAllocator();

  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` for use on `stream` (an opaque key: nullptr is one
  // stream like any other). Zero bytes returns nullptr without touching the device.
  // Out of memory is kResourceExhausted with a CUDA-like message. `context_id` is opaque
  // (e.g. an interned stack trace id) and shows up in history and snapshots.
  absl::StatusOr<void*> Allocate(size_t bytes, xxnpuStream_t stream = nullptr,
                                 uint64_t context_id = 0);
  // Frees a pointer returned by Allocate. nullptr is a no-op; anything else that is not a
  // live allocation is kInvalidArgument naming the pointer.
  absl::Status Free(void* ptr, uint64_t context_id = 0);
  // Declares that `stream` uses the allocation `ptr` (torch's record_stream): its memory
  // is not reused until the work queued on `stream` before the Free has completed.
  absl::Status RecordStream(void* ptr, xxnpuStream_t stream);

  // Retires completed markers, then returns every fully free segment to the backend.
  // Does not wait: blocks whose markers are still pending stay reserved.
  absl::Status EmptyCache();

  // Private pools (see the top of this file). From now until EndAllocateToPool(id),
  // Allocate on a stream that `filter` accepts is served from pool `id`, which is created
  // if needed; either way the pool gains a user, to be matched by one ReleasePool(id).
  // Filters are called with the allocator's lock held: they must not call it.
  absl::Status BeginAllocateToPool(MempoolId id, std::function<bool(xxnpuStream_t)> filter);
  absl::Status EndAllocateToPool(MempoolId id);
  // One user of pool `id` is done with it (its graph was destroyed). When the last one
  // is, the pool's free segments go back to the device now, the rest as their blocks are
  // freed and EmptyCache runs; the pool's id may then be used afresh.
  absl::Status ReleasePool(MempoolId id);
  std::vector<PoolInfo> PrivatePools() const;

  // Limits reserved memory to fraction * Capacity(), 0 <= fraction <= 1.
  absl::Status SetMemoryFraction(double fraction);
  double GetMemoryFraction() const;

  DeviceStats GetStats() const;
  // peak = current for every stat.
  void ResetPeakStats();
  // allocated = freed = 0 for every stat, and the event counters (num_*) to 0.
  void ResetAccumulatedStats();

  // Starts (or stops, clearing the entries) recording a ring of the last `max_entries`
  // (at least 1) trace entries.
  void RecordHistory(bool enabled, size_t max_entries);
  bool IsRecordingHistory() const;
  MemorySnapshot Snapshot() const;

  // The segment holding `ptr` (which may point anywhere inside an allocation).
  struct SegmentRange {
    void* base = nullptr;
    size_t size = 0;
  };
  absl::StatusOr<SegmentRange> GetBaseAllocation(const void* ptr) const;
  // The (rounded) size of the allocated block starting at `ptr`, e.g. for reporting a
  // free to a memory profiler before it happens.
  absl::StatusOr<size_t> BlockSize(const void* ptr) const;

  int device() const { return device_; }
  AllocatorBackend* backend() const { return backend_; }

 private:
  struct Block;
  // Orders a pool by (stream, size, address): the first block not less than
  // (stream, size, 0) is the best fit on that stream.
  struct BlockKey {
    uintptr_t stream;
    size_t size;
    uintptr_t addr;
  };
  struct BlockLess {
    using is_transparent = void;
    static BlockKey KeyOf(const Block* b);
    static bool Less(const BlockKey& a, const BlockKey& b) {
      if (a.stream != b.stream) return a.stream < b.stream;
      if (a.size != b.size) return a.size < b.size;
      return a.addr < b.addr;
    }
    bool operator()(const Block* a, const Block* b) const { return Less(KeyOf(a), KeyOf(b)); }
    bool operator()(const Block* a, const BlockKey& b) const { return Less(KeyOf(a), b); }
    bool operator()(const BlockKey& a, const Block* b) const { return Less(a, KeyOf(b)); }
  };
  using BlockSet = std::set<Block*, BlockLess>;
  struct PrivatePool {
    MempoolId id;
    int use_count = 0;
    int64_t segments = 0;
    BlockSet small_blocks;
    BlockSet large_blocks;
  };
  struct PendingMarker {
    MarkerId marker;
    Block* block;
  };

  // All private helpers run with mu_ held.
  Block* NewBlockLocked();
  void RecycleBlockLocked(Block* block);
  // `pool` nullptr: the default pools.
  BlockSet& PoolOf(PrivatePool* pool, bool small) {
    if (pool != nullptr) [[unlikely]] return small ? pool->small_blocks : pool->large_blocks;
    return small ? small_pool_ : large_pool_;
  }
  void PoolInsertLocked(Block* block);
  void PoolEraseLocked(Block* block);
  Block* FindFreeBlockLocked(PrivatePool* pool, bool small, xxnpuStream_t stream, size_t size);
  bool ShouldSplitLocked(const Block* block, size_t size) const;
  absl::Status AllocSegmentLocked(PrivatePool* pool, bool small, xxnpuStream_t stream, size_t size,
                                  Block** out);
  // The private pool an allocation on `stream` comes from now (nullptr: the default).
  PrivatePool* AllocationPoolLocked(xxnpuStream_t stream);
  // Records markers for frees deferred while captures were underway (see the top of the
  // file). Called WITHOUT mu_, like every call that queues work.
  void RecordDeferredMarkers(std::vector<Block*> blocks);
  void* UseBlockLocked(Block* block, size_t size, size_t requested, uint64_t context_id);
  void FreeBlockLocked(Block* block, uint64_t context_id);
  // Takes every whole free segment out of the default pools and of the private pools no
  // graph uses any more (or only of `pool`, if given), for ReleaseSegments.
  void TakeCachedSegmentsLocked(std::vector<Block*>* taken, PrivatePool* pool = nullptr);
  // Returns taken segments to the backend. Called WITHOUT mu_ (it takes it to account):
  // the backend's free waits for the device, see the .cc.
  absl::Status ReleaseSegments(const std::vector<Block*>& taken);
  absl::Status ProcessMarkersLocked();
  absl::Status UnknownPointerLocked(const char* api, const void* ptr) const;
  absl::Status OutOfMemoryLocked(size_t requested, size_t rounded, size_t segment_size,
                                 xxnpuStream_t stream, const absl::Status& cause);
  void RecordTraceLocked(TraceAction action, uint64_t addr, size_t size,
                         xxnpuStream_t stream, uint64_t context_id);
  void EmitActivityLocked(bool alloc, uint64_t addr, int64_t bytes, xxnpuStream_t stream);
  std::vector<TraceEntry> TraceInOrderLocked() const;

  std::unique_ptr<AllocatorBackend> owned_backend_;
  AllocatorBackend* const backend_;
  const int device_;
  const size_t max_split_size_;

  mutable SpinLock mu_;
  BlockSet small_pool_;
  BlockSet large_pool_;
  absl::flat_hash_map<MempoolId, std::unique_ptr<PrivatePool>> private_pools_;
  // The pools being allocated to, with their stream filters (usually empty: then
  // Allocate's only cost for pools is this emptiness check).
  std::vector<std::pair<PrivatePool*, std::function<bool(xxnpuStream_t)>>> allocating_;
  // Freed blocks whose markers wait for the end of the captures (see the top of the file).
  std::vector<Block*> deferred_;
  // Allocated blocks by address: the lookup of Free and RecordStream.
  absl::flat_hash_map<uintptr_t, Block*> allocated_;
  // Segments by base address, with their first block, which never changes (a split
  // keeps the front, a merge keeps the lower block).
  struct Segment {
    Block* head;
    size_t size;
  };
  std::map<uintptr_t, Segment> segments_;
  // Markers per stream, in recording order (a stream completes them in that order).
  absl::flat_hash_map<xxnpuStream_t, std::deque<PendingMarker>> pending_;
  size_t pending_count_ = 0;
  // Recycled Block objects (linked through Block::next) and set nodes: Allocate/Free in
  // steady state allocate nothing on the heap.
  Block* spare_blocks_ = nullptr;
  std::vector<BlockSet::node_type> spare_nodes_;

  DeviceStats stats_;
  bool fraction_set_ = false;
  double fraction_ = 1.0;
  size_t allowed_bytes_ = 0;  // fraction_ * capacity

  bool record_history_ = false;
  size_t history_max_ = 1;
  size_t history_next_ = 0;  // ring slot to overwrite once full
  std::vector<TraceEntry> history_;
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_CACHING_ALLOCATOR_H_
