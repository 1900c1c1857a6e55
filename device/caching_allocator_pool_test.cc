// The caching allocator's private pools for graphs (caching_allocator.h, "private
// pools"), against the fake device (fake_allocator_backend.h): which allocations a pool
// serves, that its blocks are reused only inside it, sharing by id, release by the last
// user, the markers deferred while a capture is underway, and the pool stats.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "device/caching_allocator.h"
#include "device/fake_allocator_backend.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

constexpr size_t kKiB = size_t{1} << 10;

uintptr_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

class PoolTest : public ::testing::Test {
 protected:
  void* Alloc(size_t bytes, xxnpuStream_t stream) {
    absl::StatusOr<void*> p = alloc_.Allocate(bytes, stream);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : nullptr;
  }
  // The private pool of the segment holding `p` ({0, 0}: the default pools).
  MempoolId PoolOf(const void* p) const {
    for (const SegmentInfo& s : alloc_.Snapshot().segments) {
      if (Addr(p) >= s.address && Addr(p) < s.address + s.total_size) return s.pool_id;
    }
    ADD_FAILURE() << "no segment holds " << p;
    return {~0ull, ~0ull};
  }
  auto OnStream(xxnpuStream_t s) {
    return [s](xxnpuStream_t x) { return x == s; };
  }

  FakeAllocatorBackend backend_{size_t{1} << 30};
  CachingAllocator alloc_{&backend_};
  const xxnpuStream_t a_ = FakeStream(1);  // "the capturing stream"
  const xxnpuStream_t b_ = FakeStream(2);
  const xxnpuStream_t c_ = FakeStream(3);
};

TEST_F(PoolTest, OnlyTheFilteredStreamsAllocationsComeFromThePoolAndOnlyWhileAllocatingToIt) {
  const MempoolId id = NewMempoolId();
  EXPECT_NE(id, NewMempoolId());  // unique
  ASSERT_TRUE(alloc_.BeginAllocateToPool(id, OnStream(a_)).ok());
  void* in_pool = Alloc(kKiB, a_);
  void* other = Alloc(kKiB, b_);
  ASSERT_TRUE(alloc_.EndAllocateToPool(id).ok());
  void* after = Alloc(kKiB, a_);
  EXPECT_EQ(PoolOf(in_pool), id);
  EXPECT_EQ(PoolOf(other), (MempoolId{0, 0}));
  EXPECT_EQ(PoolOf(after), (MempoolId{0, 0}));
  EXPECT_EQ(backend_.alloc_calls(), 3);  // the pool has a segment of its own

  const std::vector<PoolInfo> pools = alloc_.PrivatePools();
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0].id, id);
  EXPECT_EQ(pools[0].use_count, 1);
  EXPECT_FALSE(pools[0].allocating);
  EXPECT_EQ(pools[0].segments, 1);
  EXPECT_EQ(pools[0].reserved_bytes, kSmallBuffer);
  EXPECT_EQ(pools[0].allocated_bytes, kKiB);
  EXPECT_EQ(pools[0].allocations, 1);
  for (void* p : {in_pool, other, after}) ASSERT_TRUE(alloc_.Free(p).ok());
  ASSERT_TRUE(alloc_.ReleasePool(id).ok());
}

TEST_F(PoolTest, APoolsFreedBlocksAreReusedInsideItNeverOutsideAndSurviveEmptyCache) {
  const MempoolId id = NewMempoolId();
  ASSERT_TRUE(alloc_.BeginAllocateToPool(id, OnStream(a_)).ok());
  void* tmp = Alloc(4 * kKiB, a_);
  ASSERT_TRUE(alloc_.Free(tmp).ok());  // freed during capture
  void* again = Alloc(4 * kKiB, a_);
  EXPECT_EQ(again, tmp);  // reused inside the pool
  ASSERT_TRUE(alloc_.Free(again).ok());
  ASSERT_TRUE(alloc_.EndAllocateToPool(id).ok());

  // Eager work on the same stream never gets the pool's free memory: a replay writes it.
  void* eager = Alloc(4 * kKiB, a_);
  EXPECT_EQ(PoolOf(eager), (MempoolId{0, 0}));
  ASSERT_TRUE(alloc_.Free(eager).ok());
  const int frees = backend_.free_calls();
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_EQ(backend_.free_calls(), frees + 1);  // the default segment only
  ASSERT_EQ(alloc_.PrivatePools().size(), 1u);
  EXPECT_EQ(alloc_.PrivatePools()[0].segments, 1);

  // The pool's last user releases it: its memory goes back to the device.
  ASSERT_TRUE(alloc_.ReleasePool(id).ok());
  EXPECT_EQ(backend_.free_calls(), frees + 2);
  EXPECT_TRUE(alloc_.PrivatePools().empty());
  EXPECT_EQ(backend_.outstanding_bytes(), 0u);
}

TEST_F(PoolTest, GraphsGivenOnePoolIdShareItUntilTheLastReleasesIt) {
  const MempoolId shared = NewMempoolId();
  ASSERT_TRUE(alloc_.BeginAllocateToPool(shared, OnStream(a_)).ok());  // graph 1
  void* first = Alloc(8 * kKiB, a_);
  ASSERT_TRUE(alloc_.Free(first).ok());
  ASSERT_TRUE(alloc_.EndAllocateToPool(shared).ok());
  ASSERT_TRUE(alloc_.BeginAllocateToPool(shared, OnStream(a_)).ok());  // graph 2, same pool
  void* other = Alloc(8 * kKiB, b_);  // not graph 2's stream: the default pools
  EXPECT_EQ(PoolOf(other), (MempoolId{0, 0}));
  void* shared_block = Alloc(8 * kKiB, a_);
  EXPECT_EQ(shared_block, first);  // graph 1's freed block, reused by graph 2
  ASSERT_TRUE(alloc_.Free(shared_block).ok());
  ASSERT_TRUE(alloc_.Free(other).ok());
  ASSERT_TRUE(alloc_.EndAllocateToPool(shared).ok());
  EXPECT_EQ(alloc_.PrivatePools()[0].use_count, 2);
  EXPECT_EQ(alloc_.PrivatePools()[0].segments, 1);  // one segment served both graphs

  const int frees = backend_.free_calls();
  ASSERT_TRUE(alloc_.ReleasePool(shared).ok());
  EXPECT_EQ(backend_.free_calls(), frees);  // graph 2 still uses it
  EXPECT_EQ(alloc_.PrivatePools()[0].use_count, 1);
  ASSERT_TRUE(alloc_.ReleasePool(shared).ok());
  EXPECT_EQ(backend_.free_calls(), frees + 1);
  EXPECT_TRUE(alloc_.PrivatePools().empty());
  absl::Status again = alloc_.ReleasePool(shared);
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(again.message().find("released already"), absl::string_view::npos) << again;
}

TEST_F(PoolTest, AReleasedPoolWithLiveAllocationsGoesWhenTheyAreFreed) {
  const MempoolId id = NewMempoolId();
  ASSERT_TRUE(alloc_.BeginAllocateToPool(id, OnStream(a_)).ok());
  void* output = Alloc(kKiB, a_);  // e.g. a graph's output tensor, still held
  ASSERT_TRUE(alloc_.EndAllocateToPool(id).ok());
  ASSERT_TRUE(alloc_.ReleasePool(id).ok());
  ASSERT_EQ(alloc_.PrivatePools().size(), 1u);
  EXPECT_EQ(alloc_.PrivatePools()[0].use_count, 0);
  EXPECT_EQ(alloc_.PrivatePools()[0].allocations, 1);
  ASSERT_TRUE(alloc_.Free(output).ok());
  // A released pool's free memory is no graph's any more: reusable by its id afresh, and
  // returned by EmptyCache.
  ASSERT_TRUE(alloc_.EmptyCache().ok());
  EXPECT_TRUE(alloc_.PrivatePools().empty());
  EXPECT_EQ(backend_.outstanding_bytes(), 0u);
}

TEST_F(PoolTest, BadPoolCallsAreClearErrors) {
  EXPECT_EQ(alloc_.BeginAllocateToPool({0, 0}, OnStream(a_)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(alloc_.BeginAllocateToPool(NewMempoolId(), nullptr).code(), absl::StatusCode::kInvalidArgument);
  const MempoolId id = NewMempoolId();
  EXPECT_EQ(alloc_.EndAllocateToPool(id).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(alloc_.ReleasePool(id).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(alloc_.BeginAllocateToPool(id, OnStream(a_)).ok());
  EXPECT_EQ(alloc_.BeginAllocateToPool(id, OnStream(b_)).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(alloc_.ReleasePool(id).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(alloc_.EndAllocateToPool(id).ok());
  ASSERT_TRUE(alloc_.ReleasePool(id).ok());
}

TEST_F(PoolTest, MarkersOfAFreeDuringCaptureAreRecordedWhenTheCaptureEnds) {
  void* used_elsewhere = Alloc(kKiB, b_);
  ASSERT_TRUE(alloc_.RecordStream(used_elsewhere, c_).ok());
  const MempoolId id = NewMempoolId();
  ASSERT_TRUE(alloc_.BeginAllocateToPool(id, OnStream(a_)).ok());
  ASSERT_TRUE(alloc_.Free(used_elsewhere).ok());
  // No marker now: on a capturing stream it would be captured, and querying it would
  // spoil the capture.
  EXPECT_EQ(backend_.live_markers(), 0u);
  const std::vector<SegmentInfo> segments = alloc_.Snapshot().segments;
  ASSERT_EQ(segments.size(), 1u);
  EXPECT_EQ(segments[0].blocks[0].state, BlockState::kActivePendingFree);
  void* meanwhile = Alloc(kKiB, b_);
  EXPECT_NE(meanwhile, used_elsewhere);  // not reusable yet
  ASSERT_TRUE(alloc_.EndAllocateToPool(id).ok());
  EXPECT_EQ(backend_.live_markers(), 1u);  // recorded at the capture's end
  void* still = Alloc(kKiB, b_);
  EXPECT_NE(still, used_elsewhere);  // stream c_ has not finished
  backend_.CompleteStream(c_);
  void* reused = Alloc(kKiB, b_);
  EXPECT_EQ(reused, used_elsewhere);
  for (void* p : {meanwhile, still, reused}) ASSERT_TRUE(alloc_.Free(p).ok());
  ASSERT_TRUE(alloc_.ReleasePool(id).ok());
}

}  // namespace
}  // namespace xxnpu
