// The shared-memory exchange: see shm_exchange.h for the round protocol.
#include "distributed/shm_exchange.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <fstream>
#include <new>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xxnpu::distributed {
namespace {

constexpr uint64_t kMagic = 0x78786363'6c73686dULL;  // "xxcclshm"
constexpr int kSpins = 2000;                          // ~10-50 us before sleeping
constexpr absl::Duration kSleepSlice = absl::Milliseconds(10);  // liveness re-check period

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
              "the futex words are std::atomic<uint32_t> in shared memory");

// Process-shared futex (no FUTEX_PRIVATE_FLAG): waiters and wakers are other processes.
long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

void WakeAll(std::atomic<uint32_t>* word) { Futex(word, FUTEX_WAKE, INT_MAX, nullptr); }

// Counters wrap; a counter has reached `target` when it is at most 2^31 rounds past it.
bool Reached(uint32_t value, uint32_t target) { return static_cast<int32_t>(value - target) >= 0; }

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

constexpr char kNamePrefix[] = "xxccl-";  // names are /xxccl-<creator pid>-<token>
constexpr char kShmDir[] = "/dev/shm";    // where glibc's shm_open keeps them
// A segment whose creator died before writing its header is removed once it is this old
// (a live creator writes it microseconds after creating the name).
constexpr absl::Duration kUnwrittenGrace = absl::Minutes(1);

// The PID namespace of this process (the inode of /proc/self/ns/pid; 0 if unknown). A pid
// means the same process only within one namespace, and /dev/shm may be shared across
// namespaces (containers, sandboxes).
uint64_t PidNamespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

bool ProcessExists(pid_t pid) { return !(kill(pid, 0) != 0 && errno == ESRCH); }

}  // namespace

struct alignas(64) ShmExchange::Control {
  uint64_t magic;
  uint64_t token;
  uint64_t size;
  uint64_t slot_bytes;
  // Who created it, for the stale-segment sweep: a pid in a PID namespace.
  uint64_t creator_pid;
  uint64_t creator_pid_ns;
};

// Each side's counter has its own cache line: the owner writes it, the others poll it.
struct alignas(64) ShmExchange::RankState {
  alignas(64) std::atomic<uint32_t> published;  // the last round this rank published
  alignas(64) std::atomic<uint32_t> consumed;   // the last round this rank released
  alignas(64) int64_t pid;
  uint64_t bytes;  // of this round's data
  RoundHeader header;
};

size_t ShmExchange::SegmentBytes(int size, size_t slot_bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t head = sizeof(Control) + static_cast<size_t>(size) * sizeof(RankState);
  return (head + page - 1) / page * page + static_cast<size_t>(size) * slot_bytes;
}

ShmExchange::RankState& ShmExchange::State(int r) const {
  return reinterpret_cast<RankState*>(static_cast<char*>(base_) + sizeof(Control))[r];
}

char* ShmExchange::Slot(int r) const {
  return static_cast<char*>(base_) + (length_ - static_cast<size_t>(size_ - r) * slot_bytes_);
}

ShmExchange::ShmExchange(std::string name, uint64_t token, int rank, int size, size_t slot_bytes, void* base,
                         size_t length)
    : name_(std::move(name)),
      token_(token),
      rank_(rank),
      size_(size),
      slot_bytes_(slot_bytes),
      base_(base),
      length_(length),
      linked_(rank == 0) {}

ShmExchange::~ShmExchange() {
  Unlink();
  munmap(base_, length_);
}

void ShmExchange::RemoveStaleSegments() {
  DIR* dir = opendir(kShmDir);
  if (dir == nullptr) return;
  const uint64_t my_ns = PidNamespace();
  while (const dirent* entry = readdir(dir)) {
    const std::string file = entry->d_name;
    if (!absl::StartsWith(file, kNamePrefix)) continue;
    const std::string rest = file.substr(sizeof(kNamePrefix) - 1);
    int64_t pid = 0;
    if (!absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid) || pid <= 0 || pid == getpid()) continue;
    const std::string name = "/" + file;
    const int fd = shm_open(name.c_str(), O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0) continue;
    struct stat st {};
    bool stale = false;
    // Only our own user's segments, and only when sure their creator is gone.
    if (fstat(fd, &st) == 0 && st.st_uid == geteuid()) {
      Control control{};
      if (static_cast<size_t>(st.st_size) >= sizeof(Control) &&
          pread(fd, &control, sizeof control, 0) == static_cast<ssize_t>(sizeof control) && control.magic == kMagic) {
        // A pid is only meaningful in its creator's namespace: another one's live
        // creator would look dead from here.
        stale = control.creator_pid == static_cast<uint64_t>(pid) && my_ns != 0 &&
                control.creator_pid_ns == my_ns && !ProcessExists(static_cast<pid_t>(pid));
      } else {
        stale = absl::Now() - absl::FromTimeT(st.st_mtime) > kUnwrittenGrace;
      }
    }
    close(fd);
    if (stale) shm_unlink(name.c_str());
  }
  closedir(dir);
}

absl::StatusOr<std::unique_ptr<ShmExchange>> ShmExchange::Create(int size, size_t slot_bytes) {
  if (size < 1 || slot_bytes == 0 || slot_bytes % 64 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm exchange: expected size >= 1 and slot_bytes a positive multiple of 64, got size ", size,
                     " and slot_bytes ", slot_bytes));
  }
  // A rank 0 that died between creating its segment and unlinking the name (killed
  // during the group's setup) left it behind: clear such leftovers first (issue 21).
  RemoveStaleSegments();
  std::random_device entropy;
  const uint64_t token = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
  const std::string name = absl::StrFormat("/xxccl-%d-%016x", getpid(), token);
  const size_t length = SegmentBytes(size, slot_bytes);
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Errno(absl::StrCat("shm_open(", name, ")"));
  // Reserve the pages now: a full /dev/shm then fails here, not as SIGBUS mid-collective.
  const int reserve = posix_fallocate(fd, 0, static_cast<off_t>(length));
  void* base = reserve == 0 ? mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  const int saved = reserve != 0 ? reserve : errno;
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(name.c_str());
    errno = saved;
    return Errno(absl::StrCat("shared memory segment of ", length, " bytes (", name, ")"));
  }
  auto* control = new (base) Control{0, token, static_cast<uint64_t>(size), slot_bytes,
                                     static_cast<uint64_t>(getpid()), PidNamespace()};
  auto exchange = std::unique_ptr<ShmExchange>(new ShmExchange(name, token, 0, size, slot_bytes, base, length));
  for (int r = 0; r < size; ++r) {
    RankState* state = new (&exchange->State(r)) RankState();
    state->published.store(0, std::memory_order_relaxed);
    state->consumed.store(0, std::memory_order_relaxed);
  }
  exchange->State(0).pid = getpid();
  std::atomic_thread_fence(std::memory_order_release);
  control->magic = kMagic;
  return exchange;
}

absl::StatusOr<std::unique_ptr<ShmExchange>> ShmExchange::Attach(const std::string& name, uint64_t token, int rank,
                                                                 int size, size_t slot_bytes) {
  if (rank < 1 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("shm exchange: attaching rank must be in [1, ", size, "), got ", rank));
  }
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory segment ", name, " is not visible here: ", std::strerror(errno)));
  }
  const size_t length = SegmentBytes(size, slot_bytes);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int saved = errno;
    close(fd);
    errno = saved;
    return Errno(absl::StrCat("fstat of shared memory segment ", name));
  }
  // The group's rank 0 runs as this user (ranks of one job do) and creates it 0600:
  // anything else is not the segment this group created, and mapping it would let its
  // owner read or forge this rank's collectives.
  if (st.st_uid != geteuid()) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("shared memory segment ", name, " is owned by uid ", st.st_uid,
                                                      ", expected uid ", geteuid(),
                                                      " (this process's): not the segment this group created"));
  }
  if ((st.st_mode & 077) != 0) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrFormat(
        "shared memory segment %s is accessible to other users (mode 0%o, expected 0600): not the segment this "
        "group created",
        name, st.st_mode & 0777));
  }
  if (static_cast<size_t>(st.st_size) != length) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat("shared memory segment ", name, " has ", st.st_size,
                                                      " bytes, expected ", length));
  }
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) return Errno(absl::StrCat("mmap of ", name));
  const auto* control = static_cast<const Control*>(base);
  if (control->magic != kMagic || control->token != token || control->size != static_cast<uint64_t>(size) ||
      control->slot_bytes != slot_bytes) {
    munmap(base, length);
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory segment ", name, " belongs to another group (token or shape differ)"));
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  auto exchange = std::unique_ptr<ShmExchange>(new ShmExchange(name, token, rank, size, slot_bytes, base, length));
  exchange->State(rank).pid = getpid();
  return exchange;
}

void ShmExchange::Unlink() {
  if (linked_) shm_unlink(name_.c_str());
  linked_ = false;
}

bool ShmExchange::PeersVisible() {
  watch_peers_ = true;
  for (int r = 0; r < size_; ++r) {
    const int64_t pid = State(r).pid;
    if (pid <= 0 || (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) watch_peers_ = false;
  }
  return watch_peers_;
}

bool ShmExchange::ProcessGone(int peer) const {
  const int64_t pid = State(peer).pid;
  if (!watch_peers_ || pid <= 0) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  // A dead child not yet reaped by its parent still answers kill(): a zombie.
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && (line[paren + 2] == 'Z' || line[paren + 2] == 'X');
}

absl::Status ShmExchange::WaitFor(int peer, bool published, uint32_t target, absl::Time deadline) {
  RankState& state = State(peer);
  std::atomic<uint32_t>& word = published ? state.published : state.consumed;
  for (int i = 0; i < kSpins; ++i) {
    if (Reached(word.load(std::memory_order_acquire), target)) return absl::OkStatus();
    CpuRelax();
  }
  while (true) {
    const uint32_t seen = word.load(std::memory_order_acquire);
    if (Reached(seen, target)) return absl::OkStatus();
    const absl::Time now = absl::Now();
    const char* what = published ? "reach" : "finish reading";
    if (now >= deadline) {
      broken_ = true;
      return absl::DeadlineExceededError(absl::StrCat(
          "timed out waiting for rank ", peer, " to ", what, " round ", target,
          " of the shared-memory exchange (is every rank issuing the same collectives in the same order?)"));
    }
    if (ProcessGone(peer)) {
      broken_ = true;
      return absl::UnavailableError(absl::StrCat("rank ", peer, " (pid ", state.pid, ") exited"));
    }
    const absl::Duration slice = std::min(deadline - now, kSleepSlice);
    const timespec ts = absl::ToTimespec(slice);
    Futex(&word, FUTEX_WAIT, seen, &ts);  // returns at once if the word moved meanwhile
  }
}

absl::Status ShmExchange::Publish(const RoundHeader& header, const void* data, size_t nbytes, absl::Time deadline) {
  if (broken_) {
    return absl::FailedPreconditionError("the shared-memory exchange is unusable after an earlier failure");
  }
  if (nbytes > slot_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm exchange: a round carries at most ", slot_bytes_, " bytes, got ", nbytes));
  }
  const uint32_t round = round_ + 1;
  // My slot is free once everybody has finished reading the previous round.
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    absl::Status s = WaitFor(r, /*published=*/false, round - 1, deadline);
    if (!s.ok()) return s;
  }
  RankState& mine = State(rank_);
  mine.header = header;
  mine.bytes = nbytes;
  if (nbytes > 0) std::memcpy(Slot(rank_), data, nbytes);
  mine.published.store(round, std::memory_order_release);
  WakeAll(&mine.published);
  round_ = round;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    absl::Status s = WaitFor(r, /*published=*/true, round, deadline);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

const RoundHeader& ShmExchange::Header(int r) const { return State(r).header; }
const void* ShmExchange::Data(int r) const { return Slot(r); }
size_t ShmExchange::Bytes(int r) const { return State(r).bytes; }

void ShmExchange::Release() {
  RankState& mine = State(rank_);
  mine.consumed.store(round_, std::memory_order_release);
  WakeAll(&mine.consumed);
}

}  // namespace xxnpu::distributed
