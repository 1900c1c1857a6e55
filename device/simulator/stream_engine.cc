#include "device/simulator/stream_engine.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "device/activity_trace.h"
#include "device/clock.h"
#include "device/runtime.h"
#include "device/simulator/kernel_guard.h"


namespace xxnpu {

void EventImpl::Complete(uint64_t generation, int64_t now_ns, const absl::Status& stream_error) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (generation > completed) {
      completed = generation;
      time_ns = now_ns;
      error = stream_error;
    }
  }
  cv.notify_all();
}

void EventImpl::WaitReached(uint64_t generation) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return completed >= generation; });
}

static_assert(offsetof(Command, args) < 128, "an inline kernel's launch must start within two cache lines");

namespace {

// Why what a command captured is destroyed by a host thread: a kernel body (its closure)
// is allocated by the launching host thread. Freed on the device thread, each launch
// paid glibc's slow cross-thread path (the chunk overflows the device thread's cache
// into the shared arena, under the arena lock the host's next allocation also needs).
// Freed by a host thread, both ends stay in that thread's cache. The lists are per host
// thread so that their capacity is recycled.
struct Reaped {
  std::vector<KernelBody> bodies;
  std::vector<absl::AnyInvocable<void()>> host_fns;
  // A graph launch's hold on its executable: the last one may free the nodes' bodies.
  std::vector<std::shared_ptr<ExecutableGraph>> graphs;
};
thread_local Reaped t_reaped;
// Set while this thread destroys what it reaped: a destructor that launches (and so
// reaps) again leaves its stream's slots for a later call instead of touching the lists
// being cleared.
thread_local bool t_reaping = false;

// Outside the producer lock: destructors may be slow and may launch again.
void DestroyReaped() {
  if (t_reaping || (t_reaped.bodies.empty() && t_reaped.host_fns.empty() && t_reaped.graphs.empty())) return;
  t_reaping = true;
  t_reaped.bodies.clear();
  t_reaped.host_fns.clear();
  t_reaped.graphs.clear();
  t_reaping = false;
}

// Asks for `lines` cache lines from `p` in a writable state, without waiting for them.
void PrefetchForWrite(const void* p, int lines) {
  const char* c = static_cast<const char*>(p);
  for (int i = 0; i < lines; ++i) {
#if defined(__x86_64__)
    // PREFETCHW (a no-op on CPUs without it); GCC emits it for __builtin_prefetch only
    // when compiling for such a CPU.
    asm volatile("prefetchw %0" ::"m"(c[i * 64]));
#else
    __builtin_prefetch(c + i * 64, 1, 3);
#endif
  }
}

// A kernel launch writes the command's first lines: the header and config, then the
// inline kernel (up to 144 bytes of it within these).
constexpr int kPrefetchLines = 4;

// After announcing that it is about to sleep, the device thread keeps polling this long:
// a launch that missed the announcement (it read the state just before it changed) is
// visible to the device thread well within it, so the launch needs no wake-up.
constexpr int64_t kDrowsyNs = 20'000;
// A sleeping device thread still looks for work this often. Only a launch that both
// missed the announcement and stayed invisible for all of kDrowsyNs would wait for it:
// a bound that does not rest on timing, not a path expected to run.
constexpr auto kSleepRecheck = std::chrono::milliseconds(50);

}  // namespace

void StreamImpl::FillSlot(Command& slot, Command& cmd) {
  slot.type = cmd.type;
  slot.correlation_id = cmd.correlation_id;
  if (cmd.correlation_id != 0) {
    slot.external_id[0] = cmd.external_id[0];
    slot.external_id[1] = cmd.external_id[1];
  }
  switch (cmd.type) {
    case Command::Type::kKernel:
      slot.config = cmd.config;
      slot.thunk = nullptr;  // inline kernels are filled directly (xxnpuLaunchKernelInline)
      slot.body = std::move(cmd.body);
      return;
    case Command::Type::kMemcpy:
      slot.dst = cmd.dst;
      slot.src = cmd.src;
      slot.bytes = cmd.bytes;
      slot.copy_kind = cmd.copy_kind;
      return;
    case Command::Type::kMemset:
      slot.dst = cmd.dst;
      slot.bytes = cmd.bytes;
      slot.value = cmd.value;
      return;
    case Command::Type::kEventRecord:
    case Command::Type::kWaitEvent:  // a record's wait fields are their defaults
      slot.event = cmd.event;
      slot.generation = cmd.generation;
      slot.wait_stream = cmd.wait_stream;
      slot.wait_correlation_id = cmd.wait_correlation_id;
      return;
    case Command::Type::kHostFunc:
      slot.host_fn = std::move(cmd.host_fn);
      return;
    case Command::Type::kGraph:
      slot.graph = std::move(cmd.graph);
      slot.generation = cmd.generation;
      return;
  }
}

bool StreamImpl::ReapLocked() {
  const uint64_t done = completed.load(std::memory_order_acquire);
  if (owning == 0) {
    reaped = std::max(reaped, done);  // nothing to destroy: no need to look at the slots
    return false;
  }
  if (t_reaping) return false;  // a destructor launched: the lists are being cleared
  bool moved = false;
  for (; reaped < done; ++reaped) {
    Command& slot = slots[(reaped + 1) % kRingSlots];
    if (!Owns(slot)) continue;
    if (slot.body) t_reaped.bodies.push_back(std::move(slot.body));
    if (slot.host_fn) t_reaped.host_fns.push_back(std::move(slot.host_fn));
    if (slot.graph) t_reaped.graphs.push_back(std::move(slot.graph));
    --owning;
    moved = true;
  }
  return moved;
}

bool StreamImpl::ReserveLocked(uint64_t seq, bool* reaped_any) {
  if (!ring) {
    ring = std::make_unique<Command[]>(kRingSlots);
    slots = ring.get();
  }
  if (seq - reaped > kRingSlots || (owning > 0 && seq % kReapEvery == 0)) *reaped_any = ReapLocked();
  if (seq - reaped <= kRingSlots) return true;
  // The device thread is a whole ring behind: block, as on a full push buffer.
  UnlockProducer();
  DestroyReaped();
  WaitFor(seq - kRingSlots);
  return false;
}

void StreamImpl::PublishLocked(uint64_t seq, bool reaped_any) {
  enqueued = seq;
  published.store(seq, std::memory_order_release);
  const bool start = !thread.joinable();
  if (start) thread = std::thread([this] { Loop(); });
  // The next launch's slot, prefetched for writing: its lines come over from the device
  // thread (which read them a lap ago) now, not while the next launch stores into them.
  PrefetchForWrite(&slots[(seq + 1) % kRingSlots], kPrefetchLines);
  UnlockProducer();
  // Only a device thread that is going to sleep, or sleeps, needs the wake-up; an awake
  // one sees `published` move.
  if (!start && device_state.load(std::memory_order_acquire) != kAwake) WakeDevice();
  // Most launches reap nothing: skip the thread-local lists then.
  if (reaped_any) DestroyReaped();
}

uint64_t StreamImpl::Enqueue(Command&& cmd) {
  return Enqueue([&cmd](Command& slot) { FillSlot(slot, cmd); });
}

void StreamImpl::WakeDevice() {
  // Orders the publication before the state check below (and the device thread's own
  // check under `mu`): either it sees the new command or it is waiting and is notified.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  { std::lock_guard<std::mutex> lock(mu); }
  work_cv.notify_one();
}

void StreamImpl::WaitFor(uint64_t seq) {
  if (!Reached(seq)) {
    // Announce the waiter before re-checking (both seq_cst), pairing with the device
    // thread's store-then-check in Loop(): one of the two sides sees the other. It also
    // cuts the device thread's fetch interval short.
    waiters.fetch_add(1);
    // Spin first (XXNPU_SPIN_US), as CUDA's default schedule does with cores to spare: a
    // host that sleeps here is woken by the device thread, and Linux then tends to run it
    // on the device thread's core, where the two share one core (each at half speed)
    // until the load balancer separates them, milliseconds later. In a small-op loop
    // that synchronizes every few thousand ops it did, one run in a few.
    // It yields as it spins (SpinYielding): the device's compute threads may fill every
    // core, and a host spinning on a core a worker needs would halve that worker's speed.
    const int64_t until = NowNs() + int64_t{options.spin_us} * 1000;
    if (!SpinYielding([&] { return Reached(seq); }, [&] { return NowNs() >= until; })) {
      std::unique_lock<std::mutex> lock(mu);
      done_cv.wait(lock, [&] { return completed.load() >= seq; });
    }
    waiters.fetch_sub(1);
  }
  // A synchronizing host also releases what finished commands captured.
  LockProducer();
  if (ring) ReapLocked();
  UnlockProducer();
  DestroyReaped();
}

absl::Status StreamImpl::TakeError() {
  std::lock_guard<std::mutex> lock(mu);
  if (!failed.load()) return absl::OkStatus();
  absl::Status s = std::move(error);
  error = absl::OkStatus();
  // skip_through before failed: a device thread that sees failed == false then also sees
  // the commands queued up to now marked as skipped.
  skip_through.store(published.load());
  failed.store(false);
  return s;
}

absl::Status StreamImpl::PeekError() {
  std::lock_guard<std::mutex> lock(mu);
  return error;
}

void StreamImpl::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stop.store(true);
  }
  work_cv.notify_one();
  if (thread.joinable()) thread.join();
}

void StreamImpl::Reset() {
  LockProducer();
  if (ring) ReapLocked();
  ring.reset();
  slots = nullptr;
  enqueued = 0;
  reaped = 0;
  owning = 0;
  published.store(0);
  completed.store(0);
  skip_through.store(0);
  device_state.store(kAwake);
  stop.store(false);
  UnlockProducer();
  DestroyReaped();
}

uint64_t StreamImpl::AwaitWork(uint64_t done) {
  uint64_t avail;
  // Spin briefly before sleeping (XXNPU_SPIN_US): a launch arriving meanwhile starts in
  // ~1 us instead of paying a wake-up (~30 us on these VMs), so gaps in a profile are the
  // host's, not the simulator's.
  const int64_t spin_ns = int64_t{options.spin_us} * 1000;
  const int64_t until = NowNs() + spin_ns;
  // It yields as it spins (SpinYielding): when Linux has put the launching host thread on
  // the same core (it does, for a while, after this thread woke it), the host runs instead
  // of sharing the core half and half with a thread that has nothing to do.
  if (SpinYielding([&] { return (avail = published.load(std::memory_order_acquire)) != done; },
                   [&] { return NowNs() >= until || stop.load(std::memory_order_relaxed); })) {
    return avail;
  }
  // Announce the sleep, then keep polling a while (kDrowsyNs): launches from now on wake
  // this thread, and one that read the state just before is seen meanwhile.
  device_state.store(kDrowsy);
  const int64_t drowsy_until = NowNs() + kDrowsyNs;
  while (NowNs() < drowsy_until && !stop.load(std::memory_order_relaxed)) {
    if ((avail = published.load()) != done) {
      device_state.store(kAwake);
      return avail;
    }
    CpuRelax();
  }
  std::unique_lock<std::mutex> lock(mu);
  device_state.store(kAsleep);
  while ((avail = published.load()) == done && !stop.load()) {
    work_cv.wait_for(lock, kSleepRecheck);
  }
  device_state.store(kAwake);
  return avail;
}

void StreamImpl::Loop() {
  const int64_t fetch_interval_ns = options.fetch_interval_ns;
  uint64_t done = 0;  // the last command this thread ran
  for (;;) {
    const int64_t fetched_at = fetch_interval_ns > 0 ? NowNs() : 0;
    uint64_t avail = published.load(std::memory_order_acquire);
    if (avail == done) avail = AwaitWork(done);
    if (avail == done) return;  // stopped, and everything published has run
    // Every published slot, without a lock: the host fills a slot before publishing its
    // seq (release) and refills it only after `completed` has passed it.
    for (uint64_t seq = done + 1; seq <= avail; ++seq) {
      Command& cmd = slots[seq % kRingSlots];
      const bool skip = failed.load() || seq <= skip_through.load();
      absl::Status failure;
      Execute(cmd, skip, &failure);
      if (!failure.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.load()) {
          error = std::move(failure);
          failed.store(true);
        }
      }
      // The slot is the host's from here on (it reaps what the command owned).
      completed.store(seq);
      // Checked again after the store (both seq_cst), pairing with WaitFor's announce-
      // then-check: one of the two sides sees the other.
      if (waiters.load() > 0) {
        // Taking the mutex orders this notify after the waiter has gone to sleep.
        { std::lock_guard<std::mutex> lock(mu); }
        done_cv.notify_all();
      }
    }
    done = avail;
    // A busy stream looks for new commands once per fetch interval, not as soon as it is
    // free (see `published`). A synchronizing host does not wait for the interval.
    if (fetch_interval_ns > 0) {
      const int64_t next_fetch = fetched_at + fetch_interval_ns;
      while (NowNs() < next_fetch && waiters.load(std::memory_order_relaxed) == 0) CpuRelax();
    }
  }
}

namespace {

// Where a device record comes from: the traced call that queued the work (the launch, or
// the xxnpuGraphLaunch of a replay) and, for a replay, the graph node.
struct RecordSource {
  const Command& cmd;
  uint32_t graph_id = 0;
  uint64_t node_id = 0;
};

// Device records are written only for commands queued while tracing was on (they carry a
// correlation id then), as CUPTI decides at launch: work launched before a capture but
// running into it stays out of it rather than showing up unlinked.
void FillDeviceRecord(const RecordSource& src, const StreamImpl& s, ActivityRecord* r) {
  r->correlation_id = src.cmd.correlation_id;
  r->external_id[0] = src.cmd.external_id[0];
  r->external_id[1] = src.cmd.external_id[1];
  r->device = s.device;
  r->stream = s.id;
  r->thread_id = CurrentThreadId();
  if (src.graph_id != 0) {
    r->graph_id = src.graph_id;
    r->graph_node_id = src.node_id;
  }
}

// " (graph G node N)" for a replayed node's error, nothing for eager work.
std::string NodeSuffix(const RecordSource& src) {
  return src.graph_id == 0 ? std::string() : absl::StrCat(" (graph ", src.graph_id, " node ", src.node_id, ")");
}

// The kernel a device thread is running, for xxnpuKernelParallelFor: the pool its child
// grids go to, and whether the kernel is big enough to spread (its parallel_threshold).
struct RunningKernel {
  ComputePool* pool = nullptr;
  int priority = 0;
  bool parallel = false;
};
thread_local const RunningKernel* running_kernel = nullptr;

// Runs one kernel, eager or replayed, and writes its record. Always inlined: the eager
// path's code (and cost per kernel) stays what it was before graphs shared it.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status RunKernel(StreamImpl& s, const LaunchConfig& config,
                              absl::FunctionRef<absl::Status(BlockRange)> body, const RecordSource& src) {
  const int64_t start = TraceClockNow();
  const bool parallel = config.bytes + config.flops >= config.parallel_threshold;
  const int64_t blocks = static_cast<int64_t>(config.grid.count());
  const RunningKernel running{s.pool, s.priority, parallel};
  const RunningKernel* const outer = running_kernel;
  running_kernel = &running;
  absl::Status st = s.pool->Run(blocks, parallel, s.priority, body);
  running_kernel = outer;
  if (st.ok()) {
    // Memcheck: an underrun into a canary is only visible after the kernel.
    if (KernelEndCheck check = GetKernelEndCheck()) {
      if (std::string bad = check(s.device); !bad.empty()) st = absl::InternalError(bad);
    }
  }
  const int64_t end = TraceClockNow();
  if (src.cmd.correlation_id != 0 && ActivityEnabled(ActivityKind::kKernel)) {
    ActivityRecord r;
    r.kind = ActivityKind::kKernel;
    r.name = config.name;
    r.start_ns = start;
    r.end_ns = end;
    FillDeviceRecord(src, s, &r);
    r.grid[0] = config.grid.x;
    r.grid[1] = config.grid.y;
    r.grid[2] = config.grid.z;
    r.block[0] = config.block.x;
    r.block[1] = config.block.y;
    r.block[2] = config.block.z;
    r.bytes = static_cast<int64_t>(config.bytes);
    r.flops = config.flops;
    r.fused_nodes = config.fused_nodes;
    ActivityRecordEmit(r);
  }
  if (st.ok()) return st;
  absl::Status failure(st.code(), absl::StrCat("kernel '", config.name, "'", NodeSuffix(src), " failed on xxnpu:",
                                               s.device, " stream ", s.id, ": ", st.message()));
  // Payloads say what kind of fault it was (an out-of-range index is an IndexError to
  // torch): they travel with the sticky error.
  st.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) { failure.SetPayload(url, payload); });
  return failure;
}

absl::Status RunHostFunc(StreamImpl& s, absl::AnyInvocable<void()>& fn, const RecordSource& src) {
  // A host function that throws fails its stream like a kernel (it would otherwise reach
  // std::terminate on the device thread).
  absl::Status st = RunGuarded([&] {
    fn();
    return absl::OkStatus();
  });
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat("host function (xxnpuLaunchHostFunc)", NodeSuffix(src),
                                              " failed on xxnpu:", s.device, " stream ", s.id, ": ", st.message()));
}

// Copies and sets of at least kParallelCopyBytes are split into kCopyChunk pieces over the
// device's compute threads, as a GPU's copy engines use many lanes. Measured with two
// compute threads (device time of a D2D copy, quiet machine): 16 MB 1964 -> 1076-1590 us,
// 64 MB 9361 -> 5683-6778 us. The threshold was 8 MB while a hand-off to the pool cost a
// wake-up (at 1 MB 24 -> 29-39 us then); since the launcher polls for its worker, clone
// (optimised wheel, 2 December, median of 9 x 50 calls) at 1 MB takes 16-34 us split
// against 55-58 whole, 2 MB 44-94 against 167, 4 MB 145-190 against 322-329 (the CPU's
// clone of 4 MB: 148). Overlapping copies keep memmove's one pass.
constexpr size_t kCopyChunk = size_t{256} << 10;
constexpr size_t kParallelCopyBytes = size_t{1} << 20;

void CopyOrSetBytes(StreamImpl& s, bool is_copy, char* dst, const char* src, size_t bytes, int value) {
  const bool overlap = is_copy && dst < src + bytes && src < dst + bytes;
  if (bytes < kParallelCopyBytes || overlap || s.pool->threads() < 2) {
    if (is_copy) {
      std::memmove(dst, src, bytes);
    } else {
      std::memset(dst, value, bytes);
    }
    return;
  }
  const int64_t chunks = static_cast<int64_t>((bytes + kCopyChunk - 1) / kCopyChunk);
  // The body cannot fail: Run's status is always ok here.
  s.pool->Run(chunks, /*parallel=*/true, s.priority, [&](BlockRange r) {
    const size_t begin = static_cast<size_t>(r.begin) * kCopyChunk;
    const size_t end = std::min(bytes, static_cast<size_t>(r.end) * kCopyChunk);
    if (is_copy) {
      std::memcpy(dst + begin, src + begin, end - begin);
    } else {
      std::memset(dst + begin, value, end - begin);
    }
    return absl::OkStatus();
  }).IgnoreError();
}

void RunCopyOrSet(StreamImpl& s, bool is_copy, void* dst, const void* src_ptr, size_t bytes, MemcpyKind copy_kind,
                  int value, const RecordSource& src) {
  const int64_t start = TraceClockNow();
  // Views of each range's first byte: a range lies in one allocation, which the view maps whole.
  CopyOrSetBytes(s, is_copy, static_cast<char*>(DeviceView(dst)),
                 is_copy ? static_cast<const char*>(DeviceView(src_ptr)) : nullptr, bytes, value);
  const ActivityKind kind = is_copy ? ActivityKind::kMemcpy : ActivityKind::kMemset;
  if (src.cmd.correlation_id != 0 && ActivityEnabled(kind)) {
    ActivityRecord r;
    r.kind = kind;
    r.subkind = is_copy ? static_cast<uint8_t>(copy_kind) : 0;
    r.name = is_copy ? MemcpyKindName(copy_kind) : "Memset (Device)";
    r.start_ns = start;
    r.end_ns = TraceClockNow();
    FillDeviceRecord(src, s, &r);
    r.bytes = static_cast<int64_t>(bytes);
    ActivityRecordEmit(r);
  }
}

}  // namespace

absl::Status xxnpuKernelParallelFor(int64_t blocks, absl::FunctionRef<absl::Status(BlockRange)> body) {
  const RunningKernel* k = running_kernel;
  if (blocks <= 0) return absl::OkStatus();
  if (k == nullptr || !k->parallel) return body(BlockRange{0, blocks});
  return k->pool->Run(blocks, /*parallel=*/true, k->priority, body);
}

void StreamImpl::Execute(Command& cmd, bool skip, absl::Status* failure) {
  switch (cmd.type) {
    case Command::Type::kEventRecord: {
      // Events complete even on a failed stream, so nothing waiting on them hangs; they
      // carry the error instead.
      absl::Status err;
      if (skip) {
        std::lock_guard<std::mutex> lock(mu);
        err = error;
      }
      cmd.event->Complete(cmd.generation, NowNs(), err);
      return;
    }
    case Command::Type::kWaitEvent: {
      if (skip) return;
      const int64_t start = TraceClockNow();
      bool waited;
      {
        std::lock_guard<std::mutex> lock(cmd.event->mu);
        waited = cmd.event->completed < cmd.generation;
      }
      if (!waited) return;
      cmd.event->WaitReached(cmd.generation);
      if (cmd.correlation_id != 0 && ActivityEnabled(ActivityKind::kSynchronization)) {
        ActivityRecord r;
        r.kind = ActivityKind::kSynchronization;
        r.subkind = static_cast<uint8_t>(SyncKind::kStreamWaitEvent);
        r.name = "xxnpuStreamWaitEvent";
        r.start_ns = start;
        r.end_ns = TraceClockNow();
        FillDeviceRecord(RecordSource{cmd}, *this, &r);
        r.wait_stream = cmd.wait_stream;
        r.wait_correlation_id = cmd.wait_correlation_id;
        ActivityRecordEmit(r);
      }
      return;
    }
    case Command::Type::kHostFunc: {
      if (skip) return;
      if (absl::Status st = RunHostFunc(*this, cmd.host_fn, RecordSource{cmd}); !st.ok()) *failure = std::move(st);
      return;
    }
    case Command::Type::kKernel: {
      if (skip) return;
      // The body (and what it captured) is destroyed by the host: see Enqueue.
      absl::Status st =
          cmd.thunk != nullptr
              ? RunKernel(*this, cmd.config, [&cmd](BlockRange r) { return cmd.thunk(cmd.args, r); }, RecordSource{cmd})
              : RunKernel(*this, cmd.config, cmd.body, RecordSource{cmd});
      if (!st.ok()) *failure = std::move(st);
      return;
    }
    case Command::Type::kMemcpy:
    case Command::Type::kMemset: {
      if (skip) return;
      RunCopyOrSet(*this, cmd.type == Command::Type::kMemcpy, cmd.dst, cmd.src, cmd.bytes, cmd.copy_kind, cmd.value,
                   RecordSource{cmd});
      return;
    }
    case Command::Type::kGraph: {
      // Launches of one executable keep their order, skipped ones included (a later
      // launch waits for this ticket).
      ExecutableGraph& exec = *cmd.graph;
      exec.WaitTurn(cmd.generation);
      if (!skip) ExecuteGraph(cmd, failure);
      exec.Finish(cmd.generation);
      return;
    }
  }
}

void StreamImpl::ExecuteGraph(const Command& cmd, absl::Status* failure) {
  const GraphData& graph = *cmd.graph->data;
  // Capture order is a topological order: running the nodes one after another respects
  // every dependency (independent branches simply run in capture order).
  for (const GraphNode& node : graph.nodes) {
    const RecordSource src{cmd, graph.graph_id, node.id};
    absl::Status st;
    switch (node.type) {
      case Command::Type::kKernel:
        st = node.thunk != nullptr
                 ? RunKernel(*this, node.config, [&node](BlockRange r) { return node.thunk(node.args, r); }, src)
                 : RunKernel(*this, node.config, node.body, src);
        break;
      case Command::Type::kMemcpy:
      case Command::Type::kMemset:
        RunCopyOrSet(*this, node.type == Command::Type::kMemcpy, node.dst, node.src, node.bytes, node.copy_kind,
                     node.value, src);
        break;
      case Command::Type::kHostFunc:
        st = RunHostFunc(*this, node.host_fn, src);
        break;
      default:
        st = absl::InternalError(absl::StrCat("graph ", graph.graph_id, " node ", node.id, " has a type (",
                                              static_cast<int>(node.type), ") a graph cannot hold"));
        break;
    }
    if (!st.ok()) {
      *failure = std::move(st);
      return;  // the rest of the graph is skipped, as the rest of a failed stream
    }
  }
}

}  // namespace xxnpu
