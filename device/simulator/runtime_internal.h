// What the runtime's own extensions (device/ipc.cc) need from inside runtime.cc: the
// memory space and the device-idle wait. Not an API: only the simulator (device/simulator/) sees it.
#ifndef TORCH_XXNPU_DEVICE_SIMULATOR_RUNTIME_INTERNAL_H_
#define TORCH_XXNPU_DEVICE_SIMULATOR_RUNTIME_INTERNAL_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "device/simulator/device_memory.h"

namespace xxnpu::internal {

// The runtime's memory space, or its start-up (or forked-child) error.
absl::StatusOr<DeviceMemory*> RuntimeMemory();
// Waits until every command queued so far on `device`'s streams has run.
void WaitDeviceIdle(int device);

// Consulted by xxnpuFree before `base` (the start of a live allocation) is released; an
// error is returned by xxnpuFree and keeps the allocation. One hook per process.
using FreeHook = absl::Status (*)(void* base);
void SetFreeHook(FreeHook hook);

}  // namespace xxnpu::internal

#endif  // TORCH_XXNPU_DEVICE_SIMULATOR_RUNTIME_INTERNAL_H_
