#include "ops/device_loop.h"

#include <memory>
#include <vector>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"

namespace xxnpu {
namespace {

// Elements per block of the launch grid: large enough that the per-block overhead
// (a virtual call and the pointer translation) vanishes, small enough to balance.
constexpr int64_t kElementsPerBlock = 16384;

}  // namespace

xxnpuStream_t CurrentStreamHandle(c10::DeviceIndex device) { return GetCurrentXxnpuStream(device).handle(); }

void LaunchTensorIterator(const char* name, const at::TensorIteratorBase& iter, DeviceLoop2d loop,
                          KernelCost cost) {
  const int64_t numel = iter.numel();
  if (numel == 0) return;
  c10::DeviceIndex device = -1;
  uint64_t bytes = 0;
  for (int i = 0; i < iter.ntensors(); ++i) {
    if (iter.device(i).is_privateuseone() && device < 0) device = iter.device(i).index();
    bytes += static_cast<uint64_t>(iter.element_size(i)) * static_cast<uint64_t>(numel);
  }
  TORCH_INTERNAL_ASSERT(device >= 0, name, ": no xxnpu operand");
  auto shared = std::make_shared<at::TensorIterator>(iter);
  const int ntensors = iter.ntensors();

  LaunchConfig cfg;
  cfg.name = name;
  const int64_t blocks = (numel + kElementsPerBlock - 1) / kElementsPerBlock;
  cfg.grid = Dim3{static_cast<uint32_t>(blocks), 1, 1};
  cfg.block = Dim3{static_cast<uint32_t>(std::min<int64_t>(numel, kElementsPerBlock)), 1, 1};
  cfg.bytes = cost.bytes ? cost.bytes : bytes;
  cfg.flops = cost.flops_per_element * static_cast<uint64_t>(numel);
  CheckOk(xxnpuLaunchKernel(cfg, [shared, loop = std::move(loop), ntensors, numel](BlockRange r) {
    const int64_t begin = r.begin * kElementsPerBlock;
    const int64_t end = std::min(numel, r.end * kElementsPerBlock);
    shared->serial_for_each([&](char** data, const int64_t* strides, int64_t size0, int64_t size1) {
      // Device addresses -> the device's view; host operands (CPU scalars) pass through.
      char* views[16];
      for (int i = 0; i < ntensors; ++i) views[i] = static_cast<char*>(DeviceView(data[i]));
      loop(views, strides, size0, size1);
    }, {begin, end});
    return absl::OkStatus();
  }, CurrentStreamHandle(device)), name);
}

}  // namespace xxnpu
