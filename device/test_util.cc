// Shared C++ test helpers of the device runtime (see test_util.h).
#include "device/test_util.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace xxnpu::test_util {

void Gate::Wait() const {
  while (!open.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

absl::Status LaunchWait(const Gate& gate, xxnpuStream_t stream, const char* name) {
  LaunchConfig cfg;
  cfg.name = name;
  return xxnpuLaunchKernel(
      cfg,
      [&gate](BlockRange) {
        gate.Wait();
        return absl::OkStatus();
      },
      stream);
}

void Check(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::abort();
  }
}

void UseTwoTestDevices(const char* memory_per_device) {
  setenv("XXNPU_DEVICE_COUNT", "2", /*overwrite=*/1);
  setenv("XXNPU_DEVICE_MEMORY", memory_per_device, 1);
  setenv("XXNPU_COMPUTE_THREADS", "2", 1);
}

}  // namespace xxnpu::test_util
