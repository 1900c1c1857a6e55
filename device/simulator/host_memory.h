// What the host can give the simulated devices. Their memory is host RAM (a memfd per
// device, device_memory.h), so a device larger than the host, or an allocation larger
// than what is free, does not fail like a chip's cudaMalloc: committing the pages pushes
// the host into reclaim and then the OOM killer (or, in a memory cgroup, its OOM kill),
// which ends the process instead of raising torch.OutOfMemoryError. The runtime uses
// these figures to refuse such allocations up front (docs/device-runtime.md, "Memory").
//
// Everything is read from files under a root directory ("" = the real /proc and /sys),
// so tests can hand in a fake tree.
#ifndef TORCH_XXNPU_DEVICE_SIMULATOR_HOST_MEMORY_H_
#define TORCH_XXNPU_DEVICE_SIMULATOR_HOST_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace xxnpu {

struct HostMemory {
  uint64_t physical = 0;                  // MemTotal; 0 if unknown
  std::optional<uint64_t> available;      // MemAvailable, lowered to the cgroup's headroom
  std::optional<uint64_t> cgroup_limit;   // the tightest memory limit of the process's cgroups
};

// Reads /proc/meminfo and the memory cgroup (v2 memory.max / v1 memory.limit_in_bytes,
// the process's cgroup and its ancestors; its headroom is limit - usage + the page cache
// it could reclaim, shmem excluded since device memory is shmem).
HostMemory ReadHostMemory(const std::string& root = "");

// Address space the process may still map under RLIMIT_AS, or nullopt when unlimited.
std::optional<uint64_t> AddressSpaceLeft(const std::string& root = "");

// The capacity each of `devices` devices gets when XXNPU_DEVICE_MEMORY is not set:
// `nominal` (8 GiB), but no more than the host's physical RAM, the cgroup limit, and a
// quarter of the address space left under RLIMIT_AS split over the devices (the runtime
// reserves twice the capacity of address space per device). Rounded down to MiB, at
// least 1 MiB.
size_t DefaultDeviceCapacity(size_t nominal, int devices, const HostMemory& host,
                             std::optional<uint64_t> address_space_left);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_SIMULATOR_HOST_MEMORY_H_
