// Random number ops on xxnpu: uniform_, normal_, bernoulli_, random_ (so torch.rand,
// randn, randint, bernoulli and dropout masks are drawn on the device).
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

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "device/c10/torch_status.h"
#include "device/c10/xxnpu_stream.h"
#include "device/generator/philox.h"
#include "device/generator/xxnpu_generator.h"
#include "device/graph.h"
#include "device/runtime.h"
#include "ops/cpu_fallback.h"

namespace xxnpu {
namespace {

constexpr int64_t kElementsPerBlock = 16384;

PhiloxSeeds Reserve(std::optional<at::Generator> gen, c10::DeviceIndex device, uint64_t words) {
  auto* g = at::get_generator_or_default<XxnpuGeneratorImpl>(gen, GetDefaultXxnpuGenerator(device));
  const StreamCaptureInfo capture =
      ValueOrThrow(xxnpuStreamGetCaptureInfo(CurrentXxnpuStreamHandle(device)), "xxnpu random op");
  std::lock_guard<std::mutex> lock(g->mutex_);
  if (capture.status != StreamCaptureStatus::kNone && g->is_capturing(capture.id)) {
    return g->philox_reserve_captured(capture.id, words);
  }
  // A generator the graph does not know would bake this capture's numbers into every
  // replay: refuse, as CUDA does. (An invalidated capture runs nothing; let the op go on
  // to the runtime, whose error names the call that spoilt the capture.)
  TORCH_CHECK(capture.status != StreamCaptureStatus::kActive,
              "xxnpu random op during graph capture ", capture.id,
              " with a generator that is not registered with the graph: the capturing "
              "device's default generator is; register others before capturing with "
              "XXNPUGraph.register_generator_state(generator)");
  return g->philox_reserve(words);
}

// Fills the contiguous `out` on the device, `per_block` elements from each Philox block:
// element i takes block (offset / 4 + i / per_block), so one 10-round block serves 2 or 4
// elements and the result depends only on (seed, offset, i).
// f(words, values) turns a block's 4 words into `per_block` values.
template <typename scalar_t, typename F>
void LaunchGenerate(const char* name, const at::Tensor& out, PhiloxSeeds seeds, int per_block,
                    uint64_t flops_per_element, F f) {
  static_assert(kElementsPerBlock % 4 == 0, "grid blocks must start on a Philox block");
  const int64_t n = out.numel();
  scalar_t* data = out.data_ptr<scalar_t>();
  LaunchConfig cfg;
  cfg.name = name;
  cfg.grid = Dim3{static_cast<uint32_t>((n + kElementsPerBlock - 1) / kElementsPerBlock), 1, 1};
  cfg.bytes = static_cast<uint64_t>(n) * sizeof(scalar_t);
  cfg.flops = flops_per_element * static_cast<uint64_t>(n);
  CheckOk(xxnpuLaunchKernel(cfg, [data, n, seeds, per_block, f](BlockRange r) {
    scalar_t* view = DeviceView(data);
    // A captured kernel reads its (seed, base offset) now, when it runs (see the top).
    uint64_t seed = seeds.seed;
    uint64_t offset = seeds.offset;
    if (seeds.device_state != nullptr) {
      const uint64_t* state = DeviceView(seeds.device_state);
      seed = state[0];
      offset += state[1];
    }
    const int64_t end = std::min(n, r.end * kElementsPerBlock);
    double values[4] = {0, 0, 0, 0};
    for (int64_t i = r.begin * kElementsPerBlock; i < end; i += per_block) {
      Philox4x32 engine(seed, 0, offset / 4 + static_cast<uint64_t>(i / per_block));
      f(engine.next(), values);
      for (int j = 0; j < per_block && i + j < end; ++j) view[i + j] = static_cast<scalar_t>(values[j]);
    }
    return absl::OkStatus();
  }, CurrentXxnpuStreamHandle(out.device().index())), name);
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

double Uniform53(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) * 0x1.0p-53;
}

at::Tensor& Uniform(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  if (self.is_complex()) {
    // As on the CPU and CUDA: real and imaginary parts each uniform in [from, to).
    at::Tensor parts = at::view_as_real(self);
    Uniform(parts, from, to, gen);
    return self;
  }
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "uniform_ is implemented for floating point types only, got ",
              self.scalar_type());
  // The CPU's bounds checks and messages (ATen's uniform_impl_): a bound the dtype cannot
  // hold, or a span wider than its largest value, would make every sample inf or 0.
  AT_DISPATCH_V2(self.scalar_type(), "xxnpu_uniform_bounds", AT_WRAP([&] {
    const auto min = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
    const auto max = static_cast<double>(std::numeric_limits<scalar_t>::max());
    TORCH_CHECK(from >= min && from <= max, "from", " is out of bounds for ", self.dtype());
    TORCH_CHECK(to >= min && to <= max, "to", " is out of bounds for ", self.dtype());
    TORCH_CHECK((to - from) <= max, "uniform_ expects to-from <= std::numeric_limits<",
                c10::toString(self.scalar_type()), ">::max(), but found to=", to, " and from=", from,
                " which result in to-from to exceed the limit");
  }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  return ViaContiguous(self, [&](at::Tensor& out) {
    // double needs 53 random bits: two words per element; otherwise one.
    const bool wide = out.scalar_type() == at::kDouble;
    const PhiloxSeeds s = Reserve(gen, out.device().index(), static_cast<uint64_t>(out.numel()) * (wide ? 2 : 1));
    AT_DISPATCH_V2(out.scalar_type(), "xxnpu_uniform_", AT_WRAP([&] {
      LaunchGenerate<scalar_t>("xxnpu::uniform", out, s, wide ? 2 : 4, 2, [from, to, wide](auto w, double* v) {
        const int count = wide ? 2 : 4;
        for (int j = 0; j < count; ++j) {
          const double u = wide ? Uniform53(w[2 * j], w[2 * j + 1]) : uniform_float(w[j]);
          double x = from + (to - from) * u;
          // Rounding to a narrow dtype can land on `to`; keep the half-open interval.
          if (static_cast<scalar_t>(x) >= static_cast<scalar_t>(to) && to > from) x = from;
          v[j] = x;
        }
      });
    }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  });
}

at::Tensor& Normal(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.is_complex()) {
    // As on the CPU and CUDA: the real and imaginary parts are independent normals with
    // half the variance each, so |z - mean|^2 has expectation std^2 (torch.randn's
    // complex convention). `mean` goes to both parts, as there.
    at::Tensor parts = at::view_as_real(self);
    Normal(parts, mean, std / std::sqrt(2.0), gen);
    return self;
  }
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "normal_ is implemented for floating point types only, got ",
              self.scalar_type());
  return ViaContiguous(self, [&](at::Tensor& out) {
    // Box-Muller: each pair of words gives two normals, so a block gives four.
    const uint64_t words = (static_cast<uint64_t>(out.numel()) + 1) / 2 * 2;
    const PhiloxSeeds s = Reserve(gen, out.device().index(), words);
    AT_DISPATCH_V2(out.scalar_type(), "xxnpu_normal_", AT_WRAP([&] {
      LaunchGenerate<scalar_t>("xxnpu::normal", out, s, 4, 20, [mean, std](auto w, double* v) {
        const auto z0 = normal_pair(w[0], w[1]);
        const auto z1 = normal_pair(w[2], w[3]);
        v[0] = mean + std * z0[0];
        v[1] = mean + std * z0[1];
        v[2] = mean + std * z1[0];
        v[3] = mean + std * z1[1];
      });
    }), AT_EXPAND(AT_FLOATING_TYPES), at::kHalf, at::kBFloat16);
  });
}

// 1 with probability p, else 0, in self's dtype (bool included).
at::Tensor& BernoulliFloat(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(p >= 0 && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  TORCH_CHECK(!at::isComplexType(self.scalar_type()), "bernoulli_ is not implemented for complex tensors");
  return ViaContiguous(self, [&](at::Tensor& out) {
    const PhiloxSeeds s = Reserve(gen, out.device().index(), static_cast<uint64_t>(out.numel()));
    AT_DISPATCH_V2(out.scalar_type(), "xxnpu_bernoulli_", AT_WRAP([&] {
      LaunchGenerate<scalar_t>("xxnpu::bernoulli", out, s, 4, 1, [p](auto w, double* v) {
        for (int j = 0; j < 4; ++j) v[j] = uniform_float(w[j]) < p ? 1.0 : 0.0;
      });
    }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  });
}

// Integers uniform in [from, to): 53 random bits per element (two words), so every range
// a double holds exactly is unbiased to within 2^-53.
at::Tensor& RandomFromTo(at::Tensor& self, int64_t from, std::optional<int64_t> to_opt,
                         std::optional<at::Generator> gen) {
  if (!to_opt.has_value()) return FallbackFor<at::_ops::random__from>::call(self, from, to_opt, gen);
  const int64_t to = *to_opt;
  TORCH_CHECK(from < to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", to);
  TORCH_CHECK(!at::isComplexType(self.scalar_type()), "random_ is not implemented for complex tensors");
  const double range = static_cast<double>(to) - static_cast<double>(from);
  return ViaContiguous(self, [&](at::Tensor& out) {
    const PhiloxSeeds s = Reserve(gen, out.device().index(), static_cast<uint64_t>(out.numel()) * 2);
    AT_DISPATCH_V2(out.scalar_type(), "xxnpu_random_", AT_WRAP([&] {
      LaunchGenerate<scalar_t>("xxnpu::random", out, s, 2, 2, [from, range](auto w, double* v) {
        for (int j = 0; j < 2; ++j) {
          const double k = std::min(std::floor(Uniform53(w[2 * j], w[2 * j + 1]) * range), range - 1);
          v[j] = static_cast<double>(from) + k;
        }
      });
    }), AT_EXPAND(AT_ALL_TYPES), at::kHalf, at::kBFloat16, at::kBool);
  });
}
at::Tensor& RandomTo(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  return RandomFromTo(self, 0, to, gen);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", &Uniform);
  m.impl("normal_", &Normal);
  m.impl("bernoulli_.float", &BernoulliFloat);
  m.impl("random_.from", &RandomFromTo);
  m.impl("random_.to", &RandomTo);
}

}  // namespace
}  // namespace xxnpu
