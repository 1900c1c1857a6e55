// Philox4x32-10, the counter-based random engine behind every xxnpu random op.
//
// Why counter-based: a kernel on the simulated chip is split across device threads, and
// the split depends on the thread count and chunking. A sequential engine (mt19937) would
// make results depend on that split. Philox is a keyed bijection of a 128-bit counter, so
// any element's random bits can be computed directly from (seed, offset, element index).
//
// The addressing rule (all xxnpu random kernels follow it):
//   - the host reserves a range of the generator's offset with
//     XxnpuGeneratorImpl::philox_reserve(n) (offsets count uint32 values, in steps of 4);
//   - element i of the op uses Philox block (offset / 4 + i / 4) of subsequence 0, word
//     (i % 4), i.e. philox_uint32_at(seed, offset, i).
// So results depend only on (seed, offset, i), never on how the work was divided.
//
// Header-only and torch-free on purpose: device kernels include it without libtorch.
// The counter/key layout matches curand's and torch's at::philox_engine (counter words
// 0-1 = offset in 128-bit blocks, words 2-3 = subsequence, key = seed), and the round
// function is checked against the Random123 paper's known-answer vectors in
// xxnpu_generator_test.cc.
#ifndef TORCH_XXNPU_DEVICE_GENERATOR_PHILOX_H_
#define TORCH_XXNPU_DEVICE_GENERATOR_PHILOX_H_

#include <array>
#include <cmath>
#include <cstdint>

namespace xxnpu {

struct Philox4x32 {
  using Counter = std::array<uint32_t, 4>;
  using Key = std::array<uint32_t, 2>;

  // Constants from Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3" (SC11).
  static constexpr uint32_t kMul0 = 0xD2511F53u;
  static constexpr uint32_t kMul1 = 0xCD9E8D57u;
  static constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
  static constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1
  static constexpr int kRounds = 10;

  // Stream `subsequence` of key `seed`, positioned `offset` 128-bit blocks in.
  constexpr Philox4x32(uint64_t seed, uint64_t subsequence, uint64_t offset)
      : counter_{static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32),
                 static_cast<uint32_t>(subsequence),
                 static_cast<uint32_t>(subsequence >> 32)},
        key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)} {}

  // The 4 uint32 of the current block; then advances the 128-bit counter by one (with
  // carry from the offset words into the subsequence words, wrapping at 2^128).
  constexpr std::array<uint32_t, 4> next() {
    const Counter out = block(counter_, key_);
    for (uint32_t& word : counter_) {
      if (++word != 0) break;
    }
    return out;
  }

  // The bare Philox4x32-10 bijection: 10 rounds of counter mixing under a key schedule.
  static constexpr Counter block(Counter ctr, Key key) {
    for (int round = 0; round < kRounds; ++round) {
      if (round > 0) {
        key[0] += kWeyl0;
        key[1] += kWeyl1;
      }
      const uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr[0];
      const uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr[2];
      const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32);
      const uint32_t lo0 = static_cast<uint32_t>(p0);
      const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32);
      const uint32_t lo1 = static_cast<uint32_t>(p1);
      ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    }
    return ctr;
  }

 private:
  Counter counter_;
  Key key_;
};

// The addressing rule above: element `index` of an op whose reservation is
// (seed, offset). `offset` is the generator offset (a multiple of 4).
constexpr uint32_t philox_uint32_at(uint64_t seed, uint64_t offset, uint64_t index) {
  return Philox4x32(seed, 0, offset / 4 + index / 4).next()[index % 4];
}

// A float in [0, 1): the top 24 bits scaled by 2^-24. 24 bits is float's precision, so
// every result is exact and 1.0f can never come out (a plain x * 2^-32 rounds to 1.0f
// for x near 2^32).
constexpr float uniform_float(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

// Box-Muller: two independent standard normals from two uint32. The radius uses
// 1 - uniform_float(a), which lies in (0, 1], so log() never sees 0.
inline std::array<float, 2> normal_pair(uint32_t a, uint32_t b) {
  constexpr float kTwoPi = 6.28318530717958647692f;
  const float u1 = 1.0f - uniform_float(a);
  const float u2 = uniform_float(b);
  const float radius = std::sqrt(-2.0f * std::log(u1));
  const float theta = kTwoPi * u2;
  return {radius * std::cos(theta), radius * std::sin(theta)};
}

}  // namespace xxnpu

#endif  // TORCH_XXNPU_DEVICE_GENERATOR_PHILOX_H_
