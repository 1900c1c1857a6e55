#include "device/c10/pinned_allocator.h"

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/runtime.h"

namespace xxnpu {
namespace {

// An xxnpu event owned by the host allocator's bookkeeping (moved around, destroyed once).
class PinnedEvent {
 public:
  explicit PinnedEvent(c10::Stream stream) {
    const int previous = ValueOrThrow(xxnpuGetDevice(), "xxnpu pinned memory");
    CheckOk(xxnpuSetDevice(stream.device_index()), "xxnpu pinned memory");
    auto e = xxnpuEventCreate(kEventDisableTiming);
    (void)xxnpuSetDevice(previous);
    event_ = ValueOrThrow(std::move(e), "xxnpu pinned memory");
    CheckOk(xxnpuEventRecord(event_, HandleOf(stream)), "xxnpu pinned memory");
  }
  PinnedEvent(PinnedEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  PinnedEvent& operator=(PinnedEvent&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  PinnedEvent(const PinnedEvent&) = delete;
  ~PinnedEvent() {
    if (event_ != nullptr) (void)xxnpuEventDestroy(event_);
  }
  bool Done() const {
    absl::Status s = xxnpuEventQuery(event_);
    // An error on the stream still means the stream is past the copy.
    return s.code() != absl::StatusCode::kUnavailable;
  }

 private:
  xxnpuEvent_t event_ = nullptr;
};

using Block = at::HostBlock<c10::Stream>;

struct XxnpuHostAllocatorImpl : public at::CachingHostAllocatorImpl<c10::Stream, PinnedEvent> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override {
    *ptr = ValueOrThrow(xxnpuHostAlloc(size), "xxnpu pinned memory");
  }
  void free_block(Block* block) override { CheckOk(xxnpuFreeHost(block->ptr_), "xxnpu pinned memory"); }
  void record_stream(std::optional<std::vector<PinnedEvent>>& events, c10::Stream stream) override {
    events->emplace_back(stream);
  }
  bool query_event(PinnedEvent& event) override { return event.Done(); }
  c10::Stream get_current_stream() const override { return GetCurrentXxnpuStream().unwrap(); }
  bool stream_is_capturing(c10::Stream) const override { return false; }
};

void XxnpuHostAllocatorDeleter(void* ctx);

struct XxnpuHostAllocator final
    : public at::CachingHostAllocatorInterface<XxnpuHostAllocatorImpl, XxnpuHostAllocatorDeleter> {};

// Never destroyed (not a static object, unlike ATen's DECLARE_HOST_ALLOCATOR): cached
// pinned blocks stay owned and reachable until the process ends, and pinned tensors
// freed during static destruction still find their allocator.
XxnpuHostAllocator& HostAllocator() {
  static auto* allocator = new XxnpuHostAllocator();
  return *allocator;
}

void XxnpuHostAllocatorDeleter(void* ctx) { HostAllocator().free(ctx); }

}  // namespace

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &HostAllocator())

at::HostAllocator* GetXxnpuHostAllocator() { return &HostAllocator(); }

bool IsXxnpuPinned(const void* ptr) {
  return xxnpuPointerGetAttributes(ptr).type == PointerAttributes::Type::kHost;
}

void RecordPinnedUse(const at::DataPtr& data, c10::Stream stream) {
  if (data.get_deleter() != &XxnpuHostAllocatorDeleter) return;
  HostAllocator().record_event(data.get(), data.get_context(), stream);
}

}  // namespace xxnpu
