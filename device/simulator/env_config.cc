#include "device/simulator/env_config.h"

#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "device/env_flag.h"

namespace xxnpu {
namespace {

absl::StatusOr<int> ParseIntVar(const char* name, const char* value, int lo, int hi) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat(name, "=\"", value, "\": expected an integer in [",
                                                   lo, ", ", hi, "]"));
  }
  return v;
}

}  // namespace

absl::StatusOr<size_t> ParseByteSize(const std::string& text) {
  std::string t = absl::AsciiStrToUpper(std::string(absl::StripAsciiWhitespace(text)));
  if (!t.empty() && t.back() == 'B') t.pop_back();  // accept "8GB"
  size_t shift = 0;
  if (!t.empty()) {
    switch (t.back()) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: break;
    }
    if (shift) t.pop_back();
  }
  uint64_t n = 0;
  if (t.empty() || !absl::SimpleAtoi(t, &n) || n == 0 || (shift && n > (uint64_t{1} << (63 - shift)))) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": expected a positive byte count such as 4096, 512M or 8G"));
  }
  return static_cast<size_t>(n << shift);
}

absl::StatusOr<RuntimeConfig> ParseRuntimeConfig(
    const std::function<const char*(const char*)>& getenv) {
  RuntimeConfig c;
  // Every host core may run kernels by default; the host thread that launches them mostly
  // waits, so this does not oversubscribe (docs/device-runtime.md has the measurements).
  c.compute_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* v = getenv("XXNPU_DEVICE_COUNT")) {
    auto n = ParseIntVar("XXNPU_DEVICE_COUNT", v, 1, 16);
    if (!n.ok()) return n.status();
    c.device_count = *n;
  }
  if (const char* v = getenv("XXNPU_DEVICE_MEMORY")) {
    auto n = ParseByteSize(v);
    if (!n.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("XXNPU_DEVICE_MEMORY=", n.status().message()));
    }
    if (*n < (size_t{1} << 20) || *n > (size_t{1} << 40)) {
      return absl::InvalidArgumentError(
          absl::StrCat("XXNPU_DEVICE_MEMORY=\"", v, "\": expected between 1M and 1T"));
    }
    c.device_memory = *n;
    c.device_memory_explicit = true;
  }
  if (const char* v = getenv("XXNPU_COMPUTE_THREADS")) {
    auto n = ParseIntVar("XXNPU_COMPUTE_THREADS", v, 1, 256);
    if (!n.ok()) return n.status();
    c.compute_threads = *n;
  }
  if (const char* v = getenv("XXNPU_SPIN_US")) {
    auto n = ParseIntVar("XXNPU_SPIN_US", v, 0, 1000000);
    if (!n.ok()) return n.status();
    c.spin_us = *n;
  }
  if (const char* v = getenv("XXNPU_FETCH_INTERVAL_NS")) {
    auto n = ParseIntVar("XXNPU_FETCH_INTERVAL_NS", v, 0, 1000000);
    if (!n.ok()) return n.status();
    c.fetch_interval_ns = *n;
  }
  if (const char* v = getenv("XXNPU_LAUNCH_BLOCKING")) {
    auto b = ParseEnvFlag("XXNPU_LAUNCH_BLOCKING", v, c.launch_blocking);
    if (!b.ok()) return b.status();
    c.launch_blocking = *b;
  }
  if (const char* v = getenv("XXNPU_STRICT_MEMORY")) {
    auto b = ParseEnvFlag("XXNPU_STRICT_MEMORY", v, c.strict_memory);
    if (!b.ok()) return b.status();
    c.strict_memory = *b;
  }
  if (const char* v = getenv("XXNPU_MEMCHECK")) {
    auto b = ParseEnvFlag("XXNPU_MEMCHECK", v, c.memcheck);
    if (!b.ok()) return b.status();
    c.memcheck = *b;
  }
  return c;
}

}  // namespace xxnpu
