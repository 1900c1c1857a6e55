// Tests for device/activity_trace: per-kind enabling, per-thread rings (ordering,
// exited threads, overflow accounting, concurrent collection, bounded memory) and the
// external correlation stacks.
#include "device/activity_trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "device/clock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

constexpr uint64_t kNoId = 0;

ActivityRecord MakeRecord(ActivityKind kind, int64_t start_ns, uint64_t id) {
  ActivityRecord r;
  r.kind = kind;
  r.name = "test";
  r.start_ns = start_ns;
  r.end_ns = start_ns;
  r.correlation_id = id;
  r.thread_id = CurrentThreadId();
  return r;
}

// Every test starts and ends with tracing off, nothing buffered, no drops and the
// default ring size, so tests don't see each other's records.
class ActivityTraceTest : public ::testing::Test {
 protected:
  void SetUp() override { Reset(); }
  void TearDown() override { Reset(); }
  static void Reset() {
    ActivityDisableAll();
    ActivityClear();
    ActivitySetBufferRecords(65536);
  }
};

TEST_F(ActivityTraceTest, KindNames) {
  EXPECT_STREQ(ActivityKindName(ActivityKind::kKernel), "kernel");
  EXPECT_STREQ(ActivityKindName(ActivityKind::kMemcpy), "memcpy");
  EXPECT_STREQ(ActivityKindName(ActivityKind::kMemset), "memset");
  EXPECT_STREQ(ActivityKindName(ActivityKind::kRuntime), "runtime");
  EXPECT_STREQ(ActivityKindName(ActivityKind::kSynchronization), "synchronization");
  EXPECT_STREQ(ActivityKindName(ActivityKind::kMemory), "memory");
  EXPECT_STREQ(ActivityKindName(ActivityKind::kCachingAllocator), "caching_allocator");
  EXPECT_STREQ(ActivityKindName(ActivityKind::kMarker), "marker");
  EXPECT_STREQ(ActivityKindName(ActivityKind::kCount), "unknown");
  EXPECT_STREQ(ActivityKindName(static_cast<ActivityKind>(200)), "unknown");
}

TEST_F(ActivityTraceTest, DisabledKindsWriteNothing) {
  // A fresh thread: a disabled emit must not even create (register) a ring.
  const size_t rings_before = ActivityRegisteredRingCountForTesting();
  size_t rings_during = 0;
  std::thread t([&] {
    for (int k = 0; k < static_cast<int>(ActivityKind::kCount); ++k) {
      ActivityRecordEmit(MakeRecord(static_cast<ActivityKind>(k), k, k + 1));
    }
    rings_during = ActivityRegisteredRingCountForTesting();
  });
  t.join();
  EXPECT_EQ(rings_during, rings_before);

  for (int k = 0; k < static_cast<int>(ActivityKind::kCount); ++k) {
    ActivityRecordEmit(MakeRecord(static_cast<ActivityKind>(k), k, k + 1));
  }
  std::vector<ActivityRecord> out;
  EXPECT_EQ(ActivityCollectTraceClock(&out), 0u);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(ActivityTakeDroppedCount(), 0u);
}

TEST_F(ActivityTraceTest, EnableAndDisablePerKind) {
  for (int k = 0; k < static_cast<int>(ActivityKind::kCount); ++k) {
    EXPECT_FALSE(ActivityEnabled(static_cast<ActivityKind>(k)));
  }
  EXPECT_FALSE(ActivityAnyEnabled());
  ActivityEnable(ActivityKind::kKernel);
  EXPECT_TRUE(ActivityAnyEnabled());
  ActivityEnable(ActivityKind::kMemory);
  EXPECT_TRUE(ActivityEnabled(ActivityKind::kKernel));
  EXPECT_TRUE(ActivityEnabled(ActivityKind::kMemory));
  EXPECT_FALSE(ActivityEnabled(ActivityKind::kMemcpy));
  EXPECT_FALSE(ActivityEnabled(ActivityKind::kRuntime));
  EXPECT_FALSE(ActivityEnabled(ActivityKind::kCount));

  ActivityRecordEmit(MakeRecord(ActivityKind::kKernel, 1, 1));
  ActivityRecordEmit(MakeRecord(ActivityKind::kMemcpy, 2, 2));
  ActivityRecordEmit(MakeRecord(ActivityKind::kMemory, 3, 3));
  ActivityDisable(ActivityKind::kKernel);
  EXPECT_FALSE(ActivityEnabled(ActivityKind::kKernel));
  EXPECT_TRUE(ActivityEnabled(ActivityKind::kMemory));
  ActivityRecordEmit(MakeRecord(ActivityKind::kKernel, 4, 4));
  ActivityRecordEmit(MakeRecord(ActivityKind::kMemory, 5, 5));

  std::vector<ActivityRecord> out;
  ASSERT_EQ(ActivityCollectTraceClock(&out), 3u);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].kind, ActivityKind::kKernel);
  EXPECT_EQ(out[0].correlation_id, 1u);
  EXPECT_EQ(out[1].kind, ActivityKind::kMemory);
  EXPECT_EQ(out[1].correlation_id, 3u);
  EXPECT_EQ(out[2].kind, ActivityKind::kMemory);
  EXPECT_EQ(out[2].correlation_id, 5u);

  ActivityDisableAll();
  EXPECT_FALSE(ActivityEnabled(ActivityKind::kMemory));
  EXPECT_FALSE(ActivityAnyEnabled());
  ActivityRecordEmit(MakeRecord(ActivityKind::kMemory, 6, 6));
  out.clear();
  EXPECT_EQ(ActivityCollectTraceClock(&out), 0u);
}

TEST_F(ActivityTraceTest, RecordFieldsRoundTrip) {
  ActivityEnable(ActivityKind::kKernel);
  ActivityRecord r = MakeRecord(ActivityKind::kKernel, 100, 42);
  r.subkind = 3;
  r.end_ns = 250;
  r.external_id[0] = 7;
  r.external_id[1] = 8;
  r.device = 1;
  r.stream = 5;
  r.grid[0] = 2;
  r.grid[2] = 4;
  r.block[1] = 128;
  r.flops = 1 << 20;
  r.bytes = -4096;
  r.address = 0xdead0000;
  r.total_allocated = 11;
  r.total_reserved = 22;
  ActivityRecordEmit(r);
  std::vector<ActivityRecord> out;
  ASSERT_EQ(ActivityCollectTraceClock(&out), 1u);
  EXPECT_EQ(std::memcmp(&out[0], &r, sizeof(r)), 0);
}

TEST_F(ActivityTraceTest, CollectAppendsAndSortsOnlyTheNewRecords) {
  ActivityEnable(ActivityKind::kMarker);
  std::vector<ActivityRecord> out = {MakeRecord(ActivityKind::kMarker, 1000, 99)};
  ActivityRecordEmit(MakeRecord(ActivityKind::kMarker, 30, 1));
  ActivityRecordEmit(MakeRecord(ActivityKind::kMarker, 10, 2));
  ActivityRecordEmit(MakeRecord(ActivityKind::kMarker, 20, 3));
  ASSERT_EQ(ActivityCollectTraceClock(&out), 3u);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].correlation_id, 99u);  // untouched
  EXPECT_EQ(out[1].start_ns, 10);
  EXPECT_EQ(out[2].start_ns, 20);
  EXPECT_EQ(out[3].start_ns, 30);
}

TEST_F(ActivityTraceTest, EqualTimestampsKeepEmissionOrder) {
  ActivityEnable(ActivityKind::kRuntime);
  for (uint64_t i = 1; i <= 1000; ++i) {
    ActivityRecordEmit(MakeRecord(ActivityKind::kRuntime, i % 2 == 0 ? 5 : 7, i));
  }
  std::vector<ActivityRecord> out;
  ASSERT_EQ(ActivityCollectTraceClock(&out), 1000u);
  uint64_t last_id = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == 500) last_id = 0;  // the start_ns == 7 group begins
    EXPECT_EQ(out[i].start_ns, i < 500 ? 5 : 7);
    EXPECT_GT(out[i].correlation_id, last_id);
    last_id = out[i].correlation_id;
  }
}

TEST_F(ActivityTraceTest, RecordsFromManyThreadsComeBackSortedWithoutLossOrDuplicates) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10000;
  ActivityEnable(ActivityKind::kKernel);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Interleaved timestamps: thread t owns start_ns == t (mod kThreads).
        const int64_t start = int64_t{i} * kThreads + t;
        ActivityRecordEmit(MakeRecord(ActivityKind::kKernel, start, static_cast<uint64_t>(start)));
      }
    });
  }
  for (auto& t : threads) t.join();

  std::vector<ActivityRecord> out;
  ASSERT_EQ(ActivityCollectTraceClock(&out), size_t{kThreads * kPerThread});
  ASSERT_EQ(out.size(), size_t{kThreads * kPerThread});
  for (size_t i = 0; i < out.size(); ++i) {
    // Sorted, and each start_ns (== id) appears exactly once.
    ASSERT_EQ(out[i].start_ns, static_cast<int64_t>(i));
    ASSERT_EQ(out[i].correlation_id, i);
  }
  EXPECT_EQ(ActivityTakeDroppedCount(), 0u);
  std::set<int32_t> tids;
  for (const auto& r : out) tids.insert(r.thread_id);
  EXPECT_EQ(tids.size(), size_t{kThreads});

  out.clear();
  EXPECT_EQ(ActivityCollectTraceClock(&out), 0u) << "a second collect must not return records again";
}

TEST_F(ActivityTraceTest, RecordsOfExitedThreadsAreCollected) {
  ActivityEnable(ActivityKind::kMemcpy);
  int32_t tid = 0;
  std::thread t([&] {
    tid = CurrentThreadId();
    for (uint64_t i = 1; i <= 10; ++i) {
      ActivityRecordEmit(MakeRecord(ActivityKind::kMemcpy, static_cast<int64_t>(i), i));
    }
  });
  t.join();
  std::vector<ActivityRecord> out;
  ASSERT_EQ(ActivityCollectTraceClock(&out), 10u);
  for (uint64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(out[i].correlation_id, i + 1);
    EXPECT_EQ(out[i].thread_id, tid);
  }
}

TEST_F(ActivityTraceTest, FullRingDropsAndCountsExactlyTheOverflow) {
  constexpr int kCapacity = 64;
  constexpr int kEmitted = 100;
  ActivitySetBufferRecords(kCapacity);  // applies to the fresh thread's ring
  ActivityEnable(ActivityKind::kRuntime);
  std::thread t([] {
    for (int i = 0; i < kEmitted; ++i) {
      ActivityRecordEmit(MakeRecord(ActivityKind::kRuntime, i, static_cast<uint64_t>(i)));
    }
  });
  t.join();
  EXPECT_EQ(ActivityTakeDroppedCount(), uint64_t{kEmitted - kCapacity});
  EXPECT_EQ(ActivityTakeDroppedCount(), 0u) << "taking resets the count";
  std::vector<ActivityRecord> out;
  ASSERT_EQ(ActivityCollectTraceClock(&out), size_t{kCapacity});
  for (int i = 0; i < kCapacity; ++i) {
    EXPECT_EQ(out[i].correlation_id, static_cast<uint64_t>(i)) << "the oldest records are kept";
  }
}

TEST_F(ActivityTraceTest, RingIsReusableAfterCollectAcrossWrapAround) {
  ActivitySetBufferRecords(64);
  ActivityEnable(ActivityKind::kKernel);
  std::thread t([] {
    uint64_t id = 0;
    std::vector<ActivityRecord> out;
    // 10 rounds of 50 records through a 64-slot ring: wraps around several times.
    for (int round = 0; round < 10; ++round) {
      for (int i = 0; i < 50; ++i, ++id) {
        ActivityRecordEmit(MakeRecord(ActivityKind::kKernel, static_cast<int64_t>(id), id));
      }
      out.clear();
      ASSERT_EQ(ActivityCollectTraceClock(&out), 50u);
      for (int i = 0; i < 50; ++i) {
        ASSERT_EQ(out[i].correlation_id, id - 50 + static_cast<uint64_t>(i));
      }
    }
  });
  t.join();
  EXPECT_EQ(ActivityTakeDroppedCount(), 0u);
}

TEST_F(ActivityTraceTest, CollectWhileOtherThreadsEmit) {
  constexpr int kThreads = 3;
  constexpr uint64_t kPerThread = 50000;
  // Small rings so that drops happen and their accounting is exercised too.
  ActivitySetBufferRecords(1024);
  ActivityEnable(ActivityKind::kKernel);

  std::atomic<int> running{kThreads};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &running] {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        const uint64_t id = static_cast<uint64_t>(t) * kPerThread + i;
        ActivityRecordEmit(MakeRecord(ActivityKind::kKernel, NowNs(), id));
      }
      running.fetch_sub(1);
    });
  }
  std::vector<ActivityRecord> all;
  size_t collected = 0;
  int collections = 0;
  while (running.load() > 0) {
    collected += ActivityCollectTraceClock(&all);
    ++collections;
  }
  for (auto& t : threads) t.join();
  collected += ActivityCollectTraceClock(&all);
  const uint64_t dropped = ActivityTakeDroppedCount();

  EXPECT_GT(collections, 0);
  EXPECT_EQ(collected, all.size());
  EXPECT_EQ(collected + dropped, kThreads * kPerThread);
  absl::flat_hash_set<uint64_t> ids;
  for (const auto& r : all) {
    ASSERT_LT(r.correlation_id, kThreads * kPerThread);
    ASSERT_TRUE(ids.insert(r.correlation_id).second) << "duplicate " << r.correlation_id;
  }
}

TEST_F(ActivityTraceTest, ClearDiscardsRecordsAndDropCount) {
  ActivitySetBufferRecords(64);
  ActivityEnable(ActivityKind::kMemset);
  std::thread t([] {
    for (int i = 0; i < 80; ++i) ActivityRecordEmit(MakeRecord(ActivityKind::kMemset, i, 1));
  });
  t.join();
  ActivityRecordEmit(MakeRecord(ActivityKind::kMemset, 1, 1));
  ActivityClear();
  EXPECT_EQ(ActivityTakeDroppedCount(), 0u);
  std::vector<ActivityRecord> out;
  EXPECT_EQ(ActivityCollectTraceClock(&out), 0u);
  // Recording continues normally after a clear.
  ActivityRecordEmit(MakeRecord(ActivityKind::kMemset, 2, 2));
  EXPECT_EQ(ActivityCollectTraceClock(&out), 1u);
}

TEST_F(ActivityTraceTest, RingsOfExitedThreadsAreFreedOnceDrained) {
  ActivitySetBufferRecords(256);
  ActivityEnable(ActivityKind::kRuntime);
  std::vector<ActivityRecord> out;
  ActivityCollectTraceClock(&out);  // frees rings left by earlier tests
  const size_t baseline = ActivityRegisteredRingCountForTesting();
  for (int cycle = 0; cycle < 200; ++cycle) {
    std::thread t([] {
      for (int i = 0; i < 10; ++i) ActivityRecordEmit(MakeRecord(ActivityKind::kRuntime, i, 1));
    });
    t.join();
    // Kept until drained, so its records are not lost...
    ASSERT_EQ(ActivityRegisteredRingCountForTesting(), baseline + 1);
    out.clear();
    ASSERT_EQ(ActivityCollectTraceClock(&out), 10u);
    // ...then freed: the registry does not grow with the number of threads ever seen.
    ASSERT_EQ(ActivityRegisteredRingCountForTesting(), baseline);
  }
}

TEST_F(ActivityTraceTest, ExternalCorrelationStacksNest) {
  ActivityRecord r;
  ActivityCaptureExternalIds(&r);
  EXPECT_EQ(r.external_id[0], kNoId);
  EXPECT_EQ(r.external_id[1], kNoId);

  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kDefault, 1);
  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kDefault, 2);
  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kUser, 7);
  ActivityCaptureExternalIds(&r);
  EXPECT_EQ(r.external_id[0], 2u);
  EXPECT_EQ(r.external_id[1], 7u);

  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault), 2u);
  ActivityCaptureExternalIds(&r);
  EXPECT_EQ(r.external_id[0], 1u);
  EXPECT_EQ(r.external_id[1], 7u);

  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kUser), 7u);
  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault), 1u);
  ActivityCaptureExternalIds(&r);
  EXPECT_EQ(r.external_id[0], kNoId);
  EXPECT_EQ(r.external_id[1], kNoId);
}

TEST_F(ActivityTraceTest, ExternalCorrelationDeepStack) {
  // Deeper than any inline capacity: the stack must grow, and unwind in order.
  for (uint64_t id = 1; id <= 100; ++id) {
    ActivityPushExternalCorrelationId(ExternalCorrelationKind::kUser, id);
  }
  for (uint64_t id = 100; id >= 1; --id) {
    ActivityRecord r;
    ActivityCaptureExternalIds(&r);
    ASSERT_EQ(r.external_id[1], id);
    ASSERT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kUser), id);
  }
  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kUser), kNoId);
}

TEST_F(ActivityTraceTest, PopOfEmptyStackReturnsZero) {
  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault), kNoId);
  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kUser), kNoId);
  // And the stack still works afterwards.
  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kDefault, 5);
  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault), 5u);
  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault), kNoId);
}

TEST_F(ActivityTraceTest, ExternalCorrelationStacksArePerThread) {
  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kDefault, 11);
  ActivityPushExternalCorrelationId(ExternalCorrelationKind::kUser, 12);
  ActivityRecord seen_before_push;
  ActivityRecord seen_after_push;
  uint64_t popped = 0;
  uint64_t popped_empty = 0;
  std::thread t([&] {
    ActivityCaptureExternalIds(&seen_before_push);
    ActivityPushExternalCorrelationId(ExternalCorrelationKind::kDefault, 21);
    ActivityCaptureExternalIds(&seen_after_push);
    popped = ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault);
    popped_empty = ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault);
  });
  t.join();
  EXPECT_EQ(seen_before_push.external_id[0], kNoId);
  EXPECT_EQ(seen_before_push.external_id[1], kNoId);
  EXPECT_EQ(seen_after_push.external_id[0], 21u);
  EXPECT_EQ(seen_after_push.external_id[1], kNoId);
  EXPECT_EQ(popped, 21u);
  EXPECT_EQ(popped_empty, kNoId);

  // The other thread neither saw nor disturbed ours.
  ActivityRecord r;
  ActivityCaptureExternalIds(&r);
  EXPECT_EQ(r.external_id[0], 11u);
  EXPECT_EQ(r.external_id[1], 12u);
  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kDefault), 11u);
  EXPECT_EQ(ActivityPopExternalCorrelationId(ExternalCorrelationKind::kUser), 12u);
}

TEST_F(ActivityTraceTest, CorrelationIdsAreUniqueAndNonZeroAcrossThreads) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 10000;
  std::vector<std::vector<uint64_t>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&ids, t] {
      ids[t].reserve(kPerThread);
      for (int i = 0; i < kPerThread; ++i) ids[t].push_back(ActivityNextCorrelationId());
    });
  }
  for (auto& t : threads) t.join();
  absl::flat_hash_set<uint64_t> seen;
  for (const auto& v : ids) {
    // Each thread sees increasing ids.
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
    for (uint64_t id : v) {
      ASSERT_NE(id, 0u);
      ASSERT_TRUE(seen.insert(id).second) << "duplicate correlation id " << id;
    }
  }
  EXPECT_EQ(seen.size(), size_t{kThreads * kPerThread});
}

// Records are written in the trace clock; ActivityCollect hands them out in Unix ns (an
// instant record keeps start == end), ActivityCollectTraceClock as written.
TEST_F(ActivityTraceTest, CollectConvertsTheTraceClockToUnixNanoseconds) {
  ActivityEnable(ActivityKind::kMarker);
  const int64_t wall_before = NowNs();
  const int64_t stamp = TraceClockNow();
  const int64_t wall_after = NowNs();
  ActivityRecord span = MakeRecord(ActivityKind::kMarker, stamp, 1);
  span.end_ns = stamp + (TraceClockNow() - stamp) + 1;  // a later reading: end > start
  ActivityRecordEmit(MakeRecord(ActivityKind::kMarker, stamp, 2));
  ActivityRecordEmit(span);
  std::vector<ActivityRecord> out;
  ASSERT_EQ(ActivityCollect(&out), 2u);
  constexpr int64_t kLineErrorNs = 1'000;  // pairs are good to ~10 ns; generous
  for (const ActivityRecord& r : out) {
    EXPECT_GE(r.start_ns, wall_before - kLineErrorNs);
    EXPECT_LE(r.start_ns, wall_after + kLineErrorNs);
  }
  const ActivityRecord& instant = out[0].correlation_id == 2 ? out[0] : out[1];
  const ActivityRecord& ranged = out[0].correlation_id == 1 ? out[0] : out[1];
  EXPECT_EQ(instant.start_ns, instant.end_ns);
  EXPECT_EQ(ranged.start_ns, instant.start_ns);
  EXPECT_GE(ranged.end_ns, ranged.start_ns);

  ActivityRecordEmit(MakeRecord(ActivityKind::kMarker, stamp, 3));
  out.clear();
  ASSERT_EQ(ActivityCollectTraceClock(&out), 1u);
  EXPECT_EQ(out[0].start_ns, stamp);
}

TEST_F(ActivityTraceTest, CurrentThreadIdIsTheOsThreadId) {
  const int32_t main_tid = CurrentThreadId();
  EXPECT_EQ(main_tid, static_cast<int32_t>(syscall(SYS_gettid)));
  EXPECT_EQ(CurrentThreadId(), main_tid);
  int32_t other_tid = 0;
  int32_t other_os_tid = 0;
  std::thread t([&] {
    other_tid = CurrentThreadId();
    other_os_tid = static_cast<int32_t>(syscall(SYS_gettid));
  });
  t.join();
  EXPECT_EQ(other_tid, other_os_tid);
  EXPECT_NE(other_tid, main_tid);
}

}  // namespace
}  // namespace xxnpu
