// Unit tests of the caching allocator against the fake device (fake_allocator_backend.h):
// size policy, splitting/merging, stream semantics, memory fraction, OOM handling,
// errors, statistics, history, snapshots, activity records and thread safety.
#include "device/caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "device/activity_trace.h"
#include "device/fake_allocator_backend.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kAgg = static_cast<size_t>(StatType::AGGREGATE);
constexpr size_t kSmall = static_cast<size_t>(StatType::SMALL_POOL);
constexpr size_t kLarge = static_cast<size_t>(StatType::LARGE_POOL);

uintptr_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

void* MustAlloc(CachingAllocator& a, size_t bytes, xxnpuStream_t stream = nullptr,
                uint64_t context = 0) {
  absl::StatusOr<void*> p = a.Allocate(bytes, stream, context);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : nullptr;
}

void ExpectStat(const Stat& s, int64_t current, int64_t peak, int64_t allocated,
                int64_t freed) {
  EXPECT_EQ(s.current, current);
  EXPECT_EQ(s.peak, peak);
  EXPECT_EQ(s.allocated, allocated);
  EXPECT_EQ(s.freed, freed);
}

class CachingAllocatorTest : public ::testing::Test {
 protected:
  FakeAllocatorBackend backend_{size_t{1} << 30};
  CachingAllocator alloc_{&backend_};
  const xxnpuStream_t a_ = FakeStream(1);
  const xxnpuStream_t b_ = FakeStream(2);
  const xxnpuStream_t c_ = FakeStream(3);
};

// ------------------------------------------------------------------ size policy

TEST(CachingAllocatorPolicyTest, RoundsTo512Bytes) {
  EXPECT_EQ(CachingAllocatorRoundSize(1), 512u);
  EXPECT_EQ(CachingAllocatorRoundSize(511), 512u);
  EXPECT_EQ(CachingAllocatorRoundSize(512), 512u);
  EXPECT_EQ(CachingAllocatorRoundSize(513), 1024u);
  EXPECT_EQ(CachingAllocatorRoundSize(kMiB + 1), kMiB + 512);
}

TEST(CachingAllocatorPolicyTest, SegmentSizes) {
  EXPECT_EQ(CachingAllocatorSegmentSize(512), 2 * kMiB);
  EXPECT_EQ(CachingAllocatorSegmentSize(kMiB), 2 * kMiB);
  EXPECT_EQ(CachingAllocatorSegmentSize(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocatorSegmentSize(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(CachingAllocatorSegmentSize(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(CachingAllocatorSegmentSize(11 * kMiB), 12 * kMiB);
  EXPECT_EQ(CachingAllocatorSegmentSize(12 * kMiB + 512), 14 * kMiB);
}

TEST_F(CachingAllocatorTest, AllocationsAreRoundedUp) {
  void* p = MustAlloc(alloc_, 1);
  DeviceStats s = alloc_.GetStats();
  EXPECT_EQ(s.allocated_bytes[kAgg].current, 512);
  EXPECT_EQ(s.requested_bytes[kAgg].current, 1);
  void* q = MustAlloc(alloc_, 513);
  EXPECT_EQ(Addr(q), Addr(p) + 512);  // carved right after p from the same segment
  EXPECT_EQ(alloc_.GetStats().allocated_bytes[kAgg].current, 512 + 1024);
  ASSERT_TRUE(alloc_.Free(p).ok());
  ASSERT_TRUE(alloc_.Free(q).ok());
}

TEST_F(CachingAllocatorTest, BlockSizeOfAllocatedBlocksOnly) {
  void* p = MustAlloc(alloc_, 1000);
  EXPECT_EQ(*alloc_.BlockSize(p), 1024u);
  EXPECT_FALSE(alloc_.BlockSize(static_cast<char*>(p) + 512).ok());
  ASSERT_TRUE(alloc_.Free(p).ok());
  EXPECT_EQ(alloc_.BlockSize(p).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CachingAllocatorTest, ZeroBytesIsNullptrWithoutDevice) {
  absl::StatusOr<void*> p = alloc_.Allocate(0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, nullptr);
  EXPECT_EQ(backend_.alloc_calls(), 0);
  EXPECT_EQ(alloc_.GetStats().allocation[kAgg].allocated, 0);
  EXPECT_TRUE(alloc_.Free(nullptr).ok());
}

TEST_F(CachingAllocatorTest, SmallPoolUses2MiBSegments) {
  void* p = MustAlloc(alloc_, kMiB);  // the largest small request
  auto live = backend_.live();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live.begin()->first, Addr(p));
  EXPECT_EQ(live.begin()->second, 2 * kMiB);
  DeviceStats s = alloc_.GetStats();
  EXPECT_EQ(s.segment[kSmall].current, 1);
  EXPECT_EQ(s.segment[kLarge].current, 0);
  EXPECT_EQ(s.reserved_bytes[kSmall].current, static_cast<int64_t>(2 * kMiB));
  // The second MiB of the segment serves the next small request.
  void* q = MustAlloc(alloc_, kMiB);
  EXPECT_EQ(Addr(q), Addr(p) + kMiB);
  EXPECT_EQ(backend_.alloc_calls(), 1);
}

TEST_F(CachingAllocatorTest, LargePoolSegmentSizes) {
  // (big first: it would otherwise fit in the rest of mid's segment)
  void* big = MustAlloc(alloc_, 11 * kMiB);  // >= 10 MiB: rounded up to 2 MiB
  void* mid = MustAlloc(alloc_, kMiB + 1);   // > 1 MiB: a 20 MiB segment
  auto live = backend_.live();
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live.at(Addr(mid)), 20 * kMiB);
  EXPECT_EQ(live.at(Addr(big)), 12 * kMiB);
  DeviceStats s = alloc_.GetStats();
  EXPECT_EQ(s.segment[kLarge].current, 2);
  EXPECT_EQ(s.segment[kSmall].current, 0);
  // The 1 MiB left in the 12 MiB segment is not worth a split (> 1 MiB needed), so the
  // block is the whole segment; the 20 MiB segment was split.
  EXPECT_EQ(s.allocated_bytes[kLarge].current,
            static_cast<int64_t>(kMiB + 512 + 12 * kMiB));
  EXPECT_EQ(s.inactive_split[kLarge].current, 1);
  EXPECT_EQ(s.inactive_split_bytes[kLarge].current,
            static_cast<int64_t>(20 * kMiB - kMiB - 512));
  // A second mid-size request is carved from the 20 MiB segment's remainder.
  void* mid2 = MustAlloc(alloc_, 2 * kMiB);
  EXPECT_EQ(Addr(mid2), Addr(mid) + kMiB + 512);
  EXPECT_EQ(backend_.alloc_calls(), 2);
}

TEST_F(CachingAllocatorTest, LargeRemainderOfOneMiBIsNotSplit) {
  // 19 MiB from a 20 MiB segment leaves exactly 1 MiB: the large pool needs > 1 MiB.
  void* p = MustAlloc(alloc_, 19 * kMiB);
  EXPECT_EQ(alloc_.GetStats().allocated_bytes[kLarge].current,
            static_cast<int64_t>(20 * kMiB));
  ASSERT_TRUE(alloc_.Free(p).ok());
  // Small pool: a remainder of exactly 512 B is split off.
  void* q = MustAlloc(alloc_, kMiB);
  void* r = MustAlloc(alloc_, kMiB - 512);
  DeviceStats s = alloc_.GetStats();
  EXPECT_EQ(s.allocated_bytes[kSmall].current, static_cast<int64_t>(2 * kMiB - 512));
  EXPECT_EQ(s.inactive_split_bytes[kSmall].current, 512);
  ASSERT_TRUE(alloc_.Free(q).ok());
  ASSERT_TRUE(alloc_.Free(r).ok());
}

// ------------------------------------------------------------------ split and merge

TEST_F(CachingAllocatorTest, FreeInAnyOrderMergesBackIntoOneBlock) {
  std::vector<int> order = {0, 1, 2};
  do {
    std::vector<void*> ptrs = {MustAlloc(alloc_, 4 * kKiB), MustAlloc(alloc_, 8 * kKiB),
                               MustAlloc(alloc_, 12 * kKiB)};
    EXPECT_EQ(Addr(ptrs[1]), Addr(ptrs[0]) + 4 * kKiB);
    EXPECT_EQ(Addr(ptrs[2]), Addr(ptrs[1]) + 8 * kKiB);
    for (int i : order) ASSERT_TRUE(alloc_.Free(ptrs[i]).ok());
    MemorySnapshot snap = alloc_.Snapshot();
    ASSERT_EQ(snap.segments.size(), 1u);
    ASSERT_EQ(snap.segments[0].blocks.size(), 1u) << "order " << order[0] << order[1]
                                                  << order[2];
    EXPECT_EQ(snap.segments[0].blocks[0].size, 2 * kMiB);
    EXPECT_EQ(snap.segments[0].blocks[0].state, BlockState::kInactive);
    DeviceStats s = alloc_.GetStats();
    EXPECT_EQ(s.inactive_split[kAgg].current, 0);
    EXPECT_EQ(s.inactive_split_bytes[kAgg].current, 0);
    EXPECT_EQ(s.active[kAgg].current, 0);
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(backend_.alloc_calls(), 1);  // every round reused the one segment
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_EQ(backend_.free_calls(), 1);
  EXPECT_EQ(backend_.outstanding_allocs(), 0u);
  EXPECT_EQ(alloc_.GetStats().reserved_bytes[kAgg].current, 0);
}

TEST_F(CachingAllocatorTest, MiddleFreeBlockMergesWithBothNeighbours) {
  void* p = MustAlloc(alloc_, 4 * kKiB);
  void* q = MustAlloc(alloc_, 4 * kKiB);
  void* r = MustAlloc(alloc_, 4 * kKiB);
  void* s = MustAlloc(alloc_, 4 * kKiB);  // keeps the tail separate
  ASSERT_TRUE(alloc_.Free(p).ok());
  ASSERT_TRUE(alloc_.Free(r).ok());
  EXPECT_EQ(alloc_.GetStats().inactive_split[kAgg].current, 3);  // p, r, tail
  ASSERT_TRUE(alloc_.Free(q).ok());  // p+q+r become one block
  DeviceStats st = alloc_.GetStats();
  EXPECT_EQ(st.inactive_split[kAgg].current, 2);
  EXPECT_EQ(st.inactive_split_bytes[kAgg].current, static_cast<int64_t>(2 * kMiB - 4 * kKiB));
  // A 12 KiB request fits exactly into the merged hole.
  EXPECT_EQ(MustAlloc(alloc_, 12 * kKiB), p);
  ASSERT_TRUE(alloc_.Free(p).ok());
  ASSERT_TRUE(alloc_.Free(s).ok());
}

TEST_F(CachingAllocatorTest, EmptyCacheKeepsSegmentsInUse) {
  void* p = MustAlloc(alloc_, 4 * kKiB);
  void* q = MustAlloc(alloc_, 3 * kMiB);
  ASSERT_TRUE(alloc_.Free(q).ok());
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_EQ(backend_.free_calls(), 1);  // the large segment only
  auto live = backend_.live();
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live.begin()->first, Addr(p));
  ASSERT_TRUE(alloc_.Free(p).ok());
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_EQ(backend_.outstanding_allocs(), 0u);
}

TEST_F(CachingAllocatorTest, AdjacentSegmentsNeverMerge) {
  // The fake places segments back to back: the blocks touch across the boundary but
  // belong to different segments.
  void* p = MustAlloc(alloc_, kMiB);
  void* q = MustAlloc(alloc_, kMiB);
  void* r = MustAlloc(alloc_, kMiB);  // second segment, right after the first
  EXPECT_EQ(Addr(r), Addr(p) + 2 * kMiB);
  ASSERT_TRUE(alloc_.Free(q).ok());
  ASSERT_TRUE(alloc_.Free(r).ok());
  ASSERT_TRUE(alloc_.Free(p).ok());
  MemorySnapshot snap = alloc_.Snapshot();
  ASSERT_EQ(snap.segments.size(), 2u);
  for (const SegmentInfo& seg : snap.segments) {
    ASSERT_EQ(seg.blocks.size(), 1u);
    EXPECT_EQ(seg.blocks[0].size, 2 * kMiB);
  }
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_EQ(backend_.free_calls(), 2);
  EXPECT_EQ(backend_.outstanding_allocs(), 0u);
}

TEST_F(CachingAllocatorTest, BestFitPrefersTheSmallestSufficientBlock) {
  void* p1 = MustAlloc(alloc_, 64 * kKiB);
  void* sep1 = MustAlloc(alloc_, 512);
  void* p2 = MustAlloc(alloc_, 16 * kKiB);
  void* sep2 = MustAlloc(alloc_, 512);
  ASSERT_TRUE(alloc_.Free(p1).ok());
  ASSERT_TRUE(alloc_.Free(p2).ok());
  // 16 KiB hole beats the 64 KiB hole and the tail.
  EXPECT_EQ(MustAlloc(alloc_, 10 * kKiB), p2);
  // 32 KiB: the 64 KiB hole is the best fit.
  EXPECT_EQ(MustAlloc(alloc_, 32 * kKiB), p1);
  for (void* ptr : {p1, p2, sep1, sep2}) ASSERT_TRUE(alloc_.Free(ptr).ok());
}

// ------------------------------------------------------------------ streams

TEST_F(CachingAllocatorTest, SameStreamReuseNeedsNoDevice) {
  void* p = MustAlloc(alloc_, 256 * kKiB, a_);
  ASSERT_TRUE(alloc_.Free(p).ok());
  for (int i = 0; i < 100; ++i) {
    void* q = MustAlloc(alloc_, 256 * kKiB, a_);
    EXPECT_EQ(q, p);
    ASSERT_TRUE(alloc_.Free(q).ok());
  }
  EXPECT_EQ(backend_.alloc_calls(), 1);
  EXPECT_EQ(backend_.free_calls(), 0);
  EXPECT_EQ(backend_.live_markers(), 0u);
}

TEST_F(CachingAllocatorTest, BlocksBelongToTheirStream) {
  void* p = MustAlloc(alloc_, 4 * kKiB, a_);
  ASSERT_TRUE(alloc_.Free(p).ok());
  void* q = MustAlloc(alloc_, 4 * kKiB, b_);  // not from a_'s cached segment
  EXPECT_NE(q, p);
  EXPECT_EQ(backend_.alloc_calls(), 2);
  ASSERT_TRUE(alloc_.Free(q).ok());
}

TEST_F(CachingAllocatorTest, RecordStreamDelaysReuseUntilMarkerCompletes) {
  void* p = MustAlloc(alloc_, 64 * kKiB, a_);
  void* keep = MustAlloc(alloc_, 64 * kKiB, a_);  // so p cannot merge with the tail
  ASSERT_TRUE(alloc_.RecordStream(p, b_).ok());
  ASSERT_TRUE(alloc_.Free(p).ok());
  EXPECT_EQ(backend_.pending_markers(), 1u);
  DeviceStats s = alloc_.GetStats();
  EXPECT_EQ(s.allocation[kAgg].current, 1);  // the free was requested...
  EXPECT_EQ(s.active[kAgg].current, 2);      // ...but p is still active

  // Not handed out while b_'s marker is pending, even repeatedly.
  void* q = MustAlloc(alloc_, 64 * kKiB, a_);
  EXPECT_NE(q, p);
  ASSERT_TRUE(alloc_.Free(q).ok());
  void* q2 = MustAlloc(alloc_, 64 * kKiB, a_);
  EXPECT_NE(q2, p);
  ASSERT_TRUE(alloc_.Free(q2).ok());
  EXPECT_EQ(alloc_.Snapshot().segments[0].blocks[0].state, BlockState::kActivePendingFree);

  backend_.CompleteStream(b_);
  void* r = MustAlloc(alloc_, 64 * kKiB, a_);  // markers are processed first
  EXPECT_EQ(r, p);
  EXPECT_EQ(backend_.live_markers(), 0u);  // released after completion
  EXPECT_EQ(alloc_.GetStats().active[kAgg].current, 2);
  ASSERT_TRUE(alloc_.Free(r).ok());
  ASSERT_TRUE(alloc_.Free(keep).ok());
}

TEST_F(CachingAllocatorTest, RecordStreamOnSeveralStreamsWaitsForAll) {
  void* p = MustAlloc(alloc_, 64 * kKiB, a_);
  void* keep = MustAlloc(alloc_, 64 * kKiB, a_);
  ASSERT_TRUE(alloc_.RecordStream(p, b_).ok());
  ASSERT_TRUE(alloc_.RecordStream(p, c_).ok());
  ASSERT_TRUE(alloc_.RecordStream(p, c_).ok());  // recorded once
  ASSERT_TRUE(alloc_.Free(p).ok());
  EXPECT_EQ(backend_.pending_markers(), 2u);
  backend_.CompleteStream(b_);
  ASSERT_TRUE(alloc_.EmptyCache().ok());  // also processes markers
  EXPECT_EQ(alloc_.Snapshot().segments[0].blocks[0].state, BlockState::kActivePendingFree);
  backend_.CompleteStream(c_);
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_EQ(alloc_.Snapshot().segments[0].blocks[0].state, BlockState::kInactive);
  EXPECT_EQ(backend_.live_markers(), 0u);
  ASSERT_TRUE(alloc_.Free(keep).ok());
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_EQ(backend_.outstanding_allocs(), 0u);
}

TEST_F(CachingAllocatorTest, RecordStreamOnAllocationStreamIsANoOp) {
  void* p = MustAlloc(alloc_, 4 * kKiB, a_);
  ASSERT_TRUE(alloc_.RecordStream(p, a_).ok());
  ASSERT_TRUE(alloc_.Free(p).ok());
  EXPECT_EQ(backend_.live_markers(), 0u);
  EXPECT_EQ(MustAlloc(alloc_, 4 * kKiB, a_), p);
  ASSERT_TRUE(alloc_.Free(p).ok());
}

TEST_F(CachingAllocatorTest, EmptyCacheDoesNotReleasePendingBlocks) {
  void* p = MustAlloc(alloc_, 4 * kKiB, a_);
  ASSERT_TRUE(alloc_.RecordStream(p, b_).ok());
  ASSERT_TRUE(alloc_.Free(p).ok());
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_EQ(backend_.outstanding_allocs(), 1u);  // b_ may still be using it
  EXPECT_EQ(backend_.sync_calls(), 0);           // and EmptyCache does not wait
  backend_.CompleteStream(b_);
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_EQ(backend_.outstanding_allocs(), 0u);
}

TEST_F(CachingAllocatorTest, FailedMarkerLeavesTheBlockAllocated) {
  void* p = MustAlloc(alloc_, 4 * kKiB, a_);
  ASSERT_TRUE(alloc_.RecordStream(p, b_).ok());
  ASSERT_TRUE(alloc_.RecordStream(p, c_).ok());
  backend_.FailNextMarkers(1);
  absl::Status s = alloc_.Free(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("stays allocated"), std::string::npos) << s;
  EXPECT_EQ(alloc_.GetStats().allocation[kAgg].current, 1);
  EXPECT_EQ(backend_.live_markers(), 0u);
  ASSERT_TRUE(alloc_.Free(p).ok());  // the retry records both markers
  EXPECT_EQ(backend_.pending_markers(), 2u);
  backend_.CompleteAll();
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_EQ(backend_.outstanding_allocs(), 0u);
}

// ------------------------------------------------------------------ fraction and OOM

TEST_F(CachingAllocatorTest, MemoryFractionLimitsReservedMemory) {
  FakeAllocatorBackend backend(100 * kMiB);
  CachingAllocator alloc(&backend);
  EXPECT_EQ(alloc.GetMemoryFraction(), 1.0);
  ASSERT_TRUE(alloc.SetMemoryFraction(0.5).ok());  // 50 MiB
  EXPECT_EQ(alloc.GetMemoryFraction(), 0.5);
  void* p = MustAlloc(alloc, 30 * kMiB);
  absl::StatusOr<void*> q = alloc.Allocate(24 * kMiB);  // 54 MiB > 50 MiB
  ASSERT_EQ(q.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(q.status().message().find("memory fraction 0.5"), std::string::npos)
      << q.status();
  EXPECT_EQ(backend.alloc_calls(), 1);  // the limit is checked before the device
  DeviceStats s = alloc.GetStats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);
  void* r = MustAlloc(alloc, 20 * kMiB);  // 50 MiB exactly is fine
  ASSERT_TRUE(alloc.Free(p).ok());
  ASSERT_TRUE(alloc.Free(r).ok());

  EXPECT_EQ(alloc.SetMemoryFraction(-0.1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(alloc.SetMemoryFraction(1.5).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(alloc.SetMemoryFraction(std::nan("")).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CachingAllocatorTest, FractionOomFreesCacheAndRetries) {
  FakeAllocatorBackend backend(100 * kMiB);
  CachingAllocator alloc(&backend);
  ASSERT_TRUE(alloc.SetMemoryFraction(0.5).ok());
  void* p = MustAlloc(alloc, 40 * kMiB, a_);
  ASSERT_TRUE(alloc.Free(p).ok());
  // 40 MiB cached on a_; b_ needs its own 40 MiB: over the limit until the cache goes.
  void* q = MustAlloc(alloc, 40 * kMiB, b_);
  EXPECT_EQ(backend.free_calls(), 1);
  EXPECT_EQ(alloc.GetStats().num_alloc_retries, 1);
  EXPECT_EQ(alloc.GetStats().num_ooms, 0);
  ASSERT_TRUE(alloc.Free(q).ok());
}

TEST_F(CachingAllocatorTest, OomFreesCachedSegmentsAndRetriesOnce) {
  FakeAllocatorBackend backend(64 * kMiB);
  CachingAllocator alloc(&backend);
  void* p = MustAlloc(alloc, 40 * kMiB, a_);
  void* small = MustAlloc(alloc, 4 * kKiB, a_);
  ASSERT_TRUE(alloc.Free(p).ok());
  ASSERT_TRUE(alloc.Free(small).ok());
  // The device has 22 MiB left; the cached 40 MiB (a_) and 2 MiB (small) segments must
  // be returned before b_'s allocation fits.
  void* q = MustAlloc(alloc, 40 * kMiB, b_);
  DeviceStats s = alloc.GetStats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_sync_all_streams, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(backend.free_calls(), 2);  // both pools were emptied
  EXPECT_EQ(backend.alloc_calls(), 4);  // 40 MiB, 2 MiB, failed 40 MiB, retried 40 MiB
  EXPECT_EQ(s.reserved_bytes[kAgg].current, static_cast<int64_t>(40 * kMiB));

  // Nothing left to free: the retry fails too and the error tells the whole story.
  absl::StatusOr<void*> r = alloc.Allocate(40 * kMiB, b_);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("out of memory on device 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Tried to allocate 40.00 MiB (41943040 bytes)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("total capacity of 64.00 MiB (67108864 bytes)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("of which 24.00 MiB (25165824 bytes) is free"), std::string::npos) << msg;
  EXPECT_NE(msg.find("40.00 MiB (41943040 bytes) is already allocated"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("40.00 MiB (41943040 bytes) is reserved in total by the allocator"),
            std::string::npos)
      << msg;
  s = alloc.GetStats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 2);
  ASSERT_TRUE(alloc.Free(q).ok());
}

TEST_F(CachingAllocatorTest, OomMessageNamesTheSegmentItNeeded) {
  FakeAllocatorBackend backend(10 * kMiB);
  CachingAllocator alloc(&backend);
  absl::StatusOr<void*> r = alloc.Allocate(3 * kMiB);  // needs a 20 MiB segment
  ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("Tried to allocate 3.00 MiB (3145728 bytes), which needs a new segment "
                     "of 20.00 MiB"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("0 bytes is already allocated"), std::string::npos) << msg;
}

TEST_F(CachingAllocatorTest, OomWaitsForPendingMarkersBeforeGivingUp) {
  FakeAllocatorBackend backend(64 * kMiB);
  CachingAllocator alloc(&backend);
  void* p = MustAlloc(alloc, 40 * kMiB, a_);
  ASSERT_TRUE(alloc.RecordStream(p, b_).ok());
  ASSERT_TRUE(alloc.Free(p).ok());
  // The 40 MiB block is pending on b_: the retry synchronizes, retires the marker,
  // frees the segment, and the allocation succeeds.
  void* q = MustAlloc(alloc, 40 * kMiB, c_);
  EXPECT_EQ(backend.sync_calls(), 1);
  EXPECT_EQ(backend.live_markers(), 0u);
  EXPECT_EQ(alloc.GetStats().num_sync_all_streams, 1);
  ASSERT_TRUE(alloc.Free(q).ok());
}

TEST_F(CachingAllocatorTest, OomRetryReusesABlockFreedByMarkers) {
  FakeAllocatorBackend backend(22 * kMiB);
  CachingAllocator alloc(&backend);
  void* p = MustAlloc(alloc, 8 * kMiB, a_);
  void* keep = MustAlloc(alloc, 8 * kMiB, a_);  // the 20 MiB segment stays split
  ASSERT_TRUE(alloc.RecordStream(p, b_).ok());
  ASSERT_TRUE(alloc.Free(p).ok());
  // No segment can be released (keep is live) and the device is full, but the
  // synchronization returns p to the pool, and the retry finds it.
  void* q = MustAlloc(alloc, 8 * kMiB, a_);
  EXPECT_EQ(q, p);
  EXPECT_EQ(alloc.GetStats().num_ooms, 0);
  ASSERT_TRUE(alloc.Free(q).ok());
  ASSERT_TRUE(alloc.Free(keep).ok());
}

TEST_F(CachingAllocatorTest, InjectedDeviceFailureIsRetried) {
  backend_.FailNextAllocs(1);
  void* p = MustAlloc(alloc_, 4 * kKiB);
  EXPECT_EQ(backend_.alloc_calls(), 2);
  EXPECT_EQ(alloc_.GetStats().num_alloc_retries, 1);
  EXPECT_EQ(alloc_.GetStats().num_device_alloc, 1);
  ASSERT_TRUE(alloc_.Free(p).ok());
}

TEST_F(CachingAllocatorTest, AbsurdSizeIsOutOfMemory) {
  absl::StatusOr<void*> p = alloc_.Allocate(~size_t{0});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(backend_.alloc_calls(), 0);
  EXPECT_EQ(alloc_.GetStats().num_ooms, 1);
}

// ------------------------------------------------------------------ errors

TEST_F(CachingAllocatorTest, FreeOfUnknownPointerIsInvalidArgument) {
  void* bogus = reinterpret_cast<void*>(uintptr_t{0x1234});
  absl::Status s = alloc_.Free(bogus);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(absl::StrFormat("%p", bogus)), std::string::npos) << s;
  EXPECT_NE(s.message().find("unknown pointer"), std::string::npos) << s;
  // Inside a segment but not the start of an allocation.
  void* p = MustAlloc(alloc_, 4 * kKiB);
  void* inside = static_cast<char*>(p) + 512;
  s = alloc_.Free(inside);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(absl::StrFormat("%p", inside)), std::string::npos) << s;
  ASSERT_TRUE(alloc_.Free(p).ok());
}

TEST_F(CachingAllocatorTest, DoubleFreeIsInvalidArgument) {
  void* p = MustAlloc(alloc_, 4 * kKiB);
  ASSERT_TRUE(alloc_.Free(p).ok());
  absl::Status s = alloc_.Free(p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(absl::StrFormat("%p", p)), std::string::npos) << s;
  EXPECT_NE(s.message().find("double free"), std::string::npos) << s;
  // The failed free changed nothing.
  DeviceStats st = alloc_.GetStats();
  EXPECT_EQ(st.allocation[kAgg].freed, 1);
  EXPECT_EQ(st.active[kAgg].current, 0);
}

TEST_F(CachingAllocatorTest, RecordStreamOfUnknownPointerIsInvalidArgument) {
  void* p = MustAlloc(alloc_, 4 * kKiB);
  ASSERT_TRUE(alloc_.Free(p).ok());
  absl::Status s = alloc_.RecordStream(p, b_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(absl::StrFormat("%p", p)), std::string::npos) << s;
}

TEST_F(CachingAllocatorTest, GetBaseAllocationFindsTheSegment) {
  void* p = MustAlloc(alloc_, 4 * kKiB);
  void* q = MustAlloc(alloc_, 4 * kKiB);
  absl::StatusOr<CachingAllocator::SegmentRange> r =
      alloc_.GetBaseAllocation(static_cast<char*>(q) + 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->base, p);
  EXPECT_EQ(r->size, 2 * kMiB);
  EXPECT_FALSE(alloc_.GetBaseAllocation(static_cast<char*>(p) + 2 * kMiB).ok());
  ASSERT_TRUE(alloc_.Free(p).ok());
  ASSERT_TRUE(alloc_.Free(q).ok());
}

// ------------------------------------------------------------------ statistics

TEST_F(CachingAllocatorTest, StatsFollowCudaMeanings) {
  DeviceStats s = alloc_.GetStats();
  EXPECT_EQ(s.max_split_size, -1);

  void* a = MustAlloc(alloc_, 1000, a_);      // small: 1024 B of a fresh 2 MiB segment
  void* b = MustAlloc(alloc_, 3 * kMiB, a_);  // large: 3 MiB of a fresh 20 MiB segment
  s = alloc_.GetStats();
  const int64_t small_rest = 2 * kMiB - 1024;
  const int64_t large_rest = 17 * kMiB;
  ExpectStat(s.allocation[kAgg], 2, 2, 2, 0);
  ExpectStat(s.allocation[kSmall], 1, 1, 1, 0);
  ExpectStat(s.allocation[kLarge], 1, 1, 1, 0);
  ExpectStat(s.segment[kAgg], 2, 2, 2, 0);
  ExpectStat(s.segment[kSmall], 1, 1, 1, 0);
  ExpectStat(s.active[kAgg], 2, 2, 2, 0);
  ExpectStat(s.inactive_split[kAgg], 2, 2, 2, 0);
  ExpectStat(s.inactive_split[kLarge], 1, 1, 1, 0);
  ExpectStat(s.allocated_bytes[kSmall], 1024, 1024, 1024, 0);
  ExpectStat(s.allocated_bytes[kLarge], 3 * kMiB, 3 * kMiB, 3 * kMiB, 0);
  ExpectStat(s.reserved_bytes[kAgg], 22 * kMiB, 22 * kMiB, 22 * kMiB, 0);
  ExpectStat(s.active_bytes[kAgg], 3 * kMiB + 1024, 3 * kMiB + 1024, 3 * kMiB + 1024, 0);
  ExpectStat(s.inactive_split_bytes[kSmall], small_rest, small_rest, small_rest, 0);
  ExpectStat(s.inactive_split_bytes[kLarge], large_rest, large_rest, large_rest, 0);
  ExpectStat(s.requested_bytes[kAgg], 3 * kMiB + 1000, 3 * kMiB + 1000, 3 * kMiB + 1000, 0);
  EXPECT_EQ(s.num_device_alloc, 2);
  EXPECT_EQ(s.num_device_free, 0);

  // A cross-stream free: allocation and allocated_bytes drop at once, active and
  // requested bytes only when the marker completes.
  ASSERT_TRUE(alloc_.RecordStream(a, b_).ok());
  ASSERT_TRUE(alloc_.Free(a).ok());
  s = alloc_.GetStats();
  ExpectStat(s.allocation[kSmall], 0, 1, 1, 1);
  ExpectStat(s.allocated_bytes[kSmall], 0, 1024, 1024, 1024);
  ExpectStat(s.active[kSmall], 1, 1, 1, 0);
  ExpectStat(s.requested_bytes[kSmall], 1000, 1000, 1000, 0);
  backend_.CompleteStream(b_);
  ASSERT_TRUE(alloc_.EmptyCache().ok());  // retires the marker, then frees the segment
  s = alloc_.GetStats();
  ExpectStat(s.active[kSmall], 0, 1, 1, 1);
  ExpectStat(s.active_bytes[kSmall], 0, 1024, 1024, 1024);
  ExpectStat(s.requested_bytes[kSmall], 0, 1000, 1000, 1000);
  // a merged with the remainder: the segment is whole again, no inactive split left.
  ExpectStat(s.inactive_split[kSmall], 0, 1, 1, 1);
  ExpectStat(s.inactive_split_bytes[kSmall], 0, small_rest, small_rest, small_rest);
  ExpectStat(s.segment[kSmall], 0, 1, 1, 1);
  ExpectStat(s.reserved_bytes[kSmall], 0, 2 * kMiB, 2 * kMiB, 2 * kMiB);
  ExpectStat(s.reserved_bytes[kAgg], 20 * kMiB, 22 * kMiB, 22 * kMiB, 2 * kMiB);
  EXPECT_EQ(s.num_device_free, 1);

  // Reusing part of an already split block shrinks the inactive split bytes.
  void* c = MustAlloc(alloc_, 2 * kMiB, a_);
  s = alloc_.GetStats();
  ExpectStat(s.inactive_split[kLarge], 1, 1, 1, 0);
  ExpectStat(s.inactive_split_bytes[kLarge], 15 * kMiB, 17 * kMiB, 17 * kMiB, 2 * kMiB);
  // Taking a whole split block (the remaining 15 MiB exactly) makes it active.
  void* d = MustAlloc(alloc_, 15 * kMiB, a_);
  s = alloc_.GetStats();
  ExpectStat(s.inactive_split[kLarge], 0, 1, 1, 1);
  ExpectStat(s.inactive_split_bytes[kLarge], 0, 17 * kMiB, 17 * kMiB, 17 * kMiB);
  ExpectStat(s.allocation[kAgg], 3, 3, 4, 1);

  alloc_.ResetPeakStats();
  s = alloc_.GetStats();
  ExpectStat(s.reserved_bytes[kAgg], 20 * kMiB, 20 * kMiB, 22 * kMiB, 2 * kMiB);
  ExpectStat(s.inactive_split_bytes[kLarge], 0, 0, 17 * kMiB, 17 * kMiB);
  EXPECT_EQ(s.allocated_bytes[kAgg].peak, s.allocated_bytes[kAgg].current);

  alloc_.ResetAccumulatedStats();
  s = alloc_.GetStats();
  ExpectStat(s.allocation[kAgg], 3, 3, 0, 0);
  ExpectStat(s.reserved_bytes[kAgg], 20 * kMiB, 20 * kMiB, 0, 0);
  EXPECT_EQ(s.num_device_alloc, 0);
  EXPECT_EQ(s.num_device_free, 0);

  for (void* p : {b, c, d}) ASSERT_TRUE(alloc_.Free(p).ok());
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  s = alloc_.GetStats();
  for (const StatArray* arr : {&s.allocation, &s.segment, &s.active, &s.inactive_split,
                               &s.allocated_bytes, &s.reserved_bytes, &s.active_bytes,
                               &s.inactive_split_bytes, &s.requested_bytes}) {
    for (const Stat& st : *arr) EXPECT_EQ(st.current, 0);
  }
  EXPECT_EQ(s.num_device_free, 1);
}

TEST_F(CachingAllocatorTest, ResetAccumulatedStatsClearsCounters) {
  FakeAllocatorBackend backend(8 * kMiB);
  CachingAllocator alloc(&backend);
  ASSERT_FALSE(alloc.Allocate(16 * kMiB).ok());
  DeviceStats s = alloc.GetStats();
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_sync_all_streams, 1);
  alloc.ResetAccumulatedStats();
  s = alloc.GetStats();
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.num_alloc_retries, 0);
  EXPECT_EQ(s.num_sync_all_streams, 0);
}

TEST(CachingAllocatorMaxSplitTest, OversizeBlocksAreNotSplitAndServeOnlyCloseSizes) {
  FakeAllocatorBackend backend(size_t{1} << 30);
  CachingAllocatorOptions options;
  options.max_split_size = 40 * kMiB;
  CachingAllocator alloc(&backend, options);
  DeviceStats s = alloc.GetStats();
  EXPECT_EQ(s.max_split_size, static_cast<int64_t>(40 * kMiB));

  void* big = MustAlloc(alloc, 50 * kMiB);
  s = alloc.GetStats();
  ExpectStat(s.oversize_segments, 1, 1, 1, 0);
  ExpectStat(s.oversize_allocations, 1, 1, 1, 0);
  ASSERT_TRUE(alloc.Free(big).ok());
  s = alloc.GetStats();
  ExpectStat(s.oversize_allocations, 0, 1, 1, 1);

  // A mid-size request must not take (or split) the cached 50 MiB block.
  void* mid = MustAlloc(alloc, 2 * kMiB);
  EXPECT_NE(mid, big);
  EXPECT_EQ(backend.alloc_calls(), 2);
  // 45 MiB may take it (within kLargeBuffer of the request), whole.
  void* again = MustAlloc(alloc, 45 * kMiB);
  EXPECT_EQ(again, big);
  EXPECT_EQ(alloc.GetStats().allocated_bytes[kLarge].current,
            static_cast<int64_t>(50 * kMiB + 2 * kMiB));
  ASSERT_TRUE(alloc.Free(again).ok());
  // 25 MiB is too far below 50 MiB: a new segment.
  void* other = MustAlloc(alloc, 25 * kMiB);
  EXPECT_NE(other, big);
  ASSERT_TRUE(alloc.Free(other).ok());
  ASSERT_TRUE(alloc.Free(mid).ok());
  ASSERT_TRUE(alloc.EmptyCache().ok());
  ExpectStat(alloc.GetStats().oversize_segments, 0, 1, 1, 1);
}

// ------------------------------------------------------------------ history

TEST_F(CachingAllocatorTest, HistoryRecordsActionsInOrder) {
  EXPECT_FALSE(alloc_.IsRecordingHistory());
  alloc_.RecordHistory(true, 100);
  EXPECT_TRUE(alloc_.IsRecordingHistory());
  void* p = MustAlloc(alloc_, 1000, a_, /*context=*/11);
  ASSERT_TRUE(alloc_.RecordStream(p, b_).ok());
  ASSERT_TRUE(alloc_.Free(p, /*context=*/12).ok());
  backend_.CompleteStream(b_);
  ASSERT_TRUE(alloc_.EmptyCache().ok());

  const std::vector<TraceEntry> trace = alloc_.Snapshot().trace;
  ASSERT_EQ(trace.size(), 5u);
  const TraceAction expected[] = {TraceAction::SEGMENT_ALLOC, TraceAction::ALLOC,
                                  TraceAction::FREE_REQUESTED, TraceAction::FREE_COMPLETED,
                                  TraceAction::SEGMENT_FREE};
  for (size_t i = 0; i < trace.size(); ++i) {
    EXPECT_EQ(trace[i].action, expected[i]) << i << ": " << TraceActionName(trace[i].action);
    EXPECT_EQ(trace[i].stream, a_);
    if (i > 0) {
      EXPECT_GE(trace[i].time_ns, trace[i - 1].time_ns);
    }
  }
  EXPECT_EQ(trace[0].addr, Addr(p));
  EXPECT_EQ(trace[0].size, 2 * kMiB);
  EXPECT_EQ(trace[1].size, 1024u);
  EXPECT_EQ(trace[1].context_id, 11u);
  EXPECT_EQ(trace[2].context_id, 12u);
  EXPECT_EQ(trace[3].context_id, 12u);  // completion carries the Free's context
  EXPECT_EQ(trace[4].size, 2 * kMiB);
  EXPECT_GT(trace[0].time_ns, 0);
  EXPECT_STREQ(TraceActionName(TraceAction::FREE_COMPLETED), "free_completed");
}

TEST_F(CachingAllocatorTest, HistoryRecordsOom) {
  FakeAllocatorBackend backend(4 * kMiB);
  CachingAllocator alloc(&backend);
  alloc.RecordHistory(true, 10);
  ASSERT_FALSE(alloc.Allocate(8 * kMiB).ok());
  const std::vector<TraceEntry> trace = alloc.Snapshot().trace;
  ASSERT_EQ(trace.size(), 1u);
  EXPECT_EQ(trace[0].action, TraceAction::OOM);
  EXPECT_EQ(trace[0].size, 8 * kMiB);
  EXPECT_EQ(trace[0].addr, 4 * kMiB);  // like CUDA: the device's free bytes
}

TEST_F(CachingAllocatorTest, HistoryRingIsBounded) {
  alloc_.RecordHistory(true, 4);
  void* keep = MustAlloc(alloc_, 512);  // SEGMENT_ALLOC, ALLOC
  for (uint64_t i = 1; i <= 10; ++i) {
    void* p = MustAlloc(alloc_, 512, nullptr, i);
    ASSERT_TRUE(alloc_.Free(p, 100 + i).ok());
  }
  std::vector<TraceEntry> trace = alloc_.Snapshot().trace;
  ASSERT_EQ(trace.size(), 4u);
  // The newest four, oldest first.
  EXPECT_EQ(trace[0].action, TraceAction::FREE_COMPLETED);
  EXPECT_EQ(trace[0].context_id, 109u);
  EXPECT_EQ(trace[1].action, TraceAction::ALLOC);
  EXPECT_EQ(trace[1].context_id, 10u);
  EXPECT_EQ(trace[2].action, TraceAction::FREE_REQUESTED);
  EXPECT_EQ(trace[2].context_id, 110u);
  EXPECT_EQ(trace[3].action, TraceAction::FREE_COMPLETED);
  EXPECT_EQ(trace[3].context_id, 110u);

  // Shrinking keeps the newest entries.
  alloc_.RecordHistory(true, 2);
  trace = alloc_.Snapshot().trace;
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace[1].context_id, 110u);
  // ...and the ring keeps rotating.
  ASSERT_TRUE(alloc_.Free(keep, 7).ok());
  trace = alloc_.Snapshot().trace;
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace[0].action, TraceAction::FREE_REQUESTED);
  EXPECT_EQ(trace[0].context_id, 7u);
  EXPECT_EQ(trace[1].action, TraceAction::FREE_COMPLETED);

  // Disabling clears; nothing is recorded while off.
  alloc_.RecordHistory(false, 0);
  EXPECT_TRUE(alloc_.Snapshot().trace.empty());
  ASSERT_TRUE(alloc_.Free(MustAlloc(alloc_, 512)).ok());
  EXPECT_TRUE(alloc_.Snapshot().trace.empty());
}

// ------------------------------------------------------------------ snapshot

TEST_F(CachingAllocatorTest, SnapshotDescribesSegmentsAndBlocks) {
  void* x = MustAlloc(alloc_, 3 * kMiB, b_, 9);  // large segment first (lower address)
  void* p = MustAlloc(alloc_, 1000, a_, 7);
  void* q = MustAlloc(alloc_, 4 * kKiB, a_, 8);
  ASSERT_TRUE(alloc_.RecordStream(q, c_).ok());
  ASSERT_TRUE(alloc_.Free(q).ok());

  MemorySnapshot snap = alloc_.Snapshot();
  EXPECT_EQ(snap.device, 0);
  ASSERT_EQ(snap.segments.size(), 2u);
  EXPECT_LT(snap.segments[0].address, snap.segments[1].address);

  const SegmentInfo& large = snap.segments[0];
  EXPECT_EQ(large.address, Addr(x));
  EXPECT_TRUE(large.is_large);
  EXPECT_EQ(large.stream, b_);
  EXPECT_EQ(large.total_size, 20 * kMiB);
  EXPECT_EQ(large.allocated_size, 3 * kMiB);
  EXPECT_EQ(large.active_size, 3 * kMiB);
  EXPECT_EQ(large.requested_size, 3 * kMiB);
  ASSERT_EQ(large.blocks.size(), 2u);
  EXPECT_EQ(large.blocks[0].state, BlockState::kActiveAllocated);
  EXPECT_EQ(large.blocks[0].context_id, 9u);
  EXPECT_EQ(large.blocks[1].state, BlockState::kInactive);
  EXPECT_EQ(large.blocks[1].size, 17 * kMiB);
  EXPECT_EQ(large.blocks[1].requested_size, 0u);

  const SegmentInfo& small = snap.segments[1];
  EXPECT_EQ(small.address, Addr(p));
  EXPECT_FALSE(small.is_large);
  EXPECT_EQ(small.stream, a_);
  EXPECT_EQ(small.total_size, 2 * kMiB);
  EXPECT_EQ(small.allocated_size, 1024u);
  EXPECT_EQ(small.active_size, 1024u + 4 * kKiB);
  EXPECT_EQ(small.requested_size, 1000u + 4 * kKiB);
  ASSERT_EQ(small.blocks.size(), 3u);
  EXPECT_EQ(small.blocks[0].address, Addr(p));
  EXPECT_EQ(small.blocks[0].size, 1024u);
  EXPECT_EQ(small.blocks[0].requested_size, 1000u);
  EXPECT_EQ(small.blocks[0].state, BlockState::kActiveAllocated);
  EXPECT_EQ(small.blocks[0].context_id, 7u);
  EXPECT_EQ(small.blocks[1].address, Addr(q));
  EXPECT_EQ(small.blocks[1].state, BlockState::kActivePendingFree);
  EXPECT_EQ(small.blocks[1].context_id, 8u);
  EXPECT_EQ(small.blocks[2].state, BlockState::kInactive);
  EXPECT_EQ(small.blocks[2].address, Addr(q) + 4 * kKiB);
  size_t covered = 0;
  for (const BlockInfo& b : small.blocks) covered += b.size;
  EXPECT_EQ(covered, small.total_size);
  EXPECT_STREQ(BlockStateName(small.blocks[1].state), "active_pending_free");
  EXPECT_TRUE(snap.trace.empty());  // history is off

  backend_.CompleteAll();
  ASSERT_TRUE(alloc_.Free(p).ok());
  ASSERT_TRUE(alloc_.Free(x).ok());
}

// ------------------------------------------------------------------ activity records

TEST_F(CachingAllocatorTest, EmitsMemoryActivityWhenEnabled) {
  ActivityClear();
  void* quiet = MustAlloc(alloc_, 4 * kKiB);  // tracing off: nothing recorded
  ActivityEnable(ActivityKind::kCachingAllocator);
  void* p = MustAlloc(alloc_, 1000);  // same stream, so the same segment as `quiet`
  ASSERT_TRUE(alloc_.Free(p).ok());
  ActivityDisable(ActivityKind::kCachingAllocator);
  ASSERT_TRUE(alloc_.Free(quiet).ok());

  std::vector<ActivityRecord> records;
  ActivityCollect(&records);
  std::vector<ActivityRecord> mine;
  for (const ActivityRecord& r : records) {
    if (r.kind == ActivityKind::kCachingAllocator && r.subkind == 1) mine.push_back(r);
  }
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_STREQ(mine[0].name, "xxnpu_caching_alloc");
  EXPECT_EQ(mine[0].bytes, 1024);
  EXPECT_EQ(mine[0].address, Addr(p));
  EXPECT_EQ(mine[0].device, 0);
  EXPECT_EQ(mine[0].stream, -1);  // the fake has no stream ids
  EXPECT_EQ(mine[0].total_allocated, 4 * kKiB + 1024);
  EXPECT_EQ(mine[0].total_reserved, 2 * kMiB);
  EXPECT_EQ(mine[0].start_ns, mine[0].end_ns);
  EXPECT_GT(mine[0].start_ns, 0);
  EXPECT_EQ(mine[0].thread_id, CurrentThreadId());
  EXPECT_STREQ(mine[1].name, "xxnpu_caching_free");
  EXPECT_EQ(mine[1].bytes, -1024);
  EXPECT_EQ(mine[1].address, Addr(p));
  EXPECT_EQ(mine[1].total_allocated, 4 * kKiB);
  ActivityClear();
}

// ------------------------------------------------------------------ lifetime, ownership

TEST(CachingAllocatorLifetimeTest, DestructorReturnsEverythingToTheBackend) {
  FakeAllocatorBackend backend;
  {
    CachingAllocator alloc(&backend);
    void* p = MustAlloc(alloc, 4 * kKiB, FakeStream(1));
    (void)MustAlloc(alloc, 30 * kMiB, FakeStream(1));  // still live at destruction
    ASSERT_TRUE(alloc.RecordStream(p, FakeStream(2)).ok());
    ASSERT_TRUE(alloc.Free(p).ok());
    EXPECT_EQ(backend.live_markers(), 1u);
  }
  EXPECT_EQ(backend.sync_calls(), 1);  // the pending marker was waited for
  EXPECT_EQ(backend.live_markers(), 0u);
  EXPECT_EQ(backend.outstanding_allocs(), 0u);
}

TEST(CachingAllocatorLifetimeTest, CanOwnItsBackend) {
  auto owned = std::make_unique<FakeAllocatorBackend>(size_t{1} << 30, /*device=*/3);
  FakeAllocatorBackend* backend = owned.get();
  CachingAllocator alloc(std::move(owned));
  EXPECT_EQ(alloc.device(), 3);
  EXPECT_EQ(alloc.backend(), backend);
  void* p = MustAlloc(alloc, 4 * kKiB);
  EXPECT_EQ(backend->alloc_calls(), 1);
  ASSERT_TRUE(alloc.Free(p).ok());
  EXPECT_EQ(alloc.Snapshot().device, 3);
}

// ------------------------------------------------------------------ threads

TEST(CachingAllocatorThreadTest, ConcurrentAllocFreeRecordStream) {
  FakeAllocatorBackend backend(size_t{4} << 30);
  CachingAllocator alloc(&backend);
  alloc.RecordHistory(true, 64);
  constexpr int kThreads = 4;
  constexpr int kIters = 2000;
  std::atomic<bool> stop{false};
  std::thread completer([&] {
    while (!stop.load()) {
      backend.CompleteAll();
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      const xxnpuStream_t mine = FakeStream(10 + t);
      std::vector<void*> live;
      for (int i = 0; i < kIters; ++i) {
        if (live.size() < 8 && rng() % 2 == 0) {
          const size_t size = rng() % 4 == 0 ? (1 + rng() % 12) * kMiB : 1 + rng() % 65536;
          absl::StatusOr<void*> p = alloc.Allocate(size, mine);
          ASSERT_TRUE(p.ok()) << p.status();
          if (rng() % 4 == 0) {
            ASSERT_TRUE(alloc.RecordStream(*p, FakeStream(99)).ok());
          }
          live.push_back(*p);
        } else if (!live.empty()) {
          ASSERT_TRUE(alloc.Free(live.back()).ok());
          live.pop_back();
        }
        if (i % 500 == 0) {
          ASSERT_TRUE(alloc.EmptyCache().ok());
          (void)alloc.GetStats();
          (void)alloc.Snapshot();
        }
      }
      for (void* p : live) ASSERT_TRUE(alloc.Free(p).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  stop.store(true);
  completer.join();
  backend.CompleteAll();
  ASSERT_TRUE(alloc.EmptyCache().ok());
  DeviceStats s = alloc.GetStats();
  EXPECT_EQ(s.allocation[kAgg].current, 0);
  EXPECT_EQ(s.active[kAgg].current, 0);
  EXPECT_EQ(s.reserved_bytes[kAgg].current, 0);
  EXPECT_EQ(backend.outstanding_allocs(), 0u);
  EXPECT_EQ(backend.live_markers(), 0u);
}

}  // namespace
}  // namespace xxnpu
