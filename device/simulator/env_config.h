// The runtime's configuration, read from environment variables once per process.
#ifndef TORCH_XXNPU_DEVICE_SIMULATOR_ENV_CONFIG_H_
#define TORCH_XXNPU_DEVICE_SIMULATOR_ENV_CONFIG_H_

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace xxnpu {

struct RuntimeConfig {
  int device_count = 2;
  // Capacity per device. Unless XXNPU_DEVICE_MEMORY sets it (`device_memory_explicit`),
  // the runtime lowers it to what the host can hold (host_memory.h).
  size_t device_memory = size_t{8} << 30;
  bool device_memory_explicit = false;
  int compute_threads = 1;  // per device; the stream thread running a kernel is one of them
  bool launch_blocking = false;
  bool strict_memory = false;
  // XXNPU_MEMCHECK: guard pages around every allocation; out-of-bounds device accesses
  // become the kernel's error (device_memory.h, kernel_guard.h).
  bool memcheck = false;
  // How long an idle stream thread spins before sleeping. Waking a sleeping thread costs
  // ~30 us on these VMs (docs/device-runtime.md); a short spin keeps back-to-back
  // launches starting within ~1 us, at the price of at most this much CPU per idle spell.
  // A host thread waiting for a stream spins as long before it sleeps: woken by the
  // device thread, it would tend to land on that thread's core.
  int spin_us = 50;
  // While a stream is busy, its thread looks for new commands at most this often (0:
  // whenever it is free). Taking launches a few at a time instead of one by one saves
  // the host a cross-core cache miss per launch (docs/device-runtime.md), at the price
  // of a kernel starting up to this much later behind a stream of tiny kernels.
  int fetch_interval_ns = 2000;
};

// Parses the XXNPU_* variables through `getenv` (injectable for tests). A malformed value
// is an InvalidArgument error naming the variable, the value and what is accepted.
absl::StatusOr<RuntimeConfig> ParseRuntimeConfig(
    const std::function<const char*(const char*)>& getenv);

// "8G", "512M", "4096", "64K" -> bytes.
absl::StatusOr<size_t> ParseByteSize(const std::string& text);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_SIMULATOR_ENV_CONFIG_H_
