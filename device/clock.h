// The device runtime's clock: nanoseconds since the Unix epoch from CLOCK_REALTIME,
// the clock torch.profiler stamps CPU events with (c10::getTime()), so device activity
// timestamps line up with host ops in one trace without conversion.
#ifndef TORCH_XXNPU_DEVICE_CLOCK_H_
#define TORCH_XXNPU_DEVICE_CLOCK_H_

#include <cstdint>

namespace xxnpu {

// Unix-epoch nanoseconds (CLOCK_REALTIME). Cheap: served from the vDSO, no syscall.
int64_t NowNs();

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_CLOCK_H_
