// Streams and events of the simulated device: in-order command queues, each executed by
// its own device thread, and the events that mark points in them.
//
// Why a thread per stream: streams must make progress independently (a stream waiting on
// an event must not hold up the others, and communication overlaps compute), exactly as
// hardware queues do. Kernels themselves fan out over the device's ComputePool, so the
// number of streams does not multiply compute threads.
#ifndef TORCH_XXNPU_DEVICE_STREAM_ENGINE_H_
#define TORCH_XXNPU_DEVICE_STREAM_ENGINE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "device/compute_pool.h"
#include "device/runtime.h"

namespace xxnpu {

// One queued operation. A plain struct rather than a class hierarchy: commands are
// created on every launch, and one move into the queue is all they cost.
struct Command {
  enum class Type : uint8_t { kKernel, kMemcpy, kMemset, kEventRecord, kWaitEvent, kHostFunc };
  Type type = Type::kKernel;
  uint64_t seq = 0;
  uint64_t correlation_id = 0;
  uint64_t external_id[2] = {0, 0};
  // kKernel
  LaunchConfig config;
  KernelBody body;
  // kMemcpy / kMemset
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  MemcpyKind copy_kind = MemcpyKind::kDefault;
  int value = 0;
  // kEventRecord / kWaitEvent
  EventImpl* event = nullptr;
  uint64_t generation = 0;
  // kHostFunc
  absl::AnyInvocable<void()> host_fn;
};

struct EngineOptions {
  int spin_us = 0;
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
  int device = 0;
  int priority = 0;
  int id = 0;
  bool is_default = false;
  ComputePool* pool = nullptr;
  EngineOptions options;

  // The host and the device thread hand work over through the fields below. Those one
  // side writes while the other polls get their own cache lines: sharing a line with
  // the mutex or with read-mostly fields made every launch's unlock miss the cache
  // (the device thread had pulled the line over meanwhile).
  alignas(64) std::mutex mu;
  std::vector<Command> queue;              // guarded by mu
  // Bodies of kernels the device thread has run, handed back for the host to destroy
  // (guarded by mu; see Enqueue).
  std::vector<KernelBody> retired;
  uint64_t enqueued = 0;                   // seq of the last queued command, guarded by mu
  bool sleeping = false;                   // guarded by mu
  bool stop = false;                       // guarded by mu
  alignas(64) std::atomic<uint64_t> enqueued_hint{0};  // `enqueued`, readable without mu (spinning)
  alignas(64) std::atomic<uint64_t> completed{0};      // seq of the last finished command
  std::atomic<int> waiters{0};                         // host threads in WaitFor
  alignas(64) std::condition_variable work_cv;  // the device thread waits for commands
  std::condition_variable done_cv;              // host threads wait for completion
  std::thread thread;
  // Sticky error: the first failure (guarded by mu). The device thread reads `failed`
  // and `skip_through` without the lock, so it can run a batch of commands lock-free:
  // commands up to skip_through are skipped even after the error has been taken.
  absl::Status error;
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> skip_through{0};

  // Queues `cmd` (assigning its seq) and returns the seq. Starts the device thread.
  uint64_t Enqueue(Command cmd);
  // Blocks until command `seq` has finished; also destroys retired kernel bodies.
  void WaitFor(uint64_t seq);
  bool Reached(uint64_t seq) const { return completed.load(std::memory_order_acquire) >= seq; }
  uint64_t LastEnqueued();
  // Returns the sticky error and clears it: commands queued so far are still skipped,
  // later ones run.
  absl::Status TakeError();
  // Whether command `seq` failed or was skipped by an error not yet taken.
  absl::Status PeekError();
  // Drains the queue and joins the device thread.
  void Shutdown();

 private:
  void Loop();
  void Execute(Command& cmd, bool skip, absl::Status* failure);
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_STREAM_ENGINE_H_
