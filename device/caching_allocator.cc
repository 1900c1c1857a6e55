// The xxnpu caching device allocator (see caching_allocator.h for the policy).
//
// Data structures
//   - A segment is one backend allocation. It is cut into Blocks that tile it exactly,
//     linked by prev/next in address order. The segment's first block is created with the
//     segment and stays its first block for its whole life: a split keeps the front part
//     in the existing Block and creates the remainder, and a merge always lets the lower
//     block absorb the higher one. So segments_ can map base address -> first block.
//   - A Block is in exactly one of three states:
//       allocated            handed out, in allocated_ (address -> Block);
//       pending              freed but waiting for markers (event_count > 0), only
//                            reachable from pending_;
//       free                 in its pool (small_pool_ or large_pool_).
//   - Pools are std::sets ordered by (stream, size, address), so lower_bound gives the
//     smallest free block on the stream that fits (best fit, lowest address on ties).
//
// The hot path (Allocate/Free of a size that is cached) allocates nothing: Block objects
// are recycled through a free list, and set nodes are moved between sets as node
// handles (C++17 extract/insert) instead of being freed and allocated again.
#include "device/caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "device/activity_trace.h"
#include "device/clock.h"
#include "device/env_flag.h"

namespace xxnpu {

namespace {

constexpr size_t kAggregate = static_cast<size_t>(StatType::AGGREGATE);
constexpr size_t kSmallPool = static_cast<size_t>(StatType::SMALL_POOL);
constexpr size_t kLargePool = static_cast<size_t>(StatType::LARGE_POOL);

// Beyond this, rounding could overflow; no device has that much memory anyway.
constexpr size_t kMaxRequest = std::numeric_limits<size_t>::max() / 4;

// How many spare set nodes to keep. Every free block owns one node, so spares only
// accumulate when the number of free blocks shrinks; a few hundred covers the churn of
// merges and splits without hoarding memory.
constexpr size_t kMaxSpareNodes = 256;

// Like CUDA's format_size: bytes below 1 KiB, else two decimals in KiB/MiB/GiB.
std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  if (bytes < (uint64_t{1} << 20)) return absl::StrFormat("%.2f KiB", bytes / 1024.0);
  if (bytes < (uint64_t{1} << 30)) {
    return absl::StrFormat("%.2f MiB", bytes / (1024.0 * 1024.0));
  }
  return absl::StrFormat("%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
}

std::string FormatBytesExact(uint64_t bytes) {
  if (bytes < 1024) return absl::StrCat(bytes, " bytes");
  return absl::StrCat(FormatBytes(bytes), " (", bytes, " bytes)");
}

// Stat updates run several times per Allocate/Free: keep them inline.
inline void Increase(Stat& stat, int64_t amount) {
  stat.current += amount;
  stat.peak = std::max(stat.peak, stat.current);
  stat.allocated += amount;
}

inline void Decrease(Stat& stat, int64_t amount) {
  stat.current -= amount;
  stat.freed += amount;
}

inline void UpdateOne(Stat& stat, int64_t delta) {
  if (delta > 0) {
    Increase(stat, delta);
  } else if (delta < 0) {
    Decrease(stat, -delta);
  }
}

// A change of one pool's stat, also counted in the aggregate.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline void UpdateStat(StatArray& stat, bool small,
                                                    int64_t delta) {
  UpdateOne(stat[kAggregate], delta);
  UpdateOne(stat[small ? kSmallPool : kLargePool], delta);
}

void ResetPeak(Stat& stat) { stat.peak = stat.current; }
void ResetAccumulated(Stat& stat) {
  stat.allocated = 0;
  stat.freed = 0;
}

template <typename Fn>
void ForEachStat(DeviceStats& s, Fn fn) {
  for (StatArray* array :
       {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes,
        &s.reserved_bytes, &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (Stat& stat : *array) fn(stat);
  }
  fn(s.oversize_allocations);
  fn(s.oversize_segments);
}

// XXNPU_MEMCHECK=1 (docs/device-runtime.md): the device puts guard pages around each of
// its allocations, which only catches an overrun if the block ends where the allocation
// does. So each block is its own segment of exactly the requested size (no rounding, no
// splitting), and a cached block is reused only for a request of the same size. Read once
// per process; a malformed value is the runtime's error to report, not ours.
bool ExactBlocks() {
  static const bool exact = ReadEnvFlag("XXNPU_MEMCHECK", false).value_or(false);
  return exact;
}

}  // namespace

size_t CachingAllocatorRoundSize(size_t bytes) {
  if (bytes < kMinBlockSize) return kMinBlockSize;
  return kMinBlockSize * ((bytes + kMinBlockSize - 1) / kMinBlockSize);
}

size_t CachingAllocatorSegmentSize(size_t rounded_size) {
  if (rounded_size <= kSmallSize) return kSmallBuffer;
  if (rounded_size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((rounded_size + kRoundLarge - 1) / kRoundLarge);
}

const char* TraceActionName(TraceAction action) {
  switch (action) {
    case TraceAction::ALLOC:
      return "alloc";
    case TraceAction::FREE_REQUESTED:
      return "free_requested";
    case TraceAction::FREE_COMPLETED:
      return "free_completed";
    case TraceAction::SEGMENT_ALLOC:
      return "segment_alloc";
    case TraceAction::SEGMENT_FREE:
      return "segment_free";
    case TraceAction::OOM:
      return "oom";
  }
  return "unknown";
}

const char* BlockStateName(BlockState state) {
  switch (state) {
    case BlockState::kActiveAllocated:
      return "active_allocated";
    case BlockState::kActivePendingFree:
      return "active_pending_free";
    case BlockState::kInactive:
      return "inactive";
  }
  return "unknown";
}

// ------------------------------------------------------------------ Block

struct CachingAllocator::Block {
  uintptr_t addr = 0;
  size_t size = 0;
  size_t requested_size = 0;  // caller's bytes while active
  xxnpuStream_t stream = nullptr;
  bool small = false;         // which pool (the segment's)
  PrivatePool* pool = nullptr;  // the segment's private pool (nullptr: the default pools)
  bool allocated = false;
  int event_count = 0;        // markers still pending after a Free
  Block* prev = nullptr;      // neighbours inside the segment, in address order
  Block* next = nullptr;      // (also the link of the spare-Block list)
  uint64_t context_id = 0;       // Allocate's while active, then the freeing call's
  uint64_t free_context_id = 0;  // of the Free, for FREE_COMPLETED after markers
  // Other streams that used the block (RecordStream). Usually zero or one.
  absl::InlinedVector<xxnpuStream_t, 2> stream_uses;
  // Position in its pool while free, so leaving the pool needs no search.
  BlockSet::iterator pool_it;

  bool IsSplit() const { return prev != nullptr || next != nullptr; }
  bool IsFree() const { return !allocated && event_count == 0; }
};

CachingAllocator::BlockKey CachingAllocator::BlockLess::KeyOf(const Block* b) {
  return BlockKey{reinterpret_cast<uintptr_t>(b->stream), b->size, b->addr};
}

// ------------------------------------------------------------------ construction

CachingAllocator::CachingAllocator(AllocatorBackend* backend, CachingAllocatorOptions options)
    : backend_(backend),
      device_(backend->Device()),
      max_split_size_(std::max(options.max_split_size, kLargeBuffer)) {
  stats_.max_split_size =
      max_split_size_ == kNoMaxSplitSize ? -1 : static_cast<int64_t>(max_split_size_);
  spare_nodes_.reserve(kMaxSpareNodes);
}

CachingAllocator::CachingAllocator(std::unique_ptr<AllocatorBackend> backend,
                                   CachingAllocatorOptions options)
    : CachingAllocator(backend.get(), options) {
  owned_backend_ = std::move(backend);
}

CachingAllocator::~CachingAllocator() {
  // No other thread may use the allocator any more, so the backend is called without mu_:
  // RawFree waits for the device, and the runtime may then destroy finished kernels'
  // captures on this thread, whose frees must not find mu_ taken (see Free).
  //
  // Markers still pending guard memory that other streams may be using: wait for them
  // before the memory goes back to the device. Errors cannot be reported from here.
  if (pending_count_ > 0) (void)backend_->Synchronize();
  for (auto& [stream, queue] : pending_) {
    for (const PendingMarker& p : queue) backend_->ReleaseMarker(p.marker);
  }
  pending_.clear();
  std::map<uintptr_t, Segment> segments;
  {
    std::lock_guard<SpinLock> lock(mu_);
    segments.swap(segments_);
  }
  for (auto& [addr, segment] : segments) {
    (void)backend_->RawFree(reinterpret_cast<void*>(addr));
    for (Block* b = segment.head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
  while (spare_blocks_ != nullptr) {
    Block* next = spare_blocks_->next;
    delete spare_blocks_;
    spare_blocks_ = next;
  }
}

// ------------------------------------------------------------------ block bookkeeping

CachingAllocator::Block* CachingAllocator::NewBlockLocked() {
  if (spare_blocks_ == nullptr) return new Block();
  Block* b = spare_blocks_;
  spare_blocks_ = b->next;
  b->next = nullptr;
  return b;
}

void CachingAllocator::RecycleBlockLocked(Block* block) {
  block->prev = nullptr;
  block->allocated = false;
  block->event_count = 0;
  block->requested_size = 0;
  block->context_id = 0;
  block->free_context_id = 0;
  block->stream_uses.clear();
  block->pool = nullptr;
  block->next = spare_blocks_;
  spare_blocks_ = block;
}

void CachingAllocator::PoolInsertLocked(Block* block) {
  BlockSet& pool = PoolOf(block->pool, block->small);
  if (spare_nodes_.empty()) {
    block->pool_it = pool.insert(block).first;
    return;
  }
  BlockSet::node_type node = std::move(spare_nodes_.back());
  spare_nodes_.pop_back();
  node.value() = block;
  block->pool_it = pool.insert(std::move(node)).position;
}

void CachingAllocator::PoolEraseLocked(Block* block) {
  BlockSet& pool = PoolOf(block->pool, block->small);
  if (spare_nodes_.size() < kMaxSpareNodes) {
    spare_nodes_.push_back(pool.extract(block->pool_it));
  } else {
    pool.erase(block->pool_it);
  }
}

bool CachingAllocator::ShouldSplitLocked(const Block* block, size_t size) const {
  const size_t remaining = block->size - size;
  if (block->small) return remaining >= kMinBlockSize;
  return size < max_split_size_ && remaining > kSmallSize;
}

CachingAllocator::Block* CachingAllocator::FindFreeBlockLocked(PrivatePool* private_pool, bool small,
                                                               xxnpuStream_t stream, size_t size) {
  BlockSet& pool = PoolOf(private_pool, small);
  const uintptr_t key_stream = reinterpret_cast<uintptr_t>(stream);
  auto it = pool.lower_bound(BlockKey{key_stream, size, 0});
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  if (ExactBlocks() && block->size != size) return nullptr;
  if (max_split_size_ != kNoMaxSplitSize) {
    // An unsplittable huge block would be wasted on a request below the limit, and a
    // request above it may only take a block that is not much larger.
    if (size < max_split_size_ && block->size >= max_split_size_) return nullptr;
    if (size >= max_split_size_ && block->size >= size + kLargeBuffer) return nullptr;
  }
  if (spare_nodes_.size() < kMaxSpareNodes) {
    spare_nodes_.push_back(pool.extract(it));
  } else {
    pool.erase(it);
  }
  return block;
}

// ------------------------------------------------------------------ segments

absl::Status CachingAllocator::AllocSegmentLocked(PrivatePool* pool, bool small, xxnpuStream_t stream,
                                                  size_t size, Block** out) {
  const size_t segment_size = ExactBlocks() ? size : CachingAllocatorSegmentSize(size);
  if (fraction_set_ &&
      static_cast<size_t>(stats_.reserved_bytes[kAggregate].current) + segment_size >
          allowed_bytes_) {
    return absl::ResourceExhaustedError(
        "a new segment would exceed the memory fraction's limit");
  }
  absl::StatusOr<void*> ptr = backend_->RawAlloc(segment_size);
  if (!ptr.ok()) return ptr.status();
  if (*ptr == nullptr) {
    return absl::InternalError(
        absl::StrCat("device ", device_, " returned nullptr for ", segment_size, " bytes"));
  }
  Block* block = NewBlockLocked();
  block->addr = reinterpret_cast<uintptr_t>(*ptr);
  block->size = segment_size;
  block->stream = stream;
  block->small = small;
  block->pool = pool;
  if (pool != nullptr) ++pool->segments;
  segments_.emplace(block->addr, Segment{block, segment_size});

  UpdateStat(stats_.segment, small, 1);
  UpdateStat(stats_.reserved_bytes, small, static_cast<int64_t>(segment_size));
  ++stats_.num_device_alloc;
  if (segment_size >= max_split_size_) Increase(stats_.oversize_segments, 1);
  if (record_history_) {
    RecordTraceLocked(TraceAction::SEGMENT_ALLOC, block->addr, segment_size, stream, 0);
  }
  *out = block;
  return absl::OkStatus();
}

void CachingAllocator::TakeCachedSegmentsLocked(std::vector<Block*>* taken, PrivatePool* only) {
  // Whole free segments leave their pool now, so nobody allocates from them while they
  // are being returned; they stay in segments_ (and snapshots) until RawFree succeeded.
  absl::InlinedVector<BlockSet*, 4> pools;
  if (only != nullptr) {
    pools = {&only->small_blocks, &only->large_blocks};
  } else {
    pools = {&small_pool_, &large_pool_};
    // A pool a graph still uses keeps its memory: the graph's replays write to it.
    for (auto& [id, pool] : private_pools_) {
      if (pool->use_count == 0) {
        pools.push_back(&pool->small_blocks);
        pools.push_back(&pool->large_blocks);
      }
    }
  }
  const size_t first = taken->size();
  for (BlockSet* pool : pools) {
    for (Block* b : *pool) {
      if (!b->IsSplit()) taken->push_back(b);
    }
  }
  for (size_t i = first; i < taken->size(); ++i) PoolEraseLocked((*taken)[i]);
}

absl::Status CachingAllocator::ReleaseSegments(const std::vector<Block*>& taken) {
  if (taken.empty()) return absl::OkStatus();
  // Without mu_: RawFree waits for the device (as cudaFree does), and while a host thread
  // waits the runtime destroys finished kernels' captures on it. A capture that owns a
  // tensor frees it into this allocator; with mu_ held that spun forever (issue 21).
  absl::InlinedVector<absl::Status, 16> results;
  results.reserve(taken.size());
  for (Block* b : taken) results.push_back(backend_->RawFree(reinterpret_cast<void*>(b->addr)));
  std::lock_guard<SpinLock> lock(mu_);
  absl::Status first_error;
  for (size_t i = 0; i < taken.size(); ++i) {
    Block* block = taken[i];
    if (!results[i].ok()) {
      PoolInsertLocked(block);  // still ours: keep it usable and consistent
      if (first_error.ok()) first_error = results[i];
      continue;
    }
    const bool small = block->small;
    UpdateStat(stats_.segment, small, -1);
    UpdateStat(stats_.reserved_bytes, small, -static_cast<int64_t>(block->size));
    ++stats_.num_device_free;
    if (block->size >= max_split_size_) Decrease(stats_.oversize_segments, 1);
    if (record_history_) {
      RecordTraceLocked(TraceAction::SEGMENT_FREE, block->addr, block->size, block->stream, 0);
    }
    segments_.erase(block->addr);
    if (block->pool != nullptr) --block->pool->segments;
    RecycleBlockLocked(block);
  }
  // A released pool goes with its last segment (no block points to it any more).
  for (auto it = private_pools_.begin(); it != private_pools_.end();) {
    const PrivatePool& p = *it->second;
    const bool forget = p.use_count == 0 && p.segments == 0 &&
                        std::none_of(allocating_.begin(), allocating_.end(),
                                     [&p](const auto& a) { return a.first == &p; });
    if (forget) {
      private_pools_.erase(it++);
    } else {
      ++it;
    }
  }
  return first_error;
}

// ------------------------------------------------------------------ handing out / taking back

void* CachingAllocator::UseBlockLocked(Block* block, size_t size, size_t requested,
                                       uint64_t context_id) {
  const bool small = block->small;
  const bool already_split = block->IsSplit();
  if (ShouldSplitLocked(block, size)) {
    // Keep the front, give the rest back to the pool as a new block.
    Block* rest = NewBlockLocked();
    rest->addr = block->addr + size;
    rest->size = block->size - size;
    rest->stream = block->stream;
    rest->small = small;
    rest->pool = block->pool;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = size;
    PoolInsertLocked(rest);
    if (already_split) {
      // An inactive split block shrank by what we hand out.
      UpdateStat(stats_.inactive_split_bytes, small, -static_cast<int64_t>(size));
    } else {
      // A whole segment became split: its remainder is a new inactive split block.
      UpdateStat(stats_.inactive_split, small, 1);
      UpdateStat(stats_.inactive_split_bytes, small, static_cast<int64_t>(rest->size));
    }
  } else if (already_split) {
    // An inactive split block becomes active as a whole.
    UpdateStat(stats_.inactive_split, small, -1);
    UpdateStat(stats_.inactive_split_bytes, small, -static_cast<int64_t>(block->size));
  }

  block->allocated = true;
  block->requested_size = requested;
  block->context_id = context_id;
  allocated_.emplace(block->addr, block);

  const int64_t bytes = static_cast<int64_t>(block->size);
  UpdateStat(stats_.allocation, small, 1);
  UpdateStat(stats_.allocated_bytes, small, bytes);
  UpdateStat(stats_.active, small, 1);
  UpdateStat(stats_.active_bytes, small, bytes);
  UpdateStat(stats_.requested_bytes, small, static_cast<int64_t>(requested));
  if (block->size >= max_split_size_) Increase(stats_.oversize_allocations, 1);
  return reinterpret_cast<void*>(block->addr);
}

void CachingAllocator::FreeBlockLocked(Block* block, uint64_t context_id) {
  // `block` is neither allocated nor pending any more: merge it with free neighbours and
  // put the result in the pool.
  const bool small = block->small;
  const size_t original_size = block->size;
  const size_t requested = block->requested_size;
  if (record_history_) {
    RecordTraceLocked(TraceAction::FREE_COMPLETED, block->addr, original_size, block->stream,
                      context_id);
  }
  block->requested_size = 0;

  int64_t net_inactive_blocks = 0;
  int64_t net_inactive_bytes = 0;
  if (Block* next = block->next; next != nullptr && next->IsFree()) {
    PoolEraseLocked(next);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) block->next->prev = block;
    net_inactive_blocks -= 1;
    net_inactive_bytes -= static_cast<int64_t>(next->size);
    RecycleBlockLocked(next);
  }
  if (Block* prev = block->prev; prev != nullptr && prev->IsFree()) {
    // The lower block absorbs this one (so a segment's first block never changes).
    PoolEraseLocked(prev);
    net_inactive_blocks -= 1;
    net_inactive_bytes -= static_cast<int64_t>(prev->size);
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next != nullptr) prev->next->prev = prev;
    RecycleBlockLocked(block);
    block = prev;
  }
  PoolInsertLocked(block);
  if (block->IsSplit()) {
    net_inactive_blocks += 1;
    net_inactive_bytes += static_cast<int64_t>(block->size);
  }

  // Inactive blocks carry the context of the Free that made them so.
  block->context_id = context_id;

  UpdateStat(stats_.inactive_split, small, net_inactive_blocks);
  UpdateStat(stats_.inactive_split_bytes, small, net_inactive_bytes);
  UpdateStat(stats_.active, small, -1);
  UpdateStat(stats_.active_bytes, small, -static_cast<int64_t>(original_size));
  UpdateStat(stats_.requested_bytes, small, -static_cast<int64_t>(requested));
}

// ------------------------------------------------------------------ markers

absl::Status CachingAllocator::ProcessMarkersLocked() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    std::deque<PendingMarker>& queue = it->second;
    while (!queue.empty()) {
      const PendingMarker p = queue.front();
      absl::StatusOr<bool> done = backend_->MarkerDone(p.marker);
      if (!done.ok()) return done.status();
      // A stream completes its markers in order: stop at its first pending one.
      if (!*done) break;
      queue.pop_front();
      backend_->ReleaseMarker(p.marker);
      --pending_count_;
      if (--p.block->event_count == 0) FreeBlockLocked(p.block, p.block->free_context_id);
    }
    if (queue.empty()) {
      pending_.erase(it++);
    } else {
      ++it;
    }
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------ history and tracing

void CachingAllocator::RecordTraceLocked(TraceAction action, uint64_t addr, size_t size,
                                         xxnpuStream_t stream, uint64_t context_id) {
  TraceEntry entry{action, addr, size, stream, context_id, NowNs()};
  if (history_.size() < history_max_) {
    history_.push_back(entry);
  } else {
    history_[history_next_] = entry;
    history_next_ = (history_next_ + 1) % history_max_;
  }
}

std::vector<TraceEntry> CachingAllocator::TraceInOrderLocked() const {
  // Until the ring is full history_next_ is 0, so this is also right then.
  std::vector<TraceEntry> out;
  out.reserve(history_.size());
  out.insert(out.end(), history_.begin() + static_cast<ptrdiff_t>(history_next_),
             history_.end());
  out.insert(out.end(), history_.begin(),
             history_.begin() + static_cast<ptrdiff_t>(history_next_));
  return out;
}

void CachingAllocator::EmitActivityLocked(bool alloc, uint64_t addr, int64_t bytes,
                                          xxnpuStream_t stream) {
  ActivityRecord record;
  record.kind = ActivityKind::kCachingAllocator;
  record.subkind = 1;  // the caching allocator (0 is the runtime's own malloc/free)
  record.name = alloc ? "xxnpu_caching_alloc" : "xxnpu_caching_free";
  record.start_ns = record.end_ns = TraceClockNow();
  record.correlation_id = ActivityNextCorrelationId();
  ActivityCaptureExternalIds(&record);
  record.device = device_;
  record.stream = backend_->StreamId(stream);
  record.thread_id = CurrentThreadId();
  record.bytes = bytes;
  record.address = addr;
  record.total_allocated = static_cast<uint64_t>(stats_.allocated_bytes[kAggregate].current);
  record.total_reserved = static_cast<uint64_t>(stats_.reserved_bytes[kAggregate].current);
  ActivityRecordEmit(record);
}

// ------------------------------------------------------------------ public API

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes, xxnpuStream_t stream,
                                                 uint64_t context_id) {
  if (bytes == 0) return nullptr;
  std::unique_lock<SpinLock> lock(mu_);
  // Blocks whose markers completed since the last call become reusable now.
  if (pending_count_ > 0) {
    if (absl::Status s = ProcessMarkersLocked(); !s.ok()) return s;
  }
  if (bytes > kMaxRequest) {
    return OutOfMemoryLocked(bytes, bytes, bytes, stream,
                             absl::ResourceExhaustedError("larger than any device"));
  }
  const size_t size = ExactBlocks() ? bytes : CachingAllocatorRoundSize(bytes);
  const bool small = size <= kSmallSize;
  PrivatePool* pool = allocating_.empty() ? nullptr : AllocationPoolLocked(stream);

  Block* block = FindFreeBlockLocked(pool, small, stream, size);
  if (block == nullptr) {
    absl::Status s = AllocSegmentLocked(pool, small, stream, size, &block);
    if (absl::IsResourceExhausted(s)) {
      // Out of memory: wait for pending markers, give every fully free cached segment
      // (of both pools, all streams) back to the device and try once more. Completed
      // markers may also have returned a block that fits, so search the pool again.
      //
      // Both waits for the device happen without mu_ (see ReleaseSegments): the thread
      // that waits may have to free memory into this allocator meanwhile. Other threads
      // may allocate in between; the retry takes whatever is left then, as it would
      // after any other thread's allocation.
      ++stats_.num_sync_all_streams;
      if (pending_count_ > 0) {
        lock.unlock();
        absl::Status sync = backend_->Synchronize();
        lock.lock();
        if (!sync.ok()) return sync;
        if (absl::Status p = ProcessMarkersLocked(); !p.ok()) return p;
      }
      std::vector<Block*> taken;
      TakeCachedSegmentsLocked(&taken);
      lock.unlock();
      absl::Status rel = ReleaseSegments(taken);
      lock.lock();
      if (!rel.ok()) return rel;
      ++stats_.num_alloc_retries;
      // The pools may have changed while unlocked (a capture ended or began).
      pool = allocating_.empty() ? nullptr : AllocationPoolLocked(stream);
      block = FindFreeBlockLocked(pool, small, stream, size);
      if (block == nullptr) s = AllocSegmentLocked(pool, small, stream, size, &block);
      if (block == nullptr && absl::IsResourceExhausted(s)) {
        return OutOfMemoryLocked(bytes, size, ExactBlocks() ? size : CachingAllocatorSegmentSize(size), stream, s);
      }
    }
    if (block == nullptr) return s;  // a device error other than out-of-memory
  }

  void* ptr = UseBlockLocked(block, size, bytes, context_id);
  if (record_history_) {
    RecordTraceLocked(TraceAction::ALLOC, block->addr, block->size, stream, context_id);
  }
  if (ActivityEnabled(ActivityKind::kCachingAllocator)) {
    EmitActivityLocked(true, block->addr, static_cast<int64_t>(block->size), stream);
  }
  return ptr;
}

absl::Status CachingAllocator::OutOfMemoryLocked(size_t requested, size_t rounded,
                                                 size_t segment_size, xxnpuStream_t stream,
                                                 const absl::Status& cause) {
  const size_t device_free = backend_->FreeBytes();
  const size_t capacity = backend_->Capacity();
  ++stats_.num_ooms;
  if (record_history_) RecordTraceLocked(TraceAction::OOM, device_free, rounded, stream, 0);
  const uint64_t allocated = static_cast<uint64_t>(stats_.allocated_bytes[kAggregate].current);
  const uint64_t reserved = static_cast<uint64_t>(stats_.reserved_bytes[kAggregate].current);
  std::string message = absl::StrCat(
      "xxnpu out of memory on device ", device_, ". Tried to allocate ",
      FormatBytesExact(requested));
  if (segment_size > rounded) {
    absl::StrAppend(&message, ", which needs a new segment of ", FormatBytes(segment_size));
  }
  absl::StrAppend(&message, ". Device ", device_, " has a total capacity of ",
                  FormatBytesExact(capacity), " of which ", FormatBytesExact(device_free),
                  " is free. ", FormatBytesExact(allocated),
                  " is already allocated by the caching allocator and ",
                  FormatBytesExact(reserved), " is reserved in total by the allocator (",
                  FormatBytesExact(reserved - std::min(reserved, allocated)),
                  " reserved but unallocated).");
  if (fraction_set_) {
    absl::StrAppend(&message, " The memory fraction ", fraction_, " limits it to ",
                    FormatBytesExact(allowed_bytes_), ".");
  }
  absl::StrAppend(&message, " Cause: ", cause.message());
  return absl::ResourceExhaustedError(message);
}

absl::Status CachingAllocator::UnknownPointerLocked(const char* api, const void* ptr) const {
  // Cold path: say whether the pointer is at least ours (then most likely a double free)
  // or foreign.
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  auto seg = segments_.upper_bound(addr);
  const bool inside = seg != segments_.begin() &&
                      addr < std::prev(seg)->first + std::prev(seg)->second.size;
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s(%p) on device %d: %s", api, ptr, device_,
      inside ? "not a live allocation (already freed? a double free)"
             : "not a pointer of this allocator (unknown pointer)"));
}

absl::Status CachingAllocator::Free(void* ptr, uint64_t context_id) {
  if (ptr == nullptr) return absl::OkStatus();
  std::unique_lock<SpinLock> lock(mu_);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  auto it = allocated_.find(addr);
  if (it == allocated_.end()) return UnknownPointerLocked("Free", ptr);
  Block* block = it->second;

  // Record the markers first, so that a failure leaves the block allocated as it was.
  // Without mu_: recording queues a command on the stream, and the runtime may then
  // destroy finished kernels' captures on this thread, which may free memory here.
  // RecordStream may add uses meanwhile: loop until every use has its marker.
  absl::InlinedVector<MarkerId, 2> markers;
  // While a capture is underway the markers wait for its end (see the header).
  const bool defer = !allocating_.empty() && !block->stream_uses.empty();
  while (!defer && markers.size() < block->stream_uses.size()) {
    const absl::InlinedVector<xxnpuStream_t, 2> uses(
        block->stream_uses.begin() + static_cast<ptrdiff_t>(markers.size()), block->stream_uses.end());
    lock.unlock();
    absl::Status failed;
    for (xxnpuStream_t use : uses) {
      absl::StatusOr<MarkerId> marker = backend_->RecordMarker(use);
      if (!marker.ok()) {
        failed = absl::Status(marker.status().code(),
                              absl::StrFormat("Free(%p): recording a marker on stream %p failed, "
                                              "the block stays allocated: %s",
                                              ptr, static_cast<void*>(use), marker.status().message()));
        break;
      }
      markers.push_back(*marker);
    }
    if (!failed.ok()) {
      for (MarkerId m : markers) backend_->ReleaseMarker(m);
      return failed;
    }
    lock.lock();
    it = allocated_.find(addr);
    if (it == allocated_.end() || it->second != block) {
      // Another thread freed it meanwhile: a double free.
      lock.unlock();
      for (MarkerId m : markers) backend_->ReleaseMarker(m);
      lock.lock();
      return UnknownPointerLocked("Free", ptr);
    }
  }

  allocated_.erase(it);
  block->allocated = false;
  const bool small = block->small;
  UpdateStat(stats_.allocation, small, -1);
  UpdateStat(stats_.allocated_bytes, small, -static_cast<int64_t>(block->size));
  if (block->size >= max_split_size_) Decrease(stats_.oversize_allocations, 1);
  if (record_history_) {
    RecordTraceLocked(TraceAction::FREE_REQUESTED, addr, block->size, block->stream,
                      context_id);
  }
  if (ActivityEnabled(ActivityKind::kCachingAllocator)) {
    EmitActivityLocked(false, addr, -static_cast<int64_t>(block->size), block->stream);
  }

  if (defer) {
    block->event_count = 1;  // pending, with its markers still to record
    block->free_context_id = context_id;
    deferred_.push_back(block);
    return absl::OkStatus();
  }
  if (markers.empty()) {
    FreeBlockLocked(block, context_id);
    return absl::OkStatus();
  }
  for (size_t i = 0; i < markers.size(); ++i) {
    pending_[block->stream_uses[i]].push_back(PendingMarker{markers[i], block});
  }
  block->event_count = static_cast<int>(markers.size());
  block->free_context_id = context_id;
  pending_count_ += markers.size();
  block->stream_uses.clear();
  return absl::OkStatus();
}

absl::Status CachingAllocator::RecordStream(void* ptr, xxnpuStream_t stream) {
  std::lock_guard<SpinLock> lock(mu_);
  auto it = allocated_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocated_.end()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "RecordStream(%p) on device %d: not a live allocation of this allocator", ptr,
        device_));
  }
  Block* block = it->second;
  // Uses on the allocation stream need nothing: stream order already protects them.
  if (stream == block->stream) return absl::OkStatus();
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) ==
      block->stream_uses.end()) {
    block->stream_uses.push_back(stream);
  }
  return absl::OkStatus();
}

absl::Status CachingAllocator::EmptyCache() {
  std::vector<Block*> taken;
  {
    std::lock_guard<SpinLock> lock(mu_);
    if (pending_count_ > 0) {
      if (absl::Status s = ProcessMarkersLocked(); !s.ok()) return s;
    }
    TakeCachedSegmentsLocked(&taken);
  }
  return ReleaseSegments(taken);  // without mu_: see there
}

// ------------------------------------------------------------------ private pools

MempoolId NewMempoolId() {
  static std::atomic<uint64_t> next{0};
  return {0, next.fetch_add(1, std::memory_order_relaxed) + 1};
}

CachingAllocator::PrivatePool* CachingAllocator::AllocationPoolLocked(xxnpuStream_t stream) {
  for (auto& [pool, filter] : allocating_) {
    if (filter(stream)) return pool;
  }
  return nullptr;
}

static std::string PoolName(MempoolId id) { return absl::StrCat("(", id.first, ", ", id.second, ")"); }

absl::Status CachingAllocator::BeginAllocateToPool(MempoolId id, std::function<bool(xxnpuStream_t)> filter) {
  if (id == MempoolId{0, 0}) {
    return absl::InvalidArgumentError(
        "BeginAllocateToPool: pool id (0, 0) names the default pools; expected a private pool's id "
        "(NewMempoolId, or a capture's)");
  }
  if (!filter) return absl::InvalidArgumentError("BeginAllocateToPool: empty stream filter");
  std::lock_guard<SpinLock> lock(mu_);
  std::unique_ptr<PrivatePool>& slot = private_pools_[id];
  if (slot == nullptr) {
    slot = std::make_unique<PrivatePool>();
    slot->id = id;
  }
  PrivatePool* pool = slot.get();
  for (const auto& [p, f] : allocating_) {
    if (p == pool) {
      return absl::FailedPreconditionError(absl::StrCat("BeginAllocateToPool: pool ", PoolName(id), " on device ",
                                                        device_, " is already being allocated to (one capture "
                                                        "into a pool at a time)"));
    }
  }
  ++pool->use_count;
  allocating_.emplace_back(pool, std::move(filter));
  return absl::OkStatus();
}

absl::Status CachingAllocator::EndAllocateToPool(MempoolId id) {
  std::vector<Block*> deferred;
  {
    std::lock_guard<SpinLock> lock(mu_);
    auto it = std::find_if(allocating_.begin(), allocating_.end(),
                           [&id](const auto& a) { return a.first->id == id; });
    if (it == allocating_.end()) {
      return absl::FailedPreconditionError(absl::StrCat("EndAllocateToPool: pool ", PoolName(id), " on device ",
                                                        device_, " is not being allocated to"));
    }
    allocating_.erase(it);
    if (allocating_.empty()) deferred.swap(deferred_);
  }
  if (!deferred.empty()) RecordDeferredMarkers(std::move(deferred));
  return absl::OkStatus();
}

void CachingAllocator::RecordDeferredMarkers(std::vector<Block*> blocks) {
  // Taken out of deferred_ under mu_: no other thread reaches these blocks meanwhile.
  std::vector<std::pair<xxnpuStream_t, MarkerId>> recorded;
  for (Block* block : blocks) {
    const size_t first = recorded.size();
    for (xxnpuStream_t use : block->stream_uses) {
      // A stream that cannot take a marker any more was destroyed, which finishes its
      // work: nothing on it can still use the block.
      if (absl::StatusOr<MarkerId> m = backend_->RecordMarker(use); m.ok()) recorded.emplace_back(use, *m);
    }
    std::lock_guard<SpinLock> lock(mu_);
    block->stream_uses.clear();
    block->event_count = static_cast<int>(recorded.size() - first);
    for (size_t i = first; i < recorded.size(); ++i) {
      pending_[recorded[i].first].push_back(PendingMarker{recorded[i].second, block});
      ++pending_count_;
    }
    if (block->event_count == 0) FreeBlockLocked(block, block->free_context_id);
  }
}

absl::Status CachingAllocator::ReleasePool(MempoolId id) {
  std::vector<Block*> taken;
  {
    std::lock_guard<SpinLock> lock(mu_);
    auto it = private_pools_.find(id);
    if (it == private_pools_.end() || it->second->use_count == 0) {
      return absl::InvalidArgumentError(absl::StrCat("ReleasePool: pool ", PoolName(id), " on device ", device_,
                                                     " has no user to release (released already?)"));
    }
    PrivatePool* pool = it->second.get();
    for (const auto& [p, f] : allocating_) {
      if (p == pool) {
        return absl::FailedPreconditionError(absl::StrCat("ReleasePool: pool ", PoolName(id), " on device ",
                                                          device_, " is being allocated to (EndAllocateToPool first)"));
      }
    }
    if (--pool->use_count > 0) return absl::OkStatus();
    TakeCachedSegmentsLocked(&taken, pool);
  }
  // Without mu_ (see ReleaseSegments); it also forgets the pool once it holds nothing.
  if (taken.empty()) {
    std::lock_guard<SpinLock> lock(mu_);
    auto it = private_pools_.find(id);
    if (it != private_pools_.end() && it->second->use_count == 0 && it->second->segments == 0) {
      private_pools_.erase(it);
    }
    return absl::OkStatus();
  }
  return ReleaseSegments(taken);
}

std::vector<PoolInfo> CachingAllocator::PrivatePools() const {
  std::lock_guard<SpinLock> lock(mu_);
  std::vector<PoolInfo> out;
  for (const auto& [id, pool] : private_pools_) {
    PoolInfo& info = out.emplace_back();
    info.id = id;
    info.use_count = pool->use_count;
    info.segments = pool->segments;
    info.allocating = std::any_of(allocating_.begin(), allocating_.end(),
                                  [p = pool.get()](const auto& a) { return a.first == p; });
  }
  for (const auto& [addr, segment] : segments_) {
    if (segment.head->pool == nullptr) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const PoolInfo& i) { return i.id == segment.head->pool->id; });
    it->reserved_bytes += segment.size;
    for (const Block* b = segment.head; b != nullptr; b = b->next) {
      if (!b->allocated) continue;
      it->allocated_bytes += b->size;
      ++it->allocations;
    }
  }
  std::sort(out.begin(), out.end(), [](const PoolInfo& a, const PoolInfo& b) { return a.id < b.id; });
  return out;
}

absl::Status CachingAllocator::SetMemoryFraction(double fraction) {
  if (!(fraction >= 0.0 && fraction <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SetMemoryFraction: the fraction must be within [0, 1], got ", fraction));
  }
  const size_t capacity = backend_->Capacity();
  std::lock_guard<SpinLock> lock(mu_);
  fraction_set_ = true;
  fraction_ = fraction;
  allowed_bytes_ = static_cast<size_t>(fraction * static_cast<double>(capacity));
  return absl::OkStatus();
}

double CachingAllocator::GetMemoryFraction() const {
  std::lock_guard<SpinLock> lock(mu_);
  return fraction_;
}

DeviceStats CachingAllocator::GetStats() const {
  std::lock_guard<SpinLock> lock(mu_);
  return stats_;
}

void CachingAllocator::ResetPeakStats() {
  std::lock_guard<SpinLock> lock(mu_);
  ForEachStat(stats_, ResetPeak);
}

void CachingAllocator::ResetAccumulatedStats() {
  std::lock_guard<SpinLock> lock(mu_);
  ForEachStat(stats_, ResetAccumulated);
  stats_.num_alloc_retries = 0;
  stats_.num_ooms = 0;
  stats_.num_sync_all_streams = 0;
  stats_.num_device_alloc = 0;
  stats_.num_device_free = 0;
}

void CachingAllocator::RecordHistory(bool enabled, size_t max_entries) {
  std::lock_guard<SpinLock> lock(mu_);
  record_history_ = enabled;
  if (!enabled) {
    history_.clear();
    history_.shrink_to_fit();
    history_next_ = 0;
    return;
  }
  // Keep the newest entries that fit the new bound, in order, with the ring restarted.
  const size_t new_max = std::max<size_t>(1, max_entries);
  std::vector<TraceEntry> kept = TraceInOrderLocked();
  if (kept.size() > new_max) {
    kept.erase(kept.begin(), kept.end() - static_cast<ptrdiff_t>(new_max));
  }
  // No reserve(new_max): callers pass generous bounds (PyTorch users often ask for
  // 100000 entries); the ring grows only as far as it is actually filled.
  history_ = std::move(kept);
  history_next_ = 0;
  history_max_ = new_max;
}

bool CachingAllocator::IsRecordingHistory() const {
  std::lock_guard<SpinLock> lock(mu_);
  return record_history_;
}

MemorySnapshot CachingAllocator::Snapshot() const {
  std::lock_guard<SpinLock> lock(mu_);
  MemorySnapshot snapshot;
  snapshot.device = device_;
  snapshot.segments.reserve(segments_.size());
  for (const auto& [addr, segment] : segments_) {
    SegmentInfo& seg = snapshot.segments.emplace_back();
    seg.address = addr;
    seg.total_size = segment.size;
    seg.stream = segment.head->stream;
    seg.is_large = !segment.head->small;
    if (segment.head->pool != nullptr) seg.pool_id = segment.head->pool->id;
    for (const Block* b = segment.head; b != nullptr; b = b->next) {
      BlockInfo& info = seg.blocks.emplace_back();
      info.address = b->addr;
      info.size = b->size;
      info.context_id = b->context_id;
      if (b->allocated) {
        info.state = BlockState::kActiveAllocated;
        seg.allocated_size += b->size;
      } else if (b->event_count > 0) {
        info.state = BlockState::kActivePendingFree;
      } else {
        info.state = BlockState::kInactive;
      }
      if (info.state != BlockState::kInactive) {
        info.requested_size = b->requested_size;
        seg.active_size += b->size;
        seg.requested_size += b->requested_size;
      }
    }
  }
  snapshot.trace = TraceInOrderLocked();
  return snapshot;
}

absl::StatusOr<CachingAllocator::SegmentRange> CachingAllocator::GetBaseAllocation(
    const void* ptr) const {
  std::lock_guard<SpinLock> lock(mu_);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(ptr);
  auto it = segments_.upper_bound(addr);
  if (it != segments_.begin()) {
    --it;
    if (addr < it->first + it->second.size) {
      return SegmentRange{reinterpret_cast<void*>(it->first), it->second.size};
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "GetBaseAllocation(%p): not inside a segment of device %d's allocator", ptr, device_));
}

absl::StatusOr<size_t> CachingAllocator::BlockSize(const void* ptr) const {
  std::lock_guard<SpinLock> lock(mu_);
  auto it = allocated_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == allocated_.end()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("BlockSize(%p): not an allocated block of device %d's allocator", ptr, device_));
  }
  return it->second->size;
}

}  // namespace xxnpu
