// The simulated xxnpu driver: implements runtime.h on host threads (see that header for
// the model, stream_engine.h for streams/events, device_memory.h for the memory space).
#include "device/runtime.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "device/activity_trace.h"
#include "device/clock.h"
#include "device/graph.h"
#include "device/simulator/capture.h"
#include "device/simulator/compute_pool.h"
#include "device/simulator/device_memory.h"
#include "device/simulator/env_config.h"
#include "device/simulator/host_memory.h"
#include "device/simulator/kernel_guard.h"
#include "device/simulator/runtime_internal.h"
#include "device/simulator/status_macros.h"
#include "device/simulator/stream_engine.h"

namespace xxnpu {
namespace {

using internal::CaptureRegistry;
using internal::CapturesUnderway;

// Device addresses -> device view, published once at start-up so DeviceView needs no lock.
std::atomic<char*> g_range_begin{nullptr};
std::atomic<char*> g_range_end{nullptr};
std::atomic<ptrdiff_t> g_view_offset{0};
std::atomic<size_t> g_capacity{1};
std::atomic<internal::FreeHook> g_free_hook{nullptr};

thread_local int t_current_device = 0;

// Set in a child forked after the runtime started: its device threads did not survive
// the fork, so the child must not touch the device (CUDA's rule too).
std::atomic<bool> g_forked_child{false};

struct DeviceState {
  int index = 0;
  std::unique_ptr<ComputePool> pool;
  StreamImpl* default_stream = nullptr;
  std::mutex mu;                      // guards `streams`
  std::vector<StreamImpl*> streams;   // live streams, the default one first
};

std::string PtrStr(const void* p) { return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(p))); }

// Stream handles: the StreamImpl's address with its life (StreamImpl::life) in the top 16
// bits, which user-space addresses leave zero on x86-64 and AArch64. A recycled object
// comes back under a new handle, so a stale handle never names its successor (issue 21);
// an object is retired for good before its life would wrap. A first life (0) keeps the
// plain address, as default streams always do.
static_assert(sizeof(uintptr_t) == 8, "stream handles keep a generation in the address's top bits");
constexpr int kLifeShift = 48;
constexpr uintptr_t kAddressMask = (uintptr_t{1} << kLifeShift) - 1;
constexpr uint32_t kMaxLife = 0xFFFF;

xxnpuStream_t StreamHandle(StreamImpl* s) {
  return reinterpret_cast<xxnpuStream_t>(reinterpret_cast<uintptr_t>(s) |
                                         (uintptr_t{s->life.load(std::memory_order_relaxed)} << kLifeShift));
}

// Whether the object can carry a life in its handle (its address fits below the tag).
bool Taggable(const StreamImpl* s) { return (reinterpret_cast<uintptr_t>(s) & ~kAddressMask) == 0; }

class Runtime {
 public:
  // Never destroyed: device threads may still be running when static destructors run.
  static Runtime& Get() {
    static Runtime* rt = new Runtime();
    return *rt;
  }

  absl::Status status() const {
    if (g_forked_child.load(std::memory_order_relaxed)) {
      return absl::FailedPreconditionError(
          "xxnpu: cannot use the device in a process forked after the xxnpu runtime was initialized "
          "(its device threads do not survive fork); use the 'spawn' start method for multiprocessing");
    }
    return init_status_;
  }
  const RuntimeConfig& config() const { return config_; }
  DeviceMemory& memory() { return *memory_; }
  DeviceState& device(int d) { return *devices_[d]; }
  int device_count() const { return static_cast<int>(devices_.size()); }

  absl::Status CheckDevice(int d, const char* api) const {
    if (d < 0 || d >= static_cast<int>(devices_.size())) {
      return absl::InvalidArgumentError(absl::StrCat(api, ": invalid device index ", d, "; expected 0..",
                                                     devices_.size() - 1, " (", devices_.size(),
                                                     " xxnpu devices; XXNPU_DEVICE_COUNT sets it)"));
    }
    return absl::OkStatus();
  }

  StreamImpl* NewStream(int device, int priority, bool is_default) {
    StreamImpl* s = nullptr;
    {
      std::lock_guard<std::mutex> lock(handles_mu_);
      // Destroyed handles are recycled, so create/destroy loops do not grow memory.
      if (!free_streams_.empty()) {
        s = free_streams_.back();
        free_streams_.pop_back();
      }
    }
    if (s == nullptr) {
      s = new StreamImpl();
    } else {
      s->life.store(s->life.load() + 1);  // before `alive`: see ResolveStream
    }
    s->device = device;
    s->priority = priority;
    s->is_default = is_default;
    s->id = next_stream_id_.fetch_add(1);
    s->pool = devices_[device]->pool.get();
    s->options.spin_us = config_.spin_us;
    s->options.fetch_interval_ns = config_.fetch_interval_ns;
    s->error = absl::OkStatus();
    s->failed.store(false);
    s->alive.store(true);
    DeviceState& dev = *devices_[device];
    std::lock_guard<std::mutex> lock(dev.mu);
    dev.streams.push_back(s);
    return s;
  }

  void RetireStream(StreamImpl* s) {
    s->alive.store(false);
    {
      DeviceState& dev = *devices_[s->device];
      std::lock_guard<std::mutex> lock(dev.mu);
      std::erase(dev.streams, s);
    }
    s->Shutdown();
    s->Reset();
    std::lock_guard<std::mutex> lock(handles_mu_);
    // An object whose handle cannot take another life is kept out of reuse for good (one
    // object per 65535 lives: nothing).
    if (Taggable(s) && s->life.load() < kMaxLife) {
      free_streams_.push_back(s);
    } else {
      retired_streams_.push_back(s);
    }
  }

  EventImpl* NewEvent(int device, unsigned flags) {
    EventImpl* e = nullptr;
    {
      std::lock_guard<std::mutex> lock(handles_mu_);
      if (!free_events_.empty()) {
        e = free_events_.back();
        free_events_.pop_back();
      }
    }
    if (e == nullptr) e = new EventImpl();
    e->device = device;
    e->flags = flags;
    {
      // A retired event's last record has completed (xxnpuEventDestroy waited for it), so
      // completed == recorded here; keep both, see EventImpl.
      std::lock_guard<std::mutex> lock(e->mu);
      e->created_at = e->recorded;
    }
    e->time_ns = 0;
    e->stream_id = -1;
    e->error = absl::OkStatus();
    {
      std::lock_guard<std::mutex> lock(handles_mu_);
      live_events_.push_back(e);
    }
    e->alive.store(true);
    return e;
  }

  void RetireEvent(EventImpl* e) {
    e->alive.store(false);
    std::lock_guard<std::mutex> lock(handles_mu_);
    std::erase(live_events_, e);
    free_events_.push_back(e);
  }

  std::vector<EventImpl*> EventsOf(int device) {
    std::lock_guard<std::mutex> lock(handles_mu_);
    std::vector<EventImpl*> out;
    for (EventImpl* e : live_events_) {
      if (e->device == device) out.push_back(e);
    }
    return out;
  }

  // Pinned host allocations: base -> size.
  std::mutex pinned_mu;
  std::map<const char*, size_t> pinned;

 private:
  Runtime() {
    pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true); });
    auto config = ParseRuntimeConfig([](const char* name) { return std::getenv(name); });
    if (!config.ok()) {
      init_status_ = absl::FailedPreconditionError(
          absl::StrCat("xxnpu runtime configuration: ", config.status().message()));
      return;
    }
    config_ = *config;
    // The device's memory is host RAM: unless set explicitly, no device is larger than
    // the host (RAM, cgroup limit) can hold (host_memory.h, docs/device-runtime.md).
    if (!config_.device_memory_explicit) {
      config_.device_memory = DefaultDeviceCapacity(config_.device_memory, config_.device_count, ReadHostMemory(),
                                                    AddressSpaceLeft());
    }
    auto memory = DeviceMemory::Create(config_.device_count, config_.device_memory, config_.strict_memory,
                                       config_.memcheck);
    if (!memory.ok()) {
      init_status_ = absl::FailedPreconditionError(
          absl::StrCat("xxnpu runtime: cannot create device memory: ", memory.status().message()));
      return;
    }
    memory_ = std::move(*memory);
    if (config_.memcheck) {
      // Faults anywhere in both halves of the device range are recovered on device threads.
      absl::Status s = EnableFaultRecovery(memory_->range_begin(), memory_->range_end() + memory_->view_offset(),
                                           [](const void* addr, bool write) {
                                             return Runtime::Get().memory().DescribeFault(addr, write);
                                           });
      if (!s.ok()) {
        init_status_ = absl::FailedPreconditionError(s.message());
        return;
      }
      SetKernelEndCheck([](int device) { return Runtime::Get().memory().CheckCanaries(device); });
    }
    g_view_offset.store(memory_->view_offset());
    g_capacity.store(memory_->capacity());
    g_range_end.store(memory_->range_end());
    g_range_begin.store(memory_->range_begin());
    for (int d = 0; d < config_.device_count; ++d) {
      auto dev = std::make_unique<DeviceState>();
      dev->index = d;
      dev->pool = std::make_unique<ComputePool>(config_.compute_threads, config_.spin_us);
      devices_.push_back(std::move(dev));
    }
    for (int d = 0; d < config_.device_count; ++d) {
      devices_[d]->default_stream = NewStream(d, 0, /*is_default=*/true);
    }
  }

  absl::Status init_status_;
  RuntimeConfig config_;
  std::unique_ptr<DeviceMemory> memory_;
  std::vector<std::unique_ptr<DeviceState>> devices_;
  std::atomic<int> next_stream_id_{0};
  std::mutex handles_mu_;
  std::vector<StreamImpl*> free_streams_;
  std::vector<StreamImpl*> retired_streams_;  // never reused (see RetireStream)
  std::vector<EventImpl*> free_events_;
  std::vector<EventImpl*> live_events_;
};

// Resolves the runtime or returns its start-up error from the calling function.
#define XXNPU_RUNTIME(rt)                     \
  Runtime& rt = Runtime::Get();               \
  XXNPU_RETURN_IF_ERROR(rt.status())

absl::StatusOr<StreamImpl*> ResolveStream(Runtime& rt, xxnpuStream_t stream, const char* api) {
  if (stream == nullptr) return rt.device(t_current_device).default_stream;
  const uintptr_t bits = reinterpret_cast<uintptr_t>(stream);
  auto* s = reinterpret_cast<StreamImpl*>(bits & kAddressMask);
  if (s->magic != kStreamMagic) {
    return absl::InvalidArgumentError(absl::StrCat(api, ": ", PtrStr(stream), " is not an xxnpu stream"));
  }
  // `life` is advanced before `alive` is set on reuse: a handle of the previous life sees
  // either the object dead or its life moved on.
  if (!s->alive.load(std::memory_order_acquire) || s->life.load(std::memory_order_acquire) != (bits >> kLifeShift)) {
    return absl::FailedPreconditionError(
        absl::StrCat(api, ": stream ", PtrStr(stream), " was destroyed (xxnpuStreamDestroy or device reset)"));
  }
  return s;
}

absl::StatusOr<EventImpl*> ResolveEvent(xxnpuEvent_t event, const char* api) {
  if (event == nullptr || event->magic != kEventMagic) {
    return absl::InvalidArgumentError(absl::StrCat(api, ": ", PtrStr(event), " is not an xxnpu event"));
  }
  if (!event->alive.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError(
        absl::StrCat(api, ": event ", PtrStr(event), " was destroyed (xxnpuEventDestroy or device reset)"));
  }
  return event;
}

// Records one host-side runtime API call (kRuntime) when tracing is on, and hands out the
// correlation id that the device-side record of the same call will carry.
class ApiCall {
 public:
  // Inlined at every call, the rest out of line: not tracing costs one load (not one per
  // kind) and no call. (Whether GCC inlined the whole constructor into the launch
  // depended on how many API functions use it: 22 instructions per launch.)
  ABSL_ATTRIBUTE_ALWAYS_INLINE explicit ApiCall(const char* name) : name_(name) {
    if (ActivityAnyEnabled()) [[unlikely]] Start();
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE ~ApiCall() {
    if (runtime_on_) [[unlikely]] Emit();
  }
  ApiCall(const ApiCall&) = delete;
  ApiCall& operator=(const ApiCall&) = delete;

  [[gnu::noinline]] void Start() {
    runtime_on_ = ActivityEnabled(ActivityKind::kRuntime);
    if (runtime_on_ || DeviceTracingOn()) {
      correlation_id_ = ActivityNextCorrelationId();
      // Captured once, for this record and the device record it links to.
      ActivityRecord ids;
      ActivityCaptureExternalIds(&ids);
      external_id_[0] = ids.external_id[0];
      external_id_[1] = ids.external_id[1];
      start_ns_ = TraceClockNow();
    }
  }
  [[gnu::noinline]] void Emit() const {
    ActivityRecord r;
    r.kind = ActivityKind::kRuntime;
    r.name = name_;
    r.start_ns = start_ns_;
    r.end_ns = TraceClockNow();
    r.correlation_id = correlation_id_;
    r.external_id[0] = external_id_[0];
    r.external_id[1] = external_id_[1];
    r.device = device_;
    r.stream = stream_;
    r.thread_id = CurrentThreadId();
    ActivityRecordEmit(r);
  }

  static bool DeviceTracingOn() {
    return ActivityEnabled(ActivityKind::kKernel) || ActivityEnabled(ActivityKind::kMemcpy) ||
           ActivityEnabled(ActivityKind::kMemset) || ActivityEnabled(ActivityKind::kSynchronization);
  }
  // Stamps `cmd` with this call's correlation id (0: not traced; set either way, since
  // ring slots are reused) and, when traced, the thread's external ids.
  void Tag(Command& cmd, const StreamImpl& s) {
    device_ = s.device;
    stream_ = s.id;
    cmd.correlation_id = correlation_id_;
    if (correlation_id_ == 0) return;
    cmd.external_id[0] = external_id_[0];
    cmd.external_id[1] = external_id_[1];
  }
  void set_location(int device, int stream) {
    device_ = device;
    stream_ = stream;
  }
  uint64_t correlation_id() const { return correlation_id_; }  // 0: not traced

 private:
  const char* name_;
  bool runtime_on_ = false;
  uint64_t correlation_id_ = 0;
  int64_t start_ns_ = 0;
  int device_ = -1;
  int stream_ = -1;
  // External ids at the call, for the runtime record and the device record. Not a whole
  // ActivityRecord: every launch would zero one even with tracing off.
  uint64_t external_id_[2] = {0, 0};
};

// A host thread blocked on the device, as a kSynchronization record.
class HostWait {
 public:
  HostWait(SyncKind kind, const char* name, int device, int stream)
      : kind_(kind), name_(name), device_(device), stream_(stream),
        on_(ActivityEnabled(ActivityKind::kSynchronization)), start_ns_(on_ ? TraceClockNow() : 0) {}
  ~HostWait() {
    if (!on_) return;
    ActivityRecord r;
    r.kind = ActivityKind::kSynchronization;
    r.subkind = static_cast<uint8_t>(kind_);
    r.name = name_;
    r.start_ns = start_ns_;
    r.end_ns = TraceClockNow();
    r.device = device_;
    r.stream = stream_;
    r.thread_id = CurrentThreadId();
    ActivityCaptureExternalIds(&r);
    ActivityRecordEmit(r);
  }

 private:
  SyncKind kind_;
  const char* name_;
  int device_, stream_;
  bool on_;
  int64_t start_ns_;
};

void EmitMemoryRecord(const char* name, int device, const void* ptr, int64_t bytes) {
  if (!ActivityEnabled(ActivityKind::kMemory)) return;
  Runtime& rt = Runtime::Get();
  ActivityRecord r;
  r.kind = ActivityKind::kMemory;
  r.subkind = 0;
  r.name = name;
  r.start_ns = r.end_ns = TraceClockNow();
  r.device = device;
  r.thread_id = CurrentThreadId();
  r.address = reinterpret_cast<uint64_t>(ptr);
  r.bytes = bytes;
  r.total_reserved = rt.memory().capacity() - rt.memory().FreeBytes(device);
  r.total_allocated = r.total_reserved;
  ActivityCaptureExternalIds(&r);
  ActivityRecordEmit(r);
}

bool IsPinned(Runtime& rt, const void* p) {
  std::lock_guard<std::mutex> lock(rt.pinned_mu);
  auto it = rt.pinned.upper_bound(static_cast<const char*>(p));
  if (it == rt.pinned.begin()) return false;
  --it;
  return static_cast<const char*>(p) < it->first + it->second;
}

// Waits for every command queued so far on the device's streams, without consuming their
// errors (xxnpuFree and reset need the device idle, not a report).
void WaitDeviceIdle(DeviceState& dev) {
  std::vector<std::pair<StreamImpl*, uint64_t>> marks;
  {
    std::lock_guard<std::mutex> lock(dev.mu);
    for (StreamImpl* s : dev.streams) marks.emplace_back(s, s->LastEnqueued());
  }
  for (auto& [s, seq] : marks) s->WaitFor(seq);
}

absl::Status CheckCopyKind(const void* dst, const void* src, MemcpyKind* kind, const char* api) {
  const bool dst_dev = IsDevicePointer(dst);
  const bool src_dev = IsDevicePointer(src);
  const MemcpyKind actual = src_dev ? (dst_dev ? MemcpyKind::kDeviceToDevice : MemcpyKind::kDeviceToHost)
                                    : (dst_dev ? MemcpyKind::kHostToDevice : MemcpyKind::kHostToHost);
  if (*kind == MemcpyKind::kDefault) {
    *kind = actual;
    return absl::OkStatus();
  }
  if (*kind != actual) {
    return absl::InvalidArgumentError(absl::StrCat(
        api, ": copy kind ", MemcpyKindName(*kind), " does not match the pointers (dst ", PtrStr(dst),
        " is ", dst_dev ? "device" : "host", " memory, src ", PtrStr(src), " is ",
        src_dev ? "device" : "host", " memory: ", MemcpyKindName(actual), ")"));
  }
  return absl::OkStatus();
}

// Both ends of a device-side range must lie inside one live allocation.
absl::Status CheckDeviceRange(Runtime& rt, const void* p, size_t bytes, const char* api, const char* what) {
  if (!IsDevicePointer(p)) return absl::OkStatus();
  auto a = rt.memory().Find(p);
  if (!a.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(api, ": ", what, " ", PtrStr(p), " is not inside a live device allocation"));
  }
  const size_t offset = static_cast<size_t>(static_cast<const char*>(p) - a->base);
  if (offset + bytes > a->size) {
    return absl::InvalidArgumentError(absl::StrCat(api, ": ", what, " range [", PtrStr(p), ", +", bytes,
                                                   ") overruns its allocation of ", a->size, " bytes at ",
                                                   PtrStr(a->base)));
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------- devices

absl::StatusOr<int> xxnpuGetDeviceCount() {
  XXNPU_RUNTIME(rt);
  return rt.device_count();
}

absl::StatusOr<int> xxnpuGetDevice() {
  XXNPU_RUNTIME(rt);
  return t_current_device;
}

int xxnpuCurrentDevice() noexcept { return t_current_device; }

absl::Status xxnpuSetDevice(int device) {
  XXNPU_RUNTIME(rt);
  XXNPU_RETURN_IF_ERROR(rt.CheckDevice(device, "xxnpuSetDevice"));
  t_current_device = device;
  return absl::OkStatus();
}

absl::StatusOr<DeviceProperties> xxnpuGetDeviceProperties(int device) {
  XXNPU_RUNTIME(rt);
  XXNPU_RETURN_IF_ERROR(rt.CheckDevice(device, "xxnpuGetDeviceProperties"));
  DeviceProperties p;
  p.name = "xxnpu simulated NPU";
  p.index = device;
  p.total_memory = rt.memory().capacity();
  p.compute_units = rt.config().compute_threads;
  p.strict_memory = rt.config().strict_memory;
  p.launch_blocking = rt.config().launch_blocking;
  return p;
}

absl::Status xxnpuDeviceSynchronize() {
  XXNPU_RUNTIME(rt);
  if (CapturesUnderway()) {
    XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckDeviceWait(t_current_device, "xxnpuDeviceSynchronize"));
  }
  ApiCall call("xxnpuDeviceSynchronize");
  DeviceState& dev = rt.device(t_current_device);
  call.set_location(dev.index, -1);
  HostWait wait(SyncKind::kDeviceSynchronize, "xxnpuDeviceSynchronize", dev.index, -1);
  WaitDeviceIdle(dev);
  std::vector<StreamImpl*> streams;
  {
    std::lock_guard<std::mutex> lock(dev.mu);
    streams = dev.streams;
  }
  absl::Status first;
  for (StreamImpl* s : streams) {
    absl::Status e = s->TakeError();
    if (first.ok() && !e.ok()) first = std::move(e);
  }
  return first;
}

absl::Status xxnpuDeviceReset(int device) {
  XXNPU_RUNTIME(rt);
  XXNPU_RETURN_IF_ERROR(rt.CheckDevice(device, "xxnpuDeviceReset"));
  if (CapturesUnderway()) XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckDeviceWait(device, "xxnpuDeviceReset"));
  DeviceState& dev = rt.device(device);
  WaitDeviceIdle(dev);
  std::vector<StreamImpl*> streams;
  {
    std::lock_guard<std::mutex> lock(dev.mu);
    streams = dev.streams;
  }
  for (StreamImpl* s : streams) {
    if (s->is_default) {
      (void)s->TakeError();  // the default stream survives, with a clean slate
    } else {
      rt.RetireStream(s);
    }
  }
  for (EventImpl* e : rt.EventsOf(device)) rt.RetireEvent(e);
  rt.memory().FreeAll(device);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- streams

absl::StatusOr<xxnpuStream_t> xxnpuStreamCreate(int priority) {
  XXNPU_RUNTIME(rt);
  // Clamp into [high, low] = [-1, 0], as cudaStreamCreateWithPriority does.
  priority = std::min(0, std::max(-1, priority));
  return StreamHandle(rt.NewStream(t_current_device, priority, /*is_default=*/false));
}

absl::Status xxnpuStreamDestroy(xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  if (stream == nullptr) {
    return absl::InvalidArgumentError("xxnpuStreamDestroy: the default stream cannot be destroyed");
  }
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuStreamDestroy"));
  if (s->is_default) {
    return absl::InvalidArgumentError("xxnpuStreamDestroy: the default stream cannot be destroyed");
  }
  if (CapturesUnderway()) XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckStreamWait(s, "xxnpuStreamDestroy"));
  rt.RetireStream(s);  // finishes queued work first
  return absl::OkStatus();
}

absl::Status xxnpuStreamQuery(xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuStreamQuery"));
  if (CapturesUnderway()) XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckStreamWait(s, "xxnpuStreamQuery"));
  if (!s->Reached(s->LastEnqueued())) return absl::UnavailableError("xxnpuStreamQuery: not ready");
  return s->TakeError();
}

absl::Status xxnpuStreamSynchronize(xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuStreamSynchronize"));
  if (CapturesUnderway()) XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckStreamWait(s, "xxnpuStreamSynchronize"));
  ApiCall call("xxnpuStreamSynchronize");
  call.set_location(s->device, s->id);
  const uint64_t seq = s->LastEnqueued();
  std::optional<HostWait> wait;  // a record only when the host actually blocks
  if (!s->Reached(seq)) wait.emplace(SyncKind::kStreamSynchronize, "xxnpuStreamSynchronize", s->device, s->id);
  s->WaitFor(seq);  // also when already reached: it releases finished kernels' bodies
  return s->TakeError();
}

absl::Status xxnpuStreamWaitEvent(xxnpuStream_t stream, xxnpuEvent_t event) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuStreamWaitEvent"));
  XXNPU_ASSIGN_OR_RETURN(EventImpl * e, ResolveEvent(event, "xxnpuStreamWaitEvent"));
  if (CapturesUnderway()) {
    bool recorded_eagerly;
    {
      std::lock_guard<std::mutex> lock(e->mu);
      recorded_eagerly = e->recorded != e->created_at;
    }
    XXNPU_ASSIGN_OR_RETURN(bool captured,
                           CaptureRegistry::Get().WaitEvent(s, e, recorded_eagerly, "xxnpuStreamWaitEvent"));
    if (captured) return absl::OkStatus();
  }
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    generation = e->recorded;
    if (generation == 0 || e->completed >= generation) return absl::OkStatus();  // nothing to wait for
  }
  ApiCall call("xxnpuStreamWaitEvent");
  Command cmd;
  cmd.type = Command::Type::kWaitEvent;
  cmd.event = e;
  cmd.generation = generation;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    cmd.wait_stream = e->stream_id;
    cmd.wait_correlation_id = e->record_correlation_id;
  }
  call.Tag(cmd, *s);
  s->Enqueue(std::move(cmd));
  return absl::OkStatus();
}

absl::StatusOr<int> xxnpuStreamGetDevice(xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuStreamGetDevice"));
  return s->device;
}

absl::StatusOr<xxnpuStream_t> xxnpuDeviceGetDefaultStream(int device) {
  XXNPU_RUNTIME(rt);
  XXNPU_RETURN_IF_ERROR(rt.CheckDevice(device, "xxnpuDeviceGetDefaultStream"));
  return StreamHandle(rt.device(device).default_stream);
}

absl::StatusOr<int> xxnpuStreamGetPriority(xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuStreamGetPriority"));
  return s->priority;
}

absl::StatusOr<int> xxnpuStreamGetId(xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuStreamGetId"));
  return s->id;
}

// ---------------------------------------------------------------- events

absl::StatusOr<xxnpuEvent_t> xxnpuEventCreate(unsigned flags) {
  XXNPU_RUNTIME(rt);
  if (flags & ~static_cast<unsigned>(kEventDisableTiming)) {
    return absl::InvalidArgumentError(
        absl::StrCat("xxnpuEventCreate: unknown flags 0x", absl::Hex(flags), "; expected kEventDisableTiming or 0"));
  }
  return rt.NewEvent(t_current_device, flags);
}

absl::Status xxnpuEventDestroy(xxnpuEvent_t event) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(EventImpl * e, ResolveEvent(event, "xxnpuEventDestroy"));
  if (CapturesUnderway()) CaptureRegistry::Get().ForgetEvent(e);
  // A queued record still references the event: let the device reach it before reuse.
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    generation = e->recorded;
  }
  e->WaitReached(generation);
  rt.RetireEvent(e);
  return absl::OkStatus();
}

absl::Status xxnpuEventRecord(xxnpuEvent_t event, xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(EventImpl * e, ResolveEvent(event, "xxnpuEventRecord"));
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuEventRecord"));
  if (s->device != e->device) {
    return absl::InvalidArgumentError(absl::StrCat("xxnpuEventRecord: event of xxnpu:", e->device,
                                                   " recorded on a stream of xxnpu:", s->device,
                                                   "; record it on a stream of its own device"));
  }
  if (CapturesUnderway()) {
    XXNPU_ASSIGN_OR_RETURN(bool captured, CaptureRegistry::Get().RecordEvent(s, e, "xxnpuEventRecord"));
    if (captured) return absl::OkStatus();
  }
  // Traced like CUDA's cudaEventRecord: a stream waiting on the event later names this
  // call's correlation id, which is how a trace reader (HTA's critical path) finds the work
  // the waiting stream depends on.
  ApiCall call("xxnpuEventRecord");
  Command cmd;
  cmd.type = Command::Type::kEventRecord;
  cmd.event = e;
  call.Tag(cmd, *s);
  {
    std::lock_guard<std::mutex> lock(e->mu);
    cmd.generation = ++e->recorded;
    e->stream_id = s->id;
    e->record_correlation_id = call.correlation_id();
  }
  s->Enqueue(std::move(cmd));
  return absl::OkStatus();
}

absl::Status xxnpuEventQuery(xxnpuEvent_t event) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(EventImpl * e, ResolveEvent(event, "xxnpuEventQuery"));
  if (CapturesUnderway()) XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckEventWait(e, "xxnpuEventQuery"));
  std::lock_guard<std::mutex> lock(e->mu);
  if (e->completed < e->recorded) return absl::UnavailableError("xxnpuEventQuery: not ready");
  return e->error;
}

absl::Status xxnpuEventSynchronize(xxnpuEvent_t event) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(EventImpl * e, ResolveEvent(event, "xxnpuEventSynchronize"));
  if (CapturesUnderway()) XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckEventWait(e, "xxnpuEventSynchronize"));
  uint64_t generation;
  bool done;
  int stream_id;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    generation = e->recorded;
    done = e->completed >= generation;
    stream_id = e->stream_id;
  }
  if (!done) {
    ApiCall call("xxnpuEventSynchronize");
    call.set_location(e->device, stream_id);
    HostWait wait(SyncKind::kEventSynchronize, "xxnpuEventSynchronize", e->device, stream_id);
    e->WaitReached(generation);
  }
  std::lock_guard<std::mutex> lock(e->mu);
  return e->error;
}

absl::StatusOr<float> xxnpuEventElapsedTime(xxnpuEvent_t start, xxnpuEvent_t end) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(EventImpl * a, ResolveEvent(start, "xxnpuEventElapsedTime"));
  XXNPU_ASSIGN_OR_RETURN(EventImpl * b, ResolveEvent(end, "xxnpuEventElapsedTime"));
  if (CapturesUnderway()) {
    XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckEventWait(a, "xxnpuEventElapsedTime"));
    XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckEventWait(b, "xxnpuEventElapsedTime"));
  }
  if ((a->flags | b->flags) & kEventDisableTiming) {
    return absl::InvalidArgumentError(
        "xxnpuEventElapsedTime: both events must be created with timing (not kEventDisableTiming)");
  }
  int64_t t[2];
  EventImpl* events[2] = {a, b};
  for (int i = 0; i < 2; ++i) {
    std::lock_guard<std::mutex> lock(events[i]->mu);
    if (events[i]->recorded == events[i]->created_at) {
      return absl::FailedPreconditionError(
          absl::StrCat("xxnpuEventElapsedTime: the ", i == 0 ? "start" : "end", " event was never recorded"));
    }
    if (events[i]->completed < events[i]->recorded) {
      return absl::UnavailableError(
          absl::StrCat("xxnpuEventElapsedTime: the ", i == 0 ? "start" : "end", " event has not completed"));
    }
    t[i] = events[i]->time_ns;
  }
  return static_cast<float>(static_cast<double>(t[1] - t[0]) / 1e6);
}

absl::StatusOr<int> xxnpuEventGetDevice(xxnpuEvent_t event) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(EventImpl * e, ResolveEvent(event, "xxnpuEventGetDevice"));
  return e->device;
}

// ---------------------------------------------------------------- memory

const char* MemcpyKindName(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::kHostToHost: return "Memcpy HtoH";
    case MemcpyKind::kHostToDevice: return "Memcpy HtoD";
    case MemcpyKind::kDeviceToHost: return "Memcpy DtoH";
    case MemcpyKind::kDeviceToDevice: return "Memcpy DtoD";
    case MemcpyKind::kDefault: return "Memcpy Default";
  }
  return "Memcpy ?";
}

void* DeviceView(const void* device_ptr) {
  char* p = const_cast<char*>(static_cast<const char*>(device_ptr));
  if (p >= g_range_begin.load(std::memory_order_relaxed) && p < g_range_end.load(std::memory_order_relaxed)) {
    return p + g_view_offset.load(std::memory_order_relaxed);
  }
  return p;
}

bool IsDevicePointer(const void* ptr) {
  const char* p = static_cast<const char*>(ptr);
  return p >= g_range_begin.load(std::memory_order_relaxed) && p < g_range_end.load(std::memory_order_relaxed);
}

int DeviceOfPointer(const void* ptr) {
  const char* p = static_cast<const char*>(ptr);
  const char* begin = g_range_begin.load(std::memory_order_relaxed);
  if (p < begin || p >= g_range_end.load(std::memory_order_relaxed)) return -1;
  return static_cast<int>(static_cast<size_t>(p - begin) / g_capacity.load(std::memory_order_relaxed));
}

absl::StatusOr<void*> xxnpuMallocOnDevice(int device, size_t bytes) {
  XXNPU_RUNTIME(rt);
  XXNPU_RETURN_IF_ERROR(rt.CheckDevice(device, "xxnpuMalloc"));
  if (bytes == 0) return nullptr;
  // Not captured (an allocation is not stream work): a graph would replay without it.
  if (CapturesUnderway()) XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckUnsafeCall("xxnpuMalloc"));
  ApiCall call("xxnpuMalloc");
  call.set_location(device, -1);
  XXNPU_ASSIGN_OR_RETURN(void* p, rt.memory().Allocate(device, bytes));
  EmitMemoryRecord("xxnpuMalloc", device, p, static_cast<int64_t>(bytes));
  return p;
}

absl::StatusOr<void*> xxnpuMalloc(size_t bytes) { return xxnpuMallocOnDevice(t_current_device, bytes); }

absl::Status xxnpuFree(void* device_ptr) {
  XXNPU_RUNTIME(rt);
  if (device_ptr == nullptr) return absl::OkStatus();
  const int device = rt.memory().DeviceOf(device_ptr);
  if (device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("xxnpuFree: ", PtrStr(device_ptr),
                                                   " is not device memory (host pointer? use xxnpuFreeHost)"));
  }
  // It waits for the device, which a capture's queued-but-not-run work would make wrong.
  if (CapturesUnderway()) XXNPU_RETURN_IF_ERROR(CaptureRegistry::Get().CheckUnsafeCall("xxnpuFree"));
  ApiCall call("xxnpuFree");
  call.set_location(device, -1);
  // Work in flight may still use the memory: wait, as cudaFree does. This is what makes
  // a raw free expensive and the caching allocator worthwhile.
  WaitDeviceIdle(rt.device(device));
  if (internal::FreeHook hook = g_free_hook.load(std::memory_order_acquire)) XXNPU_RETURN_IF_ERROR(hook(device_ptr));
  XXNPU_ASSIGN_OR_RETURN(DeviceMemory::Allocation a, rt.memory().Free(device_ptr));
  EmitMemoryRecord("xxnpuFree", device, device_ptr, -static_cast<int64_t>(a.size));
  return absl::OkStatus();
}

absl::StatusOr<void*> xxnpuHostAlloc(size_t bytes) {
  XXNPU_RUNTIME(rt);
  if (bytes == 0) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("xxnpuHostAlloc: cannot allocate ", bytes, " bytes of pinned host memory: ", std::strerror(errno)));
  }
  // Lock the pages when the limit allows, as pinning does; the simulation's copy engine
  // works either way, so a refusal (RLIMIT_MEMLOCK) is not an error.
  (void)mlock(p, bytes);
  std::lock_guard<std::mutex> lock(rt.pinned_mu);
  rt.pinned.emplace(static_cast<const char*>(p), bytes);
  return p;
}

absl::Status xxnpuFreeHost(void* host_ptr) {
  XXNPU_RUNTIME(rt);
  if (host_ptr == nullptr) return absl::OkStatus();
  size_t bytes;
  {
    std::lock_guard<std::mutex> lock(rt.pinned_mu);
    auto it = rt.pinned.find(static_cast<const char*>(host_ptr));
    if (it == rt.pinned.end()) {
      return absl::InvalidArgumentError(absl::StrCat("xxnpuFreeHost: ", PtrStr(host_ptr),
                                                     " was not returned by xxnpuHostAlloc (or was freed)"));
    }
    bytes = it->second;
    rt.pinned.erase(it);
  }
  munmap(host_ptr, bytes);
  return absl::OkStatus();
}

namespace {

absl::Status EnqueueCopy(Runtime& rt, const char* api, void* dst, const void* src, size_t bytes,
                         MemcpyKind kind, xxnpuStream_t stream, bool synchronous) {
  XXNPU_RETURN_IF_ERROR(CheckCopyKind(dst, src, &kind, api));
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(api, ": null ", dst == nullptr ? "dst" : "src",
                                                   " for a copy of ", bytes, " bytes"));
  }
  XXNPU_RETURN_IF_ERROR(CheckDeviceRange(rt, dst, bytes, api, "dst"));
  XXNPU_RETURN_IF_ERROR(CheckDeviceRange(rt, src, bytes, api, "src"));
  if (kind == MemcpyKind::kHostToHost) {
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }
  StreamImpl* s;
  if (synchronous) {
    const int owner = rt.memory().DeviceOf(kind == MemcpyKind::kDeviceToHost ? src : dst);
    s = rt.device(owner).default_stream;
  } else {
    XXNPU_ASSIGN_OR_RETURN(s, ResolveStream(rt, stream, api));
  }
  // Pageable host memory cannot be copied behind the host's back: the call waits, as
  // CUDA's does. Pinned memory (xxnpuHostAlloc) makes the copy truly asynchronous.
  const void* host_side = kind == MemcpyKind::kHostToDevice ? src : kind == MemcpyKind::kDeviceToHost ? dst : nullptr;
  if (CapturesUnderway()) {
    CaptureRegistry& reg = CaptureRegistry::Get();
    if (synchronous) XXNPU_RETURN_IF_ERROR(reg.CheckUnsafeCall(api));
    XXNPU_ASSIGN_OR_RETURN(bool captured, reg.CaptureNode(s, api, [&](GraphNode& node) {
      if (host_side != nullptr && !IsPinned(rt, host_side)) {
        // It would run synchronously, now, not at replay (CUDA refuses it as well).
        return absl::FailedPreconditionError(
            absl::StrCat("a copy ", kind == MemcpyKind::kHostToDevice ? "from" : "to", " pageable host memory ",
                         PtrStr(host_side), " (only pinned memory from xxnpuHostAlloc can be captured)"));
      }
      node.type = Command::Type::kMemcpy;
      node.dst = dst;
      node.src = src;
      node.bytes = bytes;
      node.copy_kind = kind;
      return absl::OkStatus();
    }));
    if (captured) return absl::OkStatus();
  }
  const bool wait = synchronous || (host_side != nullptr && !IsPinned(rt, host_side)) ||
                    rt.config().launch_blocking;
  ApiCall call(api);
  Command cmd;
  cmd.type = Command::Type::kMemcpy;
  cmd.dst = dst;
  cmd.src = src;
  cmd.bytes = bytes;
  cmd.copy_kind = kind;
  call.Tag(cmd, *s);
  const uint64_t seq = s->Enqueue(std::move(cmd));
  if (!wait) return absl::OkStatus();
  std::optional<HostWait> w;  // a record only when the host actually blocks
  if (!s->Reached(seq)) w.emplace(SyncKind::kMemcpyBlocking, api, s->device, s->id);
  s->WaitFor(seq);
  // A synchronous copy reports the stream's sticky error like any synchronizing call.
  return synchronous ? s->TakeError() : s->PeekError();
}

}  // namespace

absl::Status xxnpuMemcpy(void* dst, const void* src, size_t bytes, MemcpyKind kind) {
  XXNPU_RUNTIME(rt);
  return EnqueueCopy(rt, "xxnpuMemcpy", dst, src, bytes, kind, nullptr, /*synchronous=*/true);
}

absl::Status xxnpuMemcpyAsync(void* dst, const void* src, size_t bytes, MemcpyKind kind, xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  return EnqueueCopy(rt, "xxnpuMemcpyAsync", dst, src, bytes, kind, stream, /*synchronous=*/false);
}

namespace {

absl::Status EnqueueMemset(Runtime& rt, const char* api, void* device_ptr, int value, size_t bytes,
                           StreamImpl* s, bool synchronous, bool wait) {
  if (bytes == 0) return absl::OkStatus();
  if (!IsDevicePointer(device_ptr)) {
    return absl::InvalidArgumentError(absl::StrCat(api, ": ", PtrStr(device_ptr), " is not device memory"));
  }
  XXNPU_RETURN_IF_ERROR(CheckDeviceRange(rt, device_ptr, bytes, api, "dst"));
  if (CapturesUnderway()) {
    CaptureRegistry& reg = CaptureRegistry::Get();
    if (synchronous) XXNPU_RETURN_IF_ERROR(reg.CheckUnsafeCall(api));
    XXNPU_ASSIGN_OR_RETURN(bool captured, reg.CaptureNode(s, api, [&](GraphNode& node) {
      node.type = Command::Type::kMemset;
      node.dst = device_ptr;
      node.value = value;
      node.bytes = bytes;
      return absl::OkStatus();
    }));
    if (captured) return absl::OkStatus();
  }
  ApiCall call(api);
  Command cmd;
  cmd.type = Command::Type::kMemset;
  cmd.dst = device_ptr;
  cmd.value = value;
  cmd.bytes = bytes;
  call.Tag(cmd, *s);
  const uint64_t seq = s->Enqueue(std::move(cmd));
  if (!wait) return absl::OkStatus();
  s->WaitFor(seq);
  return s->TakeError();
}

}  // namespace

absl::Status xxnpuMemset(void* device_ptr, int value, size_t bytes) {
  XXNPU_RUNTIME(rt);
  const int owner = rt.memory().DeviceOf(device_ptr);
  StreamImpl* s = rt.device(owner < 0 ? t_current_device : owner).default_stream;
  return EnqueueMemset(rt, "xxnpuMemset", device_ptr, value, bytes, s, /*synchronous=*/true, /*wait=*/true);
}

absl::Status xxnpuMemsetAsync(void* device_ptr, int value, size_t bytes, xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuMemsetAsync"));
  return EnqueueMemset(rt, "xxnpuMemsetAsync", device_ptr, value, bytes, s, /*synchronous=*/false,
                       rt.config().launch_blocking);
}

PointerAttributes xxnpuPointerGetAttributes(const void* ptr) {
  PointerAttributes attr;
  Runtime& rt = Runtime::Get();
  if (!rt.status().ok() || ptr == nullptr) return attr;
  if (IsDevicePointer(ptr)) {
    attr.device = rt.memory().DeviceOf(ptr);
    if (auto a = rt.memory().Find(ptr)) {
      attr.type = PointerAttributes::Type::kDevice;
      attr.base = a->base;
      attr.size = a->size;
    }
    return attr;
  }
  std::lock_guard<std::mutex> lock(rt.pinned_mu);
  auto it = rt.pinned.upper_bound(static_cast<const char*>(ptr));
  if (it != rt.pinned.begin()) {
    --it;
    if (static_cast<const char*>(ptr) < it->first + it->second) {
      attr.type = PointerAttributes::Type::kHost;
      attr.base = it->first;
      attr.size = it->second;
    }
  }
  return attr;
}

absl::StatusOr<MemInfo> xxnpuMemGetInfo(int device) {
  XXNPU_RUNTIME(rt);
  XXNPU_RETURN_IF_ERROR(rt.CheckDevice(device, "xxnpuMemGetInfo"));
  return MemInfo{rt.memory().FreeBytes(device), rt.memory().capacity()};
}

// ---------------------------------------------------------------- kernels

namespace {

absl::Status CheckLaunchConfig(const LaunchConfig& config) {
  if (config.grid.x == 0 || config.grid.y == 0 || config.grid.z == 0) {
    return absl::InvalidArgumentError(absl::StrCat("xxnpuLaunchKernel(", config.name, "): grid (", config.grid.x,
                                                   ", ", config.grid.y, ", ", config.grid.z,
                                                   ") has a zero dimension; expected every dimension >= 1"));
  }
  if (config.name == nullptr) return absl::InvalidArgumentError("xxnpuLaunchKernel: null kernel name");
  return absl::OkStatus();
}

// Queues a kernel on `s`; `set_kernel(slot)` stores the kernel itself into the slot.
template <typename SetKernel>
absl::Status EnqueueKernel(Runtime& rt, StreamImpl* s, const LaunchConfig& config, SetKernel&& set_kernel) {
  ApiCall call("xxnpuLaunchKernel");
  const uint64_t seq = s->Enqueue([&](Command& slot) {
    slot.type = Command::Type::kKernel;
    call.Tag(slot, *s);
    slot.config = config;
    set_kernel(slot);
  });
  if (!rt.config().launch_blocking) return absl::OkStatus();
  // Launch-blocking debugging: the kernel's own error surfaces at its launch.
  s->WaitFor(seq);
  return s->TakeError();
}

// The capture paths of the two launches, out of line and cold: inlined, their code made
// GCC outline parts of the eager launch (ApiCall), +18 instructions per launch.
[[gnu::noinline, gnu::cold]] absl::StatusOr<bool> CaptureKernelBody(StreamImpl* s, const LaunchConfig& config,
                                                                    KernelBody& body) {
  // The body moves into the graph's node: see GraphNode for how it is replayed.
  return CaptureRegistry::Get().CaptureNode(s, "xxnpuLaunchKernel", [&](GraphNode& n) {
    n.type = Command::Type::kKernel;
    n.config = config;
    n.thunk = nullptr;
    n.body = std::move(body);
    return absl::OkStatus();
  });
}

[[gnu::noinline, gnu::cold]] absl::StatusOr<bool> CaptureInlineKernel(StreamImpl* s, const LaunchConfig& config,
                                                                      KernelThunk thunk, const void* kernel,
                                                                      size_t bytes) {
  // The kernel's bytes are copied into the node, as into a ring slot: replays reuse them.
  return CaptureRegistry::Get().CaptureNode(s, "xxnpuLaunchKernel", [&](GraphNode& n) {
    n.type = Command::Type::kKernel;
    n.config = config;
    n.thunk = thunk;
    std::memcpy(n.args, kernel, bytes);
    return absl::OkStatus();
  });
}

}  // namespace

absl::Status xxnpuLaunchKernel(const LaunchConfig& config, KernelBody body, xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuLaunchKernel"));
  if (!body) return absl::InvalidArgumentError("xxnpuLaunchKernel: empty kernel body");
  XXNPU_RETURN_IF_ERROR(CheckLaunchConfig(config));
  if (CapturesUnderway()) [[unlikely]] {
    XXNPU_ASSIGN_OR_RETURN(bool captured, CaptureKernelBody(s, config, body));
    if (captured) return absl::OkStatus();
  }
  return EnqueueKernel(rt, s, config, [&body](Command& slot) {
    slot.thunk = nullptr;
    slot.body = std::move(body);
  });
}

absl::Status xxnpuLaunchKernelInline(const LaunchConfig& config, KernelThunk thunk, const void* kernel,
                                     size_t bytes, xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuLaunchKernel"));
  if (thunk == nullptr || kernel == nullptr) return absl::InvalidArgumentError("xxnpuLaunchKernel: null kernel");
  if (bytes > kKernelArgsCapacity) {
    return absl::InvalidArgumentError(absl::StrCat("xxnpuLaunchKernelInline(", config.name ? config.name : "?",
                                                   "): kernel of ", bytes, " bytes; expected at most ",
                                                   kKernelArgsCapacity, " (pass a KernelBody instead)"));
  }
  XXNPU_RETURN_IF_ERROR(CheckLaunchConfig(config));
  if (CapturesUnderway()) [[unlikely]] {
    XXNPU_ASSIGN_OR_RETURN(bool captured, CaptureInlineKernel(s, config, thunk, kernel, bytes));
    if (captured) return absl::OkStatus();
  }
  return EnqueueKernel(rt, s, config, [&](Command& slot) {
    slot.thunk = thunk;
    std::memcpy(slot.args, kernel, bytes);
  });
}

absl::Status xxnpuLaunchHostFunc(xxnpuStream_t stream, absl::AnyInvocable<void()> fn) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuLaunchHostFunc"));
  if (!fn) return absl::InvalidArgumentError("xxnpuLaunchHostFunc: empty function");
  if (CapturesUnderway()) {
    XXNPU_ASSIGN_OR_RETURN(bool captured, CaptureRegistry::Get().CaptureNode(s, "xxnpuLaunchHostFunc", [&](GraphNode& n) {
      n.type = Command::Type::kHostFunc;
      n.host_fn = std::move(fn);
      return absl::OkStatus();
    }));
    if (captured) return absl::OkStatus();
  }
  Command cmd;
  cmd.type = Command::Type::kHostFunc;
  cmd.host_fn = std::move(fn);
  const uint64_t seq = s->Enqueue(std::move(cmd));
  if (rt.config().launch_blocking) s->WaitFor(seq);
  return absl::OkStatus();
}

// ---------------------------------------------------------------- graphs (device/graph.h)

absl::Status xxnpuStreamBeginCapture(xxnpuStream_t stream, StreamCaptureMode mode) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuStreamBeginCapture"));
  return CaptureRegistry::Get().Begin(s, mode);
}

absl::StatusOr<xxnpuGraph_t> xxnpuStreamEndCapture(xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuStreamEndCapture"));
  return CaptureRegistry::Get().End(s);
}

absl::StatusOr<StreamCaptureInfo> xxnpuStreamGetCaptureInfo(xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuStreamGetCaptureInfo"));
  if (!CapturesUnderway()) return StreamCaptureInfo{};
  return CaptureRegistry::Get().Info(s);
}

absl::StatusOr<StreamCaptureStatus> xxnpuStreamIsCapturing(xxnpuStream_t stream) {
  XXNPU_ASSIGN_OR_RETURN(StreamCaptureInfo info, xxnpuStreamGetCaptureInfo(stream));
  return info.status;
}

absl::Status xxnpuThreadExchangeStreamCaptureMode(StreamCaptureMode* mode) {
  if (mode == nullptr) return absl::InvalidArgumentError("xxnpuThreadExchangeStreamCaptureMode: null mode");
  if (*mode != StreamCaptureMode::kGlobal && *mode != StreamCaptureMode::kThreadLocal &&
      *mode != StreamCaptureMode::kRelaxed) {
    return absl::InvalidArgumentError(absl::StrCat("xxnpuThreadExchangeStreamCaptureMode: unknown mode ",
                                                   static_cast<int>(*mode),
                                                   "; expected kGlobal, kThreadLocal or kRelaxed"));
  }
  *mode = CaptureRegistry::ExchangeThreadMode(*mode);
  return absl::OkStatus();
}

absl::StatusOr<xxnpuGraphExec_t> xxnpuGraphInstantiate(xxnpuGraph_t graph) {
  XXNPU_RUNTIME(rt);
  return CaptureRegistry::Get().Instantiate(graph);
}

absl::Status xxnpuGraphLaunch(xxnpuGraphExec_t exec, xxnpuStream_t stream) {
  XXNPU_RUNTIME(rt);
  XXNPU_ASSIGN_OR_RETURN(std::shared_ptr<ExecutableGraph> graph,
                         CaptureRegistry::Get().ResolveExec(exec, "xxnpuGraphLaunch"));
  XXNPU_ASSIGN_OR_RETURN(StreamImpl * s, ResolveStream(rt, stream, "xxnpuGraphLaunch"));
  if (s->device != graph->data->device) {
    return absl::InvalidArgumentError(absl::StrCat("xxnpuGraphLaunch: graph ", graph->data->graph_id,
                                                   " was captured on xxnpu:", graph->data->device,
                                                   "; launch it on a stream of that device, not of xxnpu:", s->device));
  }
  if (CapturesUnderway()) {
    XXNPU_ASSIGN_OR_RETURN(bool captured, CaptureRegistry::Get().CaptureNode(s, "xxnpuGraphLaunch", [](GraphNode&) {
      return absl::UnimplementedError("capturing a graph launch (a child graph); launch it outside the capture");
    }));
    (void)captured;  // never true: the node above is refused
  }
  // One command for the whole graph; its kernels' records carry this call's correlation
  // id, which is how a profiler links the xxnpuGraphLaunch row to them.
  ApiCall call("xxnpuGraphLaunch");
  const uint64_t seq = s->Enqueue([&](Command& slot) {
    slot.type = Command::Type::kGraph;
    call.Tag(slot, *s);
    slot.graph = graph;
    // Under the producer lock: this stream's launches take their tickets in queue order.
    slot.generation = graph->tickets.fetch_add(1, std::memory_order_relaxed) + 1;
  });
  if (!rt.config().launch_blocking) return absl::OkStatus();
  s->WaitFor(seq);
  return s->TakeError();
}

absl::Status xxnpuGraphDestroy(xxnpuGraph_t graph) {
  XXNPU_RUNTIME(rt);
  return CaptureRegistry::Get().DestroyGraph(graph);
}

absl::Status xxnpuGraphExecDestroy(xxnpuGraphExec_t exec) {
  XXNPU_RUNTIME(rt);
  return CaptureRegistry::Get().DestroyExec(exec);
}

absl::StatusOr<size_t> xxnpuGraphGetNodeCount(xxnpuGraph_t graph) {
  XXNPU_ASSIGN_OR_RETURN(std::shared_ptr<const GraphData> data,
                         CaptureRegistry::Get().ResolveGraph(graph, "xxnpuGraphGetNodeCount"));
  return data->nodes.size();
}

absl::StatusOr<uint32_t> xxnpuGraphGetId(xxnpuGraph_t graph) {
  XXNPU_ASSIGN_OR_RETURN(std::shared_ptr<const GraphData> data,
                         CaptureRegistry::Get().ResolveGraph(graph, "xxnpuGraphGetId"));
  return data->graph_id;
}

absl::StatusOr<std::string> xxnpuGraphDebugDump(xxnpuGraph_t graph) {
  XXNPU_ASSIGN_OR_RETURN(std::shared_ptr<const GraphData> data,
                         CaptureRegistry::Get().ResolveGraph(graph, "xxnpuGraphDebugDump"));
  std::string out;
  for (const GraphNode& n : data->nodes) {
    const char* kind = "?";
    std::string name;
    switch (n.type) {
      case Command::Type::kKernel:
        kind = "kernel";
        name = n.config.name;
        break;
      case Command::Type::kMemcpy:
        kind = "memcpy";
        name = MemcpyKindName(n.copy_kind);
        break;
      case Command::Type::kMemset:
        kind = "memset";
        name = "Memset (Device)";
        break;
      case Command::Type::kHostFunc:
        kind = "host";
        name = "host function";
        break;
      default:
        break;
    }
    absl::StrAppend(&out, "node ", n.id, " ", kind, " '", name, "' deps [", absl::StrJoin(n.deps, ","), "]\n");
  }
  return out;
}

GraphLiveCounts xxnpuGraphGetLiveCounts() { return CaptureRegistry::Get().LiveCounts(); }

namespace internal {

absl::StatusOr<DeviceMemory*> RuntimeMemory() {
  XXNPU_RUNTIME(rt);
  return &rt.memory();
}

void WaitDeviceIdle(int device) {
  Runtime& rt = Runtime::Get();
  if (rt.status().ok() && device >= 0 && device < rt.device_count()) xxnpu::WaitDeviceIdle(rt.device(device));
}

void SetFreeHook(FreeHook hook) { g_free_hook.store(hook, std::memory_order_release); }

}  // namespace internal

}  // namespace xxnpu
