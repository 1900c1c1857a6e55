// The xxnpu random generator: a c10::GeneratorImpl for DeviceType::PrivateUse1 whose
// state is (seed, Philox offset), with CUDAGeneratorImpl's semantics, so
// torch.xxnpu.manual_seed / get_rng_state / set_rng_state behave as on CUDA.
//
// Kernels never run an engine on the generator itself. Under the generator's mutex they
// reserve a range of Philox counters (philox_reserve) and hand (seed, offset) to the
// device; each element then derives its bits from (seed, offset, element index) with
// the torch-free engine in philox.h. This keeps random ops reproducible and independent
// of how many device threads split the work.
//
// The default generators (one per device) need the device count, which the hooks layer
// passes in through InitXxnpuGenerators; this target does not depend on the runtime.
#ifndef TORCH_XXNPU_DEVICE_GENERATOR_XXNPU_GENERATOR_H_
#define TORCH_XXNPU_DEVICE_GENERATOR_XXNPU_GENERATOR_H_

#include <cstdint>
#include <unordered_map>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/intrusive_ptr.h>

namespace xxnpu {

// What a random kernel needs from the generator: the key and the first counter of the
// range reserved for it (see philox.h for how elements map onto counters).
//
// Inside a graph capture the numbers cannot be fixed at capture time, or every replay
// would repeat them: `device_state` then points to two uint64 in device memory, {seed,
// base offset}, that the graph writes before each replay (see "Graph-safe RNG" below),
// and the kernel uses seed = device_state[0], offset = device_state[1] + offset, reading
// them when it runs. Eager ops leave it null.
struct PhiloxSeeds {
  uint64_t seed;
  uint64_t offset;  // in uint32 values; always a multiple of 4
  const uint64_t* device_state = nullptr;
};

// Thread safety, as for every c10 generator (see torch's Note [Acquire lock when using
// random generators]): the methods do not lock. Callers that may race with other threads
// hold `mutex_` around mutating calls, in particular around philox_reserve:
//
//   PhiloxSeeds seeds;
//   {
//     std::lock_guard<std::mutex> lock(gen->mutex_);
//     seeds = gen->philox_reserve(numel);
//   }
//   launch(kernel, seeds, ...);
//
// The lock is left to the caller (like CUDA's callers) so that a caller can combine
// several reads and reservations into one critical section.
class XxnpuGeneratorImpl : public c10::GeneratorImpl {
 public:
  // Size in bytes of get_state()'s tensor: uint64 seed, then uint64 offset (host order).
  static constexpr int64_t kStateSize = 16;

  // device_index -1 means "no particular device", as for a CUDA generator.
  explicit XxnpuGeneratorImpl(c10::DeviceIndex device_index = -1,
                              uint64_t seed = c10::default_rng_seed_val);
  ~XxnpuGeneratorImpl() override = default;

  // Sets the seed and restarts the stream: the offset goes back to 0.
  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  // Seeds from a non-deterministic source and returns the new seed (offset reset to 0).
  uint64_t seed() override;

  // The Philox offset in uint32 values. It must be a multiple of 4 (one Philox block), the
  // granularity philox_reserve hands out; other values throw.
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;

  // A CPU uint8 tensor of kStateSize bytes: seed, then offset.
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  // Accepts only what get_state() produces: a contiguous CPU uint8 tensor of exactly
  // kStateSize bytes whose offset is a multiple of 4; anything else throws c10::Error
  // naming what was expected and what was got, and leaves the generator unchanged.
  void set_state(const c10::TensorImpl& new_state) override;

  // Reserves `increment` random uint32 values for one kernel: returns the current
  // (seed, offset) and advances the offset by `increment` rounded up to a multiple of 4,
  // since each Philox call yields 4 uint32. The caller holds mutex_ (see above). Throws
  // if the 64-bit offset would wrap, which would silently repeat random streams.
  PhiloxSeeds philox_reserve(uint64_t increment);

  // ---- Graph-safe RNG (CUDA's CUDAGeneratorState capture/replay protocol). A graph that
  // captures random ops registers the generator for its capture: capture_prologue(id,
  // state) starts counting, per capture id, the offsets the captured ops reserve
  // (philox_reserve_captured, which leaves the eager offset alone); capture_epilogue(id)
  // returns the total, the graph's whole-graph increment. Before each replay the graph
  // takes that many values from the eager stream with philox_reserve and writes the
  // (seed, offset) it got into `device_state`, so every replay draws fresh numbers and a
  // seeded run of replays draws what the same ops run eagerly would. Several captures
  // (threads) may count at once, each under its own id. The caller holds mutex_.
  //
  // `device_state`: device address of two uint64 the graph owns and keeps alive while
  // captured kernels may run. Throws if `capture_id` (never 0) is already counting.
  void capture_prologue(uint64_t capture_id, const uint64_t* device_state);
  // Ends the counting for `capture_id` and returns what the capture reserved (a multiple
  // of 4). Throws if capture_prologue was not called for it.
  uint64_t capture_epilogue(uint64_t capture_id);
  bool is_capturing(uint64_t capture_id) const;
  // philox_reserve for a kernel captured under `capture_id`: the result's offset is
  // relative to device_state[1]. Throws if the capture is not registered.
  PhiloxSeeds philox_reserve_captured(uint64_t capture_id, uint64_t increment);

  // torch.Generator.graphsafe_get_state / graphsafe_set_state (CUDA's semantics):
  // get returns a generator object sharing this one's state (seed, offset, captures), so
  // draws through either advance both; set makes this generator share `state`'s, which
  // must be an xxnpu generator (anything else throws). The caller holds mutex_.
  c10::intrusive_ptr<c10::GeneratorImpl> graphsafe_get_state() const override;
  void graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) override;

  static c10::DeviceType device_type();

 private:
  XxnpuGeneratorImpl* clone_impl() const override;

  struct CaptureCount {
    const uint64_t* device_state;
    uint64_t intragraph = 0;  // offsets reserved so far by the capture's kernels
  };
  // Everything a generator draws from, shareable between generator objects
  // (graphsafe_set_state), as CUDA's CUDAGeneratorState.
  struct State : c10::intrusive_ptr_target {
    explicit State(uint64_t s) : seed(s) {}
    uint64_t seed;
    uint64_t offset = 0;
    std::unordered_map<uint64_t, CaptureCount> captures;
  };

  c10::intrusive_ptr<State> state_;
};

// Sets the number of xxnpu devices; called by the hooks layer before any default
// generator is used. Calling it again with the same count is a no-op; a different count
// throws (default generators already handed out would no longer match).
void InitXxnpuGenerators(c10::DeviceIndex device_count);

// The default generator of `device` (0 <= device < device_count), created on first use
// with seed c10::default_rng_seed_val and kept for the life of the process. Thread-safe.
// There is no "current device" here: the hooks layer resolves index -1 before calling.
// An index out of range, or a call before InitXxnpuGenerators, throws c10::Error.
const at::Generator& GetDefaultXxnpuGenerator(c10::DeviceIndex device);

// A new generator for `device` (same range check), seeded with c10::default_rng_seed_val.
at::Generator CreateXxnpuGenerator(c10::DeviceIndex device);

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_GENERATOR_XXNPU_GENERATOR_H_
