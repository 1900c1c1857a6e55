#include "device/simulator/kernel_guard.h"

#include <cxxabi.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <typeinfo>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace xxnpu {
namespace {

std::string Demangle(const char* mangled) {
  int status = 0;
  char* name = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : mangled;
  std::free(name);
  return out;
}

// ---------------------------------------------------------------- fault recovery
//
// Why a registry and not thread_local: the handler may run on any thread, and in a
// dlopen'ed library (the Python extension) the first access to a thread_local on a
// thread may allocate inside __tls_get_addr, which a signal handler must not do. The
// registry is a fixed array the handler scans with atomic loads and gettid() only: all
// async-signal-safe.
struct RecoverySlot {
  std::atomic<pid_t> tid{0};  // owner thread, 0: free
  std::atomic<bool> armed{false};
  sigjmp_buf env;
  // Written by the handler before siglongjmp, read by the same thread after it.
  const void* volatile fault_addr = nullptr;
  volatile bool fault_write = false;
};
constexpr int kSlots = 1024;
RecoverySlot g_slots[kSlots];

std::atomic<bool> g_recovery_on{false};
std::atomic<KernelEndCheck> g_kernel_end_check{nullptr};
const char* g_begin = nullptr;
const char* g_end = nullptr;
FaultDescriber g_describe = nullptr;
struct sigaction g_previous;

pid_t Gettid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// This thread's slot, claimed at its first guarded run and given back when it exits.
struct SlotOwner {
  RecoverySlot* slot = nullptr;
  ~SlotOwner() {
    if (slot != nullptr) slot->tid.store(0, std::memory_order_release);
  }
};
thread_local SlotOwner t_slot;

RecoverySlot* ThisThreadSlot() {
  if (t_slot.slot != nullptr) return t_slot.slot;
  const pid_t me = Gettid();
  for (RecoverySlot& s : g_slots) {
    pid_t expected = 0;
    if (s.tid.compare_exchange_strong(expected, me)) {
      s.armed.store(false);
      t_slot.slot = &s;
      return &s;
    }
  }
  return nullptr;  // more than kSlots device threads: this one runs unguarded
}

void ChainToPrevious(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // The default action: restore it and return; the faulting instruction runs again and
  // the kernel delivers the signal with its default disposition (a core dump), exactly
  // as if no handler had been installed.
  signal(sig, SIG_DFL);
  if (info->si_code <= 0) raise(sig);  // sent, not a fault: nothing would re-run
}

void OnSegv(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const char* addr = static_cast<const char*>(info->si_addr);
  // Only a fault the hardware raised (si_code > 0) has a meaningful address.
  if (info->si_code > 0 && addr >= g_begin && addr < g_end) {
    const pid_t me = Gettid();
    for (RecoverySlot& s : g_slots) {
      if (s.tid.load(std::memory_order_acquire) != me) continue;
      if (!s.armed.load(std::memory_order_acquire)) break;
      s.armed.store(false, std::memory_order_relaxed);
      s.fault_addr = addr;
      bool write = false;
#if defined(__x86_64__)
      // Bit 1 of the page-fault error code: the access was a write.
      write = (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
      s.fault_write = write;
      siglongjmp(s.env, 1);
    }
  }
  errno = saved_errno;
  ChainToPrevious(sig, info, context);
}

// The part of RunGuarded that siglongjmp returns into: no objects with destructors live
// across the call, and after the jump only globals and this thread's slot are read.
absl::Status RunWithRecovery(RecoverySlot* slot, absl::FunctionRef<absl::Status()> fn) {
  if (sigsetjmp(slot->env, /*savemask=*/1) != 0) {
    // Back from the handler, which disarmed the slot; the signal mask was restored with
    // the jump. What the interrupted code had allocated or locked stays so (docs).
    RecoverySlot* self = t_slot.slot;
    return absl::InternalError(g_describe != nullptr
                                   ? g_describe(self->fault_addr, self->fault_write)
                                   : absl::StrCat("memcheck: invalid access at 0x",
                                                  absl::Hex(reinterpret_cast<uintptr_t>(self->fault_addr))));
  }
  slot->armed.store(true, std::memory_order_release);
  absl::Status s = fn();
  slot->armed.store(false, std::memory_order_release);
  return s;
}

absl::Status CallCatching(absl::FunctionRef<absl::Status()> fn, RecoverySlot* slot) {
  // Exceptions are caught here, outside the frame siglongjmp returns to.
  try {
    return slot != nullptr ? RunWithRecovery(slot, fn) : fn();
  } catch (...) {
    if (slot != nullptr) slot->armed.store(false, std::memory_order_release);
    return absl::InternalError(DescribeCurrentException());
  }
}

}  // namespace

std::string DescribeCurrentException() {
  try {
    throw;
  } catch (const std::exception& e) {
    absl::string_view what = e.what();
    // torch's c10::Error appends where it was raised and a C++ backtrace: the sticky error
    // names the kernel already, and a backtrace of the device thread says nothing more.
    if (size_t origin = what.find("\nException raised from "); origin != absl::string_view::npos) {
      what = what.substr(0, origin);
    }
    return absl::StrCat("threw ", Demangle(typeid(e).name()), ": ", what);
  } catch (...) {
    const std::type_info* type = abi::__cxa_current_exception_type();
    return absl::StrCat("threw ", type != nullptr ? Demangle(type->name()) : std::string("an unknown type"),
                        " (not a std::exception)");
  }
}

absl::Status RunGuarded(absl::FunctionRef<absl::Status()> fn) {
  RecoverySlot* slot = g_recovery_on.load(std::memory_order_acquire) ? ThisThreadSlot() : nullptr;
  return CallCatching(fn, slot);
}

absl::Status EnableFaultRecovery(const char* begin, const char* end, FaultDescriber describe) {
  if (g_recovery_on.load()) return absl::OkStatus();
  g_begin = begin;
  g_end = end;
  g_describe = describe;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = OnSegv;
  sigemptyset(&action.sa_mask);
  // SA_ONSTACK: a stack overflow elsewhere still reaches the previous handler (Python's
  // faulthandler runs on an alternate stack) instead of faulting again on the full stack.
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  if (sigaction(SIGSEGV, &action, &g_previous) != 0) {
    return absl::InternalError(absl::StrCat("XXNPU_MEMCHECK: installing the SIGSEGV handler failed: ",
                                            std::strerror(errno)));
  }
  g_recovery_on.store(true, std::memory_order_release);
  return absl::OkStatus();
}

void SetKernelEndCheck(KernelEndCheck check) { g_kernel_end_check.store(check, std::memory_order_release); }

KernelEndCheck GetKernelEndCheck() { return g_kernel_end_check.load(std::memory_order_acquire); }

}  // namespace xxnpu
