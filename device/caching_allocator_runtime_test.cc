// The caching allocator on the simulated device (RuntimeAllocatorBackend): real device
// memory, real streams and events, real capacity in OOM messages.
//
// The runtime reads its configuration at first use, so a global constructor sets it
// before main: 2 devices of 64 MiB each (small enough to run out of quickly).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "device/activity_trace.h"
#include "device/caching_allocator.h"
#include "device/graph.h"
#include "device/runtime.h"
#include "device/runtime_allocator_backend.h"
#include "device/test_util.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kDeviceMemory = 64 * kMiB;

const bool kConfigured = [] {
  test_util::UseTwoTestDevices("64M");
  return true;
}();

// A kernel that blocks its stream until the test opens the gate: "work still running on
// stream B" for as long as the test needs.
using test_util::Gate;
using test_util::LaunchWait;
constexpr char kWaitKernel[] = "caching_allocator_test_wait";

void* MustAlloc(CachingAllocator& a, size_t bytes, xxnpuStream_t stream = nullptr) {
  absl::StatusOr<void*> p = a.Allocate(bytes, stream);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : nullptr;
}

size_t DeviceFree(int device) {
  absl::StatusOr<MemInfo> info = xxnpuMemGetInfo(device);
  EXPECT_TRUE(info.ok()) << info.status();
  return info.ok() ? info->free : 0;
}

class CachingAllocatorRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kConfigured);
    ASSERT_TRUE(xxnpuSetDevice(0).ok());
    free_at_start_ = DeviceFree(0);
  }
  void TearDown() override {
    // Every test leaves the device as it found it.
    EXPECT_EQ(DeviceFree(0), free_at_start_);
  }
  size_t free_at_start_ = 0;
};

TEST_F(CachingAllocatorRuntimeTest, BackendReportsTheDevice) {
  RuntimeAllocatorBackend backend(0);
  EXPECT_EQ(backend.Device(), 0);
  EXPECT_EQ(backend.Capacity(), kDeviceMemory);
  EXPECT_EQ(backend.FreeBytes(), free_at_start_);
  absl::StatusOr<int> default_id = xxnpuStreamGetId(nullptr);
  ASSERT_TRUE(default_id.ok());
  EXPECT_EQ(backend.StreamId(nullptr), *default_id);
}

TEST_F(CachingAllocatorRuntimeTest, AllocateFreeReuseOnTheDevice) {
  {
    CachingAllocator alloc(std::make_unique<RuntimeAllocatorBackend>(0));
    void* p = MustAlloc(alloc, 4 * kKiB);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(IsDevicePointer(p));
    PointerAttributes attr = xxnpuPointerGetAttributes(p);
    EXPECT_EQ(attr.type, PointerAttributes::Type::kDevice);
    EXPECT_EQ(attr.device, 0);
    EXPECT_EQ(attr.base, p);  // the first block of a fresh segment
    EXPECT_EQ(attr.size, kSmallBuffer);
    EXPECT_EQ(DeviceFree(0), free_at_start_ - kSmallBuffer);

    // The memory is usable: a round trip through the device.
    std::vector<uint8_t> in(4 * kKiB), out(4 * kKiB);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
    ASSERT_TRUE(xxnpuMemcpy(p, in.data(), in.size(), MemcpyKind::kHostToDevice).ok());
    ASSERT_TRUE(xxnpuMemcpy(out.data(), p, out.size(), MemcpyKind::kDeviceToHost).ok());
    EXPECT_EQ(in, out);

    ASSERT_TRUE(alloc.Free(p).ok());
    for (int i = 0; i < 10; ++i) {
      void* q = MustAlloc(alloc, 4 * kKiB);
      EXPECT_EQ(q, p);  // cached, same stream
      ASSERT_TRUE(alloc.Free(q).ok());
    }
    EXPECT_EQ(alloc.GetStats().num_device_alloc, 1);
    EXPECT_EQ(DeviceFree(0), free_at_start_ - kSmallBuffer);  // still reserved

    ASSERT_TRUE(alloc.EmptyCache().ok());
    EXPECT_EQ(DeviceFree(0), free_at_start_);
    EXPECT_EQ(alloc.GetStats().num_device_free, 1);

    // The destructor returns segments still held.
    (void)MustAlloc(alloc, 3 * kMiB);
    EXPECT_EQ(DeviceFree(0), free_at_start_ - kLargeBuffer);
  }
  EXPECT_EQ(DeviceFree(0), free_at_start_);
}

TEST_F(CachingAllocatorRuntimeTest, RecordStreamWaitsForTheOtherStream) {
  absl::StatusOr<xxnpuStream_t> b = xxnpuStreamCreate();
  ASSERT_TRUE(b.ok()) << b.status();
  {
    CachingAllocator alloc(std::make_unique<RuntimeAllocatorBackend>(0));
    void* p = MustAlloc(alloc, kMiB);
    void* keep = MustAlloc(alloc, 4 * kKiB);  // p cannot merge with the tail

    Gate gate;
    ASSERT_TRUE(LaunchWait(gate, *b, kWaitKernel).ok());  // "stream B is still using p"
    ASSERT_TRUE(alloc.RecordStream(p, *b).ok());
    ASSERT_TRUE(alloc.Free(p).ok());

    // While B runs, p is not handed out, however often we ask.
    for (int i = 0; i < 5; ++i) {
      void* q = MustAlloc(alloc, kMiB);
      EXPECT_NE(q, p);
      ASSERT_TRUE(alloc.Free(q).ok());
    }
    ASSERT_EQ(xxnpuStreamQuery(*b).code(), absl::StatusCode::kUnavailable)
        << "the gate kernel finished early: the test proved nothing";
    MemorySnapshot snap = alloc.Snapshot();
    bool pending = false;
    for (const SegmentInfo& seg : snap.segments) {
      for (const BlockInfo& blk : seg.blocks) {
        if (blk.address == reinterpret_cast<uint64_t>(p)) {
          pending = blk.state == BlockState::kActivePendingFree;
        }
      }
    }
    EXPECT_TRUE(pending);

    gate.open.store(true);
    ASSERT_TRUE(xxnpuStreamSynchronize(*b).ok());
    void* r = MustAlloc(alloc, kMiB);  // the marker completed: p is back
    EXPECT_EQ(r, p);
    ASSERT_TRUE(alloc.Free(r).ok());
    ASSERT_TRUE(alloc.Free(keep).ok());
    ASSERT_TRUE(alloc.EmptyCache().ok());
    EXPECT_EQ(alloc.GetStats().reserved_bytes[0].current, 0);
  }
  ASSERT_TRUE(xxnpuStreamDestroy(*b).ok());
}

TEST_F(CachingAllocatorRuntimeTest, EmptyCacheKeepsMemoryPendingOnAStream) {
  absl::StatusOr<xxnpuStream_t> b = xxnpuStreamCreate();
  ASSERT_TRUE(b.ok()) << b.status();
  {
    CachingAllocator alloc(std::make_unique<RuntimeAllocatorBackend>(0));
    void* p = MustAlloc(alloc, 4 * kKiB);
    Gate gate;
    ASSERT_TRUE(LaunchWait(gate, *b, kWaitKernel).ok());
    ASSERT_TRUE(alloc.RecordStream(p, *b).ok());
    ASSERT_TRUE(alloc.Free(p).ok());
    ASSERT_TRUE(alloc.EmptyCache().ok());
    EXPECT_EQ(DeviceFree(0), free_at_start_ - kSmallBuffer);  // B may still use it
    gate.open.store(true);
    ASSERT_TRUE(xxnpuStreamSynchronize(*b).ok());
    ASSERT_TRUE(alloc.EmptyCache().ok());
    EXPECT_EQ(DeviceFree(0), free_at_start_);
  }
  ASSERT_TRUE(xxnpuStreamDestroy(*b).ok());
}

TEST_F(CachingAllocatorRuntimeTest, OutOfMemoryRetriesThenReportsTheRealCapacity) {
  absl::StatusOr<xxnpuStream_t> b = xxnpuStreamCreate();
  ASSERT_TRUE(b.ok()) << b.status();
  {
    CachingAllocator alloc(std::make_unique<RuntimeAllocatorBackend>(0));
    void* p = MustAlloc(alloc, 40 * kMiB);
    ASSERT_TRUE(alloc.Free(p).ok());
    // Cached on the default stream; B's 40 MiB only fits once the cache is returned.
    void* q = MustAlloc(alloc, 40 * kMiB, *b);
    ASSERT_NE(q, nullptr);
    DeviceStats s = alloc.GetStats();
    EXPECT_EQ(s.num_alloc_retries, 1);
    EXPECT_EQ(s.num_device_free, 1);
    EXPECT_EQ(s.num_ooms, 0);

    absl::StatusOr<void*> r = alloc.Allocate(40 * kMiB, *b);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find("out of memory on device 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Tried to allocate 40.00 MiB (41943040 bytes)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("total capacity of 64.00 MiB (67108864 bytes)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("40.00 MiB (41943040 bytes) is already allocated"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("40.00 MiB (41943040 bytes) is reserved in total"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(absl::StrCat("(", free_at_start_ - 40 * kMiB, " bytes) is free")),
              std::string::npos)
        << msg;
    EXPECT_EQ(alloc.GetStats().num_ooms, 1);
    ASSERT_TRUE(alloc.Free(q).ok());
  }
  ASSERT_TRUE(xxnpuStreamDestroy(*b).ok());
}

TEST_F(CachingAllocatorRuntimeTest, OutOfMemoryWaitsForAStreamStillUsingABlock) {
  absl::StatusOr<xxnpuStream_t> b = xxnpuStreamCreate();
  ASSERT_TRUE(b.ok()) << b.status();
  {
    CachingAllocator alloc(std::make_unique<RuntimeAllocatorBackend>(0));
    void* p = MustAlloc(alloc, 40 * kMiB);
    Gate gate;
    ASSERT_TRUE(LaunchWait(gate, *b, kWaitKernel).ok());
    ASSERT_TRUE(alloc.RecordStream(p, *b).ok());
    ASSERT_TRUE(alloc.Free(p).ok());
    // Opens the gate a little later, while the allocator is waiting in its OOM path.
    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      gate.open.store(true);
    });
    void* q = MustAlloc(alloc, 40 * kMiB, *b);
    opener.join();
    EXPECT_NE(q, nullptr);
    EXPECT_EQ(alloc.GetStats().num_sync_all_streams, 1);
    EXPECT_EQ(alloc.GetStats().num_ooms, 0);
    ASSERT_TRUE(alloc.Free(q).ok());
  }
  ASSERT_TRUE(xxnpuStreamDestroy(*b).ok());
}

TEST_F(CachingAllocatorRuntimeTest, MemoryFractionOfTheRealCapacity) {
  CachingAllocator alloc(std::make_unique<RuntimeAllocatorBackend>(0));
  ASSERT_TRUE(alloc.SetMemoryFraction(0.25).ok());  // 16 MiB
  void* p = MustAlloc(alloc, 12 * kMiB);
  absl::StatusOr<void*> q = alloc.Allocate(12 * kMiB);
  ASSERT_EQ(q.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(q.status().message().find("limits it to 16.00 MiB"), std::string::npos)
      << q.status();
  ASSERT_TRUE(alloc.Free(p).ok());
}

TEST_F(CachingAllocatorRuntimeTest, SecondDeviceAndDefaultStreamMarkers) {
  // An allocator for device 1 used from a thread whose current device is 0: segments
  // land on device 1, and markers on the default stream (nullptr) are recorded on
  // device 1's default stream without changing the caller's current device.
  const size_t free1 = DeviceFree(1);
  {
    CachingAllocator alloc(std::make_unique<RuntimeAllocatorBackend>(1));
    EXPECT_EQ(alloc.device(), 1);
    void* p = MustAlloc(alloc, 4 * kKiB, nullptr);
    PointerAttributes attr = xxnpuPointerGetAttributes(p);
    EXPECT_EQ(attr.device, 1);
    absl::StatusOr<xxnpuStream_t> s1 = [] {
      EXPECT_TRUE(xxnpuSetDevice(1).ok());
      absl::StatusOr<xxnpuStream_t> s = xxnpuStreamCreate();
      EXPECT_TRUE(xxnpuSetDevice(0).ok());
      return s;
    }();
    ASSERT_TRUE(s1.ok()) << s1.status();
    void* q = MustAlloc(alloc, 4 * kKiB, *s1);
    ASSERT_TRUE(alloc.RecordStream(q, nullptr).ok());
    ASSERT_TRUE(alloc.Free(q).ok());  // records a marker on device 1's default stream
    EXPECT_EQ(*xxnpuGetDevice(), 0);
    ASSERT_TRUE(xxnpuSetDevice(1).ok());
    ASSERT_TRUE(xxnpuDeviceSynchronize().ok());
    ASSERT_TRUE(xxnpuSetDevice(0).ok());
    ASSERT_TRUE(alloc.Free(p).ok());
    ASSERT_TRUE(alloc.EmptyCache().ok());
    EXPECT_EQ(DeviceFree(1), free1);
    EXPECT_EQ(alloc.GetStats().reserved_bytes[0].current, 0);
    ASSERT_TRUE(xxnpuStreamDestroy(*s1).ok());
  }
  EXPECT_EQ(DeviceFree(1), free1);
}

TEST_F(CachingAllocatorRuntimeTest, ActivityRecordsCarryStreamIds) {
  absl::StatusOr<xxnpuStream_t> b = xxnpuStreamCreate();
  ASSERT_TRUE(b.ok()) << b.status();
  {
    CachingAllocator alloc(std::make_unique<RuntimeAllocatorBackend>(0));
    ActivityClear();
    ActivityEnable(ActivityKind::kCachingAllocator);
    void* p = MustAlloc(alloc, 4 * kKiB, *b);
    void* q = MustAlloc(alloc, 4 * kKiB, nullptr);
    ASSERT_TRUE(alloc.Free(p).ok());
    ASSERT_TRUE(alloc.Free(q).ok());
    ActivityDisable(ActivityKind::kCachingAllocator);
    std::vector<ActivityRecord> records;
    ActivityCollect(&records);
    std::vector<ActivityRecord> mine;
    for (const ActivityRecord& r : records) {
      if (r.kind == ActivityKind::kCachingAllocator && r.subkind == 1) mine.push_back(r);
    }
    ASSERT_EQ(mine.size(), 4u);
    EXPECT_EQ(mine[0].stream, *xxnpuStreamGetId(*b));
    EXPECT_EQ(mine[1].stream, *xxnpuStreamGetId(nullptr));
    EXPECT_EQ(mine[0].device, 0);
    EXPECT_EQ(mine[0].total_reserved, kSmallBuffer);
    EXPECT_EQ(mine[1].total_reserved, 2 * kSmallBuffer);  // another stream, another segment
    ActivityClear();
  }
  ASSERT_TRUE(xxnpuStreamDestroy(*b).ok());
}

// ------------------------------------------------------------------ re-entrant frees
//
// Issue 21: a kernel body that owns memory of the allocator (as an xxccl comm kernel owns
// its tensors) is destroyed by whichever host thread next waits for, or queues work on,
// its stream. When that thread was inside the allocator (EmptyCache's or the OOM retry's
// xxnpuFree, a Free's marker), the body's free found the allocator's lock taken and spun
// forever. Each test below runs the call on a helper thread bounded by a deadline, so a
// regression fails instead of hanging the suite.

// Runs `fn` on another thread; fails the test and ends the process if it does not return
// within `timeout` (the stuck thread cannot be joined).
void RunBounded(const char* what, std::function<void()> fn,
                std::chrono::seconds timeout = std::chrono::seconds(20)) {
  std::packaged_task<void()> task(std::move(fn));
  std::future<void> done = task.get_future();
  std::thread runner(std::move(task));
  if (done.wait_for(timeout) != std::future_status::ready) {
    ADD_FAILURE() << what << " did not return within " << timeout.count()
                  << " s: a deadlock (the allocator's lock re-entered from a kernel body's destructor)";
    std::fflush(stdout);
    std::_Exit(1);
  }
  runner.join();
  done.get();
}

// A kernel body owning `ptr` of `a`: freed when the runtime destroys the body.
KernelBody BodyOwning(CachingAllocator& a, void* ptr) {
  std::shared_ptr<void> owned(ptr, [&a](void* p) { EXPECT_TRUE(a.Free(p).ok()); });
  return [owned](BlockRange) { return absl::OkStatus(); };
}

// Launches a body owning `ptr` on `stream` and waits (through an event, which destroys
// nothing) until it has run: its destruction is then due at the stream's next wait/launch.
void RunBodyOwning(CachingAllocator& a, void* ptr, xxnpuStream_t stream) {
  LaunchConfig config;
  config.name = "owns_a_block";
  ASSERT_TRUE(xxnpuLaunchKernel(config, BodyOwning(a, ptr), stream).ok());
  absl::StatusOr<xxnpuEvent_t> done = xxnpuEventCreate(kEventDisableTiming);
  ASSERT_TRUE(done.ok());
  ASSERT_TRUE(xxnpuEventRecord(*done, stream).ok());
  ASSERT_TRUE(xxnpuEventSynchronize(*done).ok());
  ASSERT_TRUE(xxnpuEventDestroy(*done).ok());
}

TEST_F(CachingAllocatorRuntimeTest, EmptyCacheWhileAFinishedKernelOwnsABlock) {
  CachingAllocator a(std::make_unique<RuntimeAllocatorBackend>(0));
  absl::StatusOr<xxnpuStream_t> stream = xxnpuStreamCreate(0);
  ASSERT_TRUE(stream.ok());
  void* cached = MustAlloc(a, 12 * kMiB);  // a segment of its own
  void* owned = MustAlloc(a, 12 * kMiB);
  ASSERT_TRUE(a.Free(cached).ok());  // a whole free segment for EmptyCache to return
  RunBodyOwning(a, owned, *stream);
  RunBounded("EmptyCache", [&] { EXPECT_TRUE(a.EmptyCache().ok()); });
  // The body's free went through: the block is cached, and the next EmptyCache returns it.
  ASSERT_TRUE(xxnpuStreamSynchronize(*stream).ok());
  EXPECT_EQ(a.GetStats().allocated_bytes[0].current, 0);
  ASSERT_TRUE(a.EmptyCache().ok());
  EXPECT_EQ(a.GetStats().reserved_bytes[0].current, 0);
  ASSERT_TRUE(xxnpuStreamDestroy(*stream).ok());
}

TEST_F(CachingAllocatorRuntimeTest, OutOfMemoryRetryWhileAFinishedKernelOwnsABlock) {
  CachingAllocator a(std::make_unique<RuntimeAllocatorBackend>(0));
  absl::StatusOr<xxnpuStream_t> stream = xxnpuStreamCreate(0);
  ASSERT_TRUE(stream.ok());
  void* cached = MustAlloc(a, 12 * kMiB);
  void* owned = MustAlloc(a, 12 * kMiB);
  ASSERT_TRUE(a.Free(cached).ok());
  // 30 MiB allowed, 24 reserved: a 16 MiB segment only fits after the retry's release.
  ASSERT_TRUE(a.SetMemoryFraction(30.0 / 64.0).ok());
  RunBodyOwning(a, owned, *stream);
  void* big = nullptr;
  RunBounded("Allocate (out-of-memory retry)", [&] {
    absl::StatusOr<void*> p = a.Allocate(16 * kMiB);
    ASSERT_TRUE(p.ok()) << p.status();
    big = *p;
  });
  EXPECT_EQ(a.GetStats().num_alloc_retries, 1);
  ASSERT_TRUE(a.Free(big).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(*stream).ok());
  EXPECT_EQ(a.GetStats().allocated_bytes[0].current, 0);
  ASSERT_TRUE(xxnpuStreamDestroy(*stream).ok());
}

TEST_F(CachingAllocatorRuntimeTest, FreeWithAMarkerWhileAFinishedKernelOwnsABlock) {
  CachingAllocator a(std::make_unique<RuntimeAllocatorBackend>(0));
  absl::StatusOr<xxnpuStream_t> stream = xxnpuStreamCreate(0);
  ASSERT_TRUE(stream.ok());
  // Blocks used on `stream` too: each Free records a marker there (queues a command).
  // Several, so that one of them lands on a launch that destroys finished bodies.
  std::vector<void*> used;
  for (int i = 0; i < 8; ++i) {
    used.push_back(MustAlloc(a, 4 * kKiB));
    ASSERT_TRUE(a.RecordStream(used.back(), *stream).ok());
  }
  void* owned = MustAlloc(a, 4 * kKiB);
  ASSERT_TRUE(a.RecordStream(owned, *stream).ok());  // its own Free records a marker too
  RunBodyOwning(a, owned, *stream);
  RunBounded("Free with a marker", [&] {
    for (void* p : used) EXPECT_TRUE(a.Free(p).ok());
  });
  ASSERT_TRUE(xxnpuStreamSynchronize(*stream).ok());
  EXPECT_EQ(a.GetStats().allocated_bytes[0].current, 0);
  ASSERT_TRUE(xxnpuStreamDestroy(*stream).ok());
}

// A graph captured as the c10 layer will capture one: its stream's allocations come from
// a private pool named after the capture, a temporary freed during capture is reused
// inside it, and the pool's memory stays until the graph is released.
TEST_F(CachingAllocatorRuntimeTest, CaptureAllocatesFromThePoolAndReplaysIntoIt) {
  RuntimeAllocatorBackend backend(0);
  CachingAllocator alloc(&backend);
  xxnpuStream_t s = *xxnpuStreamCreate();
  ASSERT_TRUE(xxnpuStreamBeginCapture(s, StreamCaptureMode::kGlobal).ok());
  const uint64_t capture = xxnpuStreamGetCaptureInfo(s)->id;
  const MempoolId pool{capture, 0};
  ASSERT_TRUE(alloc.BeginAllocateToPool(pool, [capture](xxnpuStream_t stream) {
    absl::StatusOr<StreamCaptureInfo> info = xxnpuStreamGetCaptureInfo(stream);
    return info.ok() && info->status == StreamCaptureStatus::kActive && info->id == capture;
  }).ok());

  constexpr int kN = 1024;
  // New segments during a global capture: the backend allocates in relaxed mode.
  auto* out = static_cast<int*>(MustAlloc(alloc, kN * sizeof(int), s));
  auto* tmp = static_cast<int*>(MustAlloc(alloc, kN * sizeof(int), s));
  EXPECT_EQ(*xxnpuStreamIsCapturing(s), StreamCaptureStatus::kActive);
  LaunchConfig cfg;
  cfg.name = "pool_fill";
  cfg.grid.x = kN;
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [tmp](BlockRange r) {
    for (int64_t i = r.begin; i < r.end; ++i) DeviceView(tmp)[i] = static_cast<int>(i);
    return absl::OkStatus();
  }, s).ok());
  cfg.name = "pool_copy";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [tmp, out](BlockRange r) {
    for (int64_t i = r.begin; i < r.end; ++i) DeviceView(out)[i] = DeviceView(tmp)[i] * 3;
    return absl::OkStatus();
  }, s).ok());
  ASSERT_TRUE(alloc.Free(tmp).ok());
  void* tmp2 = MustAlloc(alloc, kN * sizeof(int), s);
  EXPECT_EQ(tmp2, tmp);  // reused inside the pool
  ASSERT_TRUE(alloc.Free(tmp2).ok());
  absl::StatusOr<xxnpuGraph_t> graph = xxnpuStreamEndCapture(s);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(alloc.EndAllocateToPool(pool).ok());

  // Eager allocations on the stream now avoid the pool's free block (the replay's tmp).
  void* eager = MustAlloc(alloc, kN * sizeof(int), s);
  EXPECT_NE(eager, tmp);
  const std::vector<PoolInfo> pools = alloc.PrivatePools();
  ASSERT_EQ(pools.size(), 1u);
  EXPECT_EQ(pools[0].id, pool);
  EXPECT_EQ(pools[0].allocations, 1);  // `out`

  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(*graph);
  ASSERT_TRUE(xxnpuGraphLaunch(exec, s).ok());
  std::vector<int> host(kN);
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  ASSERT_TRUE(xxnpuMemcpy(host.data(), out, kN * sizeof(int), MemcpyKind::kDeviceToHost).ok());
  EXPECT_EQ(host[100], 300);

  ASSERT_TRUE(xxnpuGraphExecDestroy(exec).ok());
  ASSERT_TRUE(xxnpuGraphDestroy(*graph).ok());
  ASSERT_TRUE(alloc.Free(out).ok());
  ASSERT_TRUE(alloc.Free(eager).ok());
  ASSERT_TRUE(alloc.ReleasePool(pool).ok());
  EXPECT_TRUE(alloc.PrivatePools().empty());
  ASSERT_TRUE(alloc.EmptyCache().ok());
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

}  // namespace
}  // namespace xxnpu
