// A program of its own that embeds torch-xxnpu's torch-free device runtime: it depends
// on @torch_xxnpu//device:runtime and nothing of torch.
#include <cstdio>
#include <vector>

#include "device/runtime.h"

int main() {
  std::vector<int> host(1024), back(1024);
  for (int i = 0; i < 1024; ++i) host[i] = i;
  auto d = xxnpu::xxnpuMalloc(host.size() * sizeof(int));
  if (!d.ok()) {
    std::printf("embed: %s\n", d.status().ToString().c_str());
    return 1;
  }
  int* p = static_cast<int*>(*d);
  absl::Status s = xxnpu::xxnpuMemcpy(p, host.data(), 4096, xxnpu::MemcpyKind::kHostToDevice);
  xxnpu::LaunchConfig cfg;
  cfg.name = "embed_square";
  if (s.ok()) {
    s = xxnpu::xxnpuLaunchKernel(cfg, [p](xxnpu::BlockRange) {
      int* v = xxnpu::DeviceView(p);
      for (int i = 0; i < 1024; ++i) v[i] *= v[i];
      return absl::OkStatus();
    }, nullptr);
  }
  if (s.ok()) s = xxnpu::xxnpuMemcpy(back.data(), p, 4096, xxnpu::MemcpyKind::kDeviceToHost);
  if (s.ok()) s = xxnpu::xxnpuFree(p);
  bool ok = s.ok();
  for (int i = 0; ok && i < 1024; ++i) ok = back[i] == i * i;
  std::printf("embed: device runtime %s%s\n", ok ? "ok" : "WRONG ", s.ok() ? "" : s.ToString().c_str());
  return ok ? 0 : 1;
}
