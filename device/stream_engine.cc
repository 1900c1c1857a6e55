#include "device/stream_engine.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "device/activity_trace.h"
#include "device/clock.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define XXNPU_CPU_RELAX() _mm_pause()
#else
#define XXNPU_CPU_RELAX() std::this_thread::yield()
#endif

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

namespace {

// Why kernel bodies come back to the host to be destroyed: a body (its closure) is
// allocated by the launching host thread. Freed on the device thread, each launch paid
// glibc's slow cross-thread path (the chunk overflows the device thread's cache into the
// shared arena, under the arena lock the host's next allocation also needs), measured as
// the largest single cost of a small op's launch. Freed on a host thread, both ends stay
// in that thread's cache. The swap buffer is per host thread so that vector capacity,
// not just bodies, is recycled instead of reallocated.
thread_local std::vector<KernelBody> t_reaped;
// Set while this thread destroys bodies: a destructor that launches (and so reaps) again
// must not touch the vector being cleared; its stream's bodies wait for the next call.
thread_local bool t_reaping = false;

// Under the stream's mutex: takes the stream's retired bodies for this thread to destroy.
void TakeRetiredLocked(std::vector<KernelBody>& retired) {
  if (!t_reaping && !retired.empty()) t_reaped.swap(retired);
}

// Locks `mu`, spinning briefly first. The host and its stream's device thread each hold
// the stream mutex for well under a microsecond; a plain lock() that finds it taken
// sleeps in the kernel, and the holder's unlock then pays a futex wake-up (a syscall,
// microseconds on these VMs), which showed as the top cost of a small op's launch.
void LockSpinning(std::mutex& mu) {
  for (int i = 0; i < 256; ++i) {
    if (mu.try_lock()) return;
    XXNPU_CPU_RELAX();
  }
  mu.lock();
}

// Outside the mutex: destroys what TakeRetiredLocked took.
void DestroyTaken() {
  if (t_reaping || t_reaped.empty()) return;
  t_reaping = true;
  t_reaped.clear();
  t_reaping = false;
}

}  // namespace

uint64_t StreamImpl::Enqueue(Command cmd) {
  bool wake = false;
  uint64_t seq;
  {
    LockSpinning(mu);
    std::lock_guard<std::mutex> lock(mu, std::adopt_lock);
    seq = ++enqueued;
    cmd.seq = seq;
    queue.push_back(std::move(cmd));
    enqueued_hint.store(seq, std::memory_order_release);
    TakeRetiredLocked(retired);
    if (!thread.joinable()) {
      thread = std::thread([this] { Loop(); });
    } else if (sleeping) {
      // Only a sleeping device thread needs the (syscall-priced) wake-up.
      sleeping = false;
      wake = true;
    }
  }
  if (wake) work_cv.notify_one();
  DestroyTaken();  // outside the lock: destructors may be slow
  return seq;
}

uint64_t StreamImpl::LastEnqueued() {
  std::lock_guard<std::mutex> lock(mu);
  return enqueued;
}

void StreamImpl::WaitFor(uint64_t seq) {
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!Reached(seq)) {
      // Announce the waiter before re-checking (both seq_cst), pairing with the device
      // thread's store-then-check in Loop(): one of the two sides sees the other.
      waiters.fetch_add(1);
      done_cv.wait(lock, [&] { return completed.load() >= seq; });
      waiters.fetch_sub(1);
    }
    // A synchronizing host also releases what finished kernels captured. Bodies of a
    // batch that finished without a waiter are handed back when the device thread
    // takes its next batch, so they are released by the launch and synchronize after.
    TakeRetiredLocked(retired);
  }
  DestroyTaken();
}

absl::Status StreamImpl::TakeError() {
  std::lock_guard<std::mutex> lock(mu);
  if (!failed.load()) return absl::OkStatus();
  absl::Status s = std::move(error);
  error = absl::OkStatus();
  // skip_through before failed: a device thread that sees failed == false then also sees
  // the commands queued up to now marked as skipped.
  skip_through.store(enqueued);
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
    stop = true;
    sleeping = false;
  }
  work_cv.notify_one();
  if (thread.joinable()) thread.join();
}

void StreamImpl::Loop() {
  const int64_t spin_ns = int64_t{options.spin_us} * 1000;
  uint64_t last_seq = 0;
  std::vector<Command> batch;
  for (;;) {
    // Spin briefly before sleeping (XXNPU_SPIN_US): a launch arriving meanwhile starts in
    // ~1 us instead of paying a wake-up (~30 us on these VMs), so gaps in a profile are
    // the host's, not the simulator's.
    if (spin_ns > 0 && enqueued_hint.load(std::memory_order_acquire) == last_seq) {
      const int64_t until = NowNs() + spin_ns;
      while (enqueued_hint.load(std::memory_order_acquire) == last_seq && NowNs() < until) {
        XXNPU_CPU_RELAX();
      }
    }
    {
      // Take everything queued in one go: the host's Enqueue and this thread then meet on
      // the mutex once per batch, not once per command. The same critical section hands
      // the previous batch's kernel bodies back to the host (see Enqueue).
      LockSpinning(mu);
      std::unique_lock<std::mutex> lock(mu, std::adopt_lock);
      for (Command& cmd : batch) {
        if (cmd.body) retired.push_back(std::move(cmd.body));
      }
      batch.clear();
      while (queue.empty()) {
        if (stop) return;
        sleeping = true;
        work_cv.wait(lock);
        sleeping = false;
      }
      batch.swap(queue);
    }
    for (Command& cmd : batch) {
      const bool skip = failed.load() || cmd.seq <= skip_through.load();
      absl::Status failure;
      Execute(cmd, skip, &failure);
      last_seq = cmd.seq;
      if (!failure.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.load()) {
          error = std::move(failure);
          failed.store(true);
        }
      }
      if (cmd.body && waiters.load() > 0) {
        // A host is synchronizing: hand the body back before the host can see the
        // command complete, so its synchronize also releases what the kernel captured.
        std::lock_guard<std::mutex> lock(mu);
        retired.push_back(std::move(cmd.body));
      }
      completed.store(cmd.seq);
      // Checked again after the store (both seq_cst), pairing with WaitFor's announce-
      // then-check: one of the two sides sees the other.
      if (waiters.load() > 0) {
        // Taking the mutex orders this notify after the waiter has gone to sleep.
        { std::lock_guard<std::mutex> lock(mu); }
        done_cv.notify_all();
      }
    }
  }
}

namespace {

// Device records are written only for commands queued while tracing was on (they carry a
// correlation id then), as CUPTI decides at launch: work launched before a capture but
// running into it stays out of it rather than showing up unlinked.
void FillDeviceRecord(const Command& cmd, const StreamImpl& s, ActivityRecord* r) {
  r->correlation_id = cmd.correlation_id;
  r->external_id[0] = cmd.external_id[0];
  r->external_id[1] = cmd.external_id[1];
  r->device = s.device;
  r->stream = s.id;
  r->thread_id = CurrentThreadId();
}

}  // namespace

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
      const int64_t start = NowNs();
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
        r.end_ns = NowNs();
        FillDeviceRecord(cmd, *this, &r);
        ActivityRecordEmit(r);
      }
      return;
    }
    case Command::Type::kHostFunc:
      if (!skip) cmd.host_fn();
      return;
    case Command::Type::kKernel: {
      if (skip) return;
      const int64_t start = NowNs();
      const bool parallel = cmd.config.bytes + cmd.config.flops >= cmd.config.parallel_threshold;
      absl::Status s = pool->Run(static_cast<int64_t>(cmd.config.grid.count()), parallel, priority,
                                 cmd.body);
      const int64_t end = NowNs();
      if (cmd.correlation_id != 0 && ActivityEnabled(ActivityKind::kKernel)) {
        ActivityRecord r;
        r.kind = ActivityKind::kKernel;
        r.name = cmd.config.name;
        r.start_ns = start;
        r.end_ns = end;
        FillDeviceRecord(cmd, *this, &r);
        r.grid[0] = cmd.config.grid.x;
        r.grid[1] = cmd.config.grid.y;
        r.grid[2] = cmd.config.grid.z;
        r.block[0] = cmd.config.block.x;
        r.block[1] = cmd.config.block.y;
        r.block[2] = cmd.config.block.z;
        r.bytes = static_cast<int64_t>(cmd.config.bytes);
        r.flops = cmd.config.flops;
        ActivityRecordEmit(r);
      }
      if (!s.ok()) {
        *failure = absl::Status(s.code(), absl::StrCat("kernel '", cmd.config.name, "' failed on xxnpu:",
                                                       device, " stream ", id, ": ", s.message()));
      }
      // The body (and what it captured) is destroyed by the host: see Enqueue.
      return;
    }
    case Command::Type::kMemcpy:
    case Command::Type::kMemset: {
      if (skip) return;
      const int64_t start = NowNs();
      const bool is_copy = cmd.type == Command::Type::kMemcpy;
      if (is_copy) {
        std::memmove(DeviceView(cmd.dst), DeviceView(cmd.src), cmd.bytes);
      } else {
        std::memset(DeviceView(cmd.dst), cmd.value, cmd.bytes);
      }
      const ActivityKind kind = is_copy ? ActivityKind::kMemcpy : ActivityKind::kMemset;
      if (cmd.correlation_id != 0 && ActivityEnabled(kind)) {
        ActivityRecord r;
        r.kind = kind;
        r.subkind = is_copy ? static_cast<uint8_t>(cmd.copy_kind) : 0;
        r.name = is_copy ? MemcpyKindName(cmd.copy_kind) : "Memset (Device)";
        r.start_ns = start;
        r.end_ns = NowNs();
        FillDeviceRecord(cmd, *this, &r);
        r.bytes = static_cast<int64_t>(cmd.bytes);
        ActivityRecordEmit(r);
      }
      return;
    }
  }
}

}  // namespace xxnpu
