// xxccl: see xxccl_backend.h for the design (comm stream, comm kernels, failure).
#include "distributed/xxccl_backend.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "device/env_flag.h"
#include "device/runtime.h"

namespace xxnpu::distributed {
namespace {

// Read when a group is created: a malformed value fails init_process_group / new_group
// with the variable named (ValueError), instead of being taken as true.
bool EnvFlag(const char* name, bool fallback) {
  absl::StatusOr<bool> flag = ReadEnvFlag(name, fallback);
  TORCH_CHECK_VALUE(flag.ok(), "xxccl: ", std::string(flag.status().message()));
  return *flag;
}

std::string ReduceOpName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// The reduction the host transport runs, and whether the result is divided by the group
// size afterwards (Gloo has no AVG; NCCL's AVG is SUM / size).
struct HostReduction {
  c10d::ReduceOp op;
  bool average = false;
};

HostReduction ToHostReduction(const c10d::ReduceOp& op, const char* name, at::ScalarType dtype) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      return {op, false};
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(at::isFloatingType(dtype) || at::isComplexType(dtype), name,
                  ": ReduceOp.AVG needs a floating-point tensor, got ", dtype);
      return {c10d::ReduceOp(c10d::ReduceOp::SUM), true};
    default:
      TORCH_CHECK(false, name, ": ReduceOp.", ReduceOpName(op.op_),
                  " is not supported (supported: SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR)");
  }
}

// A CPU tensor over the tensor's device memory: for code running on the device thread.
at::Tensor DeviceMemoryView(const at::Tensor& t) {
  if (t.numel() == 0) return at::empty(t.sizes(), t.options().device(at::kCPU));
  return at::from_blob(DeviceView(t.data_ptr()), t.sizes(), t.strides(), t.options().device(at::kCPU));
}

void CheckSameShape(const char* name, const at::Tensor& expected, const at::Tensor& got, const char* what) {
  TORCH_CHECK(got.scalar_type() == expected.scalar_type(), name, ": ", what, " has dtype ",
              got.scalar_type(), ", expected ", expected.scalar_type(), " (the input's)");
  TORCH_CHECK(got.numel() == expected.numel(), name, ": ", what, " has ", got.numel(),
              " elements (sizes ", got.sizes(), "), expected ", expected.numel(), " (sizes ", expected.sizes(), ")");
}

int64_t TotalBytes(const std::vector<std::vector<at::Tensor>>& groups) {
  int64_t bytes = 0;
  for (const auto& g : groups) {
    for (const auto& t : g) bytes += static_cast<int64_t>(t.nbytes());
  }
  return bytes;
}

// Per rank and round of the shared-memory exchange: 4 MiB keeps a 64 MiB all_reduce at
// 16 rounds, and 8 ranks at 32 MiB of /dev/shm.
constexpr size_t kShmSlotBytes = size_t{4} << 20;

// The agreement record of a collective: (op type, dtype, element count; -1: not compared).
void ThrowIfDisagree(const char* name, int me, const int64_t own[3], int r, const int64_t theirs[3]) {
  if (theirs[0] != own[0]) {
    throw std::runtime_error(c10::str(name, ": ranks called different collectives: rank ", r, " called ",
                                      c10d::opTypeToString(static_cast<c10d::OpType>(theirs[0])), ", rank ", me,
                                      " called ", c10d::opTypeToString(static_cast<c10d::OpType>(own[0])),
                                      " (every rank must issue the same collectives in the same order)"));
  }
  if (theirs[1] != own[1] || (own[2] >= 0 && theirs[2] != own[2])) {
    throw std::runtime_error(c10::str(name, ": tensors differ across ranks: rank ", r, " has ",
                                      static_cast<at::ScalarType>(theirs[1]), " with ", theirs[2],
                                      " elements, rank ", me, " has ", static_cast<at::ScalarType>(own[1]),
                                      " with ", own[2], " elements"));
  }
}

// acc = acc (op) x, elementwise, with ATen's CPU kernels.
void Combine(c10d::ReduceOp::RedOpType op, at::Tensor& acc, const at::Tensor& x) {
  switch (op) {
    case c10d::ReduceOp::SUM: acc.add_(x); break;
    case c10d::ReduceOp::PRODUCT: acc.mul_(x); break;
    case c10d::ReduceOp::MIN: at::minimum_out(acc, acc, x); break;
    case c10d::ReduceOp::MAX: at::maximum_out(acc, acc, x); break;
    case c10d::ReduceOp::BAND: acc.bitwise_and_(x); break;
    case c10d::ReduceOp::BOR: acc.bitwise_or_(x); break;
    case c10d::ReduceOp::BXOR: acc.bitwise_xor_(x); break;
    default: TORCH_CHECK(false, "xxccl: no shared-memory reduction for ReduceOp.", ReduceOpName(op));
  }
}

// A shared-memory round's header: the agreement record, and broadcast's root (-1: none).
RoundHeader AgreementHeader(c10d::OpType type, at::ScalarType dtype, int64_t count, int64_t root = -1) {
  RoundHeader header;
  header.words[0] = static_cast<int64_t>(type);
  header.words[1] = static_cast<int64_t>(dtype);
  header.words[2] = count;
  header.words[3] = root;
  return header;
}

// Rank r's slot as a 1-D CPU tensor of n elements of `like`'s dtype.
at::Tensor SlotView(const ShmExchange& shm, int r, int64_t n, const at::Tensor& like) {
  return at::from_blob(const_cast<void*>(shm.Data(r)), {n}, like.options());
}

std::string StoreString(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> StoreBytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

}  // namespace

// --------------------------------------------------------------------------- backend

XxcclBackend::XxcclBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                           c10::intrusive_ptr<c10d::Backend> host, std::chrono::milliseconds timeout,
                           bool shared_memory)
    : c10d::Backend(rank, size),
      store_(store),
      host_(std::move(host)),
      timeout_(timeout),
      group_state_(std::make_shared<GroupState>()),
      check_shapes_(EnvFlag("XXCCL_CHECK_SHAPES", true)),
      staging_(EnvFlag("XXCCL_STAGING", false)) {
  TORCH_CHECK(host_, "xxccl: a host transport backend is required");
  TORCH_CHECK(host_->getRank() == rank && host_->getSize() == size, "xxccl: host transport has rank ",
              host_->getRank(), "/", host_->getSize(), ", expected ", rank, "/", size);
  if (shared_memory && size > 1) SetUpSharedMemory();
  init();
}

void XxcclBackend::SetUpSharedMemory() {
  // Every rank runs this in its constructor, so the store keys below are a small
  // collective. A per-rank counter numbers the setups made on this store: ranks create
  // groups in the same order, so they agree on it, and keys of an earlier group on the
  // same store are never mistaken for this one's.
  const int64_t generation = store_->add(c10::str("xxccl_shm/setups/", rank_), 1);
  const std::string prefix = c10::str("xxccl_shm/", generation, "/");
  std::unique_ptr<ShmExchange> mine;
  if (rank_ == 0) {
    auto created = ShmExchange::Create(size_, kShmSlotBytes);
    std::string published;
    if (created.ok()) {
      mine = std::move(*created);
      published = absl::StrCat(mine->name(), " ", mine->token());
    } else {
      TORCH_WARN("xxccl: no shared-memory transport (", created.status().message(), "); using Gloo only");
    }
    store_->set(prefix + "segment", StoreBytes(published));
  } else {
    const std::string published = StoreString(store_->get(prefix + "segment"));
    std::vector<std::string> parts = absl::StrSplit(published, ' ');
    uint64_t token = 0;
    if (parts.size() == 2 && absl::SimpleAtoi(parts[1], &token)) {
      auto attached = ShmExchange::Attach(parts[0], token, rank_, size_, kShmSlotBytes);
      // Not visible from here (another host, another /dev/shm): every rank falls back.
      if (attached.ok()) mine = std::move(*attached);
    }
  }
  store_->set(c10::str(prefix, "attached/", rank_), StoreBytes(mine ? "1" : "0"));
  bool everyone = true;
  for (int r = 0; r < size_; ++r) everyone &= StoreString(store_->get(c10::str(prefix, "attached/", r))) == "1";
  if (!mine) return;
  mine->Unlink();  // rank 0, now that everyone has had its chance to attach
  if (!everyone) return;
  mine->PeersVisible();
  shm_ = std::move(mine);
}

XxcclBackend::~XxcclBackend() { shutdown(); }

void XxcclBackend::shutdown() {
  std::optional<XxnpuStream> comm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) return;
    shut_down_ = true;
    comm.swap(comm_);
  }
  if (comm.has_value()) {
    // Kernels capture this backend (and the segment): the queued ones run first, and
    // synchronising also destroys their bodies (with the tensors they hold) here. Errors
    // were reported to the works already; a shutdown has nobody to raise them to.
    const xxnpuStream_t handle = comm->handle();
    (void)xxnpuStreamSynchronize(handle);
    // Each group used to keep its comm stream, and so a device thread, for the life of
    // the process (issue 21). Works that outlive the group keep the events they hold
    // (EventPool is shared); their stream handle now names a destroyed stream.
    (void)xxnpuStreamDestroy(handle);
  }
  // Only the comm stream's kernels used it, and none is left.
  shm_.reset();
}

void XxcclBackend::ThrowIfGroupFailed(const char* op) {
  std::lock_guard<std::mutex> lock(group_state_->mu);
  TORCH_CHECK(group_state_->error.empty(), op,
              ": the process group is unusable after an earlier failure: ", group_state_->error);
}

c10::DeviceIndex XxcclBackend::CheckTensors(const char* op, const std::vector<std::vector<at::Tensor>>& groups) {
  std::optional<c10::Device> device;
  for (const auto& g : groups) {
    for (const auto& t : g) {
      TORCH_CHECK(t.defined(), op, ": got an undefined tensor");
      TORCH_CHECK(t.device().type() == kXxnpuDeviceType, op, ": expected xxnpu tensors, got a tensor on ",
                  t.device(), " (move it with .to('xxnpu'), or use a group with a CPU backend such as "
                  "init_process_group('cpu:gloo,xxnpu:xxccl'))");
      TORCH_CHECK(t.layout() == at::kStrided, op, ": expected dense (strided) tensors, got layout ",
                  t.layout());
      TORCH_CHECK(t.is_contiguous(), op, ": expected contiguous tensors, got sizes ", t.sizes(),
                  " strides ", t.strides(), " (call .contiguous())");
      if (!device.has_value()) {
        device = t.device();
      } else {
        TORCH_CHECK(*device == t.device(), op, ": all tensors must be on one device, got ", *device,
                    " and ", t.device());
      }
    }
  }
  return device.has_value() ? device->index() : ResolveDeviceIndex(-1);
}

XxnpuStream XxcclBackend::CommStream(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!shut_down_, "xxccl: this process group was destroyed (dist.destroy_process_group); "
              "create a new group for further collectives");
  if (!comm_.has_value()) {
    // A stream of its own (not from the pool users draw from), high priority as NCCL's,
    // so communication is not queued behind unrelated user work.
    int high = 0;
    auto props = xxnpuGetDeviceProperties(device);
    if (props.ok()) high = props->stream_priority_high;
    auto stream = OnDevice(device, [high] { return xxnpuStreamCreate(high); });
    TORCH_CHECK(stream.ok(), "xxccl: could not create the communication stream on xxnpu:",
                static_cast<int>(device), ": ", stream.status().message());
    comm_ = GetStreamFromExternal(*stream, device);
    events_ = std::make_shared<EventPool>(device);
  }
  TORCH_CHECK(comm_->device_index() == device, "xxccl: this process group runs on ", comm_->device(),
              "; got tensors on xxnpu:", static_cast<int>(device),
              " (one device per rank and group, as with NCCL)");
  return *comm_;
}

void XxcclBackend::WaitHost(const c10::intrusive_ptr<c10d::Work>& work, const char* name) {
  // Gloo bounds the operation with the group's timeout itself (its context timeout); a
  // shorter wait here would leave Gloo writing into memory the kernel has released.
  work->wait();
}

void XxcclBackend::CheckAgreement(c10d::OpType type, const char* name, at::ScalarType dtype, int64_t count) {
  if (size_ == 1) return;
  if (shm_) {
    // A round without data: microseconds, so the check is always on with shared memory.
    ShmRounds(AgreementHeader(type, dtype, count), 1, 0, nullptr, name, {});
    return;
  }
  if (!check_shapes_) return;
  at::Tensor mine = at::empty({3}, at::kLong);
  mine[0] = static_cast<int64_t>(type);
  mine[1] = static_cast<int64_t>(dtype);
  mine[2] = count;
  std::vector<at::Tensor> in{mine};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < size_; ++r) out[0].push_back(at::empty({3}, at::kLong));
  WaitHost(host_->allgather(out, in, c10d::AllgatherOptions()), name);
  for (int r = 0; r < size_; ++r) {
    ThrowIfDisagree(name, rank_, mine.const_data_ptr<int64_t>(), r, out[0][r].const_data_ptr<int64_t>());
  }
}

void XxcclBackend::ShmRounds(const RoundHeader& header, int64_t item, int64_t count, const char* data,
                             const char* name, const std::function<void(int64_t, int64_t)>& step) {
  // The agreement record rides in every round's header: a mismatch is found before any
  // element is used, on every rank alike.
  const int64_t root = header.words[3];
  const int64_t per_round = std::max<int64_t>(1, static_cast<int64_t>(shm_->slot_bytes()) / item);
  int64_t offset = 0;
  do {  // at least one round: empty tensors still agree
    const int64_t n = std::min(per_round, count - offset);
    const absl::Status published =
        shm_->Publish(header, data == nullptr ? nullptr : data + offset * item,
                      data == nullptr ? 0 : static_cast<size_t>(n * item), absl::Now() + absl::FromChrono(timeout_));
    if (!published.ok()) throw std::runtime_error(c10::str(name, ": shared-memory transport: ", published.message()));
    try {
      for (int r = 0; r < size_; ++r) {
        ThrowIfDisagree(name, rank_, header.words, r, shm_->Header(r).words);
        if (root >= 0 && shm_->Header(r).words[3] != root) {
          throw std::runtime_error(c10::str(name, ": ranks disagree on the root: rank ", r, " has root ",
                                            shm_->Header(r).words[3], ", rank ", rank_, " has root ", root));
        }
      }
      if (n > 0) step(offset, n);
    } catch (...) {
      shm_->Release();
      throw;
    }
    shm_->Release();
    offset += n;
  } while (offset < count);
}

void XxcclBackend::Allreduce(const at::Tensor& flat, c10d::ReduceOp op, c10d::OpType type, const char* name) {
  if (!shm_) {
    CheckAgreement(type, name, flat.scalar_type(), flat.numel());
    std::vector<at::Tensor> tensors{flat};
    c10d::AllreduceOptions o;
    o.reduceOp = op;
    WaitHost(host_->allreduce(tensors, o), name);
    return;
  }
  // Every rank reduces all ranks' copies in rank order, so all ranks compute bitwise the
  // same result.
  ShmRounds(AgreementHeader(type, flat.scalar_type(), flat.numel()), flat.element_size(), flat.numel(),
            static_cast<const char*>(flat.data_ptr()), name, [&](int64_t offset, int64_t n) {
              at::Tensor acc = flat.narrow(0, offset, n);
              acc.copy_(SlotView(*shm_, 0, n, flat));
              for (int r = 1; r < size_; ++r) Combine(op.op_, acc, SlotView(*shm_, r, n, flat));
            });
}

void XxcclBackend::Broadcast(const at::Tensor& flat, int64_t root, c10d::OpType type, const char* name) {
  if (!shm_) {
    CheckAgreement(type, name, flat.scalar_type(), flat.numel());
    std::vector<at::Tensor> tensors{flat};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    WaitHost(host_->broadcast(tensors, o), name);
    return;
  }
  // Only the root's slot carries data; the others publish their headers alone.
  const char* data = rank_ == root ? static_cast<const char*>(flat.data_ptr()) : nullptr;
  ShmRounds(AgreementHeader(type, flat.scalar_type(), flat.numel(), root), flat.element_size(), flat.numel(), data,
            name, [&](int64_t offset, int64_t n) {
              if (rank_ != root) flat.narrow(0, offset, n).copy_(SlotView(*shm_, static_cast<int>(root), n, flat));
            });
}

void XxcclBackend::Allgather(const at::Tensor& in, const std::vector<at::Tensor>& outs, c10d::OpType type,
                             const char* name) {
  if (!shm_) {
    CheckAgreement(type, name, in.scalar_type(), in.numel());
    std::vector<at::Tensor> inputs{in};
    std::vector<std::vector<at::Tensor>> outputs{outs};
    WaitHost(host_->allgather(outputs, inputs, c10d::AllgatherOptions()), name);
    return;
  }
  ShmRounds(AgreementHeader(type, in.scalar_type(), in.numel()), in.element_size(), in.numel(),
            static_cast<const char*>(in.data_ptr()), name, [&](int64_t offset, int64_t n) {
              for (int r = 0; r < size_; ++r) outs[r].narrow(0, offset, n).copy_(SlotView(*shm_, r, n, in));
            });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::Launch(c10d::OpType type, const char* name,
                                                    std::vector<std::vector<at::Tensor>> groups,
                                                    std::vector<bool> written, std::vector<at::Tensor> outputs,
                                                    HostOp op, bool blocking, c10::DeviceIndex device) {
  ThrowIfGroupFailed(name);
  if (device < 0) device = CheckTensors(name, groups);
  XxnpuStream comm = CommStream(device);
  std::shared_ptr<EventPool> events = events_;
  XxnpuStream current = GetCurrentXxnpuStream(device);
  if (current != comm) {
    // Inputs are written by work already queued on the caller's stream.
    xxnpuEvent_t ready = events->Acquire();
    absl::Status s = xxnpuEventRecord(ready, current.handle());
    if (s.ok()) s = xxnpuStreamWaitEvent(comm.handle(), ready);
    events->Release(ready);
    TORCH_CHECK(s.ok(), name, ": could not order the comm stream after ", current, ": ", s.message());
  }

  auto state = std::make_shared<WorkState>();
  struct Args {
    std::vector<std::vector<at::Tensor>> groups;
    std::vector<bool> written;
    HostOp op;
  };
  // Tensors are captured until the kernel has run: the caller may drop them at once,
  // and their memory must not be reused while the collective reads or writes it.
  auto args = std::make_shared<Args>(Args{std::move(groups), std::move(written), std::move(op)});
  const bool staging = staging_;
  std::shared_ptr<GroupState> group = group_state_;

  LaunchConfig config;
  config.name = name;
  config.bytes = static_cast<uint64_t>(TotalBytes(args->groups));
  // One block: the kernel runs on the comm stream's own device thread, leaving the
  // compute threads to overlapping kernels on other streams.
  config.parallel_threshold = UINT64_MAX;
  KernelBody body = [this, args, state, group, staging, name](BlockRange) -> absl::Status {
    std::string error;
    try {
      std::vector<HostTensors> views(args->groups.size());
      for (size_t g = 0; g < args->groups.size(); ++g) {
        for (const at::Tensor& t : args->groups[g]) {
          at::Tensor view = DeviceMemoryView(t);
          // Staging: the copy engine moves the bytes to host memory and back.
          views[g].push_back(staging ? view.clone() : view);
        }
      }
      args->op(views);
      if (staging) {
        for (size_t g = 0; g < args->groups.size(); ++g) {
          if (!args->written[g]) continue;
          for (size_t i = 0; i < views[g].size(); ++i) DeviceMemoryView(args->groups[g][i]).copy_(views[g][i]);
        }
      }
    } catch (const c10::Error& e) {
      // Without the C++ backtrace: the message is what the user needs.
      error = c10::str(name, " failed on rank ", rank_, ": ", e.what_without_backtrace());
    } catch (const std::exception& e) {
      error = c10::str(name, " failed on rank ", rank_, ": ", e.what());
    }
    {
      std::lock_guard<std::mutex> lock(state->mu);
      state->done = true;
      state->error = error;
    }
    if (error.empty()) return absl::OkStatus();
    {
      std::lock_guard<std::mutex> lock(group->mu);
      if (group->error.empty()) group->error = error;
    }
    return absl::InternalError(error);
  };
  absl::Status s = xxnpuLaunchKernel(config, std::move(body), comm.handle());
  TORCH_CHECK(s.ok(), name, ": could not launch the communication kernel: ", s.message());
  return c10::make_intrusive<XxcclWork>(rank_, type, name, comm, state, group, events, std::move(outputs), blocking);
}

// ------------------------------------------------------------------------ collectives

c10::intrusive_ptr<c10d::Work> XxcclBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceOptions& opts) {
  const char* name = "xxccl:all_reduce";
  TORCH_CHECK(tensors.size() == 1, name, ": expected one tensor per rank, got ", tensors.size());
  at::Tensor t = tensors[0];
  const HostReduction red = ToHostReduction(opts.reduceOp, name, t.scalar_type());
  return Launch(c10d::OpType::ALLREDUCE, name, {{t}}, {true}, {t},
                [this, red, name](std::vector<HostTensors>& v) {
                  Allreduce(v[0][0].reshape({-1}), red.op, c10d::OpType::ALLREDUCE, name);
                  if (red.average) v[0][0].div_(size_);
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                 const c10d::AllreduceCoalescedOptions& opts) {
  const char* name = "xxccl:all_reduce_coalesced";
  TORCH_CHECK(!tensors.empty(), name, ": got no tensors");
  const HostReduction red = ToHostReduction(opts.reduceOp, name, tensors[0].scalar_type());
  for (const auto& t : tensors) {
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(), name, ": all tensors need one dtype, got ",
                tensors[0].scalar_type(), " and ", t.scalar_type());
  }
  return Launch(c10d::OpType::ALLREDUCE_COALESCED, name, {tensors}, {true}, tensors,
                [this, red, name](std::vector<HostTensors>& v) {
                  // One flat reduction: one round of messages for all tensors.
                  std::vector<at::Tensor> flat{at::cat(c10::fmap(v[0], [](const at::Tensor& t) { return t.reshape({-1}); }))};
                  Allreduce(flat[0], red.op, c10d::OpType::ALLREDUCE_COALESCED, name);
                  if (red.average) flat[0].div_(size_);
                  int64_t offset = 0;
                  for (at::Tensor& t : v[0]) {
                    t.copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
                    offset += t.numel();
                  }
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                       const c10d::BroadcastOptions& opts) {
  const char* name = "xxccl:broadcast";
  TORCH_CHECK(tensors.size() == 1, name, ": expected one tensor per rank, got ", tensors.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, name, ": root rank ", opts.rootRank,
              " is outside the group of ", size_);
  at::Tensor t = tensors[0];
  const int64_t root = opts.rootRank;
  return Launch(c10d::OpType::BROADCAST, name, {{t}}, {true}, {t},
                [this, name, root](std::vector<HostTensors>& v) {
                  Broadcast(v[0][0].reshape({-1}), root, c10d::OpType::BROADCAST, name);
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const char* name = "xxccl:reduce";
  TORCH_CHECK(tensors.size() == 1, name, ": expected one tensor per rank, got ", tensors.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, name, ": root rank ", opts.rootRank,
              " is outside the group of ", size_);
  at::Tensor t = tensors[0];
  const HostReduction red = ToHostReduction(opts.reduceOp, name, t.scalar_type());
  const at::ScalarType dtype = t.scalar_type();
  const int64_t numel = t.numel();
  const int64_t root = opts.rootRank;
  return Launch(c10d::OpType::REDUCE, name, {{t}}, {true}, {t},
                [this, red, name, dtype, numel, root](std::vector<HostTensors>& v) {
                  CheckAgreement(c10d::OpType::REDUCE, name, dtype, numel);
                  // Gloo uses every rank's buffer as scratch; NCCL leaves non-roots' intact.
                  std::vector<at::Tensor> scratch{v[0][0].clone()};
                  c10d::ReduceOptions o;
                  o.reduceOp = red.op;
                  o.rootRank = root;
                  WaitHost(host_->reduce(scratch, o), name);
                  if (rank_ == root) {
                    if (red.average) scratch[0].div_(size_);
                    v[0][0].copy_(scratch[0]);
                  }
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllgatherOptions& opts) {
  const char* name = "xxccl:all_gather";
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1, name, ": expected one input and one output list, got ",
              inputs.size(), " and ", outputs.size());
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, name, ": expected ", size_,
              " output tensors (one per rank), got ", outputs[0].size());
  for (const auto& o : outputs[0]) CheckSameShape(name, inputs[0], o, "an output tensor");
  return Launch(c10d::OpType::ALLGATHER, name, {inputs, outputs[0]}, {false, true}, outputs[0],
                [this, name](std::vector<HostTensors>& v) {
                  Allgather(v[0][0].reshape({-1}), c10::fmap(v[1], [](const at::Tensor& t) { return t.reshape({-1}); }),
                            c10d::OpType::ALLGATHER, name);
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                             const c10d::AllgatherOptions& opts) {
  const char* name = "xxccl:all_gather_into_tensor";
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), name, ": output dtype ", output.scalar_type(),
              " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_, name, ": output has ", output.numel(),
              " elements, expected input numel x world size = ", input.numel() * size_);
  return Launch(c10d::OpType::_ALLGATHER_BASE, name, {{input}, {output}}, {false, true}, {output},
                [this, name](std::vector<HostTensors>& v) {
                  // Straight into per-rank slices of the flat output (flat input too: Gloo
                  // wants the input's sizes to match the slices').
                  Allgather(v[0][0].reshape({-1}), v[1][0].reshape({-1}).chunk(size_), c10d::OpType::_ALLGATHER_BASE,
                            name);
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) {
  const char* name = "xxccl:all_gather_coalesced";
  TORCH_CHECK(outputs.size() == static_cast<size_t>(size_), name, ": expected ", size_, " output lists, got ",
              outputs.size());
  std::vector<std::vector<at::Tensor>> groups{inputs};
  std::vector<at::Tensor> flat_outputs;
  for (const auto& per_rank : outputs) {
    TORCH_CHECK(per_rank.size() == inputs.size(), name, ": each output list needs ", inputs.size(),
                " tensors, got ", per_rank.size());
    for (size_t i = 0; i < inputs.size(); ++i) CheckSameShape(name, inputs[i], per_rank[i], "an output tensor");
    groups.push_back(per_rank);
    flat_outputs.insert(flat_outputs.end(), per_rank.begin(), per_rank.end());
  }
  std::vector<bool> written(groups.size(), true);
  written[0] = false;
  return Launch(c10d::OpType::ALLGATHER_COALESCED, name, std::move(groups), std::move(written), flat_outputs,
                [this, name](std::vector<HostTensors>& v) {
                  for (size_t i = 0; i < v[0].size(); ++i) {
                    std::vector<at::Tensor> outs;
                    for (int r = 0; r < size_; ++r) outs.push_back(v[1 + r][i].reshape({-1}));
                    Allgather(v[0][i].reshape({-1}), outs, c10d::OpType::ALLGATHER_COALESCED, name);
                  }
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                             std::vector<at::Tensor>& inputs,
                                                                             const c10d::AllgatherOptions& opts) {
  const char* name = "xxccl:all_gather_into_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), name, ": ", outputs.size(), " outputs for ", inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size_ && outputs[i].scalar_type() == inputs[i].scalar_type(),
                name, ": output ", i, " must hold world size x input ", i, " elements of its dtype, got ",
                outputs[i].numel(), " ", outputs[i].scalar_type(), " for ", inputs[i].numel(), " ",
                inputs[i].scalar_type());
  }
  return Launch(c10d::OpType::ALLGATHER_COALESCED, name, {inputs, outputs}, {false, true}, outputs,
                [this, name](std::vector<HostTensors>& v) {
                  for (size_t i = 0; i < v[0].size(); ++i) {
                    Allgather(v[0][i].reshape({-1}), v[1][i].reshape({-1}).chunk(size_),
                              c10d::OpType::ALLGATHER_COALESCED, name);
                  }
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                    std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  const char* name = "xxccl:gather";
  TORCH_CHECK(inputs.size() == 1, name, ": expected one input tensor, got ", inputs.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, name, ": root rank ", opts.rootRank,
              " is outside the group of ", size_);
  const int64_t root = opts.rootRank;
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, name,
                ": the root needs one list of ", size_, " output tensors");
    for (const auto& o : outputs[0]) CheckSameShape(name, inputs[0], o, "an output tensor");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), name, ": only the root rank passes output tensors");
  }
  const at::ScalarType dtype = inputs[0].scalar_type();
  const int64_t numel = inputs[0].numel();
  return Launch(c10d::OpType::GATHER, name, {inputs, outs}, {false, true}, outs,
                [this, name, dtype, numel, root](std::vector<HostTensors>& v) {
                  CheckAgreement(c10d::OpType::GATHER, name, dtype, numel);
                  std::vector<std::vector<at::Tensor>> out;
                  if (rank_ == root) out.push_back(v[1]);
                  c10d::GatherOptions o;
                  o.rootRank = root;
                  WaitHost(host_->gather(out, v[0], o), name);
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::scatter(std::vector<at::Tensor>& outputs,
                                                     std::vector<std::vector<at::Tensor>>& inputs,
                                                     const c10d::ScatterOptions& opts) {
  const char* name = "xxccl:scatter";
  TORCH_CHECK(outputs.size() == 1, name, ": expected one output tensor, got ", outputs.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, name, ": root rank ", opts.rootRank,
              " is outside the group of ", size_);
  const int64_t root = opts.rootRank;
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, name,
                ": the root needs one list of ", size_, " input tensors");
    for (const auto& i : inputs[0]) CheckSameShape(name, outputs[0], i, "an input tensor");
    ins = inputs[0];
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), name, ": only the root rank passes input tensors");
  }
  const at::ScalarType dtype = outputs[0].scalar_type();
  const int64_t numel = outputs[0].numel();
  return Launch(c10d::OpType::SCATTER, name, {outputs, ins}, {true, false}, outputs,
                [this, name, dtype, numel, root](std::vector<HostTensors>& v) {
                  CheckAgreement(c10d::OpType::SCATTER, name, dtype, numel);
                  std::vector<std::vector<at::Tensor>> in;
                  if (rank_ == root) in.push_back(v[1]);
                  c10d::ScatterOptions o;
                  o.rootRank = root;
                  WaitHost(host_->scatter(v[0], in, o), name);
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                            std::vector<std::vector<at::Tensor>>& inputs,
                                                            const c10d::ReduceScatterOptions& opts) {
  const char* name = "xxccl:reduce_scatter";
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1, name, ": expected one output and one input list");
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == size_, name, ": expected ", size_,
              " input tensors (one per rank), got ", inputs[0].size());
  for (const auto& i : inputs[0]) CheckSameShape(name, outputs[0], i, "an input tensor");
  const HostReduction red = ToHostReduction(opts.reduceOp, name, outputs[0].scalar_type());
  const int64_t numel = outputs[0].numel();
  return Launch(c10d::OpType::REDUCE_SCATTER, name, {outputs, inputs[0]}, {true, false}, outputs,
                [this, name, numel, red](std::vector<HostTensors>& v) {
                  // All-reduce of the concatenated inputs, keeping this rank's slice: Gloo's
                  // reduce-scatter is not available for every op and dtype.
                  std::vector<at::Tensor> flat{at::cat(c10::fmap(v[1], [](const at::Tensor& t) { return t.reshape({-1}); }))};
                  Allreduce(flat[0], red.op, c10d::OpType::REDUCE_SCATTER, name);
                  at::Tensor mine = flat[0].narrow(0, rank_ * numel, numel);
                  if (red.average) mine.div_(size_);
                  v[0][0].copy_(mine.view(v[0][0].sizes()));
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::ReduceScatterOptions& opts) {
  const char* name = "xxccl:reduce_scatter_tensor";
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), name, ": output dtype ", output.scalar_type(),
              " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size_, name, ": input has ", input.numel(),
              " elements, expected output numel x world size = ", output.numel() * size_);
  const HostReduction red = ToHostReduction(opts.reduceOp, name, output.scalar_type());
  const int64_t numel = output.numel();
  return Launch(c10d::OpType::_REDUCE_SCATTER_BASE, name, {{output}, {input}}, {true, false}, {output},
                [this, name, numel, red](std::vector<HostTensors>& v) {
                  // The input must stay intact (as NCCL leaves it): reduce a copy.
                  std::vector<at::Tensor> flat{v[1][0].reshape({-1}).clone()};
                  Allreduce(flat[0], red.op, c10d::OpType::_REDUCE_SCATTER_BASE, name);
                  at::Tensor mine = flat[0].narrow(0, rank_ * numel, numel);
                  if (red.average) mine.div_(size_);
                  v[0][0].view({-1}).copy_(mine);
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                             std::vector<at::Tensor>& inputs,
                                                                             const c10d::ReduceScatterOptions& opts) {
  const char* name = "xxccl:reduce_scatter_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size() && !inputs.empty(), name, ": ", outputs.size(), " outputs for ",
              inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_ && outputs[i].scalar_type() == inputs[i].scalar_type(),
                name, ": input ", i, " must hold world size x output ", i, " elements of its dtype");
  }
  const HostReduction red = ToHostReduction(opts.reduceOp, name, outputs[0].scalar_type());
  return Launch(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, name, {outputs, inputs}, {true, false}, outputs,
                [this, name, red](std::vector<HostTensors>& v) {
                  for (size_t i = 0; i < v[0].size(); ++i) {
                    const int64_t numel = v[0][i].numel();
                    std::vector<at::Tensor> flat{v[1][i].reshape({-1}).clone()};
                    Allreduce(flat[0], red.op, c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, name);
                    at::Tensor mine = flat[0].narrow(0, rank_ * numel, numel);
                    if (red.average) mine.div_(size_);
                    v[0][i].view({-1}).copy_(mine);
                  }
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                           std::vector<int64_t>& output_split_sizes,
                                                           std::vector<int64_t>& input_split_sizes,
                                                           const c10d::AllToAllOptions& opts) {
  const char* name = "xxccl:all_to_all_single";
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), name, ": output dtype ", output.scalar_type(),
              " differs from input dtype ", input.scalar_type());
  if (output_split_sizes.empty() && input_split_sizes.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.dim() > 0 && input.size(0) % size_ == 0, name,
                ": without split sizes, input and output need the same numel and a first dimension divisible by ",
                size_, "; got input sizes ", input.sizes(), " and output sizes ", output.sizes());
  }
  const at::ScalarType dtype = input.scalar_type();
  std::vector<int64_t> out_splits = output_split_sizes, in_splits = input_split_sizes;
  return Launch(c10d::OpType::ALLTOALL_BASE, name, {{output}, {input}}, {true, false}, {output},
                [this, name, dtype, out_splits, in_splits](std::vector<HostTensors>& v) mutable {
                  // Split sizes may differ per rank: agree on op and dtype only.
                  CheckAgreement(c10d::OpType::ALLTOALL_BASE, name, dtype, -1);
                  WaitHost(host_->alltoall_base(v[0][0], v[1][0], out_splits, in_splits, c10d::AllToAllOptions()),
                           name);
                });
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                      const c10d::AllToAllOptions& opts) {
  const char* name = "xxccl:all_to_all";
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_, name,
              ": expected ", size_, " input and output tensors, got ", inputs.size(), " and ", outputs.size());
  const at::ScalarType dtype = inputs[0].scalar_type();
  for (const auto& t : inputs) {
    TORCH_CHECK(t.scalar_type() == dtype, name, ": all tensors need one dtype, got ", dtype, " and ", t.scalar_type());
  }
  for (const auto& t : outputs) {
    TORCH_CHECK(t.scalar_type() == dtype, name, ": all tensors need one dtype, got ", dtype, " and ", t.scalar_type());
  }
  return Launch(c10d::OpType::ALLTOALL, name, {outputs, inputs}, {true, false}, outputs,
                [this, name, dtype](std::vector<HostTensors>& v) {
                  CheckAgreement(c10d::OpType::ALLTOALL, name, dtype, -1);
                  // One exchange over flat buffers, split by each tensor's element count.
                  auto flatten = [](const std::vector<at::Tensor>& ts) {
                    return at::cat(c10::fmap(ts, [](const at::Tensor& t) { return t.reshape({-1}); }));
                  };
                  at::Tensor in = flatten(v[1]);
                  at::Tensor out = at::empty({0}, in.options());
                  std::vector<int64_t> in_splits, out_splits;
                  int64_t out_total = 0;
                  for (const auto& t : v[1]) in_splits.push_back(t.numel());
                  for (const auto& t : v[0]) {
                    out_splits.push_back(t.numel());
                    out_total += t.numel();
                  }
                  out.resize_({out_total});
                  WaitHost(host_->alltoall_base(out, in, out_splits, in_splits, c10d::AllToAllOptions()), name);
                  int64_t offset = 0;
                  for (at::Tensor& t : v[0]) {
                    t.copy_(out.narrow(0, offset, t.numel()).view(t.sizes()));
                    offset += t.numel();
                  }
                });
}

// ------------------------------------------------------------------- point to point

c10::intrusive_ptr<c10d::Work> XxcclBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  const char* name = "xxccl:send";
  TORCH_CHECK(tensors.size() == 1, name, ": expected one tensor, got ", tensors.size());
  TORCH_CHECK(dst_rank >= 0 && dst_rank < size_ && dst_rank != rank_, name, ": destination rank ", dst_rank,
              " is invalid for rank ", rank_, " of ", size_);
  return P2P(true, tensors[0], dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  const char* name = "xxccl:recv";
  TORCH_CHECK(tensors.size() == 1, name, ": expected one tensor, got ", tensors.size());
  TORCH_CHECK(src_rank >= 0 && src_rank < size_ && src_rank != rank_, name, ": source rank ", src_rank,
              " is invalid for rank ", rank_, " of ", size_);
  return P2P(false, tensors[0], src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::P2P(bool is_send, const at::Tensor& tensor, int peer, int tag) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (coalescing_) {
      CheckTensors(is_send ? "xxccl:send" : "xxccl:recv", {{tensor}});
      pending_p2p_.push_back(PendingP2P{is_send, tensor, peer, tag});
      // NCCL's coalesced ops return no work of their own; endCoalescing's covers them.
      return c10::make_intrusive<DoneWork>(rank_, is_send ? c10d::OpType::SEND : c10d::OpType::RECV);
    }
  }
  std::vector<PendingP2P> ops{PendingP2P{is_send, tensor, peer, tag}};
  return LaunchP2P(is_send ? "xxccl:send" : "xxccl:recv", is_send ? c10d::OpType::SEND : c10d::OpType::RECV,
                   std::move(ops));
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::LaunchP2P(const char* name, c10d::OpType type,
                                                       std::vector<PendingP2P> ops) {
  std::vector<std::vector<at::Tensor>> groups;
  std::vector<bool> written;
  std::vector<at::Tensor> outputs;
  for (const auto& op : ops) {
    groups.push_back({op.tensor});
    written.push_back(!op.is_send);
    if (!op.is_send) outputs.push_back(op.tensor);
  }
  std::vector<std::pair<bool, std::pair<int, int>>> plan;
  for (const auto& op : ops) plan.push_back({op.is_send, {op.peer, op.tag}});
  return Launch(type, name, std::move(groups), std::move(written), std::move(outputs),
                [this, name, plan](std::vector<HostTensors>& v) {
                  // Post every send and receive first, then wait: the peers' matching
                  // operations can then complete in any order.
                  std::vector<c10::intrusive_ptr<c10d::Work>> works;
                  for (size_t i = 0; i < plan.size(); ++i) {
                    const auto& [is_send, peer_tag] = plan[i];
                    works.push_back(is_send ? host_->send(v[i], peer_tag.first, peer_tag.second)
                                            : host_->recv(v[i], peer_tag.first, peer_tag.second));
                  }
                  for (auto& w : works) WaitHost(w, name);
                });
}

void XxcclBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!coalescing_, "xxccl: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
  pending_p2p_.clear();
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::endCoalescing() {
  std::vector<PendingP2P> ops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(coalescing_, "xxccl: endCoalescing without startCoalescing");
    coalescing_ = false;
    ops.swap(pending_p2p_);
  }
  if (ops.empty()) {
    // Collectives issued while coalescing ran as they came; nothing is left to post. The
    // work still orders its waiter after everything queued on the comm stream so far.
    std::optional<XxnpuStream> comm;
    {
      std::lock_guard<std::mutex> lock(mu_);
      comm = comm_;
    }
    if (!comm.has_value()) return c10::make_intrusive<DoneWork>(rank_, c10d::OpType::COALESCED);
    auto done = std::make_shared<WorkState>();
    done->done = true;
    return c10::make_intrusive<XxcclWork>(rank_, c10d::OpType::COALESCED, "xxccl:coalesced", *comm, done,
                                          group_state_, events_, std::vector<at::Tensor>{}, false);
  }
  return LaunchP2P("xxccl:batch_p2p", c10d::OpType::COALESCED, std::move(ops));
}

c10::intrusive_ptr<c10d::Work> XxcclBackend::barrier(const c10d::BarrierOptions& opts) {
  const char* name = "xxccl:barrier";
  c10::DeviceIndex device = -1;
  if (opts.device.has_value() && opts.device->type() == kXxnpuDeviceType) device = opts.device->index();
  if (!opts.device_ids.empty()) device = static_cast<c10::DeviceIndex>(opts.device_ids[0]);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (device < 0 && comm_.has_value()) device = comm_->device_index();
  }
  device = ResolveDeviceIndex(device);
  // Queued behind earlier collectives on the comm stream, and blocking in wait(): when
  // barrier() returns, every rank has reached it and this rank's communication is done.
  return Launch(c10d::OpType::BARRIER, name, {}, {}, {},
                [this, name](std::vector<HostTensors>&) {
                  CheckAgreement(c10d::OpType::BARRIER, name, at::kByte, 0);
                  // With shared memory the agreement round is itself a barrier.
                  if (!shm_) WaitHost(host_->barrier(c10d::BarrierOptions()), name);
                },
                /*blocking=*/true, device);
}

}  // namespace xxnpu::distributed
