// Tests of the simulated device runtime: devices, memory, copies, streams, events,
// kernels and errors. Runs with 2 devices of 256 MiB and 2 compute threads (see main).
#include "device/runtime.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "device/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

using ::testing::HasSubstr;

constexpr size_t kDeviceMemory = size_t{256} << 20;

// A gate a kernel can wait on, so tests control when device work finishes.
using test_util::Gate;
using test_util::LaunchWait;

template <typename F>
absl::Status LaunchFn(const char* name, F f, xxnpuStream_t stream) {
  LaunchConfig cfg;
  cfg.name = name;
  return xxnpuLaunchKernel(cfg, [f](BlockRange) { f(); return absl::OkStatus(); }, stream);
}

TEST(RuntimeDeviceTest, CountPropertiesAndInvalidIndex) {
  ASSERT_EQ(*xxnpuGetDeviceCount(), 2);
  auto props = xxnpuGetDeviceProperties(1);
  ASSERT_TRUE(props.ok()) << props.status();
  EXPECT_EQ(props->index, 1);
  EXPECT_EQ(props->total_memory, kDeviceMemory);
  EXPECT_EQ(props->compute_units, 2);
  EXPECT_FALSE(props->strict_memory);
  auto bad = xxnpuGetDeviceProperties(2);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("invalid device index 2; expected 0..1"));
  EXPECT_EQ(xxnpuSetDevice(-1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RuntimeDeviceTest, CurrentDeviceIsPerHostThread) {
  ASSERT_TRUE(xxnpuSetDevice(1).ok());
  int other = -1;
  std::thread t([&] { other = *xxnpuGetDevice(); });
  t.join();
  EXPECT_EQ(other, 0);
  EXPECT_EQ(*xxnpuGetDevice(), 1);
  ASSERT_TRUE(xxnpuSetDevice(0).ok());
}

TEST(RuntimeMemoryTest, RoundTripThroughDeviceMemory) {
  std::vector<int> host(1000), back(1000, 0);
  std::iota(host.begin(), host.end(), 7);
  void* d = *xxnpuMalloc(host.size() * sizeof(int));
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 256, 0u);
  ASSERT_TRUE(xxnpuMemcpy(d, host.data(), 4000, MemcpyKind::kHostToDevice).ok());
  ASSERT_TRUE(xxnpuMemcpy(back.data(), d, 4000, MemcpyKind::kDeviceToHost).ok());
  EXPECT_EQ(back, host);
  ASSERT_TRUE(xxnpuFree(d).ok());
}

// As a driver's allocation, xxnpuMalloc returns memory that is already backed and
// mapped for the device (kernels do not page-fault on first touch), and xxnpuFree gives
// the pages back.
TEST(RuntimeMemoryTest, AllocationsAreResidentAndFreeReleasesThem) {
  constexpr size_t kBytes = size_t{4} << 20;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident(kBytes / page);
  auto count_resident = [&](void* d) {
    EXPECT_EQ(mincore(DeviceView(d), kBytes, resident.data()), 0) << std::strerror(errno);
    return std::count_if(resident.begin(), resident.end(), [](unsigned char c) { return (c & 1) != 0; });
  };
  void* d = *xxnpuMalloc(kBytes);
  EXPECT_EQ(count_resident(d), static_cast<long>(resident.size()));
  ASSERT_TRUE(xxnpuFree(d).ok());
  // The same range, now free: its pages were punched out of the device's memory file.
  EXPECT_EQ(count_resident(d), 0);
}

TEST(RuntimeMemoryTest, FreeErrorsNameThePointer) {
  void* d = *xxnpuMalloc(4096);
  EXPECT_EQ(xxnpuFree(static_cast<char*>(d) + 16).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(xxnpuFree(d).ok());
  absl::Status twice = xxnpuFree(d);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.message(), HasSubstr("not the start of a live allocation"));
  int host = 0;
  EXPECT_THAT(xxnpuFree(&host).message(), HasSubstr("not device memory"));
  EXPECT_TRUE(xxnpuFree(nullptr).ok());
  EXPECT_EQ(*xxnpuMalloc(0), nullptr);
}

TEST(RuntimeMemoryTest, OutOfMemoryIsAnErrorAndTheDeviceStaysUsable) {
  auto info = *xxnpuMemGetInfo(0);
  EXPECT_EQ(info.total, kDeviceMemory);
  auto too_big = xxnpuMalloc(kDeviceMemory + 1);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_big.status().message(), HasSubstr("out of memory: tried to allocate 268435457 bytes"));
  void* half = *xxnpuMalloc(kDeviceMemory / 2);
  EXPECT_EQ(xxnpuMemGetInfo(0)->free, info.free - kDeviceMemory / 2);
  EXPECT_FALSE(xxnpuMalloc(kDeviceMemory / 2 + 4096).ok());
  ASSERT_TRUE(xxnpuFree(half).ok());
  EXPECT_EQ(xxnpuMemGetInfo(0)->free, info.free);
  void* again = *xxnpuMalloc(kDeviceMemory / 2);
  EXPECT_NE(again, nullptr);
  ASSERT_TRUE(xxnpuFree(again).ok());
}

TEST(RuntimeMemoryTest, PointerAttributes) {
  ASSERT_TRUE(xxnpuSetDevice(1).ok());
  char* d = static_cast<char*>(*xxnpuMalloc(10000));
  ASSERT_TRUE(xxnpuSetDevice(0).ok());
  auto a = xxnpuPointerGetAttributes(d + 5000);
  EXPECT_EQ(a.type, PointerAttributes::Type::kDevice);
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(a.base, d);
  EXPECT_EQ(a.size, 10000u);
  char* pinned = static_cast<char*>(*xxnpuHostAlloc(1 << 16));
  auto p = xxnpuPointerGetAttributes(pinned + 100);
  EXPECT_EQ(p.type, PointerAttributes::Type::kHost);
  EXPECT_EQ(p.base, pinned);
  int plain = 0;
  EXPECT_EQ(xxnpuPointerGetAttributes(&plain).type, PointerAttributes::Type::kUnregistered);
  EXPECT_TRUE(IsDevicePointer(d));
  EXPECT_EQ(DeviceOfPointer(d + 9999), 1);
  EXPECT_EQ(DeviceOfPointer(pinned), -1);
  EXPECT_FALSE(IsDevicePointer(pinned));
  ASSERT_TRUE(xxnpuFree(d).ok());
  EXPECT_EQ(xxnpuPointerGetAttributes(d).type, PointerAttributes::Type::kUnregistered);
  ASSERT_TRUE(xxnpuFreeHost(pinned).ok());
  EXPECT_EQ(xxnpuFreeHost(pinned).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RuntimeMemoryTest, CopiesOfEveryKind) {
  const size_t n = 1 << 20;
  std::vector<uint8_t> src(n), dst(n);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 31 + 7);
  void* d0 = *xxnpuMallocOnDevice(0, n);
  void* d0b = *xxnpuMallocOnDevice(0, n);
  void* d1 = *xxnpuMallocOnDevice(1, n);
  ASSERT_TRUE(xxnpuMemcpy(d0, src.data(), n, MemcpyKind::kHostToDevice).ok());
  ASSERT_TRUE(xxnpuMemcpy(d0b, d0, n, MemcpyKind::kDeviceToDevice).ok());          // same device
  ASSERT_TRUE(xxnpuMemcpy(d1, d0b, n, MemcpyKind::kDefault).ok());                 // across devices
  ASSERT_TRUE(xxnpuMemcpy(dst.data(), d1, n, MemcpyKind::kDeviceToHost).ok());
  EXPECT_EQ(dst, src);
  std::vector<uint8_t> h2h(n);
  ASSERT_TRUE(xxnpuMemcpy(h2h.data(), src.data(), n, MemcpyKind::kHostToHost).ok());
  EXPECT_EQ(h2h, src);

  // Async on a created stream, into and out of pinned memory.
  xxnpuStream_t s = *xxnpuStreamCreate();
  uint8_t* pin = static_cast<uint8_t*>(*xxnpuHostAlloc(n));
  ASSERT_TRUE(xxnpuMemsetAsync(d1, 0xAB, n, s).ok());
  ASSERT_TRUE(xxnpuMemcpyAsync(pin, d1, n, MemcpyKind::kDeviceToHost, s).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  EXPECT_EQ(pin[0], 0xAB);
  EXPECT_EQ(pin[n - 1], 0xAB);
  ASSERT_TRUE(xxnpuMemset(d0, 0, n).ok());
  ASSERT_TRUE(xxnpuMemcpy(dst.data(), d0, n, MemcpyKind::kDeviceToHost).ok());
  EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), static_cast<long>(n));
  ASSERT_TRUE(xxnpuFreeHost(pin).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
  for (void* p : {d0, d0b, d1}) ASSERT_TRUE(xxnpuFree(p).ok());
}

// Copies and sets from 8 MiB up are split over the compute threads: every byte lands,
// the partial last chunk included; an overlapping copy keeps memmove's result.
TEST(RuntimeMemoryTest, LargeCopiesAndSetsAreWholeAndOverlapSafe) {
  const size_t n = (size_t{9} << 20) + 13;
  std::vector<uint8_t> src(n), dst(n);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  char* a = static_cast<char*>(*xxnpuMalloc(n));
  char* b = static_cast<char*>(*xxnpuMalloc(n));
  ASSERT_TRUE(xxnpuMemcpy(a, src.data(), n, MemcpyKind::kHostToDevice).ok());
  ASSERT_TRUE(xxnpuMemcpy(b, a, n, MemcpyKind::kDeviceToDevice).ok());
  ASSERT_TRUE(xxnpuMemcpy(dst.data(), b, n, MemcpyKind::kDeviceToHost).ok());
  EXPECT_EQ(dst, src);

  // A set of an odd sub-range leaves its neighbours alone.
  const size_t off = 4099, len = (size_t{8} << 20) + 5;
  ASSERT_TRUE(xxnpuMemset(b + off, 0x5A, len).ok());
  ASSERT_TRUE(xxnpuMemcpy(dst.data(), b, n, MemcpyKind::kDeviceToHost).ok());
  std::vector<uint8_t> want = src;
  std::fill(want.begin() + off, want.begin() + off + len, 0x5A);
  EXPECT_EQ(dst, want);

  // Overlapping ranges within one allocation, both directions: memmove's result.
  const size_t shift = 4097, m = n - shift;
  ASSERT_TRUE(xxnpuMemcpy(a + shift, a, m, MemcpyKind::kDeviceToDevice).ok());
  want = src;
  std::memmove(want.data() + shift, want.data(), m);
  ASSERT_TRUE(xxnpuMemcpy(dst.data(), a, n, MemcpyKind::kDeviceToHost).ok());
  EXPECT_EQ(dst, want);
  ASSERT_TRUE(xxnpuMemcpy(a, a + shift, m, MemcpyKind::kDeviceToDevice).ok());
  std::memmove(want.data(), want.data() + shift, m);
  ASSERT_TRUE(xxnpuMemcpy(dst.data(), a, n, MemcpyKind::kDeviceToHost).ok());
  EXPECT_EQ(dst, want);
  for (void* p : {a, b}) ASSERT_TRUE(xxnpuFree(p).ok());
}

TEST(RuntimeMemoryTest, CopyErrors) {
  std::vector<char> host(4096);
  char* d = static_cast<char*>(*xxnpuMalloc(4096));
  absl::Status wrong = xxnpuMemcpy(d, host.data(), 16, MemcpyKind::kDeviceToHost);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.message(), HasSubstr("does not match the pointers"));
  absl::Status overrun = xxnpuMemcpy(d + 4000, host.data(), 200, MemcpyKind::kHostToDevice);
  EXPECT_THAT(overrun.message(), HasSubstr("overruns its allocation of 4096 bytes"));
  EXPECT_EQ(xxnpuMemcpy(nullptr, d, 16, MemcpyKind::kDefault).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(xxnpuMemset(host.data(), 0, 16).ok());
  ASSERT_TRUE(xxnpuFree(d).ok());
  EXPECT_THAT(xxnpuMemcpy(host.data(), d, 16, MemcpyKind::kDeviceToHost).message(),
              HasSubstr("not inside a live device allocation"));
}

TEST(RuntimeStreamTest, LaunchReturnsBeforeTheKernelRunsAndOrderIsKept) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  Gate gate;
  ASSERT_TRUE(LaunchWait(gate, s).ok());
  std::vector<int> order;
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(LaunchFn("test_append", [&order, i] { order.push_back(i); }, s).ok());
  }
  // Everything is queued behind the gate: nothing ran yet.
  EXPECT_EQ(xxnpuStreamQuery(s).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(order.empty());
  gate.open = true;
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  ASSERT_EQ(order.size(), 500u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(order[i], i);
  EXPECT_TRUE(xxnpuStreamQuery(s).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

TEST(RuntimeStreamTest, PinnedCopiesAreAsyncPageableCopiesWait) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  const size_t n = 1 << 16;
  void* d = *xxnpuMalloc(n);
  char* pinned = static_cast<char*>(*xxnpuHostAlloc(n));
  std::vector<char> pageable(n, 1);
  Gate gate;
  ASSERT_TRUE(LaunchWait(gate, s).ok());
  // Pinned: returns while the stream is still blocked.
  ASSERT_TRUE(xxnpuMemcpyAsync(d, pinned, n, MemcpyKind::kHostToDevice, s).ok());
  EXPECT_EQ(xxnpuStreamQuery(s).code(), absl::StatusCode::kUnavailable);
  // Pageable: the call itself waits for the copy, so it cannot finish before the gate.
  std::atomic<bool> returned{false};
  std::thread t([&] {
    EXPECT_TRUE(xxnpuMemcpyAsync(d, pageable.data(), n, MemcpyKind::kHostToDevice, s).ok());
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load());
  gate.open = true;
  t.join();
  EXPECT_TRUE(returned.load());
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  ASSERT_TRUE(xxnpuFreeHost(pinned).ok());
  ASSERT_TRUE(xxnpuFree(d).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

TEST(RuntimeStreamTest, PriorityIsClampedAndHandlesAreChecked) {
  xxnpuStream_t hi = *xxnpuStreamCreate(-5);
  xxnpuStream_t lo = *xxnpuStreamCreate(7);
  EXPECT_EQ(*xxnpuStreamGetPriority(hi), -1);
  EXPECT_EQ(*xxnpuStreamGetPriority(lo), 0);
  EXPECT_NE(*xxnpuStreamGetId(hi), *xxnpuStreamGetId(lo));
  EXPECT_NE(*xxnpuStreamGetId(hi), *xxnpuStreamGetId(nullptr));
  // The explicit default-stream handle names device 1's stream from a device-0 thread.
  xxnpuStream_t def1 = *xxnpuDeviceGetDefaultStream(1);
  EXPECT_NE(def1, nullptr);
  EXPECT_EQ(*xxnpuStreamGetDevice(def1), 1);
  EXPECT_EQ(*xxnpuStreamGetId(def1), *xxnpuStreamGetId(*xxnpuDeviceGetDefaultStream(1)));
  EXPECT_FALSE(xxnpuDeviceGetDefaultStream(5).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(hi).ok());
  absl::Status gone = xxnpuStreamSynchronize(hi);
  EXPECT_EQ(gone.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gone.message(), HasSubstr("was destroyed"));
  EXPECT_EQ(xxnpuStreamDestroy(nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(xxnpuStreamDestroy(lo).ok());
}

// Issue 21: drivers may recycle a destroyed stream's resources, but a handle must never
// come back: a stale handle (a library that kept it, a c10 stream of a destroyed process
// group) used to act silently on whichever stream reused the object.
TEST(RuntimeStreamTest, ADestroyedStreamsHandleNeverNamesALaterStream) {
  absl::StatusOr<xxnpuStream_t> created = xxnpuStreamCreate(0);
  ASSERT_TRUE(created.ok());
  const xxnpuStream_t stale = *created;
  ASSERT_TRUE(xxnpuStreamDestroy(stale).ok());
  std::set<xxnpuStream_t> handles{stale};
  std::vector<xxnpuStream_t> live;
  for (int i = 0; i < 64; ++i) {
    absl::StatusOr<xxnpuStream_t> s = xxnpuStreamCreate(0);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(handles.insert(*s).second) << "cycle " << i << ": a handle was handed out twice";
    if (i % 2 == 0) {
      live.push_back(*s);  // keep some alive, so both recycled and new objects are in play
    } else {
      ASSERT_TRUE(xxnpuStreamDestroy(*s).ok());
    }
  }
  // Every use of the stale handle is refused, naming the destruction, and nothing runs.
  std::atomic<int> ran{0};
  auto expect_destroyed = [](const absl::Status& s, const char* what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << what << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("was destroyed")) << what;
  };
  expect_destroyed(xxnpuStreamQuery(stale), "query");
  expect_destroyed(xxnpuStreamSynchronize(stale), "synchronize");
  expect_destroyed(xxnpuStreamGetId(stale).status(), "get id");
  LaunchConfig config;
  config.name = "must_not_run";
  expect_destroyed(xxnpuLaunchKernel(config, [&ran](BlockRange) { ran.fetch_add(1); return absl::OkStatus(); }, stale),
                   "launch");
  expect_destroyed(xxnpuStreamDestroy(stale), "destroy");
  for (xxnpuStream_t s : live) {
    ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
    ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
  }
  EXPECT_EQ(ran.load(), 0);
}

TEST(RuntimeStreamTest, DestroyFinishesQueuedWork) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(LaunchFn("test_count", [&ran] { ++ran; }, s).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
  EXPECT_EQ(ran.load(), 100);
}

TEST(RuntimeEventTest, RecordQuerySynchronizeAndElapsedTime) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  xxnpuEvent_t start = *xxnpuEventCreate();
  xxnpuEvent_t end = *xxnpuEventCreate();
  EXPECT_TRUE(xxnpuEventQuery(start).ok());  // never recorded: complete
  EXPECT_EQ(xxnpuEventElapsedTime(start, end).status().code(), absl::StatusCode::kFailedPrecondition);
  Gate gate;
  ASSERT_TRUE(LaunchWait(gate, s).ok());
  ASSERT_TRUE(xxnpuEventRecord(start, s).ok());
  ASSERT_TRUE(LaunchFn("test_sleep_20ms", [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }, s).ok());
  ASSERT_TRUE(xxnpuEventRecord(end, s).ok());
  EXPECT_EQ(xxnpuEventQuery(end).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(xxnpuEventElapsedTime(start, end).status().code(), absl::StatusCode::kUnavailable);
  gate.open = true;
  ASSERT_TRUE(xxnpuEventSynchronize(end).ok());
  EXPECT_TRUE(xxnpuEventQuery(start).ok());
  const float ms = *xxnpuEventElapsedTime(start, end);
  EXPECT_GE(ms, 19.5f);
  EXPECT_LT(ms, 2000.0f);
  // Re-recording: queries refer to the latest record.
  Gate gate2;
  ASSERT_TRUE(LaunchWait(gate2, s).ok());
  ASSERT_TRUE(xxnpuEventRecord(end, s).ok());
  EXPECT_EQ(xxnpuEventQuery(end).code(), absl::StatusCode::kUnavailable);
  gate2.open = true;
  ASSERT_TRUE(xxnpuEventSynchronize(end).ok());
  ASSERT_TRUE(xxnpuEventDestroy(start).ok());
  ASSERT_TRUE(xxnpuEventDestroy(end).ok());
  EXPECT_EQ(xxnpuEventQuery(end).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

TEST(RuntimeEventTest, TimingDisabledAndWrongDevice) {
  xxnpuEvent_t a = *xxnpuEventCreate(kEventDisableTiming);
  xxnpuEvent_t b = *xxnpuEventCreate();
  ASSERT_TRUE(xxnpuEventRecord(a, nullptr).ok());
  ASSERT_TRUE(xxnpuEventRecord(b, nullptr).ok());
  ASSERT_TRUE(xxnpuEventSynchronize(b).ok());
  EXPECT_EQ(xxnpuEventElapsedTime(a, b).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(xxnpuEventCreate(0x80).ok());
  ASSERT_TRUE(xxnpuSetDevice(1).ok());
  xxnpuStream_t s1 = *xxnpuStreamCreate();
  ASSERT_TRUE(xxnpuSetDevice(0).ok());
  absl::Status cross = xxnpuEventRecord(b, s1);
  EXPECT_EQ(cross.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cross.message(), HasSubstr("event of xxnpu:0 recorded on a stream of xxnpu:1"));
  ASSERT_TRUE(xxnpuStreamDestroy(s1).ok());
  ASSERT_TRUE(xxnpuEventDestroy(a).ok());
  ASSERT_TRUE(xxnpuEventDestroy(b).ok());
}

TEST(RuntimeEventTest, StreamWaitEventOrdersAcrossStreamsAndDevices) {
  xxnpuStream_t a = *xxnpuStreamCreate();
  ASSERT_TRUE(xxnpuSetDevice(1).ok());
  xxnpuStream_t b = *xxnpuStreamCreate();  // another device
  ASSERT_TRUE(xxnpuSetDevice(0).ok());
  xxnpuEvent_t e = *xxnpuEventCreate();
  Gate gate;
  std::atomic<int> step{0};
  int seen_by_b = -1;
  ASSERT_TRUE(LaunchWait(gate, a).ok());
  ASSERT_TRUE(LaunchFn("test_step", [&step] { step = 1; }, a).ok());
  ASSERT_TRUE(xxnpuEventRecord(e, a).ok());
  ASSERT_TRUE(xxnpuStreamWaitEvent(b, e).ok());
  ASSERT_TRUE(LaunchFn("test_observe", [&] { seen_by_b = step.load(); }, b).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(xxnpuStreamQuery(b).code(), absl::StatusCode::kUnavailable);  // held by the wait
  gate.open = true;
  ASSERT_TRUE(xxnpuStreamSynchronize(b).ok());
  EXPECT_EQ(seen_by_b, 1);
  ASSERT_TRUE(xxnpuStreamDestroy(a).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(b).ok());
  ASSERT_TRUE(xxnpuEventDestroy(e).ok());
}

TEST(RuntimeEventTest, DestroyingAnEventAStreamWaitsOnIsSafeWhenItsHandleIsReused) {
  // Regression: the handle of a destroyed event is recycled; a stream still queued to
  // wait on the old record must not be stranded by the new life's counters.
  xxnpuStream_t src = *xxnpuStreamCreate();
  xxnpuStream_t dst = *xxnpuStreamCreate();
  Gate gate;
  ASSERT_TRUE(LaunchWait(gate, dst).ok());  // dst's wait command stays queued a while
  xxnpuEvent_t e = *xxnpuEventCreate(kEventDisableTiming);
  ASSERT_TRUE(LaunchFn("test_src_work", [] {}, src).ok());
  ASSERT_TRUE(xxnpuEventRecord(e, src).ok());
  ASSERT_TRUE(xxnpuStreamWaitEvent(dst, e).ok());
  ASSERT_TRUE(xxnpuEventDestroy(e).ok());
  xxnpuEvent_t reused = *xxnpuEventCreate();  // recycles the handle
  EXPECT_TRUE(xxnpuEventQuery(reused).ok());  // a new event is complete until recorded
  EXPECT_EQ(xxnpuEventElapsedTime(reused, reused).status().code(), absl::StatusCode::kFailedPrecondition);
  gate.open = true;
  std::atomic<bool> done{false};
  std::thread t([&] {
    EXPECT_TRUE(xxnpuStreamSynchronize(dst).ok());
    done = true;
  });
  for (int i = 0; i < 200 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(done.load()) << "stream stranded waiting on a recycled event";
  t.join();
  ASSERT_TRUE(xxnpuEventDestroy(reused).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(src).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(dst).ok());
}

// Records the calling compute thread, then waits until a second one has been recorded
// (or `deadline` passes). On a loaded machine one compute thread can be scheduled late
// enough for the other to take every share, which says nothing about the runtime; a
// runtime that never hands the second thread a share still fails, after the deadline.
void RecordThreadAndAwaitSecond(std::mutex& mu, std::set<std::thread::id>& threads,
                                std::chrono::steady_clock::time_point deadline) {
  for (bool first = true;; first = false) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (first) threads.insert(std::this_thread::get_id());
      if (threads.size() >= 2) return;
    }
    if (std::chrono::steady_clock::now() > deadline) return;
    std::this_thread::yield();
  }
}

TEST(RuntimeKernelTest, GridIsSplitOverComputeThreadsExactlyOnce) {
  constexpr int kBlocks = 4096;
  std::vector<std::atomic<int>> hits(kBlocks);
  std::mutex mu;
  std::set<std::thread::id> threads;
  LaunchConfig cfg;
  cfg.name = "test_grid";
  cfg.grid = Dim3{64, 64, 1};
  cfg.bytes = 1 << 30;  // above the parallel threshold
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [&](BlockRange r) {
    RecordThreadAndAwaitSecond(mu, threads, deadline);
    for (int64_t b = r.begin; b < r.end; ++b) {
      hits[b]++;
      // Enough work per block that a second thread has time to join in.
      volatile double x = 0;
      for (int i = 0; i < 2000; ++i) x = x + i;
    }
    return absl::OkStatus();
  }, nullptr).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(nullptr).ok());
  for (int b = 0; b < kBlocks; ++b) ASSERT_EQ(hits[b].load(), 1) << "block " << b;
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);  // never on the host thread
}

// A one-block kernel that forks a child grid (xxnpuKernelParallelFor, what Inductor's
// generated kernels do between their phases): every child block runs once, over the
// device's compute threads, before the parent goes on; a failing share fails the parent
// with its message; below the parallel threshold the child runs on the parent's thread.
TEST(RuntimeKernelTest, AKernelsChildGridRunsOnTheComputeThreadsBeforeItGoesOn) {
  constexpr int kBlocks = 64;
  std::vector<std::atomic<int>> hits(kBlocks);
  std::mutex mu;
  std::set<std::thread::id> threads;
  std::atomic<int> seen_after_join{-1};
  LaunchConfig cfg;
  cfg.name = "test_fork_join";
  cfg.bytes = 1 << 30;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [&](BlockRange) {
    absl::Status st = xxnpuKernelParallelFor(kBlocks, [&](BlockRange r) {
      RecordThreadAndAwaitSecond(mu, threads, deadline);
      for (int64_t b = r.begin; b < r.end; ++b) {
        hits[b]++;
        volatile double x = 0;
        for (int i = 0; i < 20000; ++i) x = x + i;
      }
      return absl::OkStatus();
    });
    int total = 0;
    for (auto& h : hits) total += h.load();
    seen_after_join = total;  // the join: every child block is done here
    return st;
  }, nullptr).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(nullptr).ok());
  for (int b = 0; b < kBlocks; ++b) ASSERT_EQ(hits[b].load(), 1) << "block " << b;
  EXPECT_EQ(seen_after_join.load(), kBlocks);
  EXPECT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);

  // A failing child block is the parent kernel's failure, a sticky error naming it.
  auto failing = xxnpuStreamCreate();
  ASSERT_TRUE(failing.ok());
  cfg.name = "test_fork_join_failing";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [](BlockRange) {
    return xxnpuKernelParallelFor(8, [](BlockRange r) {
      return r.begin <= 5 && 5 < r.end ? absl::OutOfRangeError("child block 5 failed") : absl::OkStatus();
    });
  }, *failing).ok());
  const absl::Status st = xxnpuStreamSynchronize(*failing);
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("test_fork_join_failing"));
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("child block 5 failed"));
  xxnpuStreamDestroy(*failing).IgnoreError();

  // Below the threshold: one range, on the parent's thread.
  std::thread::id parent, child;
  std::vector<BlockRange> ranges;
  cfg.name = "test_fork_join_small";
  cfg.bytes = 64;
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [&](BlockRange) {
    parent = std::this_thread::get_id();
    return xxnpuKernelParallelFor(4, [&](BlockRange r) {
      child = std::this_thread::get_id();
      ranges.push_back(r);
      return absl::OkStatus();
    });
  }, nullptr).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(nullptr).ok());
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].begin, 0);
  EXPECT_EQ(ranges[0].end, 4);
  EXPECT_EQ(child, parent);
}

// A kernel's body (its closure and what it captured) is destroyed on the host, not on
// the device thread: the launching thread allocated it, and freeing it there keeps
// glibc's per-thread caches on the fast path (stream_engine.cc). It must not linger
// either: the next synchronize after the kernel's batch has retired releases it.
TEST(RuntimeKernelTest, KernelBodiesAreDestroyedOnTheHostBySynchronize) {
  struct Probe {
    std::atomic<int>* destroyed;
    std::thread::id* where;
    bool armed = true;
    Probe(std::atomic<int>* d, std::thread::id* w) : destroyed(d), where(w) {}
    Probe(Probe&& o) noexcept : destroyed(o.destroyed), where(o.where) { o.armed = false; }
    Probe(const Probe&) = delete;
    ~Probe() {
      if (!armed) return;
      *where = std::this_thread::get_id();
      destroyed->fetch_add(1);
    }
  };
  auto stream = xxnpuStreamCreate();
  ASSERT_TRUE(stream.ok());
  for (int round = 0; round < 50; ++round) {
    std::atomic<int> destroyed{0};
    std::thread::id where;
    std::atomic<bool> ran{false};
    LaunchConfig cfg;
    cfg.name = "test_probe";
    ASSERT_TRUE(xxnpuLaunchKernel(cfg, [p = Probe(&destroyed, &where), &ran](BlockRange) {
      ran.store(true);
      return absl::OkStatus();
    }, *stream).ok());
    // Either the host waits (round % 2 == 0) or the device finishes first.
    if (round % 2 == 1) {
      while (!ran.load()) std::this_thread::yield();
    }
    ASSERT_TRUE(xxnpuStreamSynchronize(*stream).ok());
    // The kernel's batch may still be retiring after the first synchronize; one more
    // launch and synchronize on the stream always collects it.
    ASSERT_TRUE(LaunchFn("test_after_probe", [] {}, *stream).ok());
    ASSERT_TRUE(xxnpuStreamSynchronize(*stream).ok());
    ASSERT_EQ(destroyed.load(), 1) << "round " << round;
    EXPECT_EQ(where, std::this_thread::get_id()) << "round " << round;
  }
  ASSERT_TRUE(xxnpuStreamDestroy(*stream).ok());
}

// What a finished kernel captured is released by later launches too, not only by a
// synchronize: a loop that never synchronizes must not pile up kernel bodies.
TEST(RuntimeKernelTest, LaunchesReleaseWhatFinishedKernelsCapturedWithoutSynchronizing) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  auto captured = std::make_shared<int>(7);
  LaunchConfig cfg;
  cfg.name = "test_capture";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, KernelBody([captured](BlockRange) {
    return *captured == 7 ? absl::OkStatus() : absl::InternalError("bad capture");
  }), s).ok());
  EXPECT_EQ(captured.use_count(), 2);  // the host's and the queued body's
  while (xxnpuStreamQuery(s).code() == absl::StatusCode::kUnavailable) std::this_thread::yield();
  // Inline kernels own nothing; launching a few lets the host reap the finished body.
  cfg.name = "test_inline";
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(xxnpuLaunchKernel(cfg, [](BlockRange) { return absl::OkStatus(); }, s).ok());
  }
  EXPECT_EQ(captured.use_count(), 1);
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

// Kernels that are trivially copyable and small are copied into the launch (no body to
// allocate or destroy); others go through KernelBody. Both kinds share one ring: over
// several laps of it, interleaved, they run in order and see what they captured.
TEST(RuntimeKernelTest, InlineAndBodyKernelsRunInOrderOverManyLapsOfTheRing) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  constexpr int kLaunches = 2000;  // ~4 laps of the 512-slot ring
  std::vector<int> order;
  std::vector<std::string> names;
  LaunchConfig cfg;
  cfg.name = "test_mixed";
  for (int i = 0; i < kLaunches; ++i) {
    if (i % 7 == 0) {
      // Owns a std::string: not trivially copyable, so a KernelBody.
      ASSERT_TRUE(xxnpuLaunchKernel(cfg, [&names, &order, i, name = std::string("body ") + std::to_string(i)](
                                             BlockRange) {
        order.push_back(i);
        names.push_back(name);
        return absl::OkStatus();
      }, s).ok());
    } else {
      std::vector<int>* out = &order;
      ASSERT_TRUE(xxnpuLaunchKernel(cfg, [out, i](BlockRange) {
        out->push_back(i);
        return absl::OkStatus();
      }, s).ok());
    }
  }
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  ASSERT_EQ(order.size(), size_t{kLaunches});
  for (int i = 0; i < kLaunches; ++i) ASSERT_EQ(order[i], i);
  ASSERT_EQ(names.size(), size_t{(kLaunches + 6) / 7});
  EXPECT_EQ(names[1], "body 7");
  // A trivially copyable kernel too large to copy into the launch takes the body path.
  std::array<int, 100> big;
  std::iota(big.begin(), big.end(), 0);
  std::atomic<int> sum{0};
  std::atomic<int>* sum_p = &sum;
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [big, sum_p](BlockRange) {
    sum_p->store(std::accumulate(big.begin(), big.end(), 0));
    return absl::OkStatus();
  }, s).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  EXPECT_EQ(sum.load(), 4950);
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

TEST(RuntimeKernelTest, InlineKernelOverTheCapacityIsRejected) {
  LaunchConfig cfg;
  cfg.name = "test_too_big";
  std::vector<char> bytes(kKernelArgsCapacity + 1);
  const KernelThunk thunk = [](const void*, BlockRange) { return absl::OkStatus(); };
  absl::Status st = xxnpuLaunchKernelInline(cfg, thunk, bytes.data(), bytes.size(), nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("kernel of 193 bytes; expected at most 192"));
  EXPECT_EQ(xxnpuLaunchKernelInline(cfg, nullptr, bytes.data(), 8, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

// A launch never overwrites a command the device thread has not finished: with the device
// held up, the launcher blocks once the ring is full and resumes as the device catches up.
TEST(RuntimeStreamTest, AFullRingBlocksTheLauncherUntilTheDeviceCatchesUp) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  Gate gate;
  ASSERT_TRUE(LaunchWait(gate, s).ok());
  constexpr int kLaunches = 1500;
  std::atomic<int> launched{0};
  std::atomic<int> ran{0};
  std::thread launcher([&] {
    LaunchConfig cfg;
    cfg.name = "test_count";
    std::atomic<int>* r = &ran;
    for (int i = 0; i < kLaunches; ++i) {
      if (!xxnpuLaunchKernel(cfg, [r](BlockRange) { r->fetch_add(1); return absl::OkStatus(); }, s).ok()) return;
      launched.fetch_add(1);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int before = launched.load();
  EXPECT_GT(before, 400);   // the ring holds several hundred commands...
  EXPECT_LT(before, 1000);  // ...but not all of them: the launcher is blocked
  EXPECT_EQ(ran.load(), 0);
  gate.open = true;
  launcher.join();
  ASSERT_EQ(launched.load(), kLaunches);
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  EXPECT_EQ(ran.load(), kLaunches);
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

// After a pause the stream's thread sleeps; a launch must wake it at once, not when it
// next looks for work on its own (every 50 ms).
TEST(RuntimeStreamTest, LaunchesWakeASleepingStreamThread) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  std::atomic<int> ran{0};
  std::atomic<int>* r = &ran;
  LaunchConfig cfg;
  cfg.name = "test_wake";
  const auto start = std::chrono::steady_clock::now();
  constexpr int kRounds = 20;
  for (int i = 0; i < kRounds; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // > spin + drowsy: asleep
    ASSERT_TRUE(xxnpuLaunchKernel(cfg, [r](BlockRange) { r->fetch_add(1); return absl::OkStatus(); }, s).ok());
    ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(ran.load(), kRounds);
  // 20 x 2 ms of sleep; a missed wake-up would add ~50 ms per round.
  EXPECT_LT(elapsed, std::chrono::milliseconds(kRounds * 2 + 400));
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

TEST(RuntimeKernelTest, BadLaunchArguments) {
  LaunchConfig cfg;
  cfg.grid = Dim3{0, 1, 1};
  EXPECT_THAT(xxnpuLaunchKernel(cfg, [](BlockRange) { return absl::OkStatus(); }, nullptr).message(),
              HasSubstr("has a zero dimension"));
  cfg.grid = Dim3{};
  EXPECT_EQ(xxnpuLaunchKernel(cfg, KernelBody(), nullptr).code(), absl::StatusCode::kInvalidArgument);
}

TEST(RuntimeErrorTest, FailedKernelIsStickyUntilReportedThenTheStreamRunsAgain) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  xxnpuStream_t other = *xxnpuStreamCreate();
  xxnpuEvent_t after = *xxnpuEventCreate();
  Gate gate;
  std::atomic<int> ran_after{0};
  ASSERT_TRUE(LaunchWait(gate, s).ok());
  LaunchConfig cfg;
  cfg.name = "test_failing_kernel";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [](BlockRange) { return absl::DataLossError("bad checksum"); }, s).ok());
  ASSERT_TRUE(LaunchFn("test_after_failure", [&] { ++ran_after; }, s).ok());
  ASSERT_TRUE(xxnpuEventRecord(after, s).ok());
  gate.open = true;
  // An event recorded after the failure completes, carrying the error.
  absl::Status ev = xxnpuEventSynchronize(after);
  EXPECT_EQ(ev.code(), absl::StatusCode::kDataLoss);
  // The work queued behind the failure is skipped until the error is reported.
  absl::Status first = xxnpuStreamSynchronize(s);
  EXPECT_EQ(first.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(first.message(), HasSubstr("kernel 'test_failing_kernel' failed on xxnpu:0"));
  EXPECT_THAT(first.message(), HasSubstr("bad checksum"));
  EXPECT_EQ(ran_after.load(), 0);
  // Reported once; the stream now runs new work. Other streams were never affected.
  EXPECT_TRUE(xxnpuStreamSynchronize(s).ok());
  ASSERT_TRUE(LaunchFn("test_after_report", [&] { ++ran_after; }, s).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  EXPECT_EQ(ran_after.load(), 1);
  EXPECT_TRUE(xxnpuStreamSynchronize(other).ok());
  ASSERT_TRUE(xxnpuEventDestroy(after).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
  ASSERT_TRUE(xxnpuStreamDestroy(other).ok());
}

TEST(RuntimeErrorTest, DeviceSynchronizeReportsAnyStreamsError) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  LaunchConfig cfg;
  cfg.name = "test_failing_kernel";
  ASSERT_TRUE(xxnpuLaunchKernel(cfg, [](BlockRange) { return absl::InternalError("boom"); }, s).ok());
  absl::Status st = xxnpuDeviceSynchronize();
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(st.message(), HasSubstr("test_failing_kernel"));
  EXPECT_TRUE(xxnpuDeviceSynchronize().ok());
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

TEST(RuntimeThreadsTest, SeveralHostThreadsOnSeveralStreams) {
  constexpr int kThreads = 4, kLaunches = 300;
  std::vector<std::thread> threads;
  std::vector<int> counts(kThreads, 0);
  std::vector<absl::Status> results(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      if (t % 2) (void)xxnpuSetDevice(1);
      auto s = xxnpuStreamCreate();
      if (!s.ok()) { results[t] = s.status(); return; }
      int* c = &counts[t];
      for (int i = 0; i < kLaunches; ++i) {
        // Each stream's kernels run in order on one device thread: no lock needed.
        absl::Status st = LaunchFn("test_inc", [c] { ++*c; }, *s);
        if (!st.ok()) { results[t] = st; return; }
      }
      results[t] = xxnpuStreamSynchronize(*s);
      if (results[t].ok()) results[t] = xxnpuStreamDestroy(*s);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(results[t].ok()) << results[t];
    EXPECT_EQ(counts[t], kLaunches);
  }
}

// Host threads launching onto one stream serialise on its ring: every command runs once,
// each thread's commands in that thread's order, over several laps of the ring.
TEST(RuntimeThreadsTest, SeveralHostThreadsOnOneStream) {
  constexpr int kThreads = 4, kLaunches = 1500;
  xxnpuStream_t s = *xxnpuStreamCreate();
  std::vector<std::vector<int>> seen(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<int>* out = &seen[t];
      LaunchConfig cfg;
      cfg.name = "test_shared_stream";
      for (int i = 0; i < kLaunches; ++i) {
        absl::Status st = (i % 5 == 0)
            ? xxnpuLaunchKernel(cfg, KernelBody([out, i](BlockRange) { out->push_back(i); return absl::OkStatus(); }), s)
            : xxnpuLaunchKernel(cfg, [out, i](BlockRange) { out->push_back(i); return absl::OkStatus(); }, s);
        if (!st.ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  EXPECT_EQ(failures.load(), 0);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), size_t{kLaunches}) << "thread " << t;
    for (int i = 0; i < kLaunches; ++i) ASSERT_EQ(seen[t][i], i) << "thread " << t;
  }
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

TEST(RuntimeHostFuncTest, RunsInStreamOrder) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  std::vector<int> order;
  ASSERT_TRUE(LaunchFn("test_a", [&] { order.push_back(1); }, s).ok());
  ASSERT_TRUE(xxnpuLaunchHostFunc(s, [&] { order.push_back(2); }).ok());
  ASSERT_TRUE(LaunchFn("test_b", [&] { order.push_back(3); }, s).ok());
  ASSERT_TRUE(xxnpuStreamSynchronize(s).ok());
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  ASSERT_TRUE(xxnpuStreamDestroy(s).ok());
}

TEST(RuntimeForkTest, ForkedChildGetsAClearError) {
  ASSERT_TRUE(xxnpuGetDeviceCount().ok());  // initialized in the parent
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    auto s = xxnpuMalloc(16);
    const bool ok = !s.ok() && s.status().code() == absl::StatusCode::kFailedPrecondition &&
                    std::string(s.status().message()).find("forked") != std::string::npos;
    char c = ok ? 'y' : 'n';
    (void)!write(pipefd[1], &c, 1);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(pipefd[0], &c, 1), 1);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(c, 'y');
  // The parent is unaffected.
  EXPECT_TRUE(xxnpuMalloc(16).ok());
}

// Last: it invalidates device 1's streams and memory.
TEST(RuntimeResetTest, ResetFreesMemoryAndInvalidatesHandles) {
  ASSERT_TRUE(xxnpuSetDevice(1).ok());
  const size_t free_before = xxnpuMemGetInfo(1)->free;
  void* d = *xxnpuMalloc(1 << 20);
  xxnpuStream_t s = *xxnpuStreamCreate();
  xxnpuEvent_t e = *xxnpuEventCreate();
  EXPECT_LT(xxnpuMemGetInfo(1)->free, free_before);
  ASSERT_TRUE(xxnpuDeviceReset(1).ok());
  EXPECT_EQ(xxnpuMemGetInfo(1)->free, kDeviceMemory);
  EXPECT_EQ(xxnpuStreamQuery(s).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(xxnpuEventQuery(e).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(xxnpuFree(d).ok());
  // The device is usable again at once.
  void* again = *xxnpuMalloc(1 << 20);
  ASSERT_TRUE(xxnpuMemset(again, 1, 1 << 20).ok());
  ASSERT_TRUE(xxnpuFree(again).ok());
  ASSERT_TRUE(xxnpuSetDevice(0).ok());
}

}  // namespace
}  // namespace xxnpu

int main(int argc, char** argv) {
  // Before the runtime's first use: it reads its configuration once.
  xxnpu::test_util::UseTwoTestDevices("256M");
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
