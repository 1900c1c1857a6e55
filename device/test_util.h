// Helpers shared by the runtime's C++ tests and benchmarks (//device:test_util, testonly):
// a gate that holds a stream busy until the test opens it, a fail-fast status check for
// benchmark setup, where gtest's assertions are not available, and the two-device
// configuration the tests run on.
#ifndef XXNPU_DEVICE_TEST_UTIL_H_
#define XXNPU_DEVICE_TEST_UTIL_H_

#include <atomic>

#include "absl/status/status.h"
#include "device/runtime.h"

namespace xxnpu::test_util {

// Configures the simulated chip the runtime tests share: two devices of `memory_per_device`
// (an XXNPU_DEVICE_MEMORY value, e.g. "256M") with two compute threads each. Call it before
// the runtime's first use in this process (it reads its configuration once) or before
// starting children that inherit the environment: typically first thing in main().
void UseTwoTestDevices(const char* memory_per_device);

// A kernel launched with LaunchWait spins (politely) until `open` is set: "work still
// running on this stream" for as long as the test needs.
struct Gate {
  std::atomic<bool> open{false};
  void Wait() const;
};

// Enqueues a kernel named `name` on `stream` that waits for `gate`. The gate must outlive
// the kernel: open it, then synchronize, before it goes out of scope.
absl::Status LaunchWait(const Gate& gate, xxnpuStream_t stream, const char* name = "test_wait_gate");

// Prints `s` and aborts unless it is OK.
void Check(const absl::Status& s);

}  // namespace xxnpu::test_util

#endif  // XXNPU_DEVICE_TEST_UTIL_H_
