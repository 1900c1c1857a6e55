#include "testing/kernel_check.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <exception>
#include <limits>
#include <sstream>
#include <utility>

namespace xxnpu {
namespace testing {
namespace {

std::string Describe(const at::Tensor& t) {
  std::ostringstream s;
  s << "Tensor(shape=" << t.sizes() << ", strides=" << t.strides() << ", offset=" << t.storage_offset()
    << ", dtype=" << t.scalar_type() << ", device=" << t.device() << ")";
  return s.str();
}

std::string DescribeAll(const std::vector<at::Tensor>& ts) {
  std::ostringstream s;
  for (size_t i = 0; i < ts.size(); ++i) s << "\n    input " << i << ": " << Describe(ts[i]);
  return s.str();
}

bool IsFloating(at::ScalarType dtype) { return at::isFloatingType(dtype) || at::isComplexType(dtype); }

// Random values of `dtype`: normal for floating types, [-50, 50) for integers, 0/1 for bool.
at::Tensor Random(at::IntArrayRef shape, at::ScalarType dtype, at::Generator& gen, bool nonzero) {
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor t;
  if (dtype == at::kBool) {
    t = at::randint(0, 2, shape, gen, opts.dtype(at::kLong)).to(at::kBool);
  } else if (IsFloating(dtype)) {
    t = at::randn(shape, gen, opts.dtype(at::isComplexType(dtype) ? at::kComplexDouble : at::kDouble)).to(dtype);
  } else {
    const int64_t low = at::isSignedType(dtype) ? -50 : 0;
    t = at::randint(low, 50, shape, gen, opts.dtype(at::kLong));
    if (nonzero) t = at::where(t == 0, at::ones_like(t), t);
    t = t.to(dtype);
  }
  return t;
}

// Finite extremes that stay finite in `dtype`.
std::pair<double, double> HugeTiny(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf:
      return {6.0e4, 1.0e-4};
    case at::kBFloat16:
    case at::kFloat:
    case at::kComplexFloat:
      return {1.0e38, 1.0e-37};
    default:
      return {1.0e300, 1.0e-300};
  }
}

at::Tensor EdgeValues(at::ScalarType dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  const auto [huge, tiny] = HugeTiny(dtype);
  const std::vector<double> v = {std::nan(""), inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, huge, -huge, tiny, -tiny, 3.0};
  return at::tensor(v, at::TensorOptions().dtype(at::kDouble)).to(dtype);
}

}  // namespace

Tolerance DefaultTolerance(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf:
    case at::kComplexHalf:
      return {1e-3, 1e-5};
    case at::kBFloat16:
      return {1.6e-2, 1e-5};
    case at::kFloat:
    case at::kComplexFloat:
      return {1.3e-6, 1e-5};
    case at::kDouble:
    case at::kComplexDouble:
      return {1e-7, 1e-7};
    default:
      return {0, 0};
  }
}

at::Tensor ToDeviceKeepStrides(const at::Tensor& t, c10::Device device) {
  const int64_t n = t.storage().nbytes() / static_cast<int64_t>(t.itemsize());
  if (n == 0) return at::empty_strided(t.sizes(), t.strides(), t.options().device(device));
  const at::Tensor flat = at::empty({0}, t.options()).set_(t.storage(), 0, {n}, {1});
  return flat.to(device).as_strided(t.sizes(), t.strides(), t.storage_offset());
}

std::vector<InputCase> MakeCases(int arity, at::ScalarType dtype, const KernelCheckOptions& options) {
  TORCH_CHECK(arity >= 1, "CheckKernel: arity must be at least 1");
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  auto rnd = [&](at::IntArrayRef shape, int index) {
    return Random(shape, dtype, gen, options.nonzero_integer_divisors && index > 0);
  };
  auto same_shape = [&](const std::string& name, at::IntArrayRef shape) {
    InputCase c{name, {}};
    for (int i = 0; i < arity; ++i) c.inputs.push_back(rnd(shape, i));
    return c;
  };
  std::vector<InputCase> cases;
  cases.push_back(same_shape("contiguous [7, 33]", {7, 33}));
  cases.push_back(same_shape("0-dim", {}));
  cases.push_back(same_shape("large [3, 4099] (many blocks)", {3, 4099}));
  cases.push_back(same_shape("empty [0, 5]", {0, 5}));
  {
    // Each input broadcasts along a different dimension: [4, 1, 6], [5, 1], [6], [4, 5, 6]...
    InputCase c{"broadcast", {}};
    const std::vector<std::vector<int64_t>> shapes = {{4, 1, 6}, {5, 1}, {6}, {4, 5, 6}};
    for (int i = 0; i < arity; ++i) c.inputs.push_back(rnd(shapes[i % shapes.size()], i));
    cases.push_back(std::move(c));
  }
  {
    InputCase c{"0-dim with [3, 4]", {}};
    for (int i = 0; i < arity; ++i) c.inputs.push_back(rnd(i % 2 ? at::IntArrayRef{} : at::IntArrayRef{3, 4}, i));
    cases.push_back(std::move(c));
  }
  {
    InputCase c{"transposed (non-contiguous)", {}};
    for (int i = 0; i < arity; ++i) c.inputs.push_back(rnd({9, 5}, i).t());
    cases.push_back(std::move(c));
  }
  {
    InputCase c{"sliced with gaps and offset (non-contiguous)", {}};
    for (int i = 0; i < arity; ++i) c.inputs.push_back(rnd({8, 13}, i).slice(0, 1, 7).slice(1, 2, 13, 3));
    cases.push_back(std::move(c));
  }
  {
    InputCase c{"expanded (stride 0)", {}};
    for (int i = 0; i < arity; ++i) c.inputs.push_back(rnd({1, 6}, i).expand({4, 6}));
    cases.push_back(std::move(c));
  }
  {
    // Mixed layouts in one call: contiguous, transposed, expanded.
    InputCase c{"mixed layouts", {}};
    for (int i = 0; i < arity; ++i) {
      if (i % 3 == 0) c.inputs.push_back(rnd({6, 4}, i));
      if (i % 3 == 1) c.inputs.push_back(rnd({4, 6}, i).t());
      if (i % 3 == 2) c.inputs.push_back(rnd({6, 1}, i).expand({6, 4}));
    }
    cases.push_back(std::move(c));
  }
  if (options.edge_values && IsFloating(dtype)) {
    // Every pairing of the edge values between the first two inputs (others random).
    const at::Tensor v = EdgeValues(dtype);
    const int64_t k = v.numel();
    InputCase c{"NaN/Inf/+-0/extremes (all pairings)", {}};
    for (int i = 0; i < arity; ++i) {
      if (i == 0) c.inputs.push_back(v.view({k, 1}).expand({k, k}).contiguous());
      else if (i == 1) c.inputs.push_back(v.view({1, k}).expand({k, k}).contiguous());
      else c.inputs.push_back(rnd({k, k}, i));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

::testing::AssertionResult TensorsClose(const at::Tensor& actual, const at::Tensor& expected, Tolerance tol) {
  if (actual.scalar_type() != expected.scalar_type()) {
    return ::testing::AssertionFailure() << "dtype " << actual.scalar_type() << ", expected "
                                         << expected.scalar_type();
  }
  if (actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure() << "shape " << actual.sizes() << ", expected " << expected.sizes();
  }
  if (expected.numel() == 0) return ::testing::AssertionSuccess();
  const at::ScalarType wide = at::isComplexType(expected.scalar_type()) ? at::kComplexDouble : at::kDouble;
  const at::Tensor a = actual.cpu().to(wide);
  const at::Tensor e = expected.cpu().to(wide);
  at::Tensor diff = (a - e).abs();
  const at::Tensor same = (a == e).logical_or(a.isnan().logical_and(e.isnan()));
  diff = at::where(same, at::zeros_like(diff), diff);
  diff = at::where(diff.isnan(), at::full_like(diff, std::numeric_limits<double>::infinity()), diff);
  // "not <=" rather than ">": where the CPU has NaN the bound is NaN and ">" would be false.
  const at::Tensor bad = same.logical_not().logical_and((diff <= e.abs() * tol.rtol + tol.atol).logical_not());
  const int64_t n_bad = bad.sum().item<int64_t>();
  if (n_bad == 0) return ::testing::AssertionSuccess();
  const int64_t flat = bad.flatten().nonzero()[0][0].item<int64_t>();
  std::vector<int64_t> index(expected.dim());
  int64_t rest = flat;
  for (int64_t d = expected.dim() - 1; d >= 0; --d) {
    index[d] = rest % expected.size(d);
    rest /= expected.size(d);
  }
  return ::testing::AssertionFailure()
         << n_bad << " of " << expected.numel() << " elements differ beyond rtol=" << tol.rtol << " atol=" << tol.atol
         << "; first at index " << c10::IntArrayRef(index) << ": got "
         << actual.cpu().flatten()[flat].item() << ", expected " << expected.flatten()[flat].item()
         << " (max abs diff " << diff.max().item<double>() << ")";
}

::testing::AssertionResult CheckKernel(const std::string& name, int arity, const OpFn& op,
                                       const KernelCheckOptions& options, const OpFn& reference) {
  const OpFn& ref = reference ? reference : op;
  int checked = 0;
  for (const at::ScalarType dtype : options.dtypes) {
    const Tolerance tol = options.tolerance.value_or(DefaultTolerance(dtype));
    for (const InputCase& c : MakeCases(arity, dtype, options)) {
      std::vector<at::Tensor> dev;
      for (const at::Tensor& t : c.inputs) dev.push_back(ToDeviceKeepStrides(t, options.device));
      auto where = [&] {
        std::ostringstream s;
        s << name << " [" << dtype << ", case \"" << c.name << "\"]" << DescribeAll(c.inputs) << "\n  ";
        return s.str();
      };
      at::Tensor expected, actual;
      c10::Device placed = options.device;
      std::string cpu_error, dev_error;
      try {
        expected = ref(c.inputs);
      } catch (const std::exception& e) {
        cpu_error = e.what();
      }
      try {
        actual = op(dev);
        if (actual.defined()) {
          placed = actual.device();
          actual = actual.cpu();  // synchronizes: a kernel fault raises here
        }
      } catch (const std::exception& e) {
        dev_error = e.what();
      }
      if (!cpu_error.empty() && !dev_error.empty()) continue;  // both reject the input
      if (!dev_error.empty()) {
        return ::testing::AssertionFailure() << where() << "the device op raised (the CPU did not): "
                                             << dev_error.substr(0, 1000);
      }
      if (!cpu_error.empty()) {
        return ::testing::AssertionFailure() << where() << "the CPU reference raised (the device op did not): "
                                             << cpu_error.substr(0, 1000);
      }
      if (actual.defined() != expected.defined()) {
        return ::testing::AssertionFailure() << where() << "one side returned an undefined tensor";
      }
      if (!actual.defined()) continue;
      if (placed != options.device) {
        return ::testing::AssertionFailure() << where() << "result is on " << placed << ", expected "
                                             << options.device;
      }
      ::testing::AssertionResult close = TensorsClose(actual, expected, tol);
      if (!close) return ::testing::AssertionFailure() << where() << close.message();
      ++checked;
    }
  }
  if (checked == 0) return ::testing::AssertionFailure() << name << ": no case ran (every input was rejected)";
  return ::testing::AssertionSuccess() << name << ": " << checked << " cases matched";
}

}  // namespace testing
}  // namespace xxnpu
