// Streams and events of the simulated device: in-order command queues, each executed by
// its own device thread, and the events that mark points in them.
//
// Why a thread per stream: streams must make progress independently (a stream waiting on
// an event must not hold up the others, and communication overlaps compute), exactly as
// hardware queues do. Kernels themselves fan out over the device's ComputePool, so the
// number of streams does not multiply compute threads.
#ifndef TORCH_XXNPU_DEVICE_SIMULATOR_STREAM_ENGINE_H_
#define TORCH_XXNPU_DEVICE_SIMULATOR_STREAM_ENGINE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "device/simulator/compute_pool.h"
#include "device/runtime_types.h"
#include "device/spin_lock.h"

namespace xxnpu {

struct ExecutableGraph;

// One queued operation, as it sits in a stream's ring. The fields a kernel launch uses
// come first, and a launch writes only those (StreamImpl::FillSlot): handing a small
// kernel to the device thread moves the few cache lines it filled, not the command.
struct alignas(64) Command {
  // The types that own something (a host function, a graph launch) come last: see Owns.
  enum class Type : uint8_t { kKernel, kMemcpy, kMemset, kEventRecord, kWaitEvent, kHostFunc, kGraph };
  Type type = Type::kKernel;
  MemcpyKind copy_kind = MemcpyKind::kDefault;  // kMemcpy
  int value = 0;                                // kMemset
  uint64_t correlation_id = 0;
  uint64_t external_id[2] = {0, 0};
  // kKernel: either `thunk` runs the kernel copied into `args`, or (thunk null) `body`.
  LaunchConfig config;
  KernelThunk thunk = nullptr;
  alignas(16) unsigned char args[kKernelArgsCapacity];
  KernelBody body;
  // kMemcpy / kMemset
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  // kEventRecord / kWaitEvent
  EventImpl* event = nullptr;
  uint64_t generation = 0;
  // kWaitEvent: where and by which traced call the awaited record was made, read when the
  // wait is queued (a later re-record of the event must not change what this wait shows).
  int wait_stream = -1;
  uint64_t wait_correlation_id = 0;
  // kHostFunc
  absl::AnyInvocable<void()> host_fn;
  // kGraph: the executable graph to run; `generation` is this launch's ticket in its
  // launches (ExecutableGraph::WaitTurn).
  std::shared_ptr<ExecutableGraph> graph;
};

// ---------------------------------------------------------------- graphs (device/graph.h)

// One node of a captured graph: the operation a command of the same type would run.
// `id` is its index in GraphData::nodes, which is a topological order (the capture order:
// a node only ever depends on nodes captured before it).
struct GraphNode {
  Command::Type type = Command::Type::kKernel;  // kKernel, kMemcpy, kMemset or kHostFunc
  uint32_t id = 0;
  std::vector<uint32_t> deps;
  // kKernel: `thunk` runs the kernel copied into `args`, or (thunk null) `body` runs.
  // A captured KernelBody is moved here from the launch and never moved again: its call
  // operator is const, so one body runs once per replay for as long as the node list
  // lives (see GraphData).
  LaunchConfig config;
  KernelThunk thunk = nullptr;
  alignas(16) unsigned char args[kKernelArgsCapacity];
  KernelBody body;
  // kMemcpy / kMemset
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  MemcpyKind copy_kind = MemcpyKind::kDefault;
  int value = 0;
  // kHostFunc: called once per replay (AnyInvocable<void()> may be called repeatedly).
  mutable absl::AnyInvocable<void()> host_fn;
};

// A graph's nodes. Why shared: the graph, each executable instantiated from it and each
// queued launch hold it (std::shared_ptr<const GraphData>), so a replay can be queued
// any number of times without copying a node, and destroying a graph or executable while
// a launch is queued is safe. The nodes (and the kernel bodies they own) are freed with
// the last holder. Immutable once the capture has ended.
struct GraphData {
  GraphData() { live_lists.fetch_add(1, std::memory_order_relaxed); }
  ~GraphData() {
    live_lists.fetch_sub(1, std::memory_order_relaxed);
    live_nodes.fetch_sub(static_cast<int64_t>(nodes.size()), std::memory_order_relaxed);
  }
  GraphData(const GraphData&) = delete;
  GraphData& operator=(const GraphData&) = delete;
  // Appends a node (during capture only); it is counted in live_nodes.
  GraphNode& AddNode() {
    live_nodes.fetch_add(1, std::memory_order_relaxed);
    GraphNode& n = nodes.emplace_back();
    n.id = static_cast<uint32_t>(nodes.size() - 1);
    return n;
  }

  uint32_t graph_id = 0;  // process-unique, never 0 (activity records carry it)
  int device = 0;
  std::vector<GraphNode> nodes;

  // xxnpuGraphGetLiveCounts.
  static inline std::atomic<int64_t> live_lists{0};
  static inline std::atomic<int64_t> live_nodes{0};
};

// What a launch runs: an instantiated graph. Launches of one executable run in the order
// they were queued, even on different streams (cudaGraphLaunch's rule): each takes a
// ticket when queued (under its stream's producer lock, so a stream's tickets follow its
// queue order) and the device runs ticket t after ticket t-1 has finished. Queued
// dependencies only point to earlier-queued work, so waiting for an earlier ticket never
// waits on this stream.
struct ExecutableGraph {
  explicit ExecutableGraph(std::shared_ptr<const GraphData> d) : data(std::move(d)) {}
  std::shared_ptr<const GraphData> data;
  uint64_t exec_id = 0;
  std::atomic<uint64_t> tickets{0};  // the last ticket handed out

  void WaitTurn(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return finished_ + 1 >= ticket; });
  }
  void Finish(uint64_t ticket) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ticket > finished_) finished_ = ticket;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t finished_ = 0;
};

struct EngineOptions {
  int spin_us = 0;
  int fetch_interval_ns = 0;
};

// The handle types declared in runtime.h. Handles are checked by `magic` and `alive`, so
// a destroyed stream or event gives a clear error rather than undefined behaviour.
inline constexpr uint32_t kStreamMagic = 0x5354524d;  // "STRM"
inline constexpr uint32_t kEventMagic = 0x45564e54;   // "EVNT"

struct EventImpl {
  uint32_t magic = kEventMagic;
  std::atomic<bool> alive{true};
  int device = 0;
  unsigned flags = kEventDefault;

  std::mutex mu;
  std::condition_variable cv;
  // Generations only grow, also across the handle's recycling: a stream still waiting on
  // a record of the event's previous life must not see the counter go back.
  uint64_t recorded = 0;   // generation of the latest record
  uint64_t completed = 0;  // latest generation the device has reached
  uint64_t created_at = 0; // `recorded` when this life began: == recorded means never recorded
  int64_t time_ns = 0;     // device time at `completed`
  int stream_id = -1;      // stream of the latest record
  // Correlation id of the latest record's xxnpuEventRecord call (0: not traced), for the
  // profiler's record of a stream waiting on this event.
  uint64_t record_correlation_id = 0;
  // Set when the record was reached on a stream holding a sticky error.
  absl::Status error;

  // Called by the device thread when it reaches record `generation`.
  void Complete(uint64_t generation, int64_t now_ns, const absl::Status& stream_error);
  // Blocks until record `generation` (or a later one) has completed.
  void WaitReached(uint64_t generation);
};

struct StreamImpl {
  uint32_t magic = kStreamMagic;
  std::atomic<bool> alive{true};
  // Which life of this object the current stream is: objects are recycled, and a handle
  // names one life (runtime.cc, StreamHandle), so a destroyed stream's handle is refused
  // instead of acting on the stream that reused the object.
  std::atomic<uint32_t> life{0};
  int device = 0;
  int priority = 0;
  int id = 0;
  bool is_default = false;
  ComputePool* pool = nullptr;
  EngineOptions options;
  // The ring's slots: set before the device thread starts, then only read (the device
  // thread must not read `ring`, which shares the host's line).
  Command* slots = nullptr;

  // Commands go from host threads to the device thread through a ring of kRingSlots
  // slots, as through a driver's push buffer: command `seq` lives in slot seq % kRingSlots.
  // Host threads take `producer` among themselves, fill the slot in place, and publish
  // the seq in `published`; the device thread runs every published slot without any
  // lock. A slot is refilled only after `completed` passed its previous command.
  //
  // Why not a mutex-guarded queue: on x86 a lock-prefixed instruction (every atomic
  // read-modify-write: a mutex's unlock, a tensor's refcount) waits until the thread's
  // earlier stores have reached the cache, and stores into lines the device thread has
  // read miss. Each launch then stalled its host thread for a cross-core round trip, the
  // top cost of a small op's launch (docs/device-runtime.md). So here a launch writes
  // only the slot's lines it needs, which were prefetched for writing one launch ahead;
  // the producer lock is released by a plain store (SpinLock); and the device thread
  // takes commands a few at a time (EngineOptions::fetch_interval_ns), so `published`
  // misses once per batch, not once per launch.
  static constexpr uint64_t kRingSlots = 512;
  // What finished commands own (kernel bodies, host functions) is destroyed by a host
  // thread: a launch takes it out of the ring every kReapEvery launches while any is
  // queued (reading `completed`, the device thread's line, costs a cache miss), and so
  // does synchronize. Few at a time, so that freeing stays in glibc's per-thread cache.
  static constexpr uint64_t kReapEvery = 4;

  // Host side (the device thread never touches this line).
  alignas(64) SpinLock producer;  // taken by launching host threads
  uint64_t enqueued = 0;  // seq of the last filled slot (under producer)
  uint64_t reaped = 0;    // slots up to this seq are free for reuse (under producer)
  uint64_t owning = 0;    // slots in (reaped, enqueued] that own a body or function (under producer)
  std::unique_ptr<Command[]> ring;  // allocated at the first launch (under producer)

  alignas(64) std::atomic<uint64_t> published{0};  // the host writes, the device polls
  alignas(64) std::atomic<uint64_t> completed{0};  // the device writes after each command
  std::atomic<int> waiters{0};                     // host threads in WaitFor
  // Whether the device thread may be about to sleep (kDrowsy) or sleeps (kAsleep): then a
  // launch also takes `mu` to wake it. Written only when the device goes idle.
  enum DeviceState : int { kAwake, kDrowsy, kAsleep };
  alignas(64) std::atomic<int> device_state{kAwake};
  std::atomic<bool> stop{false};

  // The slow paths: sleeping, waking, waiting for completion, the sticky error.
  alignas(64) std::mutex mu;
  std::condition_variable work_cv;  // the device thread sleeps on it
  std::condition_variable done_cv;  // host threads wait for completion
  std::thread thread;
  // Sticky error: the first failure (guarded by mu). The device thread reads `failed`
  // and `skip_through` without the lock: commands up to skip_through are skipped even
  // after the error has been taken.
  absl::Status error;
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> skip_through{0};

  // Queues a command and returns its seq; starts the device thread. `fill(slot)` writes
  // the command's fields into its ring slot (only those its type uses: see Command).
  template <typename Fill>
  uint64_t Enqueue(Fill&& fill) {
    for (;;) {
      LockProducer();
      const uint64_t seq = enqueued + 1;
      bool reaped_any = false;
      if (!ReserveLocked(seq, &reaped_any)) continue;  // the ring was full: waited, retry
      Command& slot = slots[seq % kRingSlots];
      fill(slot);
      if (Owns(slot)) ++owning;
      PublishLocked(seq, reaped_any);
      return seq;
    }
  }
  // The same for a command built beforehand (every type but inline kernels).
  uint64_t Enqueue(Command&& cmd);
  // Blocks until command `seq` has finished; also destroys what finished commands owned.
  void WaitFor(uint64_t seq);
  bool Reached(uint64_t seq) const { return completed.load(std::memory_order_acquire) >= seq; }
  uint64_t LastEnqueued() const { return published.load(std::memory_order_acquire); }
  // Returns the sticky error and clears it: commands queued so far are still skipped,
  // later ones run.
  absl::Status TakeError();
  // Whether command `seq` failed or was skipped by an error not yet taken.
  absl::Status PeekError();
  // Drains the queue and joins the device thread.
  void Shutdown();
  // After Shutdown: empties the ring and resets the counters, for the stream's reuse.
  void Reset();

 private:
  // Copies the fields of `cmd`'s type into `slot` (only those: see Command).
  static void FillSlot(Command& slot, Command& cmd);
  // Whether the command leaves something for a host thread to destroy (a kernel body, a
  // host function, a graph launch's hold on its graph): inline kernels and the other
  // types do not.
  static bool Owns(const Command& cmd) {
    return cmd.type >= Command::Type::kHostFunc || (cmd.type == Command::Type::kKernel && cmd.thunk == nullptr);
  }
  // Under `producer`: makes the slots of commands up to `completed` reusable, moving
  // what they own into this thread's list to destroy. Returns whether it moved any.
  bool ReapLocked();
  void LockProducer() { producer.lock(); }
  void UnlockProducer() { producer.unlock(); }
  // Under `producer`: whether slot `seq` is free. If not, the ring is full: unlocks,
  // waits for the device thread, and returns false. `*reaped_any`: whether this thread
  // now has finished commands' belongings to destroy.
  bool ReserveLocked(uint64_t seq, bool* reaped_any);
  // Under `producer`, after filling slot `seq`: publishes it and unlocks; then destroys
  // what was reaped, if anything.
  void PublishLocked(uint64_t seq, bool reaped_any);
  // Wakes the device thread if it is going to sleep or sleeps.
  void WakeDevice();
  // Device thread, out of work: spins, then sleeps. Returns the latest published seq
  // (== done only when stopping).
  uint64_t AwaitWork(uint64_t done);
  void Loop();
  void Execute(Command& cmd, bool skip, absl::Status* failure);
  // Runs a graph launch's nodes in order; the first failing node ends it.
  void ExecuteGraph(const Command& cmd, absl::Status* failure);
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_SIMULATOR_STREAM_ENGINE_H_
