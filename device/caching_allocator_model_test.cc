// Property test of the caching allocator: long random sequences of operations (allocate
// across all pool sizes, free, record_stream, marker completion, empty_cache) against the
// fake device, checked after every step against a simple model of what must hold:
//
//   - live allocations never overlap each other, nor memory still pending on a stream;
//   - every live allocation lies inside a segment the backend has handed out, and the
//     allocator's segments are exactly the backend's outstanding allocations;
//   - blocks tile their segments, no two free neighbours are left unmerged;
//   - the statistics equal what the model and the snapshot say (allocated, reserved,
//     active, inactive split, requested; per pool);
//   - allocation is best fit on the requesting stream and only reaches the device when
//     no cached block fits;
//   - after freeing everything, completing every marker and emptying the cache, nothing
//     is reserved and the backend has no outstanding allocations or markers.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "device/caching_allocator.h"
#include "device/fake_allocator_backend.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kAgg = static_cast<size_t>(StatType::AGGREGATE);
constexpr size_t kSmallIdx = static_cast<size_t>(StatType::SMALL_POOL);
constexpr size_t kLargeIdx = static_cast<size_t>(StatType::LARGE_POOL);

struct LiveBlock {
  size_t size = 0;       // the block's size as the snapshot reports it
  size_t rounded = 0;    // the request rounded
  size_t requested = 0;
  xxnpuStream_t stream = nullptr;
  bool small = false;
  std::set<xxnpuStream_t> uses;  // RecordStream'ed streams other than `stream`
};

struct PendingRegion {
  size_t size = 0;
  std::set<xxnpuStream_t> waiting;  // streams whose markers have not completed
};

struct ModelConfig {
  uint32_t seed = 1;
  int ops = 4000;
  size_t capacity = 384 * kMiB;
  size_t max_split_size = kNoMaxSplitSize;
};

class ModelRun {
 public:
  explicit ModelRun(const ModelConfig& config)
      : config_(config),
        rng_(config.seed),
        backend_(config.capacity),
        alloc_(&backend_, Options(config)) {}

  void Run() {
    for (step_ = 0; step_ < config_.ops && !::testing::Test::HasFatalFailure(); ++step_) {
      const uint32_t r = rng_() % 100;
      if (r < 48) {
        Allocate();
      } else if (r < 78) {
        FreeOne();
      } else if (r < 86) {
        RecordStreamOne();
      } else if (r < 94) {
        CompleteStream(streams_[rng_() % streams_.size()]);
      } else if (r < 97) {
        EmptyCache();
      } else if (r < 98) {
        ZeroAllocation();
      } else {
        for (xxnpuStream_t s : streams_) CompleteStream(s);
      }
      Check();
    }
    Drain();
  }

  int ooms() const { return ooms_; }
  int allocations() const { return allocations_; }
  int best_fit_checks() const { return best_fit_checks_; }

 private:
  static CachingAllocatorOptions Options(const ModelConfig& config) {
    CachingAllocatorOptions o;
    o.max_split_size = config.max_split_size;
    return o;
  }

  std::string Where() const { return absl::StrCat("seed ", config_.seed, " step ", step_); }

  size_t RandomSize() {
    const uint32_t r = rng_() % 100;
    if (r < 30) return 1 + rng_() % 8192;                        // tiny
    if (r < 55) return 1 + rng_() % kMiB;                        // small pool
    if (r < 90) return kMiB + 1 + rng_() % (9 * kMiB);           // 20 MiB segments
    return 10 * kMiB + rng_() % (38 * kMiB);                     // own segments
  }

  // What the allocator must pick from `before`: the smallest inactive block of the
  // stream and pool that fits, lowest address on ties; 0 if none.
  uint64_t ExpectedBestFit(const MemorySnapshot& before, xxnpuStream_t stream, bool small,
                           size_t rounded) const {
    uint64_t best_addr = 0;
    size_t best_size = 0;
    for (const SegmentInfo& seg : before.segments) {
      if (seg.stream != stream || seg.is_large == small) continue;
      for (const BlockInfo& b : seg.blocks) {
        if (b.state != BlockState::kInactive || b.size < rounded) continue;
        if (best_addr == 0 || b.size < best_size ||
            (b.size == best_size && b.address < best_addr)) {
          best_addr = b.address;
          best_size = b.size;
        }
      }
    }
    return best_addr;
  }

  // Whether a marker the allocator has not yet retired has completed (then the
  // allocator's view at the next call differs from `before`).
  bool HasRetirablePending() const { return !completed_unretired_.empty(); }

  void Allocate() {
    const size_t bytes = RandomSize();
    const size_t rounded = CachingAllocatorRoundSize(bytes);
    const bool small = rounded <= kSmallSize;
    xxnpuStream_t stream = streams_[rng_() % streams_.size()];
    const MemorySnapshot before = alloc_.Snapshot();
    const int calls_before = backend_.alloc_calls();
    const int syncs_before = backend_.sync_calls();
    const bool check_fit = config_.max_split_size == kNoMaxSplitSize && !HasRetirablePending();
    const uint64_t expected = check_fit ? ExpectedBestFit(before, stream, small, rounded) : 0;

    absl::StatusOr<void*> p = alloc_.Allocate(bytes, stream, /*context_id=*/step_ + 1);
    completed_unretired_.clear();  // Allocate retired every completed marker
    if (backend_.sync_calls() != syncs_before) {
      // The OOM path synchronized: the fake completed every marker, and the allocator
      // retired them all.
      for (auto& [addr, region] : pending_) region.waiting.clear();
      pending_.clear();
    }
    if (!p.ok()) {
      ASSERT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << Where() << p.status();
      ++ooms_;
      return;
    }
    ++allocations_;
    const uint64_t addr = reinterpret_cast<uint64_t>(*p);
    ASSERT_NE(addr, 0u) << Where();
    ASSERT_EQ(addr % 512, 0u) << Where();

    if (check_fit) {
      ++best_fit_checks_;
      if (expected != 0) {
        EXPECT_EQ(addr, expected) << Where() << ": not the best fit";
        EXPECT_EQ(backend_.alloc_calls(), calls_before) << Where() << ": device call with a fit";
      } else {
        EXPECT_GT(backend_.alloc_calls(), calls_before) << Where();
      }
    }

    // The block's real size (a large block may keep an unsplit remainder).
    const MemorySnapshot after = alloc_.Snapshot();
    size_t size = 0;
    for (const SegmentInfo& seg : after.segments) {
      for (const BlockInfo& b : seg.blocks) {
        if (b.address == addr) {
          size = b.size;
          EXPECT_EQ(seg.stream, stream) << Where();
          EXPECT_EQ(seg.is_large, !small) << Where();
          EXPECT_EQ(b.state, BlockState::kActiveAllocated) << Where();
          EXPECT_EQ(b.requested_size, bytes) << Where();
          EXPECT_EQ(b.context_id, static_cast<uint64_t>(step_ + 1)) << Where();
        }
      }
    }
    ASSERT_GE(size, rounded) << Where();
    if (small) {
      EXPECT_EQ(size, rounded) << Where();
    } else if (config_.max_split_size == kNoMaxSplitSize) {
      EXPECT_LE(size, rounded + kSmallSize) << Where();
    }

    // No overlap with live blocks or with memory still pending on another stream.
    for (const auto& [a, b] : live_) {
      ASSERT_TRUE(addr + size <= a || a + b.size <= addr)
          << Where() << ": overlaps live block " << a;
    }
    for (const auto& [a, region] : pending_) {
      if (region.waiting.empty()) continue;
      ASSERT_TRUE(addr + size <= a || a + region.size <= addr)
          << Where() << ": handed out memory pending on another stream";
    }
    LiveBlock block;
    block.size = size;
    block.rounded = rounded;
    block.requested = bytes;
    block.stream = stream;
    block.small = small;
    live_.emplace(addr, block);
  }

  void ZeroAllocation() {
    const int calls = backend_.alloc_calls();
    absl::StatusOr<void*> p = alloc_.Allocate(0, streams_[0]);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, nullptr);
    EXPECT_EQ(backend_.alloc_calls(), calls);
  }

  uint64_t RandomLive() {
    auto it = live_.begin();
    std::advance(it, rng_() % live_.size());
    return it->first;
  }

  void FreeOne() {
    if (live_.empty()) return;
    const uint64_t addr = RandomLive();
    const LiveBlock block = live_.at(addr);
    ASSERT_TRUE(alloc_.Free(reinterpret_cast<void*>(addr)).ok()) << Where();
    live_.erase(addr);
    if (!block.uses.empty()) {
      PendingRegion region;
      region.size = block.size;
      region.waiting = block.uses;
      pending_.emplace(addr, region);
    }
    // A second free must be refused and change nothing.
    if (rng_() % 16 == 0) {
      EXPECT_EQ(alloc_.Free(reinterpret_cast<void*>(addr)).code(),
                absl::StatusCode::kInvalidArgument)
          << Where();
    }
  }

  void RecordStreamOne() {
    if (live_.empty()) return;
    const uint64_t addr = RandomLive();
    LiveBlock& block = live_.at(addr);
    xxnpuStream_t s = streams_[rng_() % streams_.size()];
    ASSERT_TRUE(alloc_.RecordStream(reinterpret_cast<void*>(addr), s).ok()) << Where();
    if (s != block.stream) block.uses.insert(s);
  }

  void CompleteStream(xxnpuStream_t s) {
    backend_.CompleteStream(s);
    for (auto it = pending_.begin(); it != pending_.end();) {
      it->second.waiting.erase(s);
      if (it->second.waiting.empty()) {
        completed_unretired_.insert(it->first);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void EmptyCache() {
    ASSERT_TRUE(alloc_.EmptyCache().ok()) << Where();
    completed_unretired_.clear();
    // Everything fully free went back: each remaining segment holds an active block.
    for (const SegmentInfo& seg : alloc_.Snapshot().segments) {
      EXPECT_GT(seg.active_size, 0u) << Where() << ": a free segment survived EmptyCache";
    }
  }

  void Check() {
    if (::testing::Test::HasFatalFailure()) return;
    const MemorySnapshot snap = alloc_.Snapshot();
    const DeviceStats stats = alloc_.GetStats();
    const std::map<uintptr_t, size_t> device = backend_.live();

    // Segments == the backend's outstanding allocations.
    ASSERT_EQ(snap.segments.size(), device.size()) << Where();
    size_t i = 0;
    for (const auto& [base, size] : device) {
      const SegmentInfo& seg = snap.segments[i++];
      ASSERT_EQ(seg.address, base) << Where();
      ASSERT_EQ(seg.total_size, size) << Where();
      if (seg.is_large) {
        EXPECT_GT(size, kSmallBuffer - 1) << Where();
        EXPECT_EQ(size % kRoundLarge, 0u) << Where();
      } else {
        EXPECT_EQ(size, kSmallBuffer) << Where();
      }
    }

    // Per pool sums from the snapshot.
    struct Sums {
      int64_t segments = 0, reserved = 0, allocated = 0, allocated_bytes = 0, active = 0,
              active_bytes = 0, inactive_split = 0, inactive_split_bytes = 0, requested = 0;
    } sums[2];
    size_t allocated_blocks = 0;
    for (const SegmentInfo& seg : snap.segments) {
      Sums& s = sums[seg.is_large ? 1 : 0];
      ++s.segments;
      s.reserved += static_cast<int64_t>(seg.total_size);
      uint64_t next = seg.address;
      bool prev_inactive = false;
      for (const BlockInfo& b : seg.blocks) {
        ASSERT_EQ(b.address, next) << Where() << ": blocks do not tile the segment";
        ASSERT_GT(b.size, 0u) << Where();
        ASSERT_EQ(b.size % kMinBlockSize, 0u) << Where();
        next += b.size;
        const bool inactive = b.state == BlockState::kInactive;
        EXPECT_FALSE(inactive && prev_inactive) << Where() << ": unmerged free neighbours";
        prev_inactive = inactive;
        if (inactive) {
          if (seg.blocks.size() > 1) {
            ++s.inactive_split;
            s.inactive_split_bytes += static_cast<int64_t>(b.size);
          }
          continue;
        }
        ++s.active;
        s.active_bytes += static_cast<int64_t>(b.size);
        s.requested += static_cast<int64_t>(b.requested_size);
        if (b.state == BlockState::kActiveAllocated) {
          ++s.allocated;
          ++allocated_blocks;
          s.allocated_bytes += static_cast<int64_t>(b.size);
          auto it = live_.find(b.address);
          ASSERT_NE(it, live_.end()) << Where() << ": allocated block the model freed";
          EXPECT_EQ(it->second.size, b.size) << Where();
          EXPECT_EQ(it->second.requested, b.requested_size) << Where();
          EXPECT_EQ(seg.stream, it->second.stream) << Where();
        } else {
          // Pending: the model freed it with uses; its markers may have completed but
          // not been retired yet.
          EXPECT_TRUE(pending_.count(b.address) > 0 ||
                      completed_unretired_.count(b.address) > 0)
              << Where() << ": unexpected pending block";
        }
      }
      ASSERT_EQ(next, seg.address + seg.total_size) << Where();
    }
    ASSERT_EQ(allocated_blocks, live_.size()) << Where();
    // Every region still waiting for a marker is pending in the allocator.
    for (const auto& [addr, region] : pending_) {
      bool found = false;
      for (const SegmentInfo& seg : snap.segments) {
        for (const BlockInfo& b : seg.blocks) {
          if (b.address == addr) {
            found = b.state == BlockState::kActivePendingFree && b.size == region.size;
          }
        }
      }
      EXPECT_TRUE(found) << Where() << ": region waiting for a marker is not pending";
    }

    // Model sums.
    int64_t live_bytes[2] = {0, 0};
    for (const auto& [addr, b] : live_) live_bytes[b.small ? 0 : 1] += static_cast<int64_t>(b.size);
    for (const auto& [addr, b] : live_) {
      // Inside a backend segment.
      auto seg = device.upper_bound(addr);
      ASSERT_NE(seg, device.begin()) << Where();
      --seg;
      EXPECT_LE(addr + b.size, seg->first + seg->second) << Where() << ": outside a segment";
    }

    const size_t idx[2] = {kSmallIdx, kLargeIdx};
    for (int pool = 0; pool < 2; ++pool) {
      const size_t t = idx[pool];
      const Sums& s = sums[pool];
      EXPECT_EQ(stats.allocated_bytes[t].current, live_bytes[pool]) << Where();
      EXPECT_EQ(stats.allocated_bytes[t].current, s.allocated_bytes) << Where();
      EXPECT_EQ(stats.allocation[t].current, s.allocated) << Where();
      EXPECT_EQ(stats.segment[t].current, s.segments) << Where();
      EXPECT_EQ(stats.reserved_bytes[t].current, s.reserved) << Where();
      EXPECT_EQ(stats.active[t].current, s.active) << Where();
      EXPECT_EQ(stats.active_bytes[t].current, s.active_bytes) << Where();
      EXPECT_EQ(stats.inactive_split[t].current, s.inactive_split) << Where();
      EXPECT_EQ(stats.inactive_split_bytes[t].current, s.inactive_split_bytes) << Where();
      EXPECT_EQ(stats.requested_bytes[t].current, s.requested) << Where();
    }
    for (const StatArray* a :
         {&stats.allocation, &stats.segment, &stats.active, &stats.inactive_split,
          &stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
          &stats.inactive_split_bytes, &stats.requested_bytes}) {
      EXPECT_EQ((*a)[kAgg].current, (*a)[kSmallIdx].current + (*a)[kLargeIdx].current)
          << Where();
      for (const Stat& st : *a) {
        EXPECT_GE(st.current, 0) << Where();
        EXPECT_GE(st.peak, st.current) << Where();
        EXPECT_EQ(st.allocated - st.freed, st.current) << Where();  // never reset here
      }
    }
    EXPECT_EQ(stats.reserved_bytes[kAgg].current,
              static_cast<int64_t>(backend_.outstanding_bytes()))
        << Where();
    EXPECT_EQ(stats.num_device_alloc - stats.num_device_free,
              static_cast<int64_t>(device.size()))
        << Where();
    EXPECT_EQ(stats.num_ooms, ooms_) << Where();
  }

  void Drain() {
    if (::testing::Test::HasFatalFailure()) return;
    while (!live_.empty()) {
      FreeOne();
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (xxnpuStream_t s : streams_) CompleteStream(s);
    ASSERT_TRUE(alloc_.EmptyCache().ok());
    completed_unretired_.clear();
    Check();
    const DeviceStats stats = alloc_.GetStats();
    EXPECT_EQ(stats.reserved_bytes[kAgg].current, 0) << Where();
    EXPECT_EQ(stats.allocated_bytes[kAgg].current, 0) << Where();
    EXPECT_EQ(stats.active[kAgg].current, 0) << Where();
    EXPECT_EQ(stats.requested_bytes[kAgg].current, 0) << Where();
    EXPECT_EQ(backend_.outstanding_allocs(), 0u) << Where();
    EXPECT_EQ(backend_.outstanding_bytes(), 0u) << Where();
    EXPECT_EQ(backend_.live_markers(), 0u) << Where();
  }

  const ModelConfig config_;
  std::mt19937 rng_;
  FakeAllocatorBackend backend_;
  CachingAllocator alloc_;
  const std::vector<xxnpuStream_t> streams_ = {nullptr, FakeStream(1), FakeStream(2),
                                               FakeStream(3)};
  int step_ = 0;
  std::map<uint64_t, LiveBlock> live_;
  std::map<uint64_t, PendingRegion> pending_;       // freed, markers outstanding
  std::set<uint64_t> completed_unretired_;         // markers done, allocator not told yet
  int ooms_ = 0;
  int allocations_ = 0;
  int best_fit_checks_ = 0;
};

class CachingAllocatorModelTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(CachingAllocatorModelTest, RandomOperationsKeepInvariants) {
  ModelConfig config;
  config.seed = GetParam();
  ModelRun run(config);
  run.Run();
  // The sequence must have exercised the interesting paths.
  EXPECT_GT(run.allocations(), 1000);
  EXPECT_GT(run.best_fit_checks(), 500);
  RecordProperty("ooms", run.ooms());
}

TEST_P(CachingAllocatorModelTest, TightDeviceHitsOutOfMemory) {
  ModelConfig config;
  config.seed = GetParam() + 1000;
  config.capacity = 96 * kMiB;
  config.ops = 2000;
  ModelRun run(config);
  run.Run();
  EXPECT_GT(run.ooms(), 0);
}

TEST_P(CachingAllocatorModelTest, WithMaxSplitSize) {
  ModelConfig config;
  config.seed = GetParam() + 2000;
  config.max_split_size = 24 * kMiB;
  config.ops = 2000;
  ModelRun run(config);
  run.Run();
}

INSTANTIATE_TEST_SUITE_P(Seeds, CachingAllocatorModelTest,
                         ::testing::Values(1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u));

}  // namespace
}  // namespace xxnpu
