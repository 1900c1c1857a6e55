// Shared-memory exchange between the ranks of a group on one host: xxccl's same-host
// transport (docs/distributed.md, "Transport").
//
// Work proceeds in rounds. In each round every rank publishes a small header (which
// collective it is in, dtype, count: the caller's words) and up to slot_bytes() of data
// into its own slot of one shared segment, waits until every rank has published the
// round, reads what it needs from the others' slots, and releases the round. A rank
// refills its slot only after every rank has released the previous round, so a round's
// data stays put while anybody reads it.
//
// Waits spin briefly, then sleep on a futex in the segment (a process-shared futex:
// the counters live in shared memory). A wait ends with an error naming the rank when
// the caller's deadline passes or the peer's process is gone (exited, or a zombie), so a
// dead rank fails the others at once instead of at the timeout. After an error the
// exchange stays broken: every later round fails at once (the rounds are out of step).
//
// Torch-free: reductions over the slots are the caller's (xxccl uses ATen's kernels).
// Rank 0 creates the segment (mode 0600); it unlinks the name once every rank has
// attached, so a crash after that leaves nothing behind in /dev/shm. A rank 0 killed
// before that leaves the name: every Create first removes segments of this user whose
// creator no longer exists (checked in the creator's PID namespace only). Attach maps
// only a segment owned by this user, closed to others, with the group's token and shape.
// One thread per rank drives the rounds.
#ifndef TORCH_XXNPU_DISTRIBUTED_SHM_EXCHANGE_H_
#define TORCH_XXNPU_DISTRIBUTED_SHM_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace xxnpu::distributed {

// What a rank says it is doing in a round; the caller defines the words and compares
// them across ranks before trusting the data.
struct RoundHeader {
  int64_t words[4] = {0, 0, 0, 0};
};

class ShmExchange {
 public:
  // Rank 0: a new segment for `size` ranks with `slot_bytes` per rank. Its name() and
  // token() are what the other ranks need to attach.
  static absl::StatusOr<std::unique_ptr<ShmExchange>> Create(int size, size_t slot_bytes);
  // Ranks 1..size-1: the segment rank 0 created. Fails (FailedPrecondition) when the name
  // does not exist here or holds another group's segment, e.g. on another host, or one
  // owned by another user or open to other users.
  static absl::StatusOr<std::unique_ptr<ShmExchange>> Attach(const std::string& name, uint64_t token, int rank,
                                                             int size, size_t slot_bytes);
  ~ShmExchange();
  ShmExchange(const ShmExchange&) = delete;
  ShmExchange& operator=(const ShmExchange&) = delete;

  const std::string& name() const { return name_; }
  uint64_t token() const { return token_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }

  // Rank 0, once every rank has attached: removes the name (mappings stay valid).
  void Unlink();
  // Whether every rank's process is visible from here (one PID namespace); when not,
  // waits end only by the deadline. Call once all ranks have attached.
  bool PeersVisible();

  // One round: publishes `header` and data[0, nbytes) (nbytes <= slot_bytes()) and waits
  // until every rank has published this round.
  absl::Status Publish(const RoundHeader& header, const void* data, size_t nbytes, absl::Time deadline);
  // Between Publish and Release: what rank r published this round.
  const RoundHeader& Header(int r) const;
  const void* Data(int r) const;
  size_t Bytes(int r) const;
  // Ends this rank's reading of the round.
  void Release();

 private:
  struct Control;
  struct RankState;

  ShmExchange(std::string name, uint64_t token, int rank, int size, size_t slot_bytes, void* base, size_t length);
  static size_t SegmentBytes(int size, size_t slot_bytes);
  // Unlinks this user's segments whose creator has died (see the file comment).
  static void RemoveStaleSegments();
  RankState& State(int r) const;
  char* Slot(int r) const;
  // Waits until rank `peer`'s counter `which` reaches `target`.
  absl::Status WaitFor(int peer, bool published, uint32_t target, absl::Time deadline);
  bool ProcessGone(int peer) const;

  std::string name_;
  uint64_t token_;
  int rank_;
  int size_;
  size_t slot_bytes_;
  void* base_;
  size_t length_;
  bool linked_;
  bool watch_peers_ = false;
  bool broken_ = false;
  uint32_t round_ = 0;  // the last round this rank published
};

}  // namespace xxnpu::distributed

#endif  // TORCH_XXNPU_DISTRIBUTED_SHM_EXCHANGE_H_
