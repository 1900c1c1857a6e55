// SpinLock: a lock for short critical sections taken on every op, released by a plain
// store.
//
// Why not std::mutex: on x86 every atomic read-modify-write waits until the thread's
// earlier stores have reached the cache. std::mutex pays one to lock and another to
// unlock; this lock pays only the first, and the uncontended path is inline.
// A small op's launch and its output's alloc and free each take a lock, so the unlock
// shows up in the small-op loop (docs/device-runtime.md, "The launch path").
//
// A waiter spins, then yields, so a holder that was preempted (or that waits on the
// device, as the allocator's out-of-memory path does) gets the core back; it never
// sleeps, so an unlock need not check for sleepers. Meets Lockable: use it with
// std::lock_guard / std::unique_lock, not with std::condition_variable.
#ifndef TORCH_XXNPU_DEVICE_SPIN_LOCK_H_
#define TORCH_XXNPU_DEVICE_SPIN_LOCK_H_

#include <atomic>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace xxnpu {

// One step of a busy-wait: tells the CPU the thread is spinning (x86 PAUSE), so a
// hyper-threaded sibling gets the core's resources; elsewhere, yields.
inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls of a yielding busy-wait between yields (each poll ~50 ns: a pause and the checks).
constexpr int kPollsPerYield = 32;

// Busy-waits until done() or expired() returns true (done() is asked first each poll) and
// returns whether done() did. Every kPollsPerYield polls it yields the core instead of
// pausing: the simulator's device threads may fill every core, and a thread polling
// without yielding keeps one with work off its core until the time slice ends; alone on a
// core the yield is one system call per ~1.6 us of polling.
template <typename Done, typename Expired>
bool SpinYielding(Done done, Expired expired) {
  for (int polls = 1;; ++polls) {
    if (done()) return true;
    if (expired()) return false;
    if (polls % kPollsPerYield == 0) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
  }
}

class SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

  void lock() {
    if (!held_.exchange(true, std::memory_order_acquire)) return;
    LockSlow();
  }
  bool try_lock() {
    return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire);
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  void LockSlow() {
    for (int spins = 0;;) {
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          CpuRelax();
        } else {
          std::this_thread::yield();
        }
      }
      if (!held_.exchange(true, std::memory_order_acquire)) return;
    }
  }
  static constexpr int kSpinsBeforeYield = 64;
  std::atomic<bool> held_{false};
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_SPIN_LOCK_H_
