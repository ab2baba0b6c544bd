#pragma once
// The portable dot product of a float32 vector with float32 or bf16 elements
// (matvec's and cached attention's kernels without AVX-512). Its summation
// order is fixed and the same for both element types (16 running sums, then a
// pairwise tree), so a bf16 operand gives exactly the bits of its widened
// float32 copy, which the tests of both callers check. An `omp simd`
// reduction would not: the compiler picks the vector width per element type,
// and with it the order of the sums. The 16 lanes vectorize at any width.

#include <cstdint>

#include "zaya/core/bf16.h"

namespace zaya {

inline float widen_element(float v) { return v; }
inline float widen_element(uint16_t v) { return bf16_to_float(v); }

// sum_i widen(w[i]) * x[i] in the fixed order above.
template <typename W>
inline float dot_widened(const W* w, const float* x, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += widen_element(w[i + j]) * x[i + j];
  for (int j = 0; i < n; ++i, ++j) acc[j] += widen_element(w[i]) * x[i];
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0];
}

}  // namespace zaya
