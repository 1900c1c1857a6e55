// xxccl: the c10d backend for xxnpu tensors (torch.distributed's "xxccl").
//
// Semantics are NCCL's: every collective is one communication kernel ("xxccl:<op>") on a
// dedicated per-group communication stream of the device. That stream first waits for
// the caller's current stream (so inputs are ready), and Work::wait() makes the caller's
// current stream wait for the kernel without blocking the host. Compute queued
// afterwards on other streams overlaps the communication.
//
// Transport: the kernel runs the collective synchronously on the comm stream's device
// thread, reading and writing device memory through DeviceView() as a NIC doing RDMA
// from device memory would. When every rank of the group is on this host, all_reduce,
// the reduce-scatters, broadcast, the all-gathers, barrier and every collective's
// agreement check go through a shared-memory segment (shm_exchange.h); the rest, and
// every collective when ranks span hosts, go through a host-side c10d backend (ProcessGroupGloo, created by
// the Python creator on the same store). XXCCL_STAGING=1 stages Gloo's bytes through host
// buffers; docs/distributed.md compares the three with measurements. Since the kernel is
// launched through xxnpuLaunchKernel, it shows on the profiler's device timeline with its
// name and bytes.
//
// Failure: Gloo's own timeout bounds every collective; a failed collective fails its
// kernel (the comm stream's sticky error), marks the whole group failed (later calls
// raise at once, naming the first failure), and makes the stream that waits on it fail
// too, so the caller's next synchronisation raises instead of reading stale data.
// Before each collective the ranks compare (op, dtype, element count) (a small all-gather,
// or the header of a shared-memory round), so mismatched tensors give a clear error
// instead of a hang or garbage (XXCCL_CHECK_SHAPES=0 skips the all-gather).
#ifndef TORCH_XXNPU_DISTRIBUTED_XXCCL_BACKEND_H_
#define TORCH_XXNPU_DISTRIBUTED_XXCCL_BACKEND_H_

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "device/c10/xxnpu_stream.h"
#include "distributed/shm_exchange.h"
#include "distributed/xxccl_work.h"

namespace xxnpu::distributed {

class XxcclBackend : public c10d::Backend {
 public:
  // `host` is a CPU backend (Gloo) on the same ranks that moves the bytes. With
  // `shared_memory`, the constructor (collective: every rank runs it) also sets up the
  // shared-memory exchange when all ranks can map one segment, i.e. share this host.
  XxcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
               c10::intrusive_ptr<c10d::Backend> host, std::chrono::milliseconds timeout,
               bool shared_memory = false);
  // Shuts down (below) if that has not happened yet.
  ~XxcclBackend() override;
  // dist.destroy_process_group(): lets queued collectives finish, then destroys the comm
  // stream (its device thread) and unmaps the shared-memory segment. Later collectives
  // raise. Idempotent.
  void shutdown() override;

  const std::string getBackendName() const override { return "xxccl"; }
  // "shm+gloo" when reductions go through shared memory, else "gloo".
  std::string transport() const { return shm_ ? "shm+gloo" : "gloo"; }
  // What XXCCL_STAGING and XXCCL_CHECK_SHAPES said when the group was created.
  bool staging() const { return staging_; }
  bool check_shapes() const { return check_shapes_; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }

  // Coalescing (batch_isend_irecv, _coalescing_manager): point-to-point ops issued in
  // between are posted together by one kernel, so a ring of sends and receives cannot
  // deadlock the way serialised blocking sends would.
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Host views of the tensors a kernel works on (CPU tensors over device memory, or
  // host copies in staging mode), handed to the kernel's host operation.
  using HostTensors = std::vector<at::Tensor>;
  // Runs on the comm stream's device thread: the collective on host views, to completion.
  using HostOp = std::function<void(std::vector<HostTensors>& views)>;

 private:
  struct PendingP2P {
    bool is_send;
    at::Tensor tensor;
    int peer;
    int tag;
  };

  // Queues one comm kernel named `name` working on `groups` of tensors (each group is
  // given to `op` as host views; outputs are the groups marked in `written`).
  c10::intrusive_ptr<c10d::Work> Launch(c10d::OpType type, const char* name, std::vector<std::vector<at::Tensor>> groups,
                                        std::vector<bool> written, std::vector<at::Tensor> outputs, HostOp op,
                                        bool blocking = false, c10::DeviceIndex device = -1);
  c10::intrusive_ptr<c10d::Work> P2P(bool is_send, const at::Tensor& tensor, int peer, int tag);
  c10::intrusive_ptr<c10d::Work> LaunchP2P(const char* name, c10d::OpType type, std::vector<PendingP2P> ops);
  // The device all tensors are on, after checking they are usable xxnpu tensors.
  c10::DeviceIndex CheckTensors(const char* op, const std::vector<std::vector<at::Tensor>>& groups);
  XxnpuStream CommStream(c10::DeviceIndex device);
  // Inside a kernel: the ranks agree on (op, dtype, count) or all raise a clear error.
  void CheckAgreement(c10d::OpType type, const char* name, at::ScalarType dtype, int64_t count);
  // Inside a kernel: `flat` (a contiguous host view) reduced across ranks in place, after
  // the agreement check (folded into the first shared-memory round when there is one).
  void Allreduce(const at::Tensor& flat, c10d::ReduceOp op, c10d::OpType type, const char* name);
  // Inside a kernel: rank `root`'s `flat` copied into every rank's, after the check.
  void Broadcast(const at::Tensor& flat, int64_t root, c10d::OpType type, const char* name);
  // Inside a kernel: every rank's `in` (flat) into `outs[r]` (flat, as many elements), after
  // the check.
  void Allgather(const at::Tensor& in, const std::vector<at::Tensor>& outs, c10d::OpType type, const char* name);
  // Shared-memory rounds of up to a slot of `count` elements of `item` bytes each:
  // `step(offset, n)` runs between a round's publication (of `data` + offset, or nothing
  // when data is null) and its release, after the ranks' headers (and roots, when the
  // header has one) have been compared. Throws, naming the collective, on any failure.
  void ShmRounds(const RoundHeader& header, int64_t item, int64_t count, const char* data, const char* name,
                 const std::function<void(int64_t, int64_t)>& step);
  void SetUpSharedMemory();
  // Waits for a host work inside a kernel, bounded by the group's timeout.
  void WaitHost(const c10::intrusive_ptr<c10d::Work>& work, const char* name);
  void ThrowIfGroupFailed(const char* op);

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> host_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<GroupState> group_state_;
  bool check_shapes_;
  bool staging_;
  // Driven only by the comm stream's device thread once set up.
  std::unique_ptr<ShmExchange> shm_;

  std::mutex mu_;
  std::optional<XxnpuStream> comm_;  // created on the group's device at first use
  std::shared_ptr<EventPool> events_;  // of the comm stream's device
  bool shut_down_ = false;
  bool coalescing_ = false;
  std::vector<PendingP2P> pending_p2p_;
};

}  // namespace xxnpu::distributed

#endif  // TORCH_XXNPU_DISTRIBUTED_XXCCL_BACKEND_H_
