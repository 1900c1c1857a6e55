// Tests for the Philox4x32-10 engine (known answers, counter addressing, chunk
// independence) and for XxnpuGeneratorImpl (seed/offset/state, reservations, clones,
// default generators per device).
#include "device/generator/xxnpu_generator.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/util/Exception.h>

#include "device/generator/philox.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace xxnpu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();
constexpr c10::DeviceIndex kDevices = 3;

// The c10::Error message (without torch's backtrace) of calling `fn`, or "" if none.
template <typename Fn>
std::string ErrorOf(Fn&& fn) {
  try {
    fn();
  } catch (const c10::Error& e) {
    return e.msg();
  }
  return "";
}

// ------------------------------------------------------------------ Philox4x32

// Known-answer vectors from the Random123 distribution (kat_vectors, philox4x32 10 rounds).
TEST(Philox4x32Test, MatchesRandom123KnownAnswers) {
  using C = Philox4x32::Counter;
  using K = Philox4x32::Key;
  EXPECT_EQ(Philox4x32::block(C{0, 0, 0, 0}, K{0, 0}),
            (C{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32::block(C{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                              K{0xffffffff, 0xffffffff}),
            (C{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32::block(C{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                              K{0xa4093822, 0x299f31d0}),
            (C{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
  // The bijection is constexpr: kernels may fold constants with it.
  static_assert(Philox4x32::block(C{0, 0, 0, 0}, K{0, 0})[0] == 0x6627e8d5u);
}

// (seed, subsequence, offset) map onto key and counter words as in curand / torch:
// counter = {offset lo, offset hi, subsequence lo, subsequence hi}, key = {seed lo, hi}.
TEST(Philox4x32Test, ConstructorLaysOutCounterAndKey) {
  EXPECT_EQ(Philox4x32(0, 0, 0).next(),
            (Philox4x32::Counter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32(kMaxU64, kMaxU64, kMaxU64).next(),
            (Philox4x32::Counter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull)
                .next(),
            (Philox4x32::Counter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox4x32Test, NextWalksTheCounterWithCarry) {
  const uint64_t seed = 0x1234'5678'9abc'def0ull;
  Philox4x32 engine(seed, 7, 100);
  for (uint64_t k = 0; k < 5; ++k) {
    EXPECT_EQ(engine.next(), Philox4x32(seed, 7, 100 + k).next()) << "block " << k;
  }
  // The last block of subsequence 0 is followed by the first of subsequence 1.
  Philox4x32 wrapping(seed, 0, kMaxU64);
  wrapping.next();
  EXPECT_EQ(wrapping.next(), Philox4x32(seed, 1, 0).next());
  // And the very last counter wraps to 0.
  Philox4x32 last(seed, kMaxU64, kMaxU64);
  last.next();
  EXPECT_EQ(last.next(), Philox4x32(seed, 0, 0).next());
}

TEST(Philox4x32Test, AddressingRuleUsesOneBlockPerFourElements) {
  const uint64_t seed = 42;
  const uint64_t offset = 8;  // 2 blocks in
  const auto block2 = Philox4x32(seed, 0, 2).next();
  const auto block3 = Philox4x32(seed, 0, 3).next();
  for (uint64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(philox_uint32_at(seed, offset, i), block2[i]);
    EXPECT_EQ(philox_uint32_at(seed, offset, 4 + i), block3[i]);
  }
}

TEST(Philox4x32Test, UniformFloatIsInHalfOpenUnitInterval) {
  EXPECT_EQ(uniform_float(0), 0.0f);
  EXPECT_LT(uniform_float(0xffffffffu), 1.0f);
  EXPECT_EQ(uniform_float(0x80000000u), 0.5f);
  double sum = 0;
  constexpr int kN = 4096;
  for (int i = 0; i < kN; ++i) {
    const float u = uniform_float(philox_uint32_at(7, 0, i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.02);
}

TEST(Philox4x32Test, NormalPairIsFiniteAndStandard) {
  // Extremes: a = 0 gives u1 = 1 (radius 0); a = max gives the smallest u1 (2^-24).
  for (uint32_t a : {0u, 0xffffffffu}) {
    for (uint32_t b : {0u, 0x40000000u, 0xffffffffu}) {
      const auto z = normal_pair(a, b);
      EXPECT_TRUE(std::isfinite(z[0]) && std::isfinite(z[1])) << a << " " << b;
    }
  }
  double sum = 0;
  double sum_sq = 0;
  constexpr int kPairs = 4096;
  for (int i = 0; i < kPairs; ++i) {
    const auto block = Philox4x32(99, 0, i).next();
    for (const float z : normal_pair(block[0], block[1])) {
      sum += z;
      sum_sq += static_cast<double>(z) * z;
    }
  }
  const double mean = sum / (2 * kPairs);
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_NEAR(sum_sq / (2 * kPairs) - mean * mean, 1.0, 0.06);
}

// The reason for the design: 1000 uniforms computed element by element equal the same
// 1000 computed by workers over 7 uneven chunks, each walking its engine sequentially.
TEST(Philox4x32Test, ResultsDoNotDependOnHowWorkIsSplit) {
  XxnpuGeneratorImpl gen(0, 2024);
  gen.philox_reserve(13);  // start at a non-zero offset
  constexpr uint64_t kNumel = 1000;
  const PhiloxSeeds seeds = gen.philox_reserve(kNumel);
  ASSERT_EQ(seeds.offset, 16u);

  std::vector<float> whole(kNumel);
  for (uint64_t i = 0; i < kNumel; ++i) {
    whole[i] = uniform_float(philox_uint32_at(seeds.seed, seeds.offset, i));
  }

  const std::vector<uint64_t> bounds = {0, 1, 6, 7, 250, 333, 998, kNumel};  // 7 chunks
  std::vector<float> chunked(kNumel, -1.0f);
  for (size_t c = 0; c + 1 < bounds.size(); ++c) {
    const uint64_t begin = bounds[c];
    const uint64_t end = bounds[c + 1];
    Philox4x32 engine(seeds.seed, 0, seeds.offset / 4 + begin / 4);
    std::array<uint32_t, 4> block = engine.next();
    for (uint64_t i = begin; i < end; ++i) {
      if (i % 4 == 0 && i != begin) block = engine.next();
      chunked[i] = uniform_float(block[i % 4]);
    }
  }
  EXPECT_EQ(whole, chunked);
}

// ------------------------------------------------------------------ XxnpuGeneratorImpl

TEST(XxnpuGeneratorTest, IsAPrivateUse1Generator) {
  at::Generator gen = at::make_generator<XxnpuGeneratorImpl>(2);
  EXPECT_EQ(XxnpuGeneratorImpl::device_type(), c10::DeviceType::PrivateUse1);
  EXPECT_EQ(gen.device(), c10::Device(c10::DeviceType::PrivateUse1, 2));
  EXPECT_EQ(gen.key_set(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1));
  EXPECT_EQ(gen.current_seed(), c10::default_rng_seed_val);
  EXPECT_EQ(gen.get_offset(), 0u);
  // torch's kernel-side cast helper accepts it.
  EXPECT_EQ(at::check_generator<XxnpuGeneratorImpl>(gen), gen.get<XxnpuGeneratorImpl>());
}

TEST(XxnpuGeneratorTest, SeedAndOffsetRoundTrip) {
  XxnpuGeneratorImpl gen;
  gen.set_offset(40);
  gen.set_current_seed(123);
  EXPECT_EQ(gen.current_seed(), 123u);
  EXPECT_EQ(gen.get_offset(), 0u) << "set_current_seed restarts the stream";
  gen.set_offset(1ull << 40);
  EXPECT_EQ(gen.get_offset(), 1ull << 40);
  EXPECT_EQ(gen.current_seed(), 123u);
}

TEST(XxnpuGeneratorTest, SetOffsetRejectsPartialBlocks) {
  XxnpuGeneratorImpl gen;
  gen.set_offset(8);
  EXPECT_THAT(ErrorOf([&] { gen.set_offset(6); }),
              AllOf(HasSubstr("multiple of 4"), HasSubstr("got 6")));
  EXPECT_EQ(gen.get_offset(), 8u);
}

TEST(XxnpuGeneratorTest, NonDeterministicSeedResetsOffset) {
  XxnpuGeneratorImpl gen;
  gen.set_offset(64);
  const uint64_t s = gen.seed();
  EXPECT_EQ(gen.current_seed(), s);
  EXPECT_EQ(gen.get_offset(), 0u);
}

TEST(XxnpuGeneratorTest, StateRoundTrips) {
  XxnpuGeneratorImpl gen(0, 0xdead'beef'cafe'f00dull);
  gen.philox_reserve(1001);
  const c10::intrusive_ptr<c10::TensorImpl> state = gen.get_state();
  EXPECT_EQ(state->device().type(), c10::DeviceType::CPU);
  EXPECT_EQ(state->dtype(), c10::ScalarType::Byte);
  EXPECT_EQ(state->numel(), XxnpuGeneratorImpl::kStateSize);
  uint64_t words[2];
  std::memcpy(words, state->data(), sizeof(words));
  EXPECT_EQ(words[0], 0xdead'beef'cafe'f00dull);
  EXPECT_EQ(words[1], 1004u);

  // The state is a snapshot: later reservations do not change it.
  const PhiloxSeeds next = gen.philox_reserve(4);
  XxnpuGeneratorImpl restored(1, 5);
  restored.set_state(*state);
  EXPECT_EQ(restored.current_seed(), 0xdead'beef'cafe'f00dull);
  EXPECT_EQ(restored.get_offset(), 1004u);
  const PhiloxSeeds replay = restored.philox_reserve(4);
  EXPECT_EQ(replay.seed, next.seed);
  EXPECT_EQ(replay.offset, next.offset);
}

TEST(XxnpuGeneratorTest, SetStateRejectsWrongDtype) {
  XxnpuGeneratorImpl gen(0, 77);
  const at::TensorBase floats = at::detail::empty_cpu({16}, c10::ScalarType::Float);
  EXPECT_THAT(ErrorOf([&] { gen.set_state(*floats.unsafeGetTensorImpl()); }),
              AllOf(HasSubstr("expected a state tensor of dtype uint8"),
                    HasSubstr("got dtype Float")));
  EXPECT_EQ(gen.current_seed(), 77u);
}

TEST(XxnpuGeneratorTest, SetStateRejectsWrongSize) {
  XxnpuGeneratorImpl gen(0, 77);
  for (int64_t size : {0, 8, 15, 17, 32}) {
    const at::TensorBase bytes = at::detail::empty_cpu({size}, c10::ScalarType::Byte);
    EXPECT_THAT(ErrorOf([&] { gen.set_state(*bytes.unsafeGetTensorImpl()); }),
                AllOf(HasSubstr("expected a state of exactly 16 bytes"),
                      HasSubstr("got " + std::to_string(size) + " bytes")));
  }
  EXPECT_EQ(gen.current_seed(), 77u);
}

TEST(XxnpuGeneratorTest, SetStateRejectsNonContiguousAndUnalignedOffset) {
  XxnpuGeneratorImpl gen(0, 77);
  const at::TensorBase strided =
      at::detail::empty_strided_cpu({16}, {2}, c10::ScalarType::Byte);
  EXPECT_THAT(ErrorOf([&] { gen.set_state(*strided.unsafeGetTensorImpl()); }),
              HasSubstr("expected a contiguous state tensor"));

  c10::intrusive_ptr<c10::TensorImpl> state = XxnpuGeneratorImpl(0, 1).get_state();
  const uint64_t bad_offset = 3;
  std::memcpy(static_cast<uint8_t*>(state->mutable_data()) + 8, &bad_offset, 8);
  EXPECT_THAT(ErrorOf([&] { gen.set_state(*state); }),
              AllOf(HasSubstr("multiple of 4"), HasSubstr("got 3")));
  EXPECT_EQ(gen.current_seed(), 77u) << "a rejected state changes nothing";
  EXPECT_EQ(gen.get_offset(), 0u);
}

TEST(XxnpuGeneratorTest, CloneIsIndependent) {
  at::Generator gen = at::make_generator<XxnpuGeneratorImpl>(1, 555);
  gen.get<XxnpuGeneratorImpl>()->philox_reserve(10);
  at::Generator copy = gen.clone();
  ASSERT_NE(copy, gen);
  EXPECT_EQ(copy.device(), gen.device());
  EXPECT_EQ(copy.current_seed(), 555u);
  EXPECT_EQ(copy.get_offset(), 12u);

  gen.get<XxnpuGeneratorImpl>()->philox_reserve(100);
  EXPECT_EQ(copy.get_offset(), 12u);
  copy.set_current_seed(1);
  EXPECT_EQ(gen.current_seed(), 555u);
  EXPECT_EQ(gen.get_offset(), 112u);
}

TEST(XxnpuGeneratorTest, ReserveRoundsUpToWholeBlocks) {
  XxnpuGeneratorImpl gen(0, 9);
  struct Step {
    uint64_t increment;
    uint64_t returned_offset;
    uint64_t offset_after;
  };
  for (const Step& step : {Step{1, 0, 4}, Step{4, 4, 8}, Step{5, 8, 16}, Step{0, 16, 16},
                           Step{7, 16, 24}, Step{1000, 24, 1024}}) {
    const PhiloxSeeds seeds = gen.philox_reserve(step.increment);
    EXPECT_EQ(seeds.seed, 9u);
    EXPECT_EQ(seeds.offset, step.returned_offset) << "increment " << step.increment;
    EXPECT_EQ(gen.get_offset(), step.offset_after) << "increment " << step.increment;
  }
}

TEST(XxnpuGeneratorTest, ReserveRefusesToWrapTheOffset) {
  XxnpuGeneratorImpl gen;
  gen.set_offset(kMaxU64 - 7);  // 2^64 - 8: two blocks left
  EXPECT_EQ(gen.philox_reserve(4).offset, kMaxU64 - 7);
  EXPECT_THAT(ErrorOf([&] { gen.philox_reserve(5); }), HasSubstr("would wrap"));
  EXPECT_THAT(ErrorOf([&] { gen.philox_reserve(kMaxU64); }), HasSubstr("would wrap"));
  EXPECT_EQ(gen.get_offset(), kMaxU64 - 3);
}

TEST(XxnpuGeneratorTest, ManualSeedReproducesReservations) {
  InitXxnpuGenerators(kDevices);  // CreateXxnpuGenerator checks the index against it
  at::Generator a = CreateXxnpuGenerator(0);
  at::Generator b = at::make_generator<XxnpuGeneratorImpl>(0);
  std::vector<uint64_t> sizes = {3, 17, 4, 0, 1 << 20, 9};
  auto run = [&](at::Generator& gen) {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(31337);
    std::vector<std::pair<uint64_t, uint64_t>> out;
    for (uint64_t n : sizes) {
      const PhiloxSeeds s = gen.get<XxnpuGeneratorImpl>()->philox_reserve(n);
      out.emplace_back(s.seed, s.offset);
    }
    return out;
  };
  a.get<XxnpuGeneratorImpl>()->philox_reserve(100);  // history before the seed is erased
  EXPECT_EQ(run(a), run(b));
  EXPECT_EQ(run(a), run(a));
}

// Graph-safe RNG bookkeeping: a capture counts its own offsets (relative to the graph's
// device state) and leaves the eager offset alone; its total is the whole-graph increment.
TEST(XxnpuGeneratorTest, CaptureCountsOffsetsApartFromTheEagerStream) {
  XxnpuGeneratorImpl gen(0, 5);
  gen.philox_reserve(8);
  const uint64_t state_a[2] = {0, 0};
  const uint64_t state_b[2] = {0, 0};
  gen.capture_prologue(11, state_a);
  gen.capture_prologue(12, state_b);  // a second capture (another thread) counts apart
  EXPECT_TRUE(gen.is_capturing(11));
  EXPECT_FALSE(gen.is_capturing(13));
  const PhiloxSeeds first = gen.philox_reserve_captured(11, 5);
  const PhiloxSeeds second = gen.philox_reserve_captured(11, 4);
  EXPECT_EQ(first.device_state, state_a);
  EXPECT_EQ(first.offset, 0u);
  EXPECT_EQ(second.offset, 8u);  // 5 rounded up to two blocks
  EXPECT_EQ(gen.philox_reserve_captured(12, 1).device_state, state_b);
  EXPECT_EQ(gen.get_offset(), 8u);  // captured reservations do not move the eager offset
  EXPECT_EQ(gen.philox_reserve(1).device_state, nullptr);
  EXPECT_EQ(gen.capture_epilogue(11), 12u);
  EXPECT_EQ(gen.capture_epilogue(12), 4u);
  EXPECT_FALSE(gen.is_capturing(11));
  EXPECT_THAT(ErrorOf([&] { gen.philox_reserve_captured(11, 4); }), HasSubstr("not registered"));
  EXPECT_THAT(ErrorOf([&] { gen.capture_epilogue(11); }), HasSubstr("no capture_prologue"));
  gen.capture_prologue(11, state_a);  // an id may be reused once it ended
  EXPECT_THAT(ErrorOf([&] { gen.capture_prologue(11, state_a); }), HasSubstr("already registered"));
  EXPECT_THAT(ErrorOf([&] { gen.capture_prologue(0, state_a); }), HasSubstr("expected a capture id"));
  EXPECT_THAT(ErrorOf([&] { gen.capture_prologue(14, nullptr); }), HasSubstr("got null"));
}

// graphsafe_get_state shares, clone copies: draws through a shared state advance every
// generator holding it, as CUDA's (torch's activation checkpointing relies on it).
TEST(XxnpuGeneratorTest, GraphsafeStateIsSharedNotCopied) {
  auto a = c10::make_intrusive<XxnpuGeneratorImpl>(0, 3);
  a->philox_reserve(8);
  c10::intrusive_ptr<c10::GeneratorImpl> shared = a->graphsafe_get_state();
  auto b = c10::make_intrusive<XxnpuGeneratorImpl>(0, 99);
  b->graphsafe_set_state(shared);
  EXPECT_EQ(b->current_seed(), 3u);
  EXPECT_EQ(b->get_offset(), 8u);
  b->philox_reserve(4);
  EXPECT_EQ(a->get_offset(), 12u);
  EXPECT_EQ(shared->get_offset(), 12u);
  const uint64_t state[2] = {0, 0};
  a->capture_prologue(5, state);
  EXPECT_TRUE(b->is_capturing(5));  // captures are part of the state
  EXPECT_EQ(b->capture_epilogue(5), 0u);
  c10::intrusive_ptr<c10::GeneratorImpl> copy = a->clone();
  a->philox_reserve(4);
  EXPECT_EQ(copy->get_offset(), 12u);  // a clone is independent
  c10::intrusive_ptr<c10::GeneratorImpl> cpu = at::make_generator<at::CPUGeneratorImpl>(7).getIntrusivePtr();
  EXPECT_THAT(ErrorOf([&] { b->graphsafe_set_state(cpu); }), HasSubstr("expected the state of an xxnpu generator"));
  EXPECT_EQ(b->get_offset(), 16u);  // unchanged by the refused call
}

// ------------------------------------------------------------------ default generators

TEST(DefaultXxnpuGeneratorTest, OnePerDeviceWithTheDefaultSeed) {
  InitXxnpuGenerators(kDevices);
  InitXxnpuGenerators(kDevices);  // idempotent
  std::set<c10::GeneratorImpl*> impls;
  for (c10::DeviceIndex d = 0; d < kDevices; ++d) {
    const at::Generator& gen = GetDefaultXxnpuGenerator(d);
    EXPECT_EQ(&gen, &GetDefaultXxnpuGenerator(d)) << "created once";
    EXPECT_EQ(gen.device(), c10::Device(c10::DeviceType::PrivateUse1, d));
    EXPECT_EQ(gen.current_seed(), c10::default_rng_seed_val);
    impls.insert(gen.unsafeGetGeneratorImpl());
  }
  EXPECT_EQ(impls.size(), static_cast<size_t>(kDevices));

  at::Generator fresh = CreateXxnpuGenerator(1);
  EXPECT_NE(fresh, GetDefaultXxnpuGenerator(1));
  EXPECT_EQ(fresh.current_seed(), c10::default_rng_seed_val);
  EXPECT_EQ(fresh.device(), c10::Device(c10::DeviceType::PrivateUse1, 1));
}

TEST(DefaultXxnpuGeneratorTest, OutOfRangeDeviceNamesTheValidRange) {
  InitXxnpuGenerators(kDevices);
  for (c10::DeviceIndex d : {c10::DeviceIndex{-1}, kDevices, c10::DeviceIndex{100}}) {
    const std::string expected = "xxnpu device index " + std::to_string(d) +
                                 " is out of range: expected 0 <= device < 3 (valid range [0, 2])";
    EXPECT_THAT(ErrorOf([&] { GetDefaultXxnpuGenerator(d); }), HasSubstr(expected));
    EXPECT_THAT(ErrorOf([&] { CreateXxnpuGenerator(d); }), HasSubstr(expected));
  }
  EXPECT_THAT(ErrorOf([] { InitXxnpuGenerators(kDevices + 1); }),
              HasSubstr("already initialized for 3 devices"));
}

TEST(DefaultXxnpuGeneratorTest, ConcurrentFirstUseYieldsOneGenerator) {
  InitXxnpuGenerators(kDevices);
  constexpr int kThreads = 8;
  std::vector<const at::Generator*> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&seen, t] { seen[t] = &GetDefaultXxnpuGenerator(2); });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(seen[t], &GetDefaultXxnpuGenerator(2));
}

}  // namespace
}  // namespace xxnpu
