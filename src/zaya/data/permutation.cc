#include "zaya/data/permutation.h"

#include <bit>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"

namespace zaya {
namespace {

// Four rounds make a Feistel network over a pseudo-random function a strong
// pseudo-random permutation (Luby & Rackoff 1988); two more are cheap margin.
constexpr int kRounds = 6;
// Tags the Philox counters of this use (bits 40..63 of the low counter word),
// so that a seed shared with other users of philox4x32 (parameter init,
// dropout) gives unrelated numbers.
constexpr uint64_t kPermutationTag = 0x5A5045;  // "ZPE"

}  // namespace

FeistelPermutation::FeistelPermutation(uint64_t n, uint64_t seed, uint64_t stream)
    : n_(n), seed_(seed), stream_(stream) {
  ZAYA_CHECK(n > 0, "a permutation needs at least one element (n = 0)");
  // Bits needed for the largest value n - 1, rounded up to an even count >= 2.
  int bits = n > 1 ? std::bit_width(n - 1) : 1;
  half_bits_ = (bits + 1) / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;  // half_bits_ <= 32
}

uint64_t FeistelPermutation::feistel(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (int round = 0; round < kRounds; ++round) {
    // right has at most 32 bits; the round number (bits 32..39) and the tag fill the rest.
    uint64_t counter_lo = (kPermutationTag << 40) | (static_cast<uint64_t>(round) << 32) | right;
    uint64_t f = philox4x32(seed_, stream_, counter_lo)[0] & half_mask_;
    uint64_t next_right = left ^ f;
    left = right;
    right = next_right;
  }
  return (left << half_bits_) | right;
}

uint64_t FeistelPermutation::operator()(uint64_t i) const {
  ZAYA_ASSERT(i < n_);
  uint64_t x = i;
  do {
    x = feistel(x);
  } while (x >= n_);
  return x;
}

}  // namespace zaya
