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

// Why kernel bodies are destroyed by the host: a body (its closure) is allocated by the
// launching host thread. Freed on the device thread, each launch paid glibc's slow
// cross-thread path (the chunk overflows the device thread's cache into the shared arena,
// under the arena lock the host's next allocation also needs), measured as the largest
// single cost of a small op's launch. Freed on a host thread, both ends stay in that
// thread's cache. So finished commands' bodies stay in the ring until the next launch or
// synchronize on the stream takes them out, and that host thread destroys them after
// unlocking. The vectors are per host thread so that their capacity is recycled.
struct Reaped {
  std::vector<KernelBody> bodies;
  std::vector<absl::AnyInvocable<void()>> host_fns;
};
thread_local Reaped t_reaped;
// Set while this thread destroys what it reaped: a destructor that launches (and so
// reaps) again collects into a vector of its own, not into the one being cleared.
thread_local bool t_reaping = false;

// Destroys what was reaped into `r` (outside the stream's mutex: destructors may be slow
// and may launch again).
void DestroyReaped(Reaped& r) {
  if (&r != &t_reaped) {
    r.bodies.clear();
    r.host_fns.clear();
    return;
  }
  if (t_reaping) return;
  t_reaping = true;
  r.bodies.clear();
  r.host_fns.clear();
  t_reaping = false;
}

// Locks `mu`, spinning briefly first. Host threads launching on one stream (and the
// device thread, on its rare paths) each hold the stream mutex for well under a
// microsecond; a plain lock() that finds it taken sleeps in the kernel, and the holder's
// unlock then pays a futex wake-up (a syscall, microseconds on these VMs).
void LockSpinning(std::mutex& mu) {
  for (int i = 0; i < 256; ++i) {
    if (mu.try_lock()) return;
    XXNPU_CPU_RELAX();
  }
  mu.lock();
}

}  // namespace

void StreamImpl::ReapLocked(std::vector<KernelBody>& bodies, std::vector<absl::AnyInvocable<void()>>& host_fns) {
  const uint64_t done = completed.load(std::memory_order_acquire);
  for (; reaped < done; ++reaped) {
    Command& cmd = ring[(reaped + 1) % kRingSlots];
    if (cmd.body) {
      bodies.push_back(std::move(cmd.body));
      cmd.body = nullptr;
    }
    if (cmd.host_fn) {
      host_fns.push_back(std::move(cmd.host_fn));
      cmd.host_fn = nullptr;
    }
  }
}

uint64_t StreamImpl::Enqueue(Command cmd) {
  for (;;) {
    Reaped nested;
    Reaped& sink = t_reaping ? nested : t_reaped;
    bool wake = false;
    bool full = false;
    uint64_t seq;
    {
      LockSpinning(mu);
      std::lock_guard<std::mutex> lock(mu, std::adopt_lock);
      if (!ring) ring = std::make_unique<Command[]>(kRingSlots);
      ReapLocked(sink.bodies, sink.host_fns);
      seq = enqueued + 1;
      if (seq > kRingSlots && reaped < seq - kRingSlots) {
        full = true;  // the device thread is kRingSlots commands behind
      } else {
        enqueued = seq;
        cmd.seq = seq;
        ring[seq % kRingSlots] = std::move(cmd);
        enqueued_hint.store(seq, std::memory_order_release);
        if (!thread.joinable()) {
          thread = std::thread([this] { Loop(); });
        } else if (sleeping) {
          // Only a sleeping device thread needs the (syscall-priced) wake-up.
          sleeping = false;
          wake = true;
        }
      }
    }
    if (wake) work_cv.notify_one();
    DestroyReaped(sink);
    if (!full) return seq;
    // As a full push buffer does: block until the device thread frees the slot.
    WaitFor(seq - kRingSlots);
  }
}

uint64_t StreamImpl::LastEnqueued() {
  std::lock_guard<std::mutex> lock(mu);
  return enqueued;
}

void StreamImpl::WaitFor(uint64_t seq) {
  Reaped nested;
  Reaped& sink = t_reaping ? nested : t_reaped;
  {
    std::unique_lock<std::mutex> lock(mu);
    if (!Reached(seq)) {
      // Announce the waiter before re-checking (both seq_cst), pairing with the device
      // thread's store-then-check in Loop(): one of the two sides sees the other.
      waiters.fetch_add(1);
      done_cv.wait(lock, [&] { return completed.load() >= seq; });
      waiters.fetch_sub(1);
    }
    // A synchronizing host also releases what finished commands captured.
    if (ring) ReapLocked(sink.bodies, sink.host_fns);
  }
  DestroyReaped(sink);
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
  uint64_t done = 0;  // the last command this thread ran
  for (;;) {
    uint64_t avail = enqueued_hint.load(std::memory_order_acquire);
    if (avail == done && spin_ns > 0) {
      // Spin briefly before sleeping (XXNPU_SPIN_US): a launch arriving meanwhile starts
      // in ~1 us instead of paying a wake-up (~30 us on these VMs), so gaps in a profile
      // are the host's, not the simulator's.
      const int64_t until = NowNs() + spin_ns;
      while ((avail = enqueued_hint.load(std::memory_order_acquire)) == done && NowNs() < until) {
        XXNPU_CPU_RELAX();
      }
    }
    if (avail == done) {
      LockSpinning(mu);
      std::unique_lock<std::mutex> lock(mu, std::adopt_lock);
      while ((avail = enqueued_hint.load(std::memory_order_acquire)) == done) {
        if (stop) return;
        sleeping = true;
        work_cv.wait(lock);
        sleeping = false;
      }
    }
    // Everything published so far, without the mutex: the host writes a slot before
    // publishing its seq (release), and refills it only after `completed` passed it.
    for (uint64_t seq = done + 1; seq <= avail; ++seq) {
      Command& cmd = ring[seq % kRingSlots];
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
      // The slot is the host's from here on (it reaps what the command captured).
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
