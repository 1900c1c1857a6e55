// C++ tests of the xxccl backend without Python or sockets: a fake host transport stands
// for Gloo (rank 0 of 2, the other rank simulated), so stream ordering, host
// non-blocking, failure propagation and argument checks are tested in one process (and
// under sanitizers).
#include "distributed/xxccl_backend.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu::distributed {
namespace {

using ::testing::HasSubstr;

// A finished host work, or one whose wait() raises `error`.
class FakeWork : public c10d::Work {
 public:
  explicit FakeWork(std::string error = "") : error_(std::move(error)) {}
  bool wait(std::chrono::milliseconds) override {
    if (!error_.empty()) throw std::runtime_error(error_);
    return true;
  }
  bool isCompleted() override { return true; }

 private:
  std::string error_;
};

// Rank 0 of 2; the peer holds the same tensors as this rank unless told otherwise.
class FakeHost : public c10d::Backend {
 public:
  FakeHost() : c10d::Backend(0, 2) {}
  const std::string getBackendName() const override { return "fake_host"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    std::this_thread::sleep_for(delay);
    if (!fail_with.empty()) return c10::make_intrusive<FakeWork>(fail_with);
    // Host memory over device memory: touching it here proves the view is host-usable.
    if (opts.reduceOp == c10d::ReduceOp::SUM) tensors[0].mul_(2);
    ++allreduces;
    return c10::make_intrusive<FakeWork>();
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions&) override {
    for (auto& o : outputs[0]) o.copy_(inputs[0]);
    // The simulated peer's agreement record: (op, dtype, count + peer_count_delta).
    if (inputs[0].numel() == 3 && inputs[0].scalar_type() == at::kLong) {
      outputs[0][1][2] += peer_count_delta;
    }
    return c10::make_intrusive<FakeWork>();
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    return c10::make_intrusive<FakeWork>();
  }

  std::chrono::milliseconds delay{0};
  std::string fail_with;
  int64_t peer_count_delta = 0;
  std::atomic<int> allreduces{0};
};

class XxcclBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_ = c10::make_intrusive<FakeHost>();
    backend_ = c10::make_intrusive<XxcclBackend>(c10::make_intrusive<c10d::HashStore>(), 0, 2, host_,
                                                 std::chrono::milliseconds(10000));
  }

  at::Tensor Ones(int64_t n) { return at::ones({n}, at::TensorOptions().device(kXxnpuDeviceType, 0)); }

  c10::intrusive_ptr<FakeHost> host_;
  c10::intrusive_ptr<XxcclBackend> backend_;
};

std::string MessageOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

TEST_F(XxcclBackendTest, AllreduceRunsAfterQueuedComputeWithoutBlockingTheHost) {
  at::Tensor x = Ones(1 << 20);
  x.mul_(3);  // queued on the current stream; the comm stream must wait for it
  host_->delay = std::chrono::milliseconds(300);
  std::vector<at::Tensor> tensors{x};
  const auto start = std::chrono::steady_clock::now();
  auto work = backend_->allreduce(tensors, c10d::AllreduceOptions());
  work->wait();
  const auto host_time = std::chrono::steady_clock::now() - start;
  EXPECT_LT(host_time, std::chrono::milliseconds(250)) << "allreduce + wait blocked the host";
  EXPECT_FALSE(work->isCompleted());
  // Queued behind the collective on the current stream by wait().
  at::Tensor y = x + 1;
  EXPECT_TRUE(at::equal(y.cpu(), at::full({1 << 20}, 7.0f)));
  EXPECT_TRUE(work->isCompleted());
  EXPECT_TRUE(work->isSuccess());
  EXPECT_EQ(host_->allreduces.load(), 1);
}

TEST_F(XxcclBackendTest, CollectiveRunsOnItsOwnStream) {
  at::Tensor x = Ones(16);
  GetCurrentXxnpuStream(0).synchronize();
  std::vector<at::Tensor> tensors{x};
  host_->delay = std::chrono::milliseconds(500);
  auto work = backend_->allreduce(tensors, c10d::AllreduceOptions());
  // Not waited: the current stream drains (it only records the comm stream's "inputs
  // ready" event) while the comm stream still holds the collective.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
  while (!GetCurrentXxnpuStream(0).query() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(GetCurrentXxnpuStream(0).query());
  EXPECT_FALSE(work->isCompleted());
  work->wait();
  EXPECT_TRUE(at::equal(x.cpu(), at::full({16}, 2.0f)));
}

TEST_F(XxcclBackendTest, AverageIsSumOverWorldSize) {
  at::Tensor x = Ones(8).mul_(5);
  std::vector<at::Tensor> tensors{x};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::AVG;
  backend_->allreduce(tensors, opts)->wait();
  EXPECT_TRUE(at::equal(x.cpu(), at::full({8}, 5.0f)));
}

TEST_F(XxcclBackendTest, FailedCollectiveFailsTheWaitingStreamAndPoisonsTheGroup) {
  host_->fail_with = "peer went away";
  // Fails late enough that wait() (which only orders the current stream) returns first;
  // the failure then reaches the waiting stream. (A failure known by then makes wait()
  // itself raise, as RanksThatDisagree... below allows for.)
  host_->delay = std::chrono::milliseconds(300);
  at::Tensor x = Ones(8);
  std::vector<at::Tensor> tensors{x};
  auto work = backend_->allreduce(tensors, c10d::AllreduceOptions());
  work->wait();
  const std::string msg = MessageOf([&] { x.cpu(); });
  EXPECT_THAT(msg, HasSubstr("xxccl:all_reduce failed on rank 0"));
  EXPECT_THAT(msg, HasSubstr("peer went away"));
  EXPECT_TRUE(work->isCompleted());
  EXPECT_FALSE(work->isSuccess());
  EXPECT_THAT(MessageOf([&] { work->wait(); }), HasSubstr("peer went away"));
  EXPECT_THAT(MessageOf([&] { backend_->allreduce(tensors, c10d::AllreduceOptions()); }),
              HasSubstr("unusable after an earlier failure"));
  // The comm stream's sticky error is reported (and cleared) by a device sync.
  EXPECT_THAT(xxnpuDeviceSynchronize().message(), HasSubstr("peer went away"));
}

TEST_F(XxcclBackendTest, RanksThatDisagreeOnTheTensorGetAClearError) {
  host_->peer_count_delta = 1;
  at::Tensor x = Ones(4);
  std::vector<at::Tensor> tensors{x};
  // The failure surfaces at wait() when the collective has already failed by then, else
  // at the next synchronization of the stream that waited on it: either way, the message.
  const std::string msg = MessageOf([&] {
    backend_->allreduce(tensors, c10d::AllreduceOptions())->wait();
    x.cpu();
  });
  EXPECT_THAT(msg, HasSubstr("tensors differ across ranks: rank 1 has Float with 5 elements, rank 0 has Float "
                             "with 4 elements"));
  EXPECT_EQ(host_->allreduces.load(), 0) << "the mismatched collective still ran";
  (void)xxnpuDeviceSynchronize();
}

TEST_F(XxcclBackendTest, BadTensorsAreRejectedAtTheCall) {
  std::vector<at::Tensor> cpu{at::ones({4})};
  EXPECT_THAT(MessageOf([&] { backend_->allreduce(cpu, c10d::AllreduceOptions()); }),
              HasSubstr("expected xxnpu tensors, got a tensor on cpu"));
  std::vector<at::Tensor> strided{Ones(16).view({4, 4}).t()};
  EXPECT_THAT(MessageOf([&] { backend_->allreduce(strided, c10d::AllreduceOptions()); }),
              HasSubstr("expected contiguous tensors"));
  std::vector<at::Tensor> ints{Ones(4).to(at::kInt)};
  c10d::AllreduceOptions avg;
  avg.reduceOp = c10d::ReduceOp::AVG;
  EXPECT_THAT(MessageOf([&] { backend_->allreduce(ints, avg); }), HasSubstr("AVG needs a floating-point tensor"));
  at::Tensor out = Ones(3);
  at::Tensor in = Ones(2);
  EXPECT_THAT(MessageOf([&] { backend_->_allgather_base(out, in, c10d::AllgatherOptions()); }),
              HasSubstr("expected input numel x world size = 4"));
  // None of that poisoned the group.
  std::vector<at::Tensor> ok{Ones(4)};
  backend_->allreduce(ok, c10d::AllreduceOptions())->wait();
  EXPECT_TRUE(at::equal(ok[0].cpu(), at::full({4}, 2.0f)));
}

TEST_F(XxcclBackendTest, BarrierBlocksTheHostUntilEarlierCollectivesAreDone) {
  host_->delay = std::chrono::milliseconds(150);
  std::vector<at::Tensor> tensors{Ones(4)};
  auto first = backend_->allreduce(tensors, c10d::AllreduceOptions());
  c10d::BarrierOptions opts;
  opts.device = c10::Device(kXxnpuDeviceType, 0);
  backend_->barrier(opts)->wait();
  EXPECT_TRUE(first->isCompleted());
}

}  // namespace
}  // namespace xxnpu::distributed

int main(int argc, char** argv) {
  setenv("XXNPU_DEVICE_MEMORY", "512M", 1);
  testing::InitGoogleTest(&argc, argv);
  at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  return RUN_ALL_TESTS();
}
