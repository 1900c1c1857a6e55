#include "device/simulator/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace xxnpu {
namespace {

// cgroup v1 spells "no limit" as a huge page-aligned number.
constexpr uint64_t kNoLimit = uint64_t{1} << 60;

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::optional<uint64_t> ReadNumber(const std::string& path) {
  auto text = ReadFile(path);
  if (!text) return std::nullopt;
  uint64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v)) return std::nullopt;  // "max": none
  return v;
}

// The value of `key` in a "key value [kB]" file (/proc/meminfo, memory.stat).
std::optional<uint64_t> Field(const std::string& text, absl::string_view key, uint64_t unit) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::ByAnyChar(" :\t"), absl::SkipEmpty());
    if (parts.size() >= 2 && parts[0] == key) {
      uint64_t v = 0;
      if (absl::SimpleAtoi(parts[1], &v)) return v * unit;
    }
  }
  return std::nullopt;
}

struct CgroupFiles {
  const char* limit;
  const char* usage;
  const char* page_cache;  // in memory.stat
  const char* shmem;
};
constexpr CgroupFiles kV2{"memory.max", "memory.current", "file", "shmem"};
constexpr CgroupFiles kV1{"memory.limit_in_bytes", "memory.usage_in_bytes", "total_cache", "total_shmem"};

// The tightest limit among `dir` and its ancestors up to `mount`, and the headroom of the
// cgroup that sets it.
void ScanCgroup(const std::string& mount, std::string path, const CgroupFiles& files, HostMemory* out) {
  for (;;) {
    const std::string dir = mount + path;
    auto limit = ReadNumber(dir + "/" + files.limit);
    if (limit && *limit < kNoLimit && (!out->cgroup_limit || *limit < *out->cgroup_limit)) {
      out->cgroup_limit = *limit;
      const uint64_t usage = ReadNumber(dir + "/" + files.usage).value_or(*limit);
      uint64_t reclaimable = 0;
      if (auto stat = ReadFile(dir + "/memory.stat")) {
        const uint64_t cache = Field(*stat, files.page_cache, 1).value_or(0);
        const uint64_t shmem = Field(*stat, files.shmem, 1).value_or(0);
        reclaimable = cache > shmem ? cache - shmem : 0;
      }
      const uint64_t headroom = *limit - std::min(*limit, usage) + reclaimable;
      out->available = std::min(out->available.value_or(headroom), std::min(headroom, *limit));
    }
    if (path.empty() || path == "/") return;
    const size_t slash = path.rfind('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
}

}  // namespace

HostMemory ReadHostMemory(const std::string& root) {
  HostMemory host;
  if (auto meminfo = ReadFile(root + "/proc/meminfo")) {
    host.physical = Field(*meminfo, "MemTotal", 1024).value_or(0);
    host.available = Field(*meminfo, "MemAvailable", 1024);
  }
  auto cgroups = ReadFile(root + "/proc/self/cgroup");
  if (!cgroups) return host;
  // "0::/path" (v2) or "N:memory[,...]:/path" (v1).
  for (absl::string_view line : absl::StrSplit(*cgroups, '\n', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    if (parts[0] == "0" && parts[1].empty()) {
      ScanCgroup(root + "/sys/fs/cgroup", parts[2], kV2, &host);
      ScanCgroup(root + "/sys/fs/cgroup/unified", parts[2], kV2, &host);
    } else {
      for (absl::string_view controller : absl::StrSplit(parts[1], ',')) {
        if (controller == "memory") ScanCgroup(root + "/sys/fs/cgroup/memory", parts[2], kV1, &host);
      }
    }
  }
  return host;
}

std::optional<uint64_t> AddressSpaceLeft(const std::string& root) {
  rlimit lim;
  if (getrlimit(RLIMIT_AS, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return std::nullopt;
  uint64_t used = 0;
  if (auto status = ReadFile(root + "/proc/self/status")) used = Field(*status, "VmSize", 1024).value_or(0);
  return lim.rlim_cur > used ? lim.rlim_cur - used : 0;
}

size_t DefaultDeviceCapacity(size_t nominal, int devices, const HostMemory& host,
                             std::optional<uint64_t> address_space_left) {
  uint64_t cap = nominal;
  if (host.physical > 0) cap = std::min(cap, host.physical);
  if (host.cgroup_limit) cap = std::min(cap, *host.cgroup_limit);
  if (address_space_left) cap = std::min(cap, *address_space_left / 4 / static_cast<uint64_t>(std::max(1, devices)));
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  return static_cast<size_t>(std::max(kMiB, cap / kMiB * kMiB));
}

}  // namespace xxnpu
