// xxccl's work/stream plumbing: the c10d Work of a collective (NCCL's semantics: waiting
// orders the caller's stream after the comm kernel, not the host), the group's failure
// state that poisons later collectives, and the pool of runtime events that order streams.
// The collectives themselves are in xxccl_backend.{h,cc}.
#ifndef TORCH_XXNPU_DISTRIBUTED_XXCCL_WORK_H_
#define TORCH_XXNPU_DISTRIBUTED_XXCCL_WORK_H_

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"

namespace xxnpu::distributed {

// Runs `fn` with `device` as the thread's current runtime device, then restores it.
template <typename Fn>
auto OnDevice(c10::DeviceIndex device, Fn fn) {
  auto previous = xxnpuGetDevice();
  absl::Status set = xxnpuSetDevice(device);
  TORCH_CHECK(set.ok(), "xxccl: ", set.message());
  auto result = fn();
  if (previous.ok()) (void)xxnpuSetDevice(*previous);
  return result;
}

// What all works of one group share: the first failure, which poisons the group.
struct GroupState {
  std::mutex mu;
  std::string error;  // empty while healthy
};

// One collective's completion, written by its comm kernel.
struct WorkState {
  std::mutex mu;
  bool done = false;
  std::string error;
};

// Runtime events for ordering streams, recycled once the device has passed them.
// Destroying a runtime event waits for its pending record, so works and launches never
// destroy theirs: that would make every collective block the host.
class EventPool {
 public:
  explicit EventPool(c10::DeviceIndex device) : device_(device) {}
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  xxnpuEvent_t Acquire();
  // The event may still have a record in flight; it is reused only after it completes.
  void Release(xxnpuEvent_t event);

 private:
  c10::DeviceIndex device_;
  std::mutex mu_;
  std::vector<xxnpuEvent_t> free_;
  std::vector<xxnpuEvent_t> all_;
};

class XxcclWork : public c10d::Work {
 public:
  XxcclWork(int rank, c10d::OpType type, const char* name, XxnpuStream comm, std::shared_ptr<WorkState> state,
            std::shared_ptr<GroupState> group, std::shared_ptr<EventPool> events, std::vector<at::Tensor> outputs,
            bool blocking);
  ~XxcclWork() override;

  // True once the comm stream has passed the kernel (non-blocking).
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  // NCCL semantics: the current stream of the work's device waits for the collective;
  // the host does not (unless the work is blocking, like barrier, or a timeout is given).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  // Completed at launch, with the comm stream's event: waiting on it (or on a then()
  // callback) orders the waiter's stream after the collective, as DDP's hooks expect.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  void BlockCurrentStream();
  void ThrowIfFailed() const;
  // Empty while the collective has not failed (nor been skipped after a group failure).
  std::string Failure() const;

  const char* name_;
  XxnpuStream comm_;
  std::shared_ptr<WorkState> state_;
  std::shared_ptr<GroupState> group_;
  std::shared_ptr<EventPool> events_;
  xxnpuEvent_t done_event_;  // recorded on the comm stream right after the kernel
  std::vector<at::Tensor> outputs_;
  bool blocking_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A work with nothing left to do (ops folded into a later coalesced launch).
class DoneWork : public c10d::Work {
 public:
  DoneWork(int rank, c10d::OpType type) : c10d::Work(rank, type) {}
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
};

}  // namespace xxnpu::distributed

#endif  // TORCH_XXNPU_DISTRIBUTED_XXCCL_WORK_H_
