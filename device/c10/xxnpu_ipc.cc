// torch.multiprocessing for xxnpu storages (xxnpu_ipc.h): the sent-block limbo and the
// received storages built on opened segments.
#include "device/c10/xxnpu_ipc.h"

#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_allocator.h"
#include "device/c10/xxnpu_stream.h"
#include "device/ipc.h"
#include "device/runtime.h"

namespace xxnpu {
namespace {

// A shared storage's original allocation, kept until no receiver holds it.
struct SentData {
  c10::DataPtr original;
  xxnpuIpcRefHandle_t ref;
  xxnpuIpcMemHandle_t mem;
  size_t offset = 0;  // of the storage in its segment
};

// A received storage: where its mapping starts and the reference it holds.
struct ReceivedData {
  void* base = nullptr;  // the opened segment (nullptr: the sender's own memory came back)
  xxnpuIpcRefHandle_t ref;
  xxnpuIpcMemHandle_t mem;
  size_t offset = 0;
};

std::mutex& LimboMutex() {
  static auto* mu = new std::mutex();
  return *mu;
}
std::vector<SentData*>& Limbo() {
  static auto* limbo = new std::vector<SentData*>();
  return *limbo;
}

// Takes the finished blocks out of the limbo (under its lock); the caller frees them
// without it, since freeing re-enters the allocator.
std::vector<SentData*> TakeReleasedLocked() {
  std::vector<SentData*> done;
  auto& limbo = Limbo();
  for (size_t i = 0; i < limbo.size();) {
    absl::StatusOr<bool> in_use = xxnpuIpcRefInUse(limbo[i]->ref);
    // An error means the counter cannot be read any more (runtime gone): nothing to wait for.
    if (in_use.ok() && *in_use) {
      ++i;
      continue;
    }
    done.push_back(limbo[i]);
    limbo[i] = limbo.back();
    limbo.pop_back();
  }
  return done;
}

void FreeSent(std::vector<SentData*> done) {
  for (SentData* s : done) {
    (void)xxnpuIpcRefDestroy(s->ref);
    delete s;  // the original DataPtr returns the block to the caching allocator
  }
}

void SentDataDelete(void* ctx) {
  std::vector<SentData*> done;
  {
    std::lock_guard<std::mutex> lock(LimboMutex());
    Limbo().push_back(static_cast<SentData*>(ctx));
    done = TakeReleasedLocked();
  }
  FreeSent(std::move(done));
}

void ReceivedDataDelete(void* ctx) {
  std::unique_ptr<ReceivedData> r(static_cast<ReceivedData*>(ctx));
  // A deleter cannot throw. Close before release: once released, the sender may free the
  // segment, which it refuses while it is still open here.
  if (r->base != nullptr) (void)xxnpuIpcCloseMemHandle(r->base);
  (void)xxnpuIpcRefRelease(r->ref);
}

template <typename T>
std::string Bytes(const T& h) {
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
}

template <typename T>
T FromBytes(const std::string& s, const char* what) {
  TORCH_CHECK_VALUE(s.size() == sizeof(T), "xxnpu IPC: ", what, " of ", s.size(), " bytes; expected ", sizeof(T));
  T h;
  std::memcpy(&h, s.data(), sizeof(T));
  return h;
}

}  // namespace

SharedStorageHandle ShareStorage(const c10::Storage& storage) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->device_type() == c10::DeviceType::PrivateUse1,
              "xxnpu IPC: expected an xxnpu storage, got one on ", impl->device());
  SharedStorageHandle out;
  out.device = impl->device().index();
  out.storage_bytes = impl->nbytes();
  void* ptr = impl->mutable_data_ptr().get();
  if (ptr == nullptr || out.storage_bytes == 0) return out;
  const c10::DataPtr& data = impl->data_ptr();
  if (data.get_deleter() == &ReceivedDataDelete) {
    // Received from elsewhere: forward the original segment and counter.
    const auto* r = static_cast<const ReceivedData*>(data.get_context());
    CheckOk(xxnpuIpcRefAddPending(r->ref), "xxnpu IPC: forwarding a received storage");
    out.mem_handle = Bytes(r->mem);
    out.offset_bytes = r->offset;
    out.ref_handle = Bytes(r->ref);
  } else {
    SentData* sent;
    if (data.get_deleter() == &SentDataDelete) {
      sent = static_cast<SentData*>(data.get_context());
    } else {
      TORCH_CHECK(data.get_deleter() == GetXxnpuAllocator()->raw_deleter(),
                  "xxnpu IPC: only storages allocated by the xxnpu caching allocator can be shared; this one has "
                  "another deleter (from_blob or an external pointer?)");
      auto segment = ValueOrThrow(GetXxnpuAllocator()->ForDevice(out.device).GetBaseAllocation(ptr), "xxnpu IPC");
      auto owned = std::make_unique<SentData>();
      CheckOk(xxnpuIpcGetMemHandle(&owned->mem, segment.base), "xxnpu IPC");
      owned->offset = static_cast<size_t>(static_cast<char*>(ptr) - static_cast<char*>(segment.base));
      CheckOk(xxnpuIpcRefCreate(&owned->ref), "xxnpu IPC");
      sent = owned.release();
      sent->original = impl->set_data_ptr(c10::DataPtr(ptr, sent, &SentDataDelete, impl->device()));
    }
    CheckOk(xxnpuIpcRefAddPending(sent->ref), "xxnpu IPC");
    out.mem_handle = Bytes(sent->mem);
    out.offset_bytes = sent->offset;
    out.ref_handle = Bytes(sent->ref);
  }
  // The receiver reads what was queued before the send.
  CheckOk(xxnpuStreamSynchronize(CurrentXxnpuStreamHandle(static_cast<c10::DeviceIndex>(out.device))),
          "xxnpu IPC: synchronizing before the send");
  FreeSent([] {
    std::lock_guard<std::mutex> lock(LimboMutex());
    return TakeReleasedLocked();
  }());
  return out;
}

c10::Storage OpenSharedStorage(const SharedStorageHandle& h) {
  const c10::Device device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(h.device));
  auto r = std::make_unique<ReceivedData>();
  r->mem = FromBytes<xxnpuIpcMemHandle_t>(h.mem_handle, "memory handle");
  r->ref = FromBytes<xxnpuIpcRefHandle_t>(h.ref_handle, "reference counter handle");
  r->offset = h.offset_bytes;
  void* segment = nullptr;
  size_t segment_bytes = 0;
  if (absl::StatusOr<void*> own = xxnpuIpcMemHandleOwnPointer(r->mem); own.ok()) {
    segment = *own;  // our own memory, sent back
  } else {
    CheckOk(xxnpuIpcOpenMemHandle(&r->base, r->mem), "xxnpu IPC: opening a shared storage");
    segment = r->base;
  }
  segment_bytes = xxnpuPointerGetAttributes(segment).size;
  if (h.offset_bytes + h.storage_bytes > segment_bytes) {
    if (r->base) (void)xxnpuIpcCloseMemHandle(r->base);
    TORCH_CHECK_VALUE(false, "xxnpu IPC: storage [", h.offset_bytes, ", +", h.storage_bytes,
                      ") overruns the shared allocation of ", segment_bytes, " bytes");
  }
  if (absl::Status s = xxnpuIpcRefAcquire(r->ref); !s.ok()) {
    if (r->base) (void)xxnpuIpcCloseMemHandle(r->base);
    ThrowStatus(s, "xxnpu IPC: taking the sender's reference");
  }
  void* data = static_cast<char*>(segment) + h.offset_bytes;
  c10::DataPtr ptr(data, r.release(), &ReceivedDataDelete, device);
  return c10::Storage(c10::Storage::use_byte_size_t(), h.storage_bytes, std::move(ptr), /*allocator=*/nullptr,
                      /*resizable=*/false);
}

void ReleaseSharedReference(const std::string& ref_handle) {
  const auto ref = FromBytes<xxnpuIpcRefHandle_t>(ref_handle, "reference counter handle");
  CheckOk(xxnpuIpcRefAcquire(ref), "xxnpu IPC");
  CheckOk(xxnpuIpcRefRelease(ref), "xxnpu IPC");
}

int64_t IpcCollect() {
  std::vector<SentData*> done;
  int64_t held;
  {
    std::lock_guard<std::mutex> lock(LimboMutex());
    done = TakeReleasedLocked();
    held = static_cast<int64_t>(Limbo().size());
  }
  FreeSent(std::move(done));
  return held;
}

}  // namespace xxnpu
