// Inter-process sharing between real processes: every test forks an exporter and an
// importer (the test process itself never starts the runtime, so its children may), they
// talk through pipes, and the test checks what each child reports. Every wait is bounded.
#include "device/ipc.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/runtime.h"
#include "device/test_util.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

constexpr int kTimeoutMs = 30000;

// A pipe end pair to one child: the child writes `out`, reads `in`.
struct Channel {
  int to_child[2];
  int from_child[2];
};

bool ReadFull(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, kTimeoutMs) <= 0) return false;
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteFull(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The child's side of a test: `in` from the test/peer, `out` to it. Returns "" on success,
// else what went wrong (printed, exit code 1).
using ChildBody = std::function<std::string(int in, int out)>;

pid_t Fork(const ChildBody& body, Channel* ch) {
  if (pipe(ch->to_child) != 0 || pipe(ch->from_child) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(ch->to_child[1]);
    close(ch->from_child[0]);
    std::string error = body(ch->to_child[0], ch->from_child[1]);
    if (!error.empty()) std::fprintf(stderr, "child %d: %s\n", getpid(), error.c_str());
    std::fflush(stderr);
    _exit(error.empty() ? 0 : 1);
  }
  close(ch->to_child[0]);
  close(ch->from_child[1]);
  return pid;
}

// The child's exit code (or -1 after killing it at the timeout).
int Wait(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTimeoutMs);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Forwards bytes between the two children (exporter -> importer and back) so that they
// need not know each other's pipes: the test process is the post office.
bool Relay(const Channel& from, const Channel& to, size_t bytes) {
  std::vector<char> buf(bytes);
  return ReadFull(from.from_child[0], buf.data(), bytes) && WriteFull(to.to_child[1], buf.data(), bytes);
}

std::string Check(const absl::Status& s, const char* what) {
  return s.ok() ? "" : absl::StrCat(what, ": ", s.ToString());
}

#define CHILD_OK(expr)                                     \
  do {                                                     \
    std::string child_error_ = Check((expr), #expr);       \
    if (!child_error_.empty()) return child_error_;        \
  } while (0)
#define CHILD_EXPECT(cond, msg)                                          \
  do {                                                                   \
    if (!(cond)) return absl::StrCat(#cond " failed: ", (msg));         \
  } while (0)

bool Signal(int fd, char c = 'x') { return WriteFull(fd, &c, 1); }
bool Await(int fd) {
  char c;
  return ReadFull(fd, &c, 1);
}

std::string ReadBackAll(const float* device, size_t n, float expected) {
  std::vector<float> host(n);
  absl::Status s = xxnpuMemcpy(host.data(), device, n * sizeof(float), MemcpyKind::kDeviceToHost);
  if (!s.ok()) return s.ToString();
  for (size_t i = 0; i < n; ++i) {
    if (host[i] != expected) return absl::StrCat("element ", i, " is ", host[i], ", expected ", expected);
  }
  return "";
}

// Adds `delta` to every element on the device: a real kernel on the opened memory.
absl::Status AddOnDevice(float* device, size_t n, float delta) {
  LaunchConfig config;
  config.name = "ipc_test_add";
  config.grid.x = 4;
  auto kernel = [device, n, delta](BlockRange r) -> absl::Status {
    float* v = DeviceView(device);
    const size_t per = (n + 3) / 4;
    for (int64_t b = r.begin; b < r.end; ++b) {
      for (size_t i = b * per; i < std::min(n, (b + 1) * per); ++i) v[i] += delta;
    }
    return absl::OkStatus();
  };
  absl::Status s = xxnpuLaunchKernel(config, kernel, nullptr);
  if (!s.ok()) return s;
  return xxnpuDeviceSynchronize();
}

constexpr size_t kN = 3000;  // not a page multiple: the mapping rounds up

TEST(IpcMemTest, ExporterAndImporterSeeEachOthersWritesAndLifetimesAreEnforced) {
  Channel a, b;
  const pid_t exporter = Fork(
      [](int in, int out) -> std::string {
        auto p = xxnpuMalloc(kN * sizeof(float));
        CHILD_OK(p.status());
        float* d = static_cast<float*>(*p);
        std::vector<float> ones(kN, 1.0f);
        CHILD_OK(xxnpuMemcpy(d, ones.data(), kN * sizeof(float), MemcpyKind::kHostToDevice));
        xxnpuIpcMemHandle_t h, h2;
        CHILD_OK(xxnpuIpcGetMemHandle(&h, d));
        CHILD_OK(xxnpuIpcGetMemHandle(&h2, d));
        CHILD_EXPECT(std::memcmp(&h, &h2, sizeof(h)) == 0, "the same allocation gave two handles");
        // Own handle: as CUDA, not openable in the process that made it.
        void* self = nullptr;
        absl::Status own = xxnpuIpcOpenMemHandle(&self, h);
        CHILD_EXPECT(own.code() == absl::StatusCode::kInvalidArgument, own.ToString());
        CHILD_EXPECT(WriteFull(out, &h, sizeof(h)), "send handle");
        if (!Await(in)) return "no word from the importer (it added 2)";
        CHILD_EXPECT(ReadBackAll(d, kN, 3.0f).empty(), ReadBackAll(d, kN, 3.0f));
        auto count = xxnpuIpcMemOpenCount(d);
        CHILD_OK(count.status());
        CHILD_EXPECT(*count == 1, absl::StrCat("open count ", *count));
        // Freeing memory another process maps would alias our next allocation: refused.
        absl::Status busy = xxnpuFree(d);
        CHILD_EXPECT(busy.code() == absl::StatusCode::kFailedPrecondition &&
                         std::string(busy.message()).find("open in 1 other process") != std::string::npos,
                     busy.ToString());
        CHILD_OK(AddOnDevice(d, kN, 10.0f));  // 13 now, for the importer to see
        CHILD_EXPECT(Signal(out), "signal");
        if (!Await(in)) return "no word from the importer (closed)";
        count = xxnpuIpcMemOpenCount(d);
        CHILD_EXPECT(count.ok() && *count == 0, "still open after close");
        CHILD_OK(xxnpuFree(d));
        CHILD_EXPECT(Signal(out), "signal freed");
        if (!Await(in)) return "no word from the importer (stale open)";
        return "";
      },
      &a);
  const pid_t importer = Fork(
      [](int in, int out) -> std::string {
        xxnpuIpcMemHandle_t h;
        if (!ReadFull(in, &h, sizeof(h))) return "no handle";
        void* p = nullptr;
        CHILD_OK(xxnpuIpcOpenMemHandle(&p, h));
        void* again = nullptr;
        CHILD_OK(xxnpuIpcOpenMemHandle(&again, h));
        CHILD_EXPECT(again == p, "a second open of one handle gave another pointer");
        CHILD_OK(xxnpuIpcCloseMemHandle(again));
        float* d = static_cast<float*>(p);
        CHILD_EXPECT(IsDevicePointer(d), "the mapping is not in this process's device range");
        const PointerAttributes attr = xxnpuPointerGetAttributes(d + 10);
        CHILD_EXPECT(attr.type == PointerAttributes::Type::kDevice && attr.base == d &&
                         attr.size == kN * sizeof(float),
                     "pointer attributes of the opened range");
        std::string err = ReadBackAll(d, kN, 1.0f);
        CHILD_EXPECT(err.empty(), err);
        CHILD_OK(AddOnDevice(d, kN, 2.0f));
        absl::Status not_ours = xxnpuFree(d);
        CHILD_EXPECT(not_ours.code() == absl::StatusCode::kInvalidArgument &&
                         std::string(not_ours.message()).find("xxnpuIpcCloseMemHandle") != std::string::npos,
                     not_ours.ToString());
        xxnpuIpcMemHandle_t re;
        absl::Status reexport = xxnpuIpcGetMemHandle(&re, d);
        CHILD_EXPECT(reexport.code() == absl::StatusCode::kInvalidArgument, reexport.ToString());
        CHILD_EXPECT(Signal(out), "signal");
        if (!Await(in)) return "no word from the exporter (added 10)";
        err = ReadBackAll(d, kN, 13.0f);
        CHILD_EXPECT(err.empty(), err);
        CHILD_OK(xxnpuIpcCloseMemHandle(d));
        absl::Status twice = xxnpuIpcCloseMemHandle(d);
        CHILD_EXPECT(twice.code() == absl::StatusCode::kInvalidArgument &&
                         std::string(twice.message()).find("closed already") != std::string::npos,
                     twice.ToString());
        CHILD_EXPECT(Signal(out), "signal closed");
        if (!Await(in)) return "no word from the exporter (freed)";
        absl::Status stale = xxnpuIpcOpenMemHandle(&p, h);
        CHILD_EXPECT(stale.code() == absl::StatusCode::kFailedPrecondition &&
                         std::string(stale.message()).find("freed") != std::string::npos,
                     stale.ToString());
        CHILD_EXPECT(Signal(out), "signal done");
        return "";
      },
      &b);
  ASSERT_GT(exporter, 0);
  ASSERT_GT(importer, 0);
  EXPECT_TRUE(Relay(a, b, sizeof(xxnpuIpcMemHandle_t)));
  for (int step = 0; step < 2; ++step) {
    EXPECT_TRUE(Relay(b, a, 1)) << step;
    EXPECT_TRUE(Relay(a, b, 1)) << step;
  }
  EXPECT_TRUE(Relay(b, a, 1));
  EXPECT_EQ(Wait(exporter), 0);
  EXPECT_EQ(Wait(importer), 0);
}

TEST(IpcMemTest, BadHandlesAndPointersAreClearErrors) {
  Channel a;
  const pid_t child = Fork(
      [](int, int) -> std::string {
        xxnpuIpcMemHandle_t h;
        std::memset(&h, 0x5a, sizeof(h));
        void* p = nullptr;
        absl::Status s = xxnpuIpcOpenMemHandle(&p, h);
        CHILD_EXPECT(s.code() == absl::StatusCode::kInvalidArgument &&
                         std::string(s.message()).find("not an xxnpu IPC memory handle") != std::string::npos,
                     s.ToString());
        float host[4];
        s = xxnpuIpcGetMemHandle(&h, host);
        CHILD_EXPECT(s.code() == absl::StatusCode::kInvalidArgument, s.ToString());
        auto d = xxnpuMalloc(8192);
        CHILD_OK(d.status());
        s = xxnpuIpcGetMemHandle(&h, static_cast<char*>(*d) + 256);
        CHILD_EXPECT(s.code() == absl::StatusCode::kInvalidArgument &&
                         std::string(s.message()).find("points inside the allocation") != std::string::npos,
                     s.ToString());
        CHILD_OK(xxnpuFree(*d));
        s = xxnpuIpcGetMemHandle(&h, *d);
        CHILD_EXPECT(s.code() == absl::StatusCode::kInvalidArgument &&
                         std::string(s.message()).find("freed") != std::string::npos,
                     s.ToString());
        s = xxnpuIpcCloseMemHandle(host);
        CHILD_EXPECT(s.code() == absl::StatusCode::kInvalidArgument, s.ToString());
        xxnpuIpcRefHandle_t r;
        std::memset(&r, 0, sizeof(r));
        s = xxnpuIpcRefAcquire(r);
        CHILD_EXPECT(s.code() == absl::StatusCode::kInvalidArgument, s.ToString());
        return "";
      },
      &a);
  ASSERT_GT(child, 0);
  EXPECT_EQ(Wait(child), 0);
}

TEST(IpcMemTest, HandleOfAnExitedProcessIsAClearError) {
  Channel a, b;
  const pid_t exporter = Fork(
      [](int, int out) -> std::string {
        auto d = xxnpuMalloc(4096);
        CHILD_OK(d.status());
        xxnpuIpcMemHandle_t h;
        CHILD_OK(xxnpuIpcGetMemHandle(&h, *d));
        CHILD_EXPECT(WriteFull(out, &h, sizeof(h)), "send");
        return "";  // exits with the allocation exported and unopened
      },
      &a);
  ASSERT_GT(exporter, 0);
  std::vector<char> handle(sizeof(xxnpuIpcMemHandle_t));
  ASSERT_TRUE(ReadFull(a.from_child[0], handle.data(), handle.size()));
  ASSERT_EQ(Wait(exporter), 0);
  const pid_t importer = Fork(
      [](int in, int) -> std::string {
        xxnpuIpcMemHandle_t h;
        if (!ReadFull(in, &h, sizeof(h))) return "no handle";
        void* p = nullptr;
        absl::Status s = xxnpuIpcOpenMemHandle(&p, h);
        CHILD_EXPECT(s.code() == absl::StatusCode::kFailedPrecondition &&
                         std::string(s.message()).find("has exited") != std::string::npos,
                     s.ToString());
        return "";
      },
      &b);
  ASSERT_TRUE(WriteFull(b.to_child[1], handle.data(), handle.size()));
  EXPECT_EQ(Wait(importer), 0);
}

TEST(IpcMemTest, OpenedMemoryOutlivesItsExporter) {
  Channel a, b;
  const pid_t exporter = Fork(
      [](int in, int out) -> std::string {
        auto d = xxnpuMalloc(kN * sizeof(float));
        CHILD_OK(d.status());
        std::vector<float> v(kN, 5.0f);
        CHILD_OK(xxnpuMemcpy(*d, v.data(), kN * sizeof(float), MemcpyKind::kHostToDevice));
        xxnpuIpcMemHandle_t h;
        CHILD_OK(xxnpuIpcGetMemHandle(&h, *d));
        CHILD_EXPECT(WriteFull(out, &h, sizeof(h)), "send");
        if (!Await(in)) return "importer did not open";
        return "";
      },
      &a);
  const pid_t importer = Fork(
      [](int in, int out) -> std::string {
        xxnpuIpcMemHandle_t h;
        if (!ReadFull(in, &h, sizeof(h))) return "no handle";
        void* p = nullptr;
        CHILD_OK(xxnpuIpcOpenMemHandle(&p, h));
        CHILD_EXPECT(Signal(out), "signal");
        if (!Await(in)) return "exporter did not exit";
        std::string err = ReadBackAll(static_cast<float*>(p), kN, 5.0f);
        CHILD_EXPECT(err.empty(), err);
        CHILD_OK(xxnpuIpcCloseMemHandle(p));
        return "";
      },
      &b);
  EXPECT_TRUE(Relay(a, b, sizeof(xxnpuIpcMemHandle_t)));
  EXPECT_TRUE(Relay(b, a, 1));
  EXPECT_EQ(Wait(exporter), 0);
  EXPECT_TRUE(Signal(b.to_child[1]));
  EXPECT_EQ(Wait(importer), 0);
}

TEST(IpcRefTest, PendingAndHoldersAndADeadHolderIsNotInUse) {
  Channel a, b, c;
  const pid_t sender = Fork(
      [](int in, int out) -> std::string {
        xxnpuIpcRefHandle_t r;
        CHILD_OK(xxnpuIpcRefCreate(&r));
        auto in_use = xxnpuIpcRefInUse(r);
        CHILD_EXPECT(in_use.ok() && !*in_use, "a fresh counter is in use");
        CHILD_OK(xxnpuIpcRefAddPending(r));  // to the receiver that releases
        CHILD_OK(xxnpuIpcRefAddPending(r));  // to the receiver that dies
        CHILD_EXPECT(WriteFull(out, &r, sizeof(r)), "send");
        CHILD_EXPECT(WriteFull(out, &r, sizeof(r)), "send");
        in_use = xxnpuIpcRefInUse(r);
        CHILD_EXPECT(in_use.ok() && *in_use, "pending references do not count");
        if (!Await(in)) return "no word (both received, one released, one died)";
        in_use = xxnpuIpcRefInUse(r);
        CHILD_EXPECT(in_use.ok() && !*in_use, "in use after release and holder death");
        CHILD_OK(xxnpuIpcRefDestroy(r));
        absl::Status s = xxnpuIpcRefAddPending(r);
        CHILD_EXPECT(s.code() == absl::StatusCode::kFailedPrecondition, s.ToString());
        return "";
      },
      &a);
  const pid_t keeper = Fork(
      [](int in, int out) -> std::string {
        xxnpuIpcRefHandle_t r;
        if (!ReadFull(in, &r, sizeof(r))) return "no counter";
        CHILD_OK(xxnpuIpcRefAcquire(r));
        CHILD_EXPECT(Signal(out), "acquired");
        if (!Await(in)) return "no go";
        CHILD_OK(xxnpuIpcRefRelease(r));
        absl::Status s = xxnpuIpcRefRelease(r);
        CHILD_EXPECT(s.code() == absl::StatusCode::kInvalidArgument, s.ToString());
        return "";
      },
      &b);
  const pid_t dier = Fork(
      [](int in, int out) -> std::string {
        xxnpuIpcRefHandle_t r;
        if (!ReadFull(in, &r, sizeof(r))) return "no counter";
        CHILD_OK(xxnpuIpcRefAcquire(r));
        return "";  // exits holding it
      },
      &c);
  EXPECT_TRUE(Relay(a, b, sizeof(xxnpuIpcRefHandle_t)));
  EXPECT_TRUE(Relay(a, c, sizeof(xxnpuIpcRefHandle_t)));
  EXPECT_TRUE(Await(b.from_child[0]));
  EXPECT_EQ(Wait(dier), 0);  // reaped: no zombie left
  EXPECT_TRUE(Signal(b.to_child[1]));
  EXPECT_EQ(Wait(keeper), 0);
  EXPECT_TRUE(Signal(a.to_child[1]));
  EXPECT_EQ(Wait(sender), 0);
}

// As an unprivileged user: processes of one user share; another user is refused.
TEST(IpcMemTest, UnprivilegedSameUserWorksOtherUserIsRefused) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to become the two users";
  {
    // A sandbox's user namespace may map only root: then there are no other users to be.
    Channel probe;
    const pid_t pid = Fork([](int, int) -> std::string { return setresuid(65534, 65534, 65534) == 0 ? "" : "no"; },
                           &probe);
    if (Wait(pid) != 0) GTEST_SKIP() << "cannot switch to uid 65534 here (user namespace?)";
  }
  for (const uid_t importer_uid : {uid_t{65534}, uid_t{65533}}) {
    Channel a, b;
    auto as_user = [](uid_t uid) -> std::string {
      if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) return "setresuid failed";
      // What an ordinary user process is; changing uid cleared it.
      prctl(PR_SET_DUMPABLE, 1);
      return "";
    };
    const pid_t exporter = Fork(
        [&](int in, int out) -> std::string {
          if (std::string e = as_user(65534); !e.empty()) return e;
          auto d = xxnpuMalloc(4096);
          CHILD_OK(d.status());
          CHILD_OK(xxnpuMemset(*d, 0x11, 4096));
          xxnpuIpcMemHandle_t h;
          CHILD_OK(xxnpuIpcGetMemHandle(&h, *d));
          CHILD_EXPECT(WriteFull(out, &h, sizeof(h)), "send");
          if (!Await(in)) return "no word";
          return "";
        },
        &a);
    const pid_t importer = Fork(
        [&](int in, int out) -> std::string {
          if (std::string e = as_user(importer_uid); !e.empty()) return e;
          xxnpuIpcMemHandle_t h;
          if (!ReadFull(in, &h, sizeof(h))) return "no handle";
          void* p = nullptr;
          absl::Status s = xxnpuIpcOpenMemHandle(&p, h);
          if (importer_uid == 65534) {
            CHILD_OK(s);
            unsigned char byte = 0;
            CHILD_OK(xxnpuMemcpy(&byte, static_cast<char*>(p) + 100, 1, MemcpyKind::kDeviceToHost));
            CHILD_EXPECT(byte == 0x11, absl::StrCat("read ", int{byte}));
            CHILD_OK(xxnpuIpcCloseMemHandle(p));
          } else {
            CHILD_EXPECT(s.code() == absl::StatusCode::kPermissionDenied &&
                             std::string(s.message()).find("ptrace read access") != std::string::npos,
                         s.ToString());
          }
          CHILD_EXPECT(Signal(out), "signal");
          return "";
        },
        &b);
    EXPECT_TRUE(Relay(a, b, sizeof(xxnpuIpcMemHandle_t))) << importer_uid;
    EXPECT_TRUE(Relay(b, a, 1)) << importer_uid;
    EXPECT_EQ(Wait(exporter), 0) << importer_uid;
    EXPECT_EQ(Wait(importer), 0) << importer_uid;
  }
}

}  // namespace
}  // namespace xxnpu

int main(int argc, char** argv) {
  // Read by each child's runtime at its first use; this process never starts one.
  xxnpu::test_util::UseTwoTestDevices("64M");
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
