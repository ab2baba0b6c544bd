#pragma once
// A seeded pseudo-random permutation of [0, n) that needs no table, so it works
// for billions of elements in O(1) memory (docs/formats-data.md, "Sampler").
//
// Construction: a balanced Feistel network on 2h-bit integers, with 2^(2h) the
// smallest even power of two >= n, is a bijection of [0, 2^(2h)) whatever its
// round function. Restricting it to [0, n) by "cycle walking" (apply it again
// while the result is >= n) is a bijection of [0, n) (Black & Rogaway,
// "Ciphers with Arbitrary Finite Domains", 2002). Since 2^(2h) < 4n, a lookup
// takes fewer than 4 Feistel evaluations on average. The round function is
// Philox4x32-10 keyed by the seed, with the stream (e.g. the epoch) in the
// counter, so every (seed, stream) gives an independent permutation.

#include <cstdint>

namespace zaya {

class FeistelPermutation {
 public:
  FeistelPermutation(uint64_t n, uint64_t seed, uint64_t stream);

  // The image of i (< n).
  uint64_t operator()(uint64_t i) const;

  uint64_t size() const { return n_; }

 private:
  uint64_t feistel(uint64_t x) const;

  uint64_t n_;
  uint64_t seed_;
  uint64_t stream_;
  int half_bits_ = 0;
  uint64_t half_mask_ = 0;
};

}  // namespace zaya
