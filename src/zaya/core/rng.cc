#include "zaya/core/rng.h"

#include <omp.h>

namespace zaya {

std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_hi, uint64_t counter_lo) {
  // Constants from the Philox paper (Random123).
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter_lo), c1 = static_cast<uint32_t>(counter_lo >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter_hi), c3 = static_cast<uint32_t>(counter_hi >> 32);
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {c0, c1, c2, c3};
}

float normal01(uint64_t seed, uint64_t stream, uint64_t index) {
  auto b = philox4x32(seed, stream, index);
  // u1 in (0, 1] so that log(u1) is finite; u2 in [0, 1).
  double u1 = (static_cast<double>(b[0]) + 1.0) * (1.0 / 4294967296.0);
  double u2 = static_cast<double>(b[1]) * (1.0 / 4294967296.0);
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

void fill_normal(float* x, size_t n, float mean, float std, uint64_t seed, uint64_t stream) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) x[i] = mean + std * normal01(seed, stream, i);
}

uint64_t Rng::next_below(uint64_t n) {
  if (n <= 1) return 0;
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    uint64_t v = next_u64();
    if (v < limit) return v % n;
  }
}

}  // namespace zaya
