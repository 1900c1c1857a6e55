// How the simulator runs code it did not write (kernel bodies, inline kernels, host
// functions) without letting that code take the process down:
//   - a C++ exception escaping it becomes an error status (a kernel's sticky error), not
//     std::terminate;
//   - with XXNPU_MEMCHECK=1, a device-memory access that hits a guard zone (memcheck.h)
//     unwinds to the runner by siglongjmp and becomes an error naming the address.
// The runtime wraps every call of such code in RunGuarded; nothing else needs to.
#ifndef TORCH_XXNPU_DEVICE_SIMULATOR_KERNEL_GUARD_H_
#define TORCH_XXNPU_DEVICE_SIMULATOR_KERNEL_GUARD_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace xxnpu {

// Runs `fn` and returns its status; an exception it throws becomes an InternalError
// saying "threw <type>: <what()>". Under memcheck, a guard-zone fault inside `fn` on this
// thread becomes the error memcheck describes (the rest of `fn` does not run).
absl::Status RunGuarded(absl::FunctionRef<absl::Status()> fn);

// The message for the exception being handled (call inside a catch block only).
std::string DescribeCurrentException();

// Describes a recovered fault at `addr` (`write`: the access was a store; false when
// unknown). Called on the faulting thread after the unwind, outside the signal handler,
// so it may lock and allocate.
using FaultDescriber = std::string (*)(const void* addr, bool write);

// XXNPU_MEMCHECK: installs a SIGSEGV handler (once per process) that recovers a fault
// whose address lies in [begin, end) when it happens inside RunGuarded on this process's
// thread; every other SIGSEGV goes to the handler that was installed before, unchanged.
absl::Status EnableFaultRecovery(const char* begin, const char* end, FaultDescriber describe);

// XXNPU_MEMCHECK: run on the device thread after each kernel that succeeded; a non-empty
// result fails the kernel with that message (the canary check, device_memory.h).
using KernelEndCheck = std::string (*)(int device);
void SetKernelEndCheck(KernelEndCheck check);
KernelEndCheck GetKernelEndCheck();  // null unless set

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_SIMULATOR_KERNEL_GUARD_H_
