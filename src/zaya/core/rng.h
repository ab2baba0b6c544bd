#pragma once
// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
// A value depends only on (seed, stream, index), never on thread count or call
// order, so initialisation and sampling are bit-reproducible and resumable: the
// whole state of a generator is its counter.

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace zaya {

// One Philox4x32-10 block: 128 random bits for a 128-bit counter and 64-bit key.
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo);

// Uniform in [0, 1) with 24 random bits; the value for `index` of `stream`.
inline float uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  uint32_t bits = philox4x32(seed, stream, index)[0];
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// Standard normal (Box-Muller on one Philox block); the value for `index` of `stream`.
float normal01(uint64_t seed, uint64_t stream, uint64_t index);

// x[i] = mean + std * normal01(seed, stream, i) for i < n, in parallel.
void fill_normal(float* x, size_t n, float mean, float std, uint64_t seed, uint64_t stream);

// A sequential generator for sampling loops: its full state is (seed, stream, counter).
struct Rng {
  uint64_t seed = 0;
  uint64_t stream = 0;
  uint64_t counter = 0;

  uint32_t next_u32() { return philox4x32(seed, stream, counter++)[0]; }
  uint64_t next_u64() {
    auto b = philox4x32(seed, stream, counter++);
    return (static_cast<uint64_t>(b[0]) << 32) | b[1];
  }
  // Uniform in [0, 1) with 53 random bits.
  double next_double() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
  // Uniform integer in [0, n), unbiased (rejection on the top range).
  uint64_t next_below(uint64_t n);
};

}  // namespace zaya
