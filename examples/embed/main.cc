// Embeds torch-xxnpu's device runtime in a program of its own.
#include <cstdio>
#include <ctime>

#include "device/clock.h"

int main() {
  const long long device_ns = xxnpu::NowNs();
  const long long wall_s = static_cast<long long>(std::time(nullptr));
  const bool ok = device_ns / 1'000'000'000 - wall_s <= 1 && wall_s - device_ns / 1'000'000'000 <= 1;
  std::printf("embed: device clock %s (%lld ns)\n", ok ? "ok" : "WRONG", device_ns);
  return ok ? 0 : 1;
}
