// The shared-memory exchange on its own: ranks are threads with their own mappings of one
// segment (as separate processes would have), and a forked process for a dead peer.
#include "distributed/shm_exchange.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu::distributed {
namespace {

using ::testing::HasSubstr;

constexpr size_t kSlot = 4096;

absl::Time Soon(absl::Duration d = absl::Seconds(30)) { return absl::Now() + d; }

// Rank 0 plus size-1 attached ranks.
std::vector<std::unique_ptr<ShmExchange>> Group(int size) {
  std::vector<std::unique_ptr<ShmExchange>> ranks;
  auto first = ShmExchange::Create(size, kSlot);
  EXPECT_TRUE(first.ok()) << first.status();
  ranks.push_back(std::move(*first));
  for (int r = 1; r < size; ++r) {
    auto other = ShmExchange::Attach(ranks[0]->name(), ranks[0]->token(), r, size, kSlot);
    EXPECT_TRUE(other.ok()) << other.status();
    ranks.push_back(std::move(*other));
  }
  ranks[0]->Unlink();
  return ranks;
}

TEST(ShmExchangeTest, EveryRankReadsEveryRanksHeaderAndDataEachRound) {
  constexpr int kSize = 4;
  constexpr int kRounds = 300;
  auto ranks = Group(kSize);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int me = 0; me < kSize; ++me) {
    threads.emplace_back([&, me] {
      ShmExchange& x = *ranks[me];
      std::vector<unsigned char> out(kSlot);
      for (int round = 0; round < kRounds; ++round) {
        // Sizes differ per rank and round, up to the whole slot (and zero).
        const size_t n = (static_cast<size_t>(me) * 977 + static_cast<size_t>(round) * 131) % (kSlot + 1);
        for (size_t i = 0; i < n; ++i) out[i] = static_cast<unsigned char>(me * 31 + round + i);
        RoundHeader h;
        h.words[0] = round;
        h.words[1] = me;
        ASSERT_TRUE(x.Publish(h, out.data(), n, Soon()).ok());
        for (int r = 0; r < kSize; ++r) {
          const size_t expect = (static_cast<size_t>(r) * 977 + static_cast<size_t>(round) * 131) % (kSlot + 1);
          if (x.Header(r).words[0] != round || x.Header(r).words[1] != r || x.Bytes(r) != expect) ++bad;
          const auto* data = static_cast<const unsigned char*>(x.Data(r));
          for (size_t i = 0; i < expect; ++i) {
            if (data[i] != static_cast<unsigned char>(r * 31 + round + i)) {
              ++bad;
              break;
            }
          }
        }
        x.Release();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(ShmExchangeTest, ASlotIsNotRefilledWhileAPeerStillReadsIt) {
  auto ranks = Group(2);
  const int first = 1, second = 2;
  std::atomic<bool> reader_released{false};
  std::thread reader([&] {
    ASSERT_TRUE(ranks[1]->Publish({}, nullptr, 0, Soon()).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // Still round 1's data: rank 0's next Publish has to wait for this Release.
    EXPECT_EQ(*static_cast<const int*>(ranks[1]->Data(0)), first);
    reader_released = true;
    ranks[1]->Release();
    ASSERT_TRUE(ranks[1]->Publish({}, nullptr, 0, Soon()).ok());
    EXPECT_EQ(*static_cast<const int*>(ranks[1]->Data(0)), second);
    ranks[1]->Release();
  });
  ASSERT_TRUE(ranks[0]->Publish({}, &first, sizeof(first), Soon()).ok());
  ranks[0]->Release();
  ASSERT_TRUE(ranks[0]->Publish({}, &second, sizeof(second), Soon()).ok());
  EXPECT_TRUE(reader_released.load());
  ranks[0]->Release();
  reader.join();
}

TEST(ShmExchangeTest, DeadlineNamesTheRankThatDidNotArriveAndBreaksTheExchange) {
  auto ranks = Group(2);
  const auto start = absl::Now();
  absl::Status s = ranks[0]->Publish({}, nullptr, 0, absl::Now() + absl::Milliseconds(200));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(s.message()), HasSubstr("waiting for rank 1"));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(190));
  // The rounds are out of step now: everything later fails at once.
  s = ranks[0]->Publish({}, nullptr, 0, Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("earlier failure"));
}

TEST(ShmExchangeTest, ADeadPeerProcessFailsTheWaitAtOnceEvenAsAZombie) {
  auto created = ShmExchange::Create(2, kSlot);
  ASSERT_TRUE(created.ok()) << created.status();
  ShmExchange& x = **created;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto peer = ShmExchange::Attach(x.name(), x.token(), 1, 2, kSlot);
    if (!peer.ok() || !(*peer)->Publish({}, nullptr, 0, Soon()).ok()) _exit(1);
    (*peer)->Release();
    _exit(0);  // dies without joining round 2
  }
  ASSERT_TRUE(x.Publish({}, nullptr, 0, Soon()).ok());
  EXPECT_TRUE(x.PeersVisible());
  x.Release();
  // Not reaped yet: the child is a zombie that still answers kill(pid, 0).
  const auto start = absl::Now();
  absl::Status s = x.Publish({}, nullptr, 0, Soon(absl::Seconds(60)));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 1 (pid " + std::to_string(child) + ") exited"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(ShmExchangeTest, AttachRefusesAnotherGroupsSegmentAndAMissingName) {
  auto created = ShmExchange::Create(2, kSlot);
  ASSERT_TRUE(created.ok()) << created.status();
  auto wrong_token = ShmExchange::Attach((*created)->name(), (*created)->token() + 1, 1, 2, kSlot);
  EXPECT_EQ(wrong_token.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(wrong_token.status().message()), HasSubstr("another group"));
  auto wrong_size = ShmExchange::Attach((*created)->name(), (*created)->token(), 1, 3, kSlot);
  EXPECT_EQ(wrong_size.status().code(), absl::StatusCode::kFailedPrecondition);
  (*created)->Unlink();
  auto gone = ShmExchange::Attach((*created)->name(), (*created)->token(), 1, 2, kSlot);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr("not visible here"));
}

// Where shm_open's names live on Linux.
std::string ShmPath(const std::string& name) { return "/dev/shm" + name; }
bool Exists(const std::string& name) {
  struct stat st {};
  return stat(ShmPath(name).c_str(), &st) == 0;
}

// A child process creates a segment, reports its name and then dies by SIGKILL (no
// destructor, no unlink), as rank 0 dying during the group's setup. With `hold`, it
// instead waits until the returned fd (the write end of its pipe) is closed.
struct Creator {
  pid_t pid = -1;
  std::string name;
  int release_fd = -1;
};
Creator SpawnCreator(bool hold) {
  int names[2], release[2];
  EXPECT_EQ(pipe(names), 0);
  EXPECT_EQ(pipe(release), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(names[0]);
    close(release[1]);
    auto created = ShmExchange::Create(2, kSlot);
    const std::string name = created.ok() ? (*created)->name() : std::string();
    (void)!write(names[1], name.data(), name.size());
    close(names[1]);
    if (hold) {
      char c;
      (void)!read(release[0], &c, 1);
      _exit(0);  // also without unlinking: only its liveness matters here
    }
    kill(getpid(), SIGKILL);
    _exit(1);
  }
  close(names[1]);
  close(release[0]);
  Creator c;
  c.pid = pid;
  char buf[256];
  ssize_t n;
  while ((n = read(names[0], buf, sizeof buf)) > 0) c.name.append(buf, static_cast<size_t>(n));
  close(names[0]);
  c.release_fd = release[1];
  return c;
}

// Issue 21: rank 0 unlinks the segment's name once everyone has attached, so a rank 0
// killed before that left the name in /dev/shm for good.
TEST(ShmExchangeTest, ASegmentWhoseCreatorDiedIsRemovedByTheNextCreate) {
  Creator dead = SpawnCreator(/*hold=*/false);
  ASSERT_FALSE(dead.name.empty());
  int status = 0;
  ASSERT_EQ(waitpid(dead.pid, &status, 0), dead.pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  close(dead.release_fd);
  ASSERT_TRUE(Exists(dead.name)) << "the killed creator's segment should still be there";
  Creator alive = SpawnCreator(/*hold=*/true);
  ASSERT_FALSE(alive.name.empty());

  auto next = ShmExchange::Create(2, kSlot);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(Exists(dead.name)) << "a segment of a dead creator survived the next Create";
  EXPECT_TRUE(Exists(alive.name)) << "a live creator's segment must not be removed";
  EXPECT_TRUE(Exists((*next)->name()));

  close(alive.release_fd);
  ASSERT_EQ(waitpid(alive.pid, &status, 0), alive.pid);
  shm_unlink(alive.name.c_str());
}

// Attach maps only the segment its group created: one open to other users (or owned by
// another user, below) is refused even when name and token match, since its contents
// could be read or forged.
TEST(ShmExchangeTest, AttachRefusesASegmentOpenToOtherUsers) {
  auto created = ShmExchange::Create(2, kSlot);
  ASSERT_TRUE(created.ok()) << created.status();
  ShmExchange& x = **created;
  ASSERT_EQ(chmod(ShmPath(x.name()).c_str(), 0666), 0);
  auto opened = ShmExchange::Attach(x.name(), x.token(), 1, 2, kSlot);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(opened.status().message(), HasSubstr("other users"));
  ASSERT_EQ(chmod(ShmPath(x.name()).c_str(), 0600), 0);
  EXPECT_TRUE(ShmExchange::Attach(x.name(), x.token(), 1, 2, kSlot).ok());
}

TEST(ShmExchangeTest, AttachRefusesASegmentOwnedByAnotherUser) {
  auto created = ShmExchange::Create(2, kSlot);
  ASSERT_TRUE(created.ok()) << created.status();
  ShmExchange& x = **created;
  // Only root can arrange another owner, and not inside Bazel's sandbox (its user
  // namespace maps root alone): run the binary directly as root to cover it.
  const uid_t other = geteuid() == 65534 ? 65533 : 65534;
  if (chown(ShmPath(x.name()).c_str(), other, static_cast<gid_t>(-1)) != 0) {
    GTEST_SKIP() << "cannot give the segment another owner here (" << std::strerror(errno) << ")";
  }
  auto foreign = ShmExchange::Attach(x.name(), x.token(), 1, 2, kSlot);
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(foreign.status().message(), HasSubstr("owned by uid"));
}

TEST(ShmExchangeTest, BadArgumentsAreRejectedWithWhatWasExpected) {
  auto bad_slot = ShmExchange::Create(2, 100);
  EXPECT_EQ(bad_slot.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_slot.status().message()), HasSubstr("multiple of 64"));
  auto ranks = Group(1);
  std::vector<char> big(kSlot + 1);
  absl::Status s = ranks[0]->Publish({}, big.data(), big.size(), Soon());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("at most 4096 bytes"));
  // A group of one needs nobody else.
  ASSERT_TRUE(ranks[0]->Publish({}, big.data(), kSlot, Soon()).ok());
  ranks[0]->Release();
}

}  // namespace
}  // namespace xxnpu::distributed
