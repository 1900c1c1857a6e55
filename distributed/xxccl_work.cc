// xxccl's Work and event pool: see xxccl_work.h.
#include "distributed/xxccl_work.h"

#include <ATen/core/ivalue.h>
#include <c10/core/StreamGuard.h>

#include <exception>
#include <stdexcept>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace xxnpu::distributed {

// ------------------------------------------------------------------------ event pool

EventPool::~EventPool() {
  for (xxnpuEvent_t e : all_) (void)xxnpuEventDestroy(e);
}

xxnpuEvent_t EventPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < free_.size(); ++i) {
      // Not ready yet = still in flight; any other answer (OK, or the error its stream
      // stamped on it) means the device has passed it.
      if (xxnpuEventQuery(free_[i]).code() != absl::StatusCode::kUnavailable) {
        xxnpuEvent_t e = free_[i];
        free_[i] = free_.back();
        free_.pop_back();
        return e;
      }
    }
  }
  auto created = OnDevice(device_, [] { return xxnpuEventCreate(kEventDisableTiming); });
  TORCH_CHECK(created.ok(), "xxccl: could not create an event: ", created.status().message());
  std::lock_guard<std::mutex> lock(mu_);
  all_.push_back(*created);
  return *created;
}

void EventPool::Release(xxnpuEvent_t event) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(event);
}

// ------------------------------------------------------------------------------ work

XxcclWork::XxcclWork(int rank, c10d::OpType type, const char* name, XxnpuStream comm,
                     std::shared_ptr<WorkState> state, std::shared_ptr<GroupState> group,
                     std::shared_ptr<EventPool> events, std::vector<at::Tensor> outputs, bool blocking)
    : c10d::Work(rank, type),
      name_(name),
      comm_(comm),
      state_(std::move(state)),
      group_(std::move(group)),
      events_(std::move(events)),
      done_event_(events_->Acquire()),
      outputs_(std::move(outputs)),
      blocking_(blocking) {
  absl::Status s = xxnpuEventRecord(done_event_, comm_.handle());
  TORCH_CHECK(s.ok(), name_, ": could not record the completion event: ", s.message());
}

XxcclWork::~XxcclWork() { events_->Release(done_event_); }

std::string XxcclWork::Failure() const {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!state_->error.empty()) return state_->error;
    if (state_->done) return {};
  }
  // Not run (yet): it is only a failure if the group failed, which skips queued kernels.
  std::lock_guard<std::mutex> lock(group_->mu);
  if (group_->error.empty()) return {};
  return c10::str(name_, " was not run: an earlier collective of the group failed: ", group_->error);
}

bool XxcclWork::isCompleted() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->done) return true;
  }
  return !Failure().empty();
}

bool XxcclWork::isSuccess() const { return Failure().empty(); }

std::exception_ptr XxcclWork::exception() const {
  const std::string failure = Failure();
  if (failure.empty()) return nullptr;
  return std::make_exception_ptr(std::runtime_error(failure));
}

std::vector<at::Tensor> XxcclWork::result() { return outputs_; }

void XxcclWork::ThrowIfFailed() const {
  const std::string failure = Failure();
  TORCH_CHECK(failure.empty(), failure);
}

void XxcclWork::BlockCurrentStream() {
  XxnpuStream current = GetCurrentXxnpuStream(comm_.device_index());
  if (current == comm_) return;
  absl::Status waited = xxnpuStreamWaitEvent(current.handle(), done_event_);
  TORCH_CHECK(waited.ok(), "xxccl: could not order the current stream after ", name_, ": ", waited.message());
  // Waits do not carry errors across streams, so a tiny kernel behind the wait fails the
  // waiting stream when the collective failed: the caller's next synchronisation raises
  // rather than computing on a buffer the collective never filled.
  std::shared_ptr<WorkState> state = state_;
  std::shared_ptr<GroupState> group = group_;
  const char* name = name_;
  LaunchConfig config;
  config.name = "xxccl:wait";
  absl::Status s = xxnpuLaunchKernel(
      config,
      [state, group, name](BlockRange) -> absl::Status {
        std::lock_guard<std::mutex> lock(state->mu);
        if (!state->error.empty()) return absl::InternalError(state->error);
        if (!state->done) {
          std::lock_guard<std::mutex> group_lock(group->mu);
          return absl::InternalError(absl::StrCat(name, " was not run: ", group->error));
        }
        return absl::OkStatus();
      },
      current.handle());
  TORCH_CHECK(s.ok(), "xxccl: could not queue the wait for ", name_, ": ", s.message());
}

bool XxcclWork::wait(std::chrono::milliseconds timeout) {
  ThrowIfFailed();
  BlockCurrentStream();
  if (!blocking_ && timeout == kNoTimeout) return true;
  // Host-blocking wait (barrier, or an explicit timeout): poll so a timeout can be given.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!isCompleted()) {
    TORCH_CHECK(timeout == kNoTimeout || std::chrono::steady_clock::now() < deadline, name_,
                ": not completed within ", timeout.count(), " ms");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  ThrowIfFailed();
  return true;
}

void XxcclWork::synchronize() { wait(kNoTimeout); }

c10::intrusive_ptr<c10::ivalue::Future> XxcclWork::getFuture() {
  if (!future_) {
    // Complete as far as the host is concerned; its event (recorded on the comm stream
    // under this guard) orders whoever waits on it after the collective. Made on demand
    // (DDP's hooks): the future's c10 events block the host when destroyed before the
    // device passes them.
    future_ = c10::make_intrusive<at::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                      std::vector<c10::Device>{comm_.device()});
    c10::StreamGuard guard(comm_.unwrap());
    future_->markCompleted(at::IValue(outputs_));
  }
  return future_;
}

}  // namespace xxnpu::distributed
