// Inter-process sharing of device memory (ipc.h): handles, /proc/<pid>/fd transport, the
// shared slot table behind exports and reference counters.
//
// Every process that exports memory or creates a counter owns one "slot table": a small
// memfd of fixed-size slots that importers map (through /proc/<pid>/fd like the memory
// itself). A slot is live while its id is non-zero; ids are never reused within a process,
// so a stale handle (freed allocation, destroyed counter, reused slot) fails the id check.
// A slot lists the pids of the processes holding it, which is how the owner tells who
// still uses it and notices when one of them has died.
#include "device/ipc.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/runtime.h"
#include "device/simulator/runtime_internal.h"
#include "device/simulator/status_macros.h"

namespace xxnpu {
namespace {

constexpr uint32_t kMemMagic = 0x4d504958;  // "XIPM"
constexpr uint32_t kRefMagic = 0x52504958;  // "XIPR"
constexpr int kMaxHolders = 28;
constexpr uint32_t kSlots = 4096;

// Lives in shared memory: only lock-free atomics, no pointers.
struct Slot {
  std::atomic<uint64_t> id;
  std::atomic<int32_t> pending;
  int32_t reserved;
  std::atomic<int32_t> holders[kMaxHolders];
};
static_assert(sizeof(Slot) == 128);
static_assert(std::atomic<int32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free);

struct MemHandle {
  uint32_t magic;
  int32_t pid;
  int32_t table_fd;
  int32_t mem_fd;
  uint64_t table_ino;
  uint64_t mem_ino;
  uint32_t slot;
  int32_t device;
  uint64_t id;
  uint64_t offset;  // in the exporter's device memfd
  uint64_t size;
};
static_assert(sizeof(MemHandle) == sizeof(xxnpuIpcMemHandle_t));

struct RefHandle {
  uint32_t magic;
  int32_t pid;
  int32_t table_fd;
  uint32_t slot;
  uint64_t table_ino;
  uint64_t id;
  uint64_t reserved[2];
};
static_assert(sizeof(RefHandle) == sizeof(xxnpuIpcRefHandle_t));

std::string PtrStr(const void* p) { return absl::StrCat("0x", absl::Hex(reinterpret_cast<uintptr_t>(p))); }

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, " failed: ", std::strerror(errno)));
}

// A zombie still answers kill(pid, 0); for our purpose it is dead.
bool ProcessAlive(int32_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return errno != ENOENT;
  char buf[512];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* close_paren = std::strrchr(buf, ')');  // the command name may hold spaces
  if (close_paren == nullptr || close_paren[1] == '\0') return true;
  const char state = close_paren[2];
  return state != 'Z' && state != 'X';
}

absl::Status RegisterHolder(Slot& slot, int32_t pid) {
  for (auto& h : slot.holders) {
    int32_t expected = 0;
    if (h.compare_exchange_strong(expected, pid)) return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat("xxnpu IPC: more than ", kMaxHolders,
                                                   " processes hold the same shared memory at once"));
}

void UnregisterHolder(Slot& slot, int32_t pid) {
  for (auto& h : slot.holders) {
    int32_t expected = pid;
    if (h.compare_exchange_strong(expected, 0)) return;
  }
}

// Live holders other than `self`; entries of dead processes are cleared on the way.
int LiveHolders(Slot& slot, int32_t self) {
  int n = 0;
  for (auto& h : slot.holders) {
    int32_t pid = h.load();
    if (pid == 0 || pid == self) continue;
    if (ProcessAlive(pid)) {
      ++n;
    } else {
      h.compare_exchange_strong(pid, 0);
    }
  }
  return n;
}

// Re-opens descriptor `fd` of process `pid`, checking it is still the file (inode) the
// handle was made for.
absl::StatusOr<int> OpenProcFd(int32_t pid, int32_t fd, uint64_t ino, const char* api, const char* what) {
  const std::string path = absl::StrCat("/proc/", pid, "/fd/", fd);
  const int opened = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (opened < 0) {
    const int err = errno;
    if (!ProcessAlive(pid)) {
      return absl::FailedPreconditionError(
          absl::StrCat(api, ": the process that made the handle (pid ", pid, ") has exited"));
    }
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(absl::StrCat(
          api, ": cannot open ", path, " (", std::strerror(err), "): the receiving process needs ptrace read access "
          "to pid ", pid, " (same user and a dumpable sender, or CAP_SYS_PTRACE)"));
    }
    return absl::FailedPreconditionError(absl::StrCat(api, ": the ", what, " of pid ", pid, " is gone (", path, ": ",
                                                      std::strerror(err), "); the handle is stale"));
  }
  struct stat st;
  if (fstat(opened, &st) != 0 || static_cast<uint64_t>(st.st_ino) != ino) {
    close(opened);
    return absl::FailedPreconditionError(absl::StrCat(api, ": ", path, " is not the ", what,
                                                      " the handle names (pid reused? the handle is stale)"));
  }
  return opened;
}

class Ipc {
 public:
  static Ipc& Get() {
    static Ipc* ipc = new Ipc();  // never destroyed: deleters may run during exit
    return *ipc;
  }

  // ---- this process's table
  absl::Status EnsureOwnTableLocked() {
    if (own_slots_ != nullptr) return absl::OkStatus();
    const int fd = memfd_create("xxnpu-ipc-table", MFD_CLOEXEC);
    if (fd < 0) return Errno("xxnpu IPC: memfd_create");
    const size_t bytes = sizeof(Slot) * kSlots;
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      close(fd);
      return Errno("xxnpu IPC: ftruncate");
    }
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      return Errno("xxnpu IPC: mmap of the slot table");
    }
    struct stat st;
    fstat(fd, &st);
    own_fd_ = fd;
    own_ino_ = static_cast<uint64_t>(st.st_ino);
    own_slots_ = static_cast<Slot*>(p);
    own_pid_ = getpid();
    return absl::OkStatus();
  }

  absl::StatusOr<uint32_t> NewSlotLocked() {
    XXNPU_RETURN_IF_ERROR(EnsureOwnTableLocked());
    uint32_t index;
    if (!free_slots_.empty()) {
      index = free_slots_.back();
      free_slots_.pop_back();
    } else if (next_slot_ < kSlots) {
      index = next_slot_++;
    } else {
      return absl::ResourceExhaustedError(absl::StrCat(
          "xxnpu IPC: all ", kSlots, " shared slots of this process are in use (exported allocations and reference "
          "counters); free some or release sent tensors"));
    }
    Slot& s = own_slots_[index];
    s.pending.store(0);
    for (auto& h : s.holders) h.store(0);
    s.id.store(next_id_++);
    return index;
  }

  void FreeSlotLocked(uint32_t index) {
    own_slots_[index].id.store(0);
    free_slots_.push_back(index);
  }

  // ---- other processes' tables, mapped once per (pid, inode) and kept
  absl::StatusOr<Slot*> PeerSlotLocked(int32_t pid, int32_t fd, uint64_t ino, uint32_t index, const char* api) {
    if (index >= kSlots) return absl::InvalidArgumentError(absl::StrCat(api, ": corrupt handle (slot ", index, ")"));
    if (pid == own_pid_ && ino == own_ino_ && own_slots_ != nullptr) return &own_slots_[index];
    auto key = std::make_pair(pid, ino);
    auto it = peer_tables_.find(key);
    if (it == peer_tables_.end()) {
      XXNPU_ASSIGN_OR_RETURN(int opened, OpenProcFd(pid, fd, ino, api, "shared slot table"));
      void* p = mmap(nullptr, sizeof(Slot) * kSlots, PROT_READ | PROT_WRITE, MAP_SHARED, opened, 0);
      close(opened);
      if (p == MAP_FAILED) return Errno(absl::StrCat(api, ": mapping the slot table of pid ", pid));
      it = peer_tables_.emplace(key, static_cast<Slot*>(p)).first;
    }
    return &it->second[index];
  }

  std::mutex mu;
  int own_fd_ = -1;
  uint64_t own_ino_ = 0;
  Slot* own_slots_ = nullptr;
  int32_t own_pid_ = 0;
  uint32_t next_slot_ = 0;
  uint64_t next_id_ = 1;
  std::vector<uint32_t> free_slots_;
  // Exported allocations: base -> (slot, handle).
  std::map<const void*, std::pair<uint32_t, MemHandle>> exports;
  std::map<std::pair<int32_t, uint64_t>, Slot*> peer_tables_;

  // Opened allocations of other processes: (pid, table inode, id) -> mapping.
  struct Imported {
    void* ptr = nullptr;
    int device = -1;
    int opens = 0;
    Slot* slot = nullptr;
  };
  using ImportKey = std::tuple<int32_t, uint64_t, uint64_t>;
  std::map<ImportKey, Imported> imported;
  std::map<const void*, ImportKey> imported_by_ptr;
  // Counters this process holds: (pid, table inode, slot, id) -> acquisitions.
  std::map<std::tuple<int32_t, uint64_t, uint32_t, uint64_t>, int> held;

 private:
  Ipc() = default;
};

absl::StatusOr<MemHandle> DecodeMem(const xxnpuIpcMemHandle_t& h, const char* api) {
  MemHandle m;
  std::memcpy(&m, h.bytes, sizeof(m));
  if (m.magic != kMemMagic) {
    return absl::InvalidArgumentError(absl::StrCat(api, ": not an xxnpu IPC memory handle (bad magic 0x",
                                                   absl::Hex(m.magic), ", expected 0x", absl::Hex(kMemMagic), ")"));
  }
  return m;
}

absl::StatusOr<RefHandle> DecodeRef(const xxnpuIpcRefHandle_t& h, const char* api) {
  RefHandle r;
  std::memcpy(&r, h.bytes, sizeof(r));
  if (r.magic != kRefMagic) {
    return absl::InvalidArgumentError(absl::StrCat(api, ": not an xxnpu IPC reference counter handle (bad magic 0x",
                                                   absl::Hex(r.magic), ", expected 0x", absl::Hex(kRefMagic), ")"));
  }
  return r;
}

// The calling process's own live counter slot named by `r`.
absl::StatusOr<Slot*> OwnRefSlotLocked(Ipc& ipc, const RefHandle& r, const char* api) {
  if (ipc.own_slots_ == nullptr || r.pid != ipc.own_pid_ || r.table_ino != ipc.own_ino_ || r.slot >= kSlots) {
    return absl::InvalidArgumentError(absl::StrCat(api, ": the counter was created by pid ", r.pid,
                                                   ", not by this process (", getpid(), ")"));
  }
  Slot* s = &ipc.own_slots_[r.slot];
  if (s->id.load() != r.id) return absl::FailedPreconditionError(absl::StrCat(api, ": the counter was destroyed"));
  return s;
}

absl::Status OnFree(void* base) {
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  auto it = ipc.exports.find(base);
  if (it == ipc.exports.end()) return absl::OkStatus();
  Slot& slot = ipc.own_slots_[it->second.first];
  // Revoke first, then look for holders; an importer registers first, then checks the
  // id: whichever comes second sees the other.
  const uint64_t id = slot.id.exchange(0);
  if (const int n = LiveHolders(slot, ipc.own_pid_); n > 0) {
    slot.id.store(id);
    return absl::FailedPreconditionError(absl::StrCat(
        "xxnpuFree: ", PtrStr(base), " is open in ", n, " other process(es) (xxnpuIpcOpenMemHandle); they must "
        "xxnpuIpcCloseMemHandle it (or exit) before it is freed"));
  }
  ipc.free_slots_.push_back(it->second.first);
  ipc.exports.erase(it);
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------- memory handles

absl::Status xxnpuIpcGetMemHandle(xxnpuIpcMemHandle_t* handle, void* device_ptr) {
  constexpr const char* kApi = "xxnpuIpcGetMemHandle";
  if (handle == nullptr) return absl::InvalidArgumentError(absl::StrCat(kApi, ": null handle"));
  XXNPU_ASSIGN_OR_RETURN(DeviceMemory * memory, internal::RuntimeMemory());
  const PointerAttributes attr = xxnpuPointerGetAttributes(device_ptr);
  if (attr.type != PointerAttributes::Type::kDevice) {
    return absl::InvalidArgumentError(absl::StrCat(kApi, ": ", PtrStr(device_ptr),
                                                   " is not a live device allocation (host pointer, or freed?)"));
  }
  if (attr.base != device_ptr) {
    return absl::InvalidArgumentError(absl::StrCat(kApi, ": ", PtrStr(device_ptr), " points inside the allocation at ",
                                                   PtrStr(attr.base), "; pass the allocation's start"));
  }
  if (memory->memcheck()) {
    // A memcheck allocation starts mid-page (its end is flush against a guard page), and
    // an importer can only map whole pages.
    return absl::FailedPreconditionError(absl::StrCat(kApi, ": not available under XXNPU_MEMCHECK=1 (allocations "
                                                            "are placed against guard pages, not on page boundaries)"));
  }
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  if (ipc.imported_by_ptr.count(device_ptr)) {
    return absl::InvalidArgumentError(absl::StrCat(kApi, ": ", PtrStr(device_ptr),
                                                   " is another process's memory opened here; only the process that "
                                                   "allocated it can export it"));
  }
  auto it = ipc.exports.find(device_ptr);
  if (it == ipc.exports.end()) {
    XXNPU_ASSIGN_OR_RETURN(uint32_t index, ipc.NewSlotLocked());
    MemHandle m{};
    m.magic = kMemMagic;
    m.pid = ipc.own_pid_;
    m.table_fd = ipc.own_fd_;
    m.table_ino = ipc.own_ino_;
    m.device = attr.device;
    m.mem_fd = memory->HeapFd(attr.device);
    struct stat st;
    if (fstat(m.mem_fd, &st) != 0) return Errno(absl::StrCat(kApi, ": fstat of the device memory"));
    m.mem_ino = static_cast<uint64_t>(st.st_ino);
    m.slot = index;
    m.id = ipc.own_slots_[index].id.load();
    m.offset = memory->OffsetOf(device_ptr);
    m.size = attr.size;
    it = ipc.exports.emplace(device_ptr, std::make_pair(index, m)).first;
    internal::SetFreeHook(&OnFree);
  }
  std::memcpy(handle->bytes, &it->second.second, sizeof(MemHandle));
  return absl::OkStatus();
}

absl::Status xxnpuIpcOpenMemHandle(void** device_ptr, const xxnpuIpcMemHandle_t& handle) {
  constexpr const char* kApi = "xxnpuIpcOpenMemHandle";
  if (device_ptr == nullptr) return absl::InvalidArgumentError(absl::StrCat(kApi, ": null device_ptr"));
  XXNPU_ASSIGN_OR_RETURN(MemHandle m, DecodeMem(handle, kApi));
  XXNPU_ASSIGN_OR_RETURN(DeviceMemory * memory, internal::RuntimeMemory());
  XXNPU_ASSIGN_OR_RETURN(int devices, xxnpuGetDeviceCount());
  if (m.pid == getpid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kApi, ": the handle was made by this process (pid ", m.pid, "); use the allocation's own pointer"));
  }
  if (m.device < 0 || m.device >= devices) {
    return absl::InvalidArgumentError(absl::StrCat(kApi, ": the handle is memory of xxnpu:", m.device, " but this process has ",
                                                   devices, " devices (XXNPU_DEVICE_COUNT)"));
  }
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  const Ipc::ImportKey key{m.pid, m.table_ino, m.id};
  if (auto it = ipc.imported.find(key); it != ipc.imported.end()) {
    ++it->second.opens;
    *device_ptr = it->second.ptr;
    return absl::OkStatus();
  }
  XXNPU_ASSIGN_OR_RETURN(Slot * slot, ipc.PeerSlotLocked(m.pid, m.table_fd, m.table_ino, m.slot, kApi));
  const int32_t self = getpid();
  XXNPU_RETURN_IF_ERROR(RegisterHolder(*slot, self));
  // Registered first, then checked: see OnFree.
  if (slot->id.load() != m.id) {
    UnregisterHolder(*slot, self);
    return absl::FailedPreconditionError(absl::StrCat(kApi, ": the allocation was freed by its process (pid ", m.pid,
                                                      "); the handle is no longer valid"));
  }
  absl::StatusOr<int> fd = OpenProcFd(m.pid, m.mem_fd, m.mem_ino, kApi, "device memory");
  if (!fd.ok()) {
    UnregisterHolder(*slot, self);
    return fd.status();
  }
  absl::StatusOr<void*> p = memory->MapForeign(m.device, *fd, m.offset, m.size);
  close(*fd);  // the mapping keeps the memory alive
  if (!p.ok()) {
    UnregisterHolder(*slot, self);
    return p.status();
  }
  ipc.imported.emplace(key, Ipc::Imported{*p, m.device, 1, slot});
  ipc.imported_by_ptr.emplace(*p, key);
  *device_ptr = *p;
  return absl::OkStatus();
}

absl::Status xxnpuIpcCloseMemHandle(void* device_ptr) {
  constexpr const char* kApi = "xxnpuIpcCloseMemHandle";
  XXNPU_ASSIGN_OR_RETURN(DeviceMemory * memory, internal::RuntimeMemory());
  Ipc& ipc = Ipc::Get();
  std::unique_lock<std::mutex> lock(ipc.mu);
  auto by_ptr = ipc.imported_by_ptr.find(device_ptr);
  if (by_ptr == ipc.imported_by_ptr.end()) {
    return absl::InvalidArgumentError(absl::StrCat(kApi, ": ", PtrStr(device_ptr),
                                                   " is not open here (not from xxnpuIpcOpenMemHandle, or closed already)"));
  }
  auto it = ipc.imported.find(by_ptr->second);
  if (--it->second.opens > 0) return absl::OkStatus();
  const Ipc::Imported imported = it->second;
  ipc.imported.erase(it);
  ipc.imported_by_ptr.erase(by_ptr);
  lock.unlock();
  // Queued kernels may still read or write the pages.
  internal::WaitDeviceIdle(imported.device);
  absl::Status s = memory->UnmapForeign(imported.ptr);
  UnregisterHolder(*imported.slot, getpid());
  return s;
}

absl::StatusOr<void*> xxnpuIpcMemHandleOwnPointer(const xxnpuIpcMemHandle_t& handle) {
  constexpr const char* kApi = "xxnpuIpcMemHandleOwnPointer";
  XXNPU_ASSIGN_OR_RETURN(MemHandle m, DecodeMem(handle, kApi));
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  for (const auto& [base, export_] : ipc.exports) {
    const MemHandle& mine = export_.second;
    if (m.pid == mine.pid && m.table_ino == mine.table_ino && m.id == mine.id) return const_cast<void*>(base);
  }
  if (m.pid == ipc.own_pid_ && m.table_ino == ipc.own_ino_) {
    return absl::FailedPreconditionError(absl::StrCat(kApi, ": the allocation was freed; the handle is no longer valid"));
  }
  return absl::InvalidArgumentError(absl::StrCat(kApi, ": the handle was made by pid ", m.pid, ", not by this process (",
                                                 getpid(), ")"));
}

absl::StatusOr<int> xxnpuIpcMemOpenCount(void* device_ptr) {
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  auto it = ipc.exports.find(device_ptr);
  if (it == ipc.exports.end()) return 0;
  return LiveHolders(ipc.own_slots_[it->second.first], ipc.own_pid_);
}

// ---------------------------------------------------------------- reference counters

absl::Status xxnpuIpcRefCreate(xxnpuIpcRefHandle_t* handle) {
  // Also refuses a child forked after the runtime started (its table is the parent's).
  XXNPU_RETURN_IF_ERROR(internal::RuntimeMemory().status());
  if (handle == nullptr) return absl::InvalidArgumentError("xxnpuIpcRefCreate: null handle");
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  XXNPU_ASSIGN_OR_RETURN(uint32_t index, ipc.NewSlotLocked());
  RefHandle r{};
  r.magic = kRefMagic;
  r.pid = ipc.own_pid_;
  r.table_fd = ipc.own_fd_;
  r.table_ino = ipc.own_ino_;
  r.slot = index;
  r.id = ipc.own_slots_[index].id.load();
  std::memcpy(handle->bytes, &r, sizeof(r));
  return absl::OkStatus();
}

absl::Status xxnpuIpcRefAddPending(const xxnpuIpcRefHandle_t& handle) {
  constexpr const char* kApi = "xxnpuIpcRefAddPending";
  XXNPU_RETURN_IF_ERROR(internal::RuntimeMemory().status());
  XXNPU_ASSIGN_OR_RETURN(RefHandle r, DecodeRef(handle, kApi));
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  Slot* s;
  if (ipc.held.count(std::make_tuple(r.pid, r.table_ino, r.slot, r.id))) {
    // Held here, so the creator cannot have destroyed it: its InUse is true.
    XXNPU_ASSIGN_OR_RETURN(s, ipc.PeerSlotLocked(r.pid, r.table_fd, r.table_ino, r.slot, kApi));
  } else {
    XXNPU_ASSIGN_OR_RETURN(s, OwnRefSlotLocked(ipc, r, kApi));
  }
  s->pending.fetch_add(1);
  return absl::OkStatus();
}

absl::StatusOr<bool> xxnpuIpcRefInUse(const xxnpuIpcRefHandle_t& handle) {
  XXNPU_RETURN_IF_ERROR(internal::RuntimeMemory().status());
  constexpr const char* kApi = "xxnpuIpcRefInUse";
  XXNPU_ASSIGN_OR_RETURN(RefHandle r, DecodeRef(handle, kApi));
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  XXNPU_ASSIGN_OR_RETURN(Slot * s, OwnRefSlotLocked(ipc, r, kApi));
  // Holders register before they take a pending reference, so this order cannot miss one.
  if (s->pending.load() > 0) return true;
  return LiveHolders(*s, /*self=*/0) > 0;
}

absl::Status xxnpuIpcRefDestroy(const xxnpuIpcRefHandle_t& handle) {
  XXNPU_RETURN_IF_ERROR(internal::RuntimeMemory().status());
  constexpr const char* kApi = "xxnpuIpcRefDestroy";
  XXNPU_ASSIGN_OR_RETURN(RefHandle r, DecodeRef(handle, kApi));
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  XXNPU_RETURN_IF_ERROR(OwnRefSlotLocked(ipc, r, kApi).status());
  ipc.FreeSlotLocked(r.slot);
  return absl::OkStatus();
}

absl::Status xxnpuIpcRefAcquire(const xxnpuIpcRefHandle_t& handle) {
  XXNPU_RETURN_IF_ERROR(internal::RuntimeMemory().status());
  constexpr const char* kApi = "xxnpuIpcRefAcquire";
  XXNPU_ASSIGN_OR_RETURN(RefHandle r, DecodeRef(handle, kApi));
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  XXNPU_ASSIGN_OR_RETURN(Slot * s, ipc.PeerSlotLocked(r.pid, r.table_fd, r.table_ino, r.slot, kApi));
  const auto key = std::make_tuple(r.pid, r.table_ino, r.slot, r.id);
  int& count = ipc.held[key];
  const int32_t self = getpid();
  if (count == 0) {
    absl::Status registered = RegisterHolder(*s, self);
    if (!registered.ok()) {
      ipc.held.erase(key);
      return registered;
    }
  }
  if (s->id.load() != r.id) {
    if (count == 0) {
      UnregisterHolder(*s, self);
      ipc.held.erase(key);
    }
    return absl::FailedPreconditionError(
        absl::StrCat(kApi, ": the sender (pid ", r.pid, ") has destroyed the counter; the handle is stale"));
  }
  ++count;
  s->pending.fetch_sub(1);
  return absl::OkStatus();
}

absl::Status xxnpuIpcRefRelease(const xxnpuIpcRefHandle_t& handle) {
  XXNPU_RETURN_IF_ERROR(internal::RuntimeMemory().status());
  constexpr const char* kApi = "xxnpuIpcRefRelease";
  XXNPU_ASSIGN_OR_RETURN(RefHandle r, DecodeRef(handle, kApi));
  Ipc& ipc = Ipc::Get();
  std::lock_guard<std::mutex> lock(ipc.mu);
  auto it = ipc.held.find(std::make_tuple(r.pid, r.table_ino, r.slot, r.id));
  if (it == ipc.held.end()) {
    return absl::InvalidArgumentError(absl::StrCat(kApi, ": this process does not hold the counter (released "
                                                         "already, or never acquired)"));
  }
  if (--it->second > 0) return absl::OkStatus();
  ipc.held.erase(it);
  XXNPU_ASSIGN_OR_RETURN(Slot * s, ipc.PeerSlotLocked(r.pid, r.table_fd, r.table_ino, r.slot, kApi));
  UnregisterHolder(*s, getpid());
  return absl::OkStatus();
}

}  // namespace xxnpu
