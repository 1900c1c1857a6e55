// XxnpuGeneratorImpl and the per-device default generators. See xxnpu_generator.h.
#include "device/generator/xxnpu_generator.h"

#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/ScalarType.h>
#include <c10/util/CallOnce.h>
#include <c10/util/Exception.h>

namespace xxnpu {
namespace {

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();

// One Philox call yields 4 uint32, so offsets move in whole blocks: an element never
// shares a block with an element of another op.
constexpr uint64_t kBlockWords = 4;

void CheckOffsetAligned(uint64_t offset, const char* where) {
  TORCH_CHECK(offset % kBlockWords == 0, where, ": expected a Philox offset that is a multiple of ",
              kBlockWords, " (one Philox4x32 block = 4 uint32 values), got ", offset);
}

}  // namespace

// ------------------------------------------------------------------ XxnpuGeneratorImpl

XxnpuGeneratorImpl::XxnpuGeneratorImpl(c10::DeviceIndex device_index, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device_index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      state_(c10::make_intrusive<State>(seed)) {}

void XxnpuGeneratorImpl::set_current_seed(uint64_t seed) {
  state_->seed = seed;
  state_->offset = 0;
}

uint64_t XxnpuGeneratorImpl::current_seed() const { return state_->seed; }

uint64_t XxnpuGeneratorImpl::seed() {
  // is_cuda = true: the random-device source CUDA uses for its generators (the other one
  // mixes in the time, which suits the CPU generator's 32-bit mt19937 seeding).
  const uint64_t random = c10::detail::getNonDeterministicRandom(/*is_cuda=*/true);
  set_current_seed(random);
  return random;
}

void XxnpuGeneratorImpl::set_offset(uint64_t offset) {
  CheckOffsetAligned(offset, "XxnpuGeneratorImpl::set_offset");
  state_->offset = offset;
}

uint64_t XxnpuGeneratorImpl::get_offset() const { return state_->offset; }

c10::intrusive_ptr<c10::TensorImpl> XxnpuGeneratorImpl::get_state() const {
  // A CPU byte tensor, like every generator's state, so torch's get_rng_state /
  // set_rng_state and pickling handle it without knowing about xxnpu.
  at::TensorBase state = at::detail::empty_cpu({kStateSize}, c10::ScalarType::Byte);
  auto* bytes = static_cast<uint8_t*>(state.mutable_data_ptr());
  std::memcpy(bytes, &state_->seed, sizeof(state_->seed));
  std::memcpy(bytes + sizeof(state_->seed), &state_->offset, sizeof(state_->offset));
  return state.getIntrusivePtr();
}

void XxnpuGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  static_assert(sizeof(state_->seed) + sizeof(state_->offset) == kStateSize);
  TORCH_CHECK(new_state.device().type() == c10::DeviceType::CPU &&
                  new_state.layout() == c10::kStrided,
              "XxnpuGeneratorImpl::set_state: expected a strided CPU tensor, got layout ",
              new_state.layout(), " on device ", new_state.device());
  TORCH_CHECK(new_state.dtype() == c10::ScalarType::Byte,
              "XxnpuGeneratorImpl::set_state: expected a state tensor of dtype uint8 "
              "(torch.ByteTensor), got dtype ",
              new_state.dtype().toScalarType());
  TORCH_CHECK(new_state.numel() == kStateSize,
              "XxnpuGeneratorImpl::set_state: expected a state of exactly ", kStateSize,
              " bytes (uint64 seed + uint64 offset), got ", new_state.numel(), " bytes");
  TORCH_CHECK(new_state.is_contiguous(),
              "XxnpuGeneratorImpl::set_state: expected a contiguous state tensor, got "
              "strides ",
              new_state.strides());

  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  uint64_t seed = 0;
  uint64_t offset = 0;
  std::memcpy(&seed, bytes, sizeof(seed));
  std::memcpy(&offset, bytes + sizeof(seed), sizeof(offset));
  // Validate everything before assigning anything: a rejected state leaves us unchanged.
  CheckOffsetAligned(offset, "XxnpuGeneratorImpl::set_state");
  state_->seed = seed;
  state_->offset = offset;
}

namespace {

// `increment` rounded up to whole Philox blocks, added to `*offset`; throws rather than
// wrap, which would silently repeat random streams.
uint64_t Advance(uint64_t* offset, uint64_t increment, const char* where) {
  const uint64_t pad = (kBlockWords - increment % kBlockWords) % kBlockWords;
  TORCH_CHECK(increment <= kMaxU64 - pad && *offset <= kMaxU64 - (increment + pad), where,
              ": reserving ", increment, " values at offset ", *offset,
              " would wrap the 64-bit Philox offset; reseed the generator");
  const uint64_t start = *offset;
  *offset += increment + pad;
  return start;
}

}  // namespace

PhiloxSeeds XxnpuGeneratorImpl::philox_reserve(uint64_t increment) {
  const uint64_t start = Advance(&state_->offset, increment, "XxnpuGeneratorImpl::philox_reserve");
  return PhiloxSeeds{state_->seed, start};
}

void XxnpuGeneratorImpl::capture_prologue(uint64_t capture_id, const uint64_t* device_state) {
  TORCH_CHECK(capture_id != 0, "XxnpuGeneratorImpl::capture_prologue: expected a capture id, got 0");
  TORCH_CHECK(device_state != nullptr,
              "XxnpuGeneratorImpl::capture_prologue: expected the device address of the graph's "
              "(seed, offset) state, got null");
  const bool inserted = state_->captures.emplace(capture_id, CaptureCount{device_state}).second;
  TORCH_CHECK(inserted, "XxnpuGeneratorImpl::capture_prologue: capture ", capture_id,
              " is already registered with this generator");
}

uint64_t XxnpuGeneratorImpl::capture_epilogue(uint64_t capture_id) {
  auto it = state_->captures.find(capture_id);
  TORCH_CHECK(it != state_->captures.end(), "XxnpuGeneratorImpl::capture_epilogue: capture ", capture_id,
              " is not registered with this generator (no capture_prologue)");
  const uint64_t total = it->second.intragraph;
  state_->captures.erase(it);
  return total;
}

bool XxnpuGeneratorImpl::is_capturing(uint64_t capture_id) const { return state_->captures.count(capture_id) != 0; }

PhiloxSeeds XxnpuGeneratorImpl::philox_reserve_captured(uint64_t capture_id, uint64_t increment) {
  auto it = state_->captures.find(capture_id);
  TORCH_CHECK(it != state_->captures.end(), "XxnpuGeneratorImpl::philox_reserve_captured: capture ",
              capture_id, " is not registered with this generator");
  const uint64_t start =
      Advance(&it->second.intragraph, increment, "XxnpuGeneratorImpl::philox_reserve_captured");
  return PhiloxSeeds{0, start, it->second.device_state};
}

c10::intrusive_ptr<c10::GeneratorImpl> XxnpuGeneratorImpl::graphsafe_get_state() const {
  auto shared = c10::make_intrusive<XxnpuGeneratorImpl>(device_.index(), state_->seed);
  shared->state_ = state_;
  return shared;
}

void XxnpuGeneratorImpl::graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) {
  TORCH_CHECK(state, "XxnpuGeneratorImpl::graphsafe_set_state: expected a generator state, got None");
  const auto* other = dynamic_cast<const XxnpuGeneratorImpl*>(state.get());
  TORCH_CHECK(other != nullptr, "XxnpuGeneratorImpl::graphsafe_set_state: expected the state of an xxnpu "
              "generator (graphsafe_get_state of one), got one of device type ", state->device().type());
  state_ = other->state_;
}

c10::DeviceType XxnpuGeneratorImpl::device_type() { return c10::DeviceType::PrivateUse1; }

XxnpuGeneratorImpl* XxnpuGeneratorImpl::clone_impl() const {
  auto* copy = new XxnpuGeneratorImpl(device_.index(), state_->seed);
  copy->state_->offset = state_->offset;
  return copy;
}

// ------------------------------------------------------------------ default generators

namespace {

// Process-wide table of default generators. Created once by InitXxnpuGenerators and
// never destroyed (like torch's own default generators), so references handed out by
// GetDefaultXxnpuGenerator stay valid through static destruction.
struct DefaultGenerators {
  explicit DefaultGenerators(c10::DeviceIndex count)
      : device_count(count), once(std::make_unique<c10::once_flag[]>(count)), generators(count) {}

  const c10::DeviceIndex device_count;
  // c10::once_flag rather than std::once_flag: c10's retries cleanly when the creator
  // throws and avoids libstdc++'s std::call_once pitfalls (see c10/util/CallOnce.h).
  std::unique_ptr<c10::once_flag[]> once;
  std::vector<at::Generator> generators;
};

// Published with release/acquire so that a thread that sees the table sees it built.
std::atomic<DefaultGenerators*> g_default_generators{nullptr};
c10::once_flag g_init_once;

DefaultGenerators& CheckedTable(c10::DeviceIndex device) {
  DefaultGenerators* table = g_default_generators.load(std::memory_order_acquire);
  TORCH_CHECK(table != nullptr,
              "xxnpu generators are not initialized: InitXxnpuGenerators(device_count) "
              "must run (the xxnpu hooks call it) before device ",
              static_cast<int>(device), "'s generator is requested");
  TORCH_CHECK(device >= 0 && device < table->device_count, "xxnpu device index ",
              static_cast<int>(device), " is out of range: expected 0 <= device < ",
              static_cast<int>(table->device_count), " (valid range [0, ",
              static_cast<int>(table->device_count) - 1, "])");
  return *table;
}

}  // namespace

void InitXxnpuGenerators(c10::DeviceIndex device_count) {
  TORCH_CHECK(device_count >= 0, "InitXxnpuGenerators: expected a device count >= 0, got ",
              static_cast<int>(device_count));
  c10::call_once(g_init_once, [device_count] {
    g_default_generators.store(new DefaultGenerators(device_count), std::memory_order_release);
  });
  const DefaultGenerators* table = g_default_generators.load(std::memory_order_acquire);
  TORCH_CHECK(table->device_count == device_count,
              "InitXxnpuGenerators: already initialized for ",
              static_cast<int>(table->device_count), " devices, got a second call with ",
              static_cast<int>(device_count));
}

const at::Generator& GetDefaultXxnpuGenerator(c10::DeviceIndex device) {
  // Each slot is written once, under its own once_flag; afterwards only read.
  DefaultGenerators& table = CheckedTable(device);
  c10::call_once(table.once[device], [&table, device] {
    table.generators[device] = at::make_generator<XxnpuGeneratorImpl>(device);
  });
  return table.generators[device];
}

at::Generator CreateXxnpuGenerator(c10::DeviceIndex device) {
  CheckedTable(device);
  return at::make_generator<XxnpuGeneratorImpl>(device, c10::default_rng_seed_val);
}

}  // namespace xxnpu
