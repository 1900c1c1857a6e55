// Tests of stream capture and graph replay (device/graph.h), through the runtime API only.
// Runs with 2 devices of 256 MiB and 2 compute threads (see main).
#include "device/graph.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "device/activity_trace.h"
#include "device/runtime.h"
#include "device/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

using ::testing::HasSubstr;
using test_util::Gate;
using test_util::LaunchWait;

#define ASSERT_OK(expr)                               \
  do {                                                \
    const absl::Status assert_ok_status_ = (expr);    \
    ASSERT_TRUE(assert_ok_status_.ok()) << assert_ok_status_; \
  } while (0)

constexpr int kN = 256;

LaunchConfig Cfg(const char* name, uint32_t blocks = kN) {
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid.x = blocks;
  return cfg;
}

// x[i] += 1: an inline kernel (copied into the launch).
absl::Status AddOne(float* x, xxnpuStream_t s) {
  return xxnpuLaunchKernel(Cfg("add_one"), [x](BlockRange r) {
    float* v = DeviceView(x);
    for (int64_t i = r.begin; i < r.end; ++i) v[i] += 1.0f;
    return absl::OkStatus();
  }, s);
}

// x[i] *= 2: a KernelBody that owns something (`keep`), so it takes the owning form.
absl::Status Double(float* x, std::shared_ptr<int> keep, xxnpuStream_t s) {
  return xxnpuLaunchKernel(Cfg("double"), KernelBody([x, keep](BlockRange r) {
    float* v = DeviceView(x);
    for (int64_t i = r.begin; i < r.end; ++i) v[i] *= static_cast<float>(*keep);
    return absl::OkStatus();
  }), s);
}

// y[i] += x[i]
absl::Status AddInto(float* y, const float* x, xxnpuStream_t s) {
  return xxnpuLaunchKernel(Cfg("add_into"), [y, x](BlockRange r) {
    float* out = DeviceView(y);
    const float* in = DeviceView(x);
    for (int64_t i = r.begin; i < r.end; ++i) out[i] += in[i];
    return absl::OkStatus();
  }, s);
}

// A kernel counting its runs in a host counter (a single block).
absl::Status Count(std::atomic<int>* counter, xxnpuStream_t s, const char* name = "count") {
  return xxnpuLaunchKernel(Cfg(name, 1), [counter](BlockRange) {
    counter->fetch_add(1);
    return absl::OkStatus();
  }, s);
}

float* DeviceBuffer() {
  auto p = xxnpuMalloc(kN * sizeof(float));
  EXPECT_TRUE(p.ok()) << p.status();
  return static_cast<float*>(*p);
}

void Upload(float* dst, const std::vector<float>& v) {
  ASSERT_OK(xxnpuMemcpy(dst, v.data(), v.size() * sizeof(float), MemcpyKind::kHostToDevice));
}

std::vector<float> Download(const float* src) {
  std::vector<float> v(kN);
  EXPECT_TRUE(xxnpuMemcpy(v.data(), src, kN * sizeof(float), MemcpyKind::kDeviceToHost).ok());
  return v;
}

std::vector<float> Iota() {
  std::vector<float> v(kN);
  for (int i = 0; i < kN; ++i) v[i] = static_cast<float>(i % 17);
  return v;
}

StreamCaptureStatus CaptureStatus(xxnpuStream_t s) {
  auto st = xxnpuStreamIsCapturing(s);
  EXPECT_TRUE(st.ok()) << st.status();
  return st.ok() ? *st : StreamCaptureStatus::kNone;
}

// Eight kinds of work in a chain: memset, two kernel forms, kernel over two buffers, a
// device copy, a copy to pinned host memory, a host function.
struct Chain {
  float* x = DeviceBuffer();
  float* y = DeviceBuffer();
  float* z = DeviceBuffer();
  float* pinned = nullptr;
  std::shared_ptr<int> factor = std::make_shared<int>(2);
  std::atomic<int> host_calls{0};

  Chain() { pinned = static_cast<float*>(*xxnpuHostAlloc(kN * sizeof(float))); }
  ~Chain() {
    EXPECT_TRUE(xxnpuFree(x).ok());
    EXPECT_TRUE(xxnpuFree(y).ok());
    EXPECT_TRUE(xxnpuFree(z).ok());
    EXPECT_TRUE(xxnpuFreeHost(pinned).ok());
  }
  absl::Status Enqueue(xxnpuStream_t s) {
    for (absl::Status st : {xxnpuMemsetAsync(y, 0, kN * sizeof(float), s), AddOne(x, s), Double(x, factor, s),
                            AddInto(y, x, s), AddInto(y, x, s),
                            xxnpuMemcpyAsync(z, y, kN * sizeof(float), MemcpyKind::kDeviceToDevice, s),
                            xxnpuMemcpyAsync(pinned, z, kN * sizeof(float), MemcpyKind::kDeviceToHost, s),
                            xxnpuLaunchHostFunc(s, [this] { host_calls.fetch_add(1); })}) {
      if (!st.ok()) return st;
    }
    return absl::OkStatus();
  }
  std::vector<float> Result() const { return std::vector<float>(pinned, pinned + kN); }
};

TEST(GraphTest, ReplayEqualsEagerForAChainAndNothingRunsDuringCapture) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  Chain chain;
  Upload(chain.x, Iota());
  std::vector<std::vector<float>> eager;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(chain.Enqueue(s));
    ASSERT_OK(xxnpuStreamSynchronize(s));
    eager.push_back(chain.Result());
  }
  ASSERT_EQ(chain.host_calls.load(), 3);

  Upload(chain.x, Iota());
  std::fill(chain.pinned, chain.pinned + kN, -1.0f);
  ASSERT_OK(xxnpuStreamBeginCapture(s, StreamCaptureMode::kGlobal));
  EXPECT_EQ(CaptureStatus(s), StreamCaptureStatus::kActive);
  ASSERT_OK(chain.Enqueue(s));
  auto graph = xxnpuStreamEndCapture(s);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(CaptureStatus(s), StreamCaptureStatus::kNone);
  // Captured, not run: the device is idle and nothing changed.
  ASSERT_OK(xxnpuStreamSynchronize(s));
  EXPECT_EQ(chain.host_calls.load(), 3);
  EXPECT_EQ(chain.pinned[5], -1.0f);
  EXPECT_EQ(Download(chain.x), Iota());
  EXPECT_EQ(*xxnpuGraphGetNodeCount(*graph), 8u);
  // A chain on one stream: each node depends on the one before.
  const std::string dump = *xxnpuGraphDebugDump(*graph);
  EXPECT_THAT(dump, HasSubstr("node 0 memset 'Memset (Device)' deps []"));
  EXPECT_THAT(dump, HasSubstr("node 2 kernel 'double' deps [1]"));
  EXPECT_THAT(dump, HasSubstr("node 6 memcpy 'Memcpy DtoH' deps [5]"));
  EXPECT_THAT(dump, HasSubstr("node 7 host 'host function' deps [6]"));

  auto exec = xxnpuGraphInstantiate(*graph);
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(xxnpuGraphLaunch(*exec, s));
    ASSERT_OK(xxnpuStreamSynchronize(s));
    EXPECT_EQ(chain.Result(), eager[i]) << "replay " << i;
  }
  EXPECT_EQ(chain.host_calls.load(), 6);
  ASSERT_OK(xxnpuGraphExecDestroy(*exec));
  ASSERT_OK(xxnpuGraphDestroy(*graph));
  ASSERT_OK(xxnpuStreamDestroy(s));
}

TEST(GraphTest, TenThousandReplaysHoldNoMoreMemory) {
  const GraphLiveCounts before = xxnpuGraphGetLiveCounts();
  const size_t free_before = xxnpuMemGetInfo(0)->free;
  xxnpuStream_t s = *xxnpuStreamCreate();
  float* x = DeviceBuffer();
  Upload(x, std::vector<float>(kN, 0.0f));
  auto keep = std::make_shared<int>(1);  // Double by 1: a body that owns `keep`
  std::atomic<int> counter{0};
  ASSERT_OK(xxnpuStreamBeginCapture(s));
  ASSERT_OK(AddOne(x, s));
  ASSERT_OK(Double(x, keep, s));
  ASSERT_OK(Count(&counter, s));
  xxnpuGraph_t graph = *xxnpuStreamEndCapture(s);
  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(graph);
  EXPECT_EQ(keep.use_count(), 2);  // the test's and the captured body's: one body for all replays
  const GraphLiveCounts captured = xxnpuGraphGetLiveCounts();
  EXPECT_EQ(captured.graphs, before.graphs + 1);
  EXPECT_EQ(captured.execs, before.execs + 1);
  EXPECT_EQ(captured.node_lists, before.node_lists + 1);  // shared by the graph and its executable
  EXPECT_EQ(captured.nodes, before.nodes + 3);

  constexpr int kReplays = 10000;
  for (int i = 0; i < kReplays; ++i) {
    ASSERT_OK(xxnpuGraphLaunch(exec, s));
    if (i % 1000 == 999) {
      ASSERT_OK(xxnpuStreamSynchronize(s));
      const GraphLiveCounts now = xxnpuGraphGetLiveCounts();
      EXPECT_EQ(now.node_lists, captured.node_lists) << "after " << i + 1 << " replays";
      EXPECT_EQ(now.nodes, captured.nodes);
      EXPECT_EQ(keep.use_count(), 2);
    }
  }
  ASSERT_OK(xxnpuStreamSynchronize(s));
  EXPECT_EQ(counter.load(), kReplays);
  EXPECT_EQ(Download(x)[7], static_cast<float>(kReplays));
  ASSERT_OK(xxnpuGraphExecDestroy(exec));
  ASSERT_OK(xxnpuGraphDestroy(graph));
  EXPECT_EQ(keep.use_count(), 1);
  const GraphLiveCounts after = xxnpuGraphGetLiveCounts();
  EXPECT_EQ(after.graphs, before.graphs);
  EXPECT_EQ(after.execs, before.execs);
  EXPECT_EQ(after.node_lists, before.node_lists);
  EXPECT_EQ(after.nodes, before.nodes);
  ASSERT_OK(xxnpuFree(x));
  ASSERT_OK(xxnpuStreamDestroy(s));
  EXPECT_EQ(xxnpuMemGetInfo(0)->free, free_before);
}

TEST(GraphTest, ForkAndJoinAcrossTwoStreamsThroughEvents) {
  xxnpuStream_t s1 = *xxnpuStreamCreate();
  xxnpuStream_t s2 = *xxnpuStreamCreate();
  xxnpuEvent_t fork = *xxnpuEventCreate(kEventDisableTiming);
  xxnpuEvent_t join = *xxnpuEventCreate(kEventDisableTiming);
  float* a = DeviceBuffer();
  float* b = DeviceBuffer();
  Upload(a, std::vector<float>(kN, 1.0f));
  Upload(b, std::vector<float>(kN, 10.0f));

  ASSERT_OK(xxnpuStreamBeginCapture(s1));
  ASSERT_OK(AddOne(a, s1));  // node 0
  ASSERT_OK(xxnpuEventRecord(fork, s1));
  ASSERT_OK(xxnpuStreamWaitEvent(s2, fork));  // s2 joins the capture
  const StreamCaptureInfo i1 = *xxnpuStreamGetCaptureInfo(s1);
  const StreamCaptureInfo i2 = *xxnpuStreamGetCaptureInfo(s2);
  EXPECT_EQ(i2.status, StreamCaptureStatus::kActive);
  EXPECT_NE(i1.id, 0u);
  EXPECT_EQ(i1.id, i2.id);
  ASSERT_OK(AddOne(a, s1));  // node 1, after node 0
  ASSERT_OK(AddOne(b, s2));  // node 2, after node 0 only
  ASSERT_OK(xxnpuEventRecord(join, s2));
  ASSERT_OK(xxnpuStreamWaitEvent(s1, join));
  ASSERT_OK(AddInto(a, b, s1));  // node 3, after nodes 1 and 2
  auto graph = xxnpuStreamEndCapture(s1);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(CaptureStatus(s2), StreamCaptureStatus::kNone);
  const std::string dump = *xxnpuGraphDebugDump(*graph);
  EXPECT_THAT(dump, HasSubstr("node 1 kernel 'add_one' deps [0]"));
  EXPECT_THAT(dump, HasSubstr("node 2 kernel 'add_one' deps [0]"));
  EXPECT_THAT(dump, HasSubstr("node 3 kernel 'add_into' deps [1,2]"));
  // Nothing ran.
  EXPECT_EQ(Download(a)[0], 1.0f);

  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(*graph);
  ASSERT_OK(xxnpuGraphLaunch(exec, s2));  // any stream of the device
  ASSERT_OK(xxnpuStreamSynchronize(s2));
  // a: 1 -> 2 (node 0) -> 3 (node 1); b: 10 -> 11 (node 2); a: 3 + 11 (node 3).
  EXPECT_EQ(Download(a)[3], 14.0f);
  EXPECT_EQ(Download(b)[3], 11.0f);

  ASSERT_OK(xxnpuGraphExecDestroy(exec));
  ASSERT_OK(xxnpuGraphDestroy(*graph));
  ASSERT_OK(xxnpuFree(a));
  ASSERT_OK(xxnpuFree(b));
  ASSERT_OK(xxnpuEventDestroy(fork));
  ASSERT_OK(xxnpuEventDestroy(join));
  ASSERT_OK(xxnpuStreamDestroy(s1));
  ASSERT_OK(xxnpuStreamDestroy(s2));
}

TEST(GraphTest, AForkNotJoinedBackFailsEndCaptureAndFreesBothStreams) {
  xxnpuStream_t s1 = *xxnpuStreamCreate();
  xxnpuStream_t s2 = *xxnpuStreamCreate();
  xxnpuEvent_t fork = *xxnpuEventCreate();
  std::atomic<int> counter{0};
  ASSERT_OK(xxnpuStreamBeginCapture(s1));
  ASSERT_OK(xxnpuEventRecord(fork, s1));
  ASSERT_OK(xxnpuStreamWaitEvent(s2, fork));
  ASSERT_OK(Count(&counter, s2));
  auto graph = xxnpuStreamEndCapture(s1);
  ASSERT_EQ(graph.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(graph.status().message(), HasSubstr("was not joined back"));
  EXPECT_EQ(CaptureStatus(s1), StreamCaptureStatus::kNone);
  EXPECT_EQ(CaptureStatus(s2), StreamCaptureStatus::kNone);
  // Both run eagerly again.
  ASSERT_OK(Count(&counter, s2));
  ASSERT_OK(xxnpuStreamSynchronize(s2));
  EXPECT_EQ(counter.load(), 1);
  ASSERT_OK(xxnpuEventDestroy(fork));
  ASSERT_OK(xxnpuStreamDestroy(s1));
  ASSERT_OK(xxnpuStreamDestroy(s2));
}

TEST(GraphTest, BeginCaptureRefusesTheDefaultStreamAndASecondBegin) {
  absl::Status st = xxnpuStreamBeginCapture(nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("default stream"));
  xxnpuStream_t s = *xxnpuStreamCreate();
  EXPECT_EQ(xxnpuStreamEndCapture(s).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_OK(xxnpuStreamBeginCapture(s));
  st = xxnpuStreamBeginCapture(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("already capturing"));
  EXPECT_EQ(xxnpuStreamBeginCapture(s, static_cast<StreamCaptureMode>(7)).code(),
            absl::StatusCode::kInvalidArgument);
  auto graph = xxnpuStreamEndCapture(s);  // an empty graph is a graph
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(*xxnpuGraphGetNodeCount(*graph), 0u);
  ASSERT_OK(xxnpuGraphDestroy(*graph));
  EXPECT_EQ(xxnpuGraphDestroy(*graph).code(), absl::StatusCode::kInvalidArgument);  // twice
  EXPECT_EQ(xxnpuGraphInstantiate(*graph).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK(xxnpuStreamDestroy(s));
}

// ---------------------------------------------------------------- illegal calls

struct IllegalCase {
  const char* name;
  // Runs the illegal call while `cs` captures (global mode, begun by this thread) and
  // `captured` was recorded in the capture, `outside` recorded before it.
  std::function<absl::Status(xxnpuStream_t cs, xxnpuEvent_t captured, xxnpuEvent_t outside, float* dev,
                             void* spare)>
      call;
  const char* message;  // what the error (and EndCapture's) says
};

std::vector<IllegalCase> IllegalCases() {
  return {
      {"DeviceSynchronize", [](auto, auto, auto, auto, auto) { return xxnpuDeviceSynchronize(); },
       "waiting for xxnpu:0, which has a capturing stream"},
      {"StreamSynchronize", [](xxnpuStream_t cs, auto, auto, auto, auto) { return xxnpuStreamSynchronize(cs); },
       "waiting for (or destroying) capturing stream"},
      {"StreamQuery", [](xxnpuStream_t cs, auto, auto, auto, auto) { return xxnpuStreamQuery(cs); },
       "waiting for (or destroying) capturing stream"},
      {"StreamDestroy", [](xxnpuStream_t cs, auto, auto, auto, auto) { return xxnpuStreamDestroy(cs); },
       "waiting for (or destroying) capturing stream"},
      {"EventSynchronize", [](auto, xxnpuEvent_t e, auto, auto, auto) { return xxnpuEventSynchronize(e); },
       "an event recorded in the capture"},
      {"EventQuery", [](auto, xxnpuEvent_t e, auto, auto, auto) { return xxnpuEventQuery(e); },
       "an event recorded in the capture"},
      {"BlockingMemcpy",
       [](auto, auto, auto, float* dev, auto) {
         float v = 1.0f;
         return xxnpuMemcpy(dev, &v, sizeof v, MemcpyKind::kHostToDevice);
       },
       "potentially unsafe call"},
      {"BlockingMemset", [](auto, auto, auto, float* dev, auto) { return xxnpuMemset(dev, 0, 4); },
       "potentially unsafe call"},
      {"MallocInGlobalMode", [](auto, auto, auto, auto, auto) { return xxnpuMalloc(64).status(); },
       "potentially unsafe call"},
      {"FreeInGlobalMode", [](auto, auto, auto, auto, void* spare) { return xxnpuFree(spare); },
       "potentially unsafe call"},
      {"PageableCopyCaptured",
       [](xxnpuStream_t cs, auto, auto, float* dev, auto) {
         static float pageable = 1.0f;
         return xxnpuMemcpyAsync(dev, &pageable, sizeof pageable, MemcpyKind::kHostToDevice, cs);
       },
       "pageable host memory"},
      {"WaitOnAnEventFromOutside",
       [](xxnpuStream_t cs, auto, xxnpuEvent_t outside, auto, auto) { return xxnpuStreamWaitEvent(cs, outside); },
       "recorded outside the capture"},
      {"DefaultStreamFromAnotherThread",
       [](auto, auto, auto, float* dev, auto) {
         absl::Status st;
         std::thread([&] { st = AddOne(dev, nullptr); }).join();
         return st;
       },
       "default stream of xxnpu:0"},
      {"EndCaptureFromAnotherThread",
       [](xxnpuStream_t cs, auto, auto, auto, auto) {
         absl::Status st;
         std::thread([&] { st = xxnpuStreamEndCapture(cs).status(); }).join();
         return st;
       },
       "from a thread other than the one that began it"},
  };
}

TEST(GraphTest, EachIllegalCallErrorsInvalidatesAndLeavesTheDeviceUsable) {
  xxnpuStream_t other = *xxnpuStreamCreate();
  xxnpuEvent_t outside = *xxnpuEventCreate();
  ASSERT_OK(xxnpuEventRecord(outside, other));
  float* dev = DeviceBuffer();
  Upload(dev, std::vector<float>(kN, 0.0f));
  for (const IllegalCase& c : IllegalCases()) {
    SCOPED_TRACE(c.name);
    xxnpuStream_t cs = *xxnpuStreamCreate();
    xxnpuEvent_t captured = *xxnpuEventCreate();
    void* spare = *xxnpuMalloc(64);
    ASSERT_OK(xxnpuStreamBeginCapture(cs, StreamCaptureMode::kGlobal));
    ASSERT_OK(AddOne(dev, cs));
    ASSERT_OK(xxnpuEventRecord(captured, cs));

    absl::Status st = c.call(cs, captured, outside, dev, spare);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(st.message(), HasSubstr(c.message));
    EXPECT_THAT(st.message(), HasSubstr("invalidated"));
    EXPECT_EQ(CaptureStatus(cs), StreamCaptureStatus::kInvalidated);
    // Work offered to the spoilt capture is refused, naming the first reason.
    absl::Status more = AddOne(dev, cs);
    EXPECT_EQ(more.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(more.message(), HasSubstr("was invalidated"));
    EXPECT_THAT(more.message(), HasSubstr(c.message));
    auto graph = xxnpuStreamEndCapture(cs);
    EXPECT_EQ(graph.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(graph.status().message(), HasSubstr(c.message));
    EXPECT_EQ(CaptureStatus(cs), StreamCaptureStatus::kNone);

    // Everything works again, eagerly: the captured AddOne never ran, this one does.
    const float before = Download(dev)[0];
    ASSERT_OK(AddOne(dev, cs));
    ASSERT_OK(xxnpuStreamSynchronize(cs));
    ASSERT_OK(xxnpuEventSynchronize(captured));
    ASSERT_OK(xxnpuDeviceSynchronize());
    EXPECT_EQ(Download(dev)[0], before + 1.0f);
    ASSERT_OK(xxnpuFree(spare));
    ASSERT_OK(xxnpuEventDestroy(captured));
    ASSERT_OK(xxnpuStreamDestroy(cs));
  }
  ASSERT_OK(xxnpuFree(dev));
  ASSERT_OK(xxnpuEventDestroy(outside));
  ASSERT_OK(xxnpuStreamDestroy(other));
}

TEST(GraphTest, LaunchingAGraphIntoACaptureIsRefused) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  std::atomic<int> counter{0};
  ASSERT_OK(xxnpuStreamBeginCapture(s));
  ASSERT_OK(Count(&counter, s));
  xxnpuGraph_t graph = *xxnpuStreamEndCapture(s);
  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(graph);
  ASSERT_OK(xxnpuStreamBeginCapture(s));
  absl::Status st = xxnpuGraphLaunch(exec, s);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("child graph"));
  EXPECT_FALSE(xxnpuStreamEndCapture(s).ok());
  ASSERT_OK(xxnpuGraphExecDestroy(exec));
  ASSERT_OK(xxnpuGraphDestroy(graph));
  ASSERT_OK(xxnpuStreamSynchronize(s));
  EXPECT_EQ(counter.load(), 0);
  ASSERT_OK(xxnpuStreamDestroy(s));
}

// What a kernel body owns may call the runtime when destroyed (a tensor's free reaches
// the allocator, which records events): destroying a graph's nodes must not hold the
// capture bookkeeping's lock. xxnpuGraphGetLiveCounts stands for any such call: it takes
// that lock.
struct CallsTheRuntimeWhenDestroyed {
  explicit CallsTheRuntimeWhenDestroyed(std::atomic<int>* d) : destroyed(d) {}
  CallsTheRuntimeWhenDestroyed(const CallsTheRuntimeWhenDestroyed&) = delete;
  std::atomic<int>* destroyed;
  ~CallsTheRuntimeWhenDestroyed() {
    (void)xxnpuGraphGetLiveCounts();
    destroyed->fetch_add(1);
  }
};

TEST(GraphTest, NodesWhoseBodiesCallTheRuntimeWhenDestroyedAreFreedWithoutDeadlock) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  std::atomic<int> destroyed{0};
  auto capture_one = [&] {
    auto owner = std::make_shared<CallsTheRuntimeWhenDestroyed>(&destroyed);
    return xxnpuLaunchKernel(Cfg("owner", 1), KernelBody([owner](BlockRange) { return absl::OkStatus(); }), s);
  };
  // A spoilt capture's nodes, freed by xxnpuStreamEndCapture.
  ASSERT_OK(xxnpuStreamBeginCapture(s));
  ASSERT_OK(capture_one());
  EXPECT_FALSE(xxnpuStreamSynchronize(s).ok());  // invalidates
  EXPECT_FALSE(xxnpuStreamEndCapture(s).ok());
  EXPECT_EQ(destroyed.load(), 1);
  // A graph's nodes, freed by xxnpuGraphDestroy.
  ASSERT_OK(xxnpuStreamBeginCapture(s));
  ASSERT_OK(capture_one());
  xxnpuGraph_t graph = *xxnpuStreamEndCapture(s);
  ASSERT_OK(xxnpuGraphDestroy(graph));
  EXPECT_EQ(destroyed.load(), 2);
  ASSERT_OK(xxnpuStreamDestroy(s));
}

// ---------------------------------------------------------------- capture modes

TEST(GraphTest, GlobalModeForbidsOtherThreadsUnsafeCallsThreadLocalDoesNot) {
  for (StreamCaptureMode mode : {StreamCaptureMode::kGlobal, StreamCaptureMode::kThreadLocal}) {
    const bool global = mode == StreamCaptureMode::kGlobal;
    SCOPED_TRACE(global ? "global" : "thread-local");
    xxnpuStream_t cs = *xxnpuStreamCreate();
    float* dev = DeviceBuffer();
    Upload(dev, std::vector<float>(kN, 0.0f));
    ASSERT_OK(xxnpuStreamBeginCapture(cs, mode));
    absl::Status malloc_status, default_stream_status;
    float seen = -1.0f;
    std::thread([&] {
      auto p = xxnpuMalloc(64);
      malloc_status = p.status();
      if (p.ok()) malloc_status = xxnpuFree(*p);
      default_stream_status = AddOne(dev, nullptr);
      if (default_stream_status.ok()) default_stream_status = xxnpuStreamSynchronize(nullptr);
      // A blocking copy is unsafe too: only this thread may make one in thread-local mode.
      if (default_stream_status.ok()) {
        default_stream_status = xxnpuMemcpy(&seen, dev, sizeof seen, MemcpyKind::kDeviceToHost);
      }
    }).join();
    if (global) {
      EXPECT_EQ(malloc_status.code(), absl::StatusCode::kFailedPrecondition) << malloc_status;
      EXPECT_EQ(default_stream_status.code(), absl::StatusCode::kFailedPrecondition) << default_stream_status;
      EXPECT_EQ(CaptureStatus(cs), StreamCaptureStatus::kInvalidated);
    } else {
      EXPECT_TRUE(malloc_status.ok()) << malloc_status;
      EXPECT_TRUE(default_stream_status.ok()) << default_stream_status;
      EXPECT_EQ(seen, 1.0f);  // the other thread's kernel ran
      EXPECT_EQ(CaptureStatus(cs), StreamCaptureStatus::kActive);
    }
    // The capturing thread itself is forbidden them in both modes.
    absl::Status own = xxnpuMalloc(64).status();
    EXPECT_EQ(own.code(), absl::StatusCode::kFailedPrecondition) << own;
    EXPECT_EQ(CaptureStatus(cs), StreamCaptureStatus::kInvalidated);
    EXPECT_FALSE(xxnpuStreamEndCapture(cs).ok());
    ASSERT_OK(xxnpuFree(dev));
    ASSERT_OK(xxnpuStreamDestroy(cs));
  }
}

TEST(GraphTest, RelaxedModeAndARelaxedThreadMayAllocate) {
  xxnpuStream_t cs = *xxnpuStreamCreate();
  ASSERT_OK(xxnpuStreamBeginCapture(cs, StreamCaptureMode::kRelaxed));
  auto p = xxnpuMalloc(64);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_OK(xxnpuFree(*p));
  EXPECT_EQ(CaptureStatus(cs), StreamCaptureStatus::kActive);
  auto graph = xxnpuStreamEndCapture(cs);
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_OK(xxnpuGraphDestroy(*graph));

  // A global capture; another thread switches itself to relaxed (as an allocator that
  // knows its memory outlives the graph would), allocates, and switches back.
  ASSERT_OK(xxnpuStreamBeginCapture(cs, StreamCaptureMode::kGlobal));
  absl::Status relaxed_status, restored_status;
  std::thread([&] {
    StreamCaptureMode m = StreamCaptureMode::kRelaxed;
    ASSERT_OK(xxnpuThreadExchangeStreamCaptureMode(&m));
    EXPECT_EQ(m, StreamCaptureMode::kGlobal);
    auto q = xxnpuMalloc(64);
    relaxed_status = q.status();
    if (q.ok()) relaxed_status = xxnpuFree(*q);
    ASSERT_OK(xxnpuThreadExchangeStreamCaptureMode(&m));
    EXPECT_EQ(m, StreamCaptureMode::kRelaxed);
    restored_status = xxnpuMalloc(64).status();
  }).join();
  EXPECT_TRUE(relaxed_status.ok()) << relaxed_status;
  EXPECT_EQ(restored_status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(xxnpuStreamEndCapture(cs).ok());
  EXPECT_EQ(xxnpuThreadExchangeStreamCaptureMode(nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK(xxnpuStreamDestroy(cs));
}

// ---------------------------------------------------------------- lifetime and order

TEST(GraphTest, DestroyingTheGraphAndExecWhileALaunchIsQueuedIsSafe) {
  const GraphLiveCounts before = xxnpuGraphGetLiveCounts();
  xxnpuStream_t s = *xxnpuStreamCreate();
  std::atomic<int> counter{0};
  auto keep = std::make_shared<int>(1);
  float* x = DeviceBuffer();
  ASSERT_OK(xxnpuStreamBeginCapture(s));
  ASSERT_OK(Count(&counter, s));
  ASSERT_OK(Double(x, keep, s));
  xxnpuGraph_t graph = *xxnpuStreamEndCapture(s);
  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(graph);

  Gate gate;
  ASSERT_OK(LaunchWait(gate, s));
  ASSERT_OK(xxnpuGraphLaunch(exec, s));
  ASSERT_OK(xxnpuGraphLaunch(exec, s));
  ASSERT_OK(xxnpuGraphExecDestroy(exec));
  ASSERT_OK(xxnpuGraphDestroy(graph));
  EXPECT_EQ(xxnpuGraphLaunch(exec, s).code(), absl::StatusCode::kInvalidArgument);
  const GraphLiveCounts queued = xxnpuGraphGetLiveCounts();
  EXPECT_EQ(queued.graphs, before.graphs);
  EXPECT_EQ(queued.execs, before.execs);
  EXPECT_EQ(queued.node_lists, before.node_lists + 1);  // held by the queued launches
  EXPECT_EQ(keep.use_count(), 2);
  gate.open = true;
  ASSERT_OK(xxnpuStreamSynchronize(s));
  EXPECT_EQ(counter.load(), 2);
  EXPECT_EQ(xxnpuGraphGetLiveCounts().node_lists, before.node_lists);
  EXPECT_EQ(keep.use_count(), 1);
  ASSERT_OK(xxnpuFree(x));
  ASSERT_OK(xxnpuStreamDestroy(s));
}

TEST(GraphTest, LaunchesOfOneExecRunInQueueOrderAcrossStreams) {
  xxnpuStream_t s1 = *xxnpuStreamCreate();
  xxnpuStream_t s2 = *xxnpuStreamCreate();
  std::atomic<int> counter{0};
  ASSERT_OK(xxnpuStreamBeginCapture(s1));
  ASSERT_OK(Count(&counter, s1));
  xxnpuGraph_t graph = *xxnpuStreamEndCapture(s1);
  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(graph);
  Gate gate;
  ASSERT_OK(LaunchWait(gate, s1));
  ASSERT_OK(xxnpuGraphLaunch(exec, s1));  // held behind the gate
  ASSERT_OK(xxnpuGraphLaunch(exec, s2));  // must wait for the launch before it
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(counter.load(), 0);
  gate.open = true;
  ASSERT_OK(xxnpuStreamSynchronize(s2));
  EXPECT_EQ(counter.load(), 2);
  ASSERT_OK(xxnpuStreamSynchronize(s1));
  ASSERT_OK(xxnpuGraphExecDestroy(exec));
  ASSERT_OK(xxnpuGraphDestroy(graph));
  ASSERT_OK(xxnpuStreamDestroy(s1));
  ASSERT_OK(xxnpuStreamDestroy(s2));
}

TEST(GraphTest, AFailingNodeFailsTheStreamLikeAKernel) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  std::atomic<bool> fail{true};
  std::atomic<int> counter{0};
  ASSERT_OK(xxnpuStreamBeginCapture(s));
  ASSERT_OK(xxnpuLaunchKernel(Cfg("maybe_fail", 1), [&fail](BlockRange) {
    return fail.load() ? absl::InternalError("boom") : absl::OkStatus();
  }, s));
  ASSERT_OK(Count(&counter, s));
  xxnpuGraph_t graph = *xxnpuStreamEndCapture(s);
  const uint32_t id = *xxnpuGraphGetId(graph);
  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(graph);
  ASSERT_OK(xxnpuGraphLaunch(exec, s));
  ASSERT_OK(Count(&counter, s));  // queued behind the failure: skipped
  absl::Status st = xxnpuStreamSynchronize(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(st.message(), HasSubstr("kernel 'maybe_fail' (graph " + std::to_string(id) + " node 0) failed"));
  EXPECT_THAT(st.message(), HasSubstr("boom"));
  EXPECT_EQ(counter.load(), 0);
  fail = false;
  ASSERT_OK(xxnpuGraphLaunch(exec, s));
  ASSERT_OK(xxnpuStreamSynchronize(s));
  EXPECT_EQ(counter.load(), 1);
  ASSERT_OK(xxnpuGraphExecDestroy(exec));
  ASSERT_OK(xxnpuGraphDestroy(graph));
  ASSERT_OK(xxnpuStreamDestroy(s));
}

TEST(GraphTest, LaunchOnAStreamOfAnotherDeviceIsRefused) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  ASSERT_OK(xxnpuStreamBeginCapture(s));
  xxnpuGraph_t graph = *xxnpuStreamEndCapture(s);
  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(graph);
  ASSERT_OK(xxnpuSetDevice(1));
  xxnpuStream_t other = *xxnpuStreamCreate();
  ASSERT_OK(xxnpuSetDevice(0));
  absl::Status st = xxnpuGraphLaunch(exec, other);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("captured on xxnpu:0"));
  ASSERT_OK(xxnpuStreamDestroy(other));
  ASSERT_OK(xxnpuGraphExecDestroy(exec));
  ASSERT_OK(xxnpuGraphDestroy(graph));
  ASSERT_OK(xxnpuStreamDestroy(s));
}

// ---------------------------------------------------------------- activity records

TEST(GraphTest, AReplayIsOneLaunchRecordLinkedToItsKernelsWhichCarryGraphAndNodeIds) {
  xxnpuStream_t s = *xxnpuStreamCreate();
  float* x = DeviceBuffer();
  ASSERT_OK(xxnpuStreamBeginCapture(s));
  ASSERT_OK(AddOne(x, s));
  ASSERT_OK(Double(x, std::make_shared<int>(2), s));
  ASSERT_OK(xxnpuMemsetAsync(x, 0, 16, s));
  ASSERT_OK(AddOne(x, s));
  xxnpuGraph_t graph = *xxnpuStreamEndCapture(s);
  const uint32_t graph_id = *xxnpuGraphGetId(graph);
  EXPECT_NE(graph_id, 0u);
  xxnpuGraphExec_t exec = *xxnpuGraphInstantiate(graph);

  ActivityClear();
  ActivityEnable(ActivityKind::kKernel);
  ActivityEnable(ActivityKind::kMemset);
  ActivityEnable(ActivityKind::kRuntime);
  ASSERT_OK(xxnpuGraphLaunch(exec, s));
  ASSERT_OK(xxnpuGraphLaunch(exec, s));
  ASSERT_OK(xxnpuStreamSynchronize(s));
  ActivityDisableAll();
  std::vector<ActivityRecord> records;
  ActivityCollect(&records);

  std::set<uint64_t> launches;
  for (const ActivityRecord& r : records) {
    if (r.kind == ActivityKind::kRuntime && std::string(r.name) == "xxnpuGraphLaunch") {
      launches.insert(r.correlation_id);
      EXPECT_EQ(r.stream, *xxnpuStreamGetId(s));
    }
  }
  ASSERT_EQ(launches.size(), 2u);
  std::map<uint64_t, std::vector<std::pair<uint64_t, std::string>>> by_launch;
  for (const ActivityRecord& r : records) {
    if (r.kind != ActivityKind::kKernel && r.kind != ActivityKind::kMemset) continue;
    EXPECT_EQ(r.graph_id, graph_id) << r.name;
    EXPECT_TRUE(launches.contains(r.correlation_id)) << r.name << " is not linked to a launch";
    by_launch[r.correlation_id].emplace_back(r.graph_node_id, r.name);
  }
  ASSERT_EQ(by_launch.size(), 2u);
  for (auto& [corr, nodes] : by_launch) {
    std::sort(nodes.begin(), nodes.end());
    const std::vector<std::pair<uint64_t, std::string>> expected = {
        {0, "add_one"}, {1, "double"}, {2, "Memset (Device)"}, {3, "add_one"}};
    EXPECT_EQ(nodes, expected) << "launch " << corr;
  }
  ASSERT_OK(xxnpuGraphExecDestroy(exec));
  ASSERT_OK(xxnpuGraphDestroy(graph));
  ASSERT_OK(xxnpuFree(x));
  ASSERT_OK(xxnpuStreamDestroy(s));
}

}  // namespace
}  // namespace xxnpu

int main(int argc, char** argv) {
  // Before the runtime's first use: it reads its configuration once.
  xxnpu::test_util::UseTwoTestDevices("256M");
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
