// A device's compute threads: a kernel's grid is split into chunks of blocks that the
// launching stream thread and the pool's workers take in turn.
//
// The stream thread always works on its own kernel, so a pool of N compute threads has
// N-1 workers; with N = 1 every kernel runs on its stream thread alone. Jobs from
// higher-priority streams are served first.
#ifndef TORCH_XXNPU_DEVICE_SIMULATOR_COMPUTE_POOL_H_
#define TORCH_XXNPU_DEVICE_SIMULATOR_COMPUTE_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "device/runtime_types.h"

namespace xxnpu {

class ComputePool {
 public:
  // `spin_us`: how long an idle worker polls for the next job before it sleeps
  // (XXNPU_SPIN_US, as the stream threads).
  explicit ComputePool(int threads, int spin_us = 0);
  ~ComputePool();
  ComputePool(const ComputePool&) = delete;
  ComputePool& operator=(const ComputePool&) = delete;

  // Runs `body` over blocks [0, total) and returns the first error any share returned.
  // Spreads the work over the pool when `parallel` and there is more than one block.
  absl::Status Run(int64_t total, bool parallel, int priority, absl::FunctionRef<absl::Status(BlockRange)> body);

  int threads() const { return threads_; }

 private:
  struct Job {
    const absl::FunctionRef<absl::Status(BlockRange)>* body = nullptr;
    int64_t total = 0;
    int64_t chunk = 1;
    int priority = 0;
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    // Workers inside Work(job): raised under the pool's mu_ (so a job off the queue gains
    // none), lowered without it as the worker's last touch of the job.
    std::atomic<int> active_workers{0};
    std::mutex error_mu;
    absl::Status error;
  };
  // Takes chunks of `job` until none remain.
  static void Work(Job& job);
  void WorkerLoop();

  const int threads_;
  const int spin_us_;
  // jobs_.size(), also readable without mu_: what an idle worker polls while it spins.
  std::atomic<int> queued_{0};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable work_cv_;  // workers wait for jobs
  std::condition_variable done_cv_;  // launchers wait for stragglers
  std::deque<Job*> jobs_;            // by priority, then arrival
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_SIMULATOR_COMPUTE_POOL_H_
