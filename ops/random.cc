// Random number ops on xxnpu: uniform_, normal_ (so torch.rand/randn work on the device).
//
// Every element draws from Philox4x32-10 at a counter given by (generator offset, element
// index) only, so a seeded result is the same whatever the number of device threads or
// the split of the grid; the generator's offset advances by what the op consumed, as
// CUDA's does.
#include <ATen/ATen.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/core/DistributionsHelper.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <mutex>

#include "device/c10/torch_status.h"
#include "device/generator/philox.h"
#include "device/generator/xxnpu_generator.h"
#include "ops/device_loop.h"

namespace xxnpu {
namespace {

constexpr int64_t kElementsPerBlock = 16384;

PhiloxSeeds Reserve(std::optional<at::Generator> gen, c10::DeviceIndex device, uint64_t words) {
  auto* g = at::get_generator_or_default<XxnpuGeneratorImpl>(gen, GetDefaultXxnpuGenerator(device));
  std::lock_guard<std::mutex> lock(g->mutex_);
  return g->philox_reserve(words);
}

// Fills the contiguous `out` with f(seed, offset, element index) on the device.
template <typename scalar_t, typename F>
void LaunchGenerate(const char* name, const at::Tensor& out, uint64_t flops_per_element, F f) {
  const int64_t n = out.numel();
  scalar_t* data = out.data_ptr<scalar_t>();
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid = Dim3{static_cast<uint32_t>((n + kElementsPerBlock - 1) / kElementsPerBlock), 1, 1};
  cfg.bytes = static_cast<uint64_t>(n) * sizeof(scalar_t);
  cfg.flops = flops_per_element * static_cast<uint64_t>(n);
  CheckOk(xxnpuLaunchKernel(cfg, [data, n, f](BlockRange r) {
    scalar_t* view = DeviceView(data);
    const int64_t end = std::min(n, r.end * kElementsPerBlock);
    for (int64_t i = r.begin * kElementsPerBlock; i < end; ++i) view[i] = static_cast<scalar_t>(f(i));
    return absl::OkStatus();
  }, CurrentStreamHandle(out.device().index())), name);
}

// Runs `fill` on a contiguous tensor; a non-contiguous self gets a contiguous scratch
// filled then copied in (the element index is the logical index either way).
template <typename Fill>
at::Tensor& ViaContiguous(at::Tensor& self, Fill fill) {
  if (self.numel() == 0) return self;
  const c10::DeviceGuard guard(self.device());
  if (self.is_contiguous()) {
    fill(self);
  } else {
    at::Tensor tmp = at::empty(self.sizes(), self.options());
    fill(tmp);
    self.copy_(tmp);
  }
  return self;
}

// Words of randomness per element: 2 for double (53-bit mantissa), else 1.
double UniformAt(uint64_t seed, uint64_t offset, int64_t i, bool wide) {
  if (!wide) return uniform_float(philox_uint32_at(seed, offset, static_cast<uint64_t>(i)));
  const uint64_t hi = philox_uint32_at(seed, offset, 2 * static_cast<uint64_t>(i));
  const uint64_t lo = philox_uint32_at(seed, offset, 2 * static_cast<uint64_t>(i) + 1);
  return static_cast<double>(((hi << 32) | lo) >> 11) * 0x1.0p-53;
}

at::Tensor& Uniform(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "uniform_ is implemented for floating point types only, got ",
              self.scalar_type());
  return ViaContiguous(self, [&](at::Tensor& out) {
    const bool wide = out.scalar_type() == at::kDouble;
    const PhiloxSeeds s = Reserve(gen, out.device().index(), static_cast<uint64_t>(out.numel()) * (wide ? 2 : 1));
    AT_DISPATCH_V2(out.scalar_type(), "xxnpu_uniform_", AT_WRAP([&] {
      LaunchGenerate<scalar_t>("xxnpu::uniform", out, 2, [s, from, to, wide](int64_t i) {
        const double u = UniformAt(s.seed, s.offset, i, wide);
        double v = from + (to - from) * u;
        // Rounding to a narrow dtype can land on `to`; keep the half-open interval.
        if (static_cast<scalar_t>(v) >= static_cast<scalar_t>(to) && to > from) v = from;
        return v;
      });
    }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  });
}

at::Tensor& Normal(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "normal_ is implemented for floating point types only, got ",
              self.scalar_type());
  return ViaContiguous(self, [&](at::Tensor& out) {
    // Box-Muller makes two normals from two words: element i uses words 2*(i/2), 2*(i/2)+1.
    const uint64_t words = (static_cast<uint64_t>(out.numel()) + 1) / 2 * 2;
    const PhiloxSeeds s = Reserve(gen, out.device().index(), words);
    AT_DISPATCH_V2(out.scalar_type(), "xxnpu_normal_", AT_WRAP([&] {
      LaunchGenerate<scalar_t>("xxnpu::normal", out, 20, [s, mean, std](int64_t i) {
        const uint64_t pair = static_cast<uint64_t>(i) / 2 * 2;
        const auto z = normal_pair(philox_uint32_at(s.seed, s.offset, pair), philox_uint32_at(s.seed, s.offset, pair + 1));
        return mean + std * static_cast<double>(z[i % 2]);
      });
    }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", &Uniform);
  m.impl("normal_", &Normal);
}

}  // namespace
}  // namespace xxnpu
