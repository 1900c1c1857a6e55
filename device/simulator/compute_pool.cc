#include "device/simulator/compute_pool.h"

#include <algorithm>

#include "device/clock.h"
#include "device/simulator/kernel_guard.h"
#include "device/spin_lock.h"

namespace xxnpu {

ComputePool::ComputePool(int threads, int spin_us) : threads_(std::max(1, threads)), spin_us_(std::max(0, spin_us)) {
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ComputePool::~ComputePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stopping_.store(true, std::memory_order_relaxed);
  }
  work_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ComputePool::Work(Job& job) {
  int64_t finished = 0;
  for (;;) {
    const int64_t begin = job.next.fetch_add(job.chunk, std::memory_order_relaxed);
    if (begin >= job.total) break;
    const int64_t end = std::min(job.total, begin + job.chunk);
    // Guarded: an exception (or, under memcheck, a guard-zone fault) in one share fails
    // the kernel; on a pool worker it would otherwise end the process.
    const absl::FunctionRef<absl::Status(BlockRange)>& body = *job.body;
    absl::Status s = RunGuarded([&] { return body(BlockRange{begin, end}); });
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(job.error_mu);
      if (job.error.ok()) job.error = std::move(s);
    }
    finished += end - begin;
  }
  if (finished) job.done.fetch_add(finished, std::memory_order_acq_rel);
}

absl::Status ComputePool::Run(int64_t total, bool parallel, int priority,
                              absl::FunctionRef<absl::Status(BlockRange)> body) {
  if (total <= 0) return absl::OkStatus();
  if (!parallel || total == 1 || threads_ == 1) return RunGuarded([&] { return body(BlockRange{0, total}); });

  Job job;
  job.body = &body;
  job.total = total;
  job.priority = priority;
  // A few chunks per thread evens out uneven blocks without much scheduling traffic.
  job.chunk = std::max<int64_t>(1, total / (threads_ * 4));
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Lower number = higher priority (CUDA's convention); FIFO within a priority.
    auto pos = std::find_if(jobs_.begin(), jobs_.end(),
                            [&](const Job* j) { return j->priority > priority; });
    jobs_.insert(pos, &job);
    queued_.store(static_cast<int>(jobs_.size()), std::memory_order_release);
  }
  work_cv_.notify_all();
  Work(job);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // No more chunks to hand out: take the job off the queue so no worker picks it up.
    auto it = std::find(jobs_.begin(), jobs_.end(), &job);
    if (it != jobs_.end()) jobs_.erase(it);
    queued_.store(static_cast<int>(jobs_.size()), std::memory_order_relaxed);
  }
  // The job lives on this stack: wait for the blocks and for every worker holding it.
  auto finished = [&] {
    return job.done.load(std::memory_order_acquire) == job.total &&
           job.active_workers.load(std::memory_order_acquire) == 0;
  };
  // A straggler is a worker finishing its last chunk, a few microseconds at most: poll for
  // it (yielding, as the idle workers do) before sleeping. Sleeping here cost a wake-up
  // (~30 us on these VMs) in every kernel whose stream thread finished its share first:
  // a 256 KB softmax took 33 us a call on two compute threads against 25 us on one.
  const int64_t until = NowNs() + int64_t{spin_us_} * 1000;
  if (!SpinYielding(finished, [&] { return NowNs() >= until; })) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, finished);
  }
  return job.error;
}

void ComputePool::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (jobs_.empty() && !stop_ && spin_us_ > 0) {
      // Poll a while before sleeping: kernels come back to back, and waking a sleeping
      // thread costs ~30 us on these VMs, more than a 256 KB kernel takes. A worker that
      // slept through each kernel's start joined it late or not at all: the 2-thread
      // [4, 256] @ [256, 384] product took 23 us against 19 us on one thread.
      // It yields as it spins (SpinYielding): with as many compute threads as cores, a
      // launching host thread has no core of its own.
      lock.unlock();
      const int64_t until = NowNs() + int64_t{spin_us_} * 1000;
      SpinYielding(
          [&] { return queued_.load(std::memory_order_acquire) != 0 || stopping_.load(std::memory_order_relaxed); },
          [&] { return NowNs() >= until; });
      lock.lock();
    }
    work_cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    Job* job = jobs_.front();
    if (job->next.load(std::memory_order_relaxed) >= job->total) {
      // Exhausted; its launcher removes it. Let others run meanwhile.
      jobs_.pop_front();
      queued_.store(static_cast<int>(jobs_.size()), std::memory_order_relaxed);
      continue;
    }
    job->active_workers.fetch_add(1, std::memory_order_relaxed);
    lock.unlock();
    Work(*job);
    // The last touch of the job: its launcher may return (destroying it) from here on.
    job->active_workers.fetch_sub(1, std::memory_order_acq_rel);
    lock.lock();
    // Under the lock: a launcher that found the job unfinished under it is waiting by now.
    done_cv_.notify_all();
  }
}

}  // namespace xxnpu
