// The shared-memory exchange on its own: ranks are threads with their own mappings of one
// segment (as separate processes would have), and a forked process for a dead peer.
#include "distributed/shm_exchange.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
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
