#pragma once
// The portable dot product of a float32 vector with float32 or bf16 elements
// (matvec's and cached attention's kernels without AVX-512). Its summation
// order is fixed and the same for both element types (16 running sums, then a
// pairwise tree), so a bf16 operand gives exactly the bits of its widened
// float32 copy, which the tests of both callers check. An `omp simd`
// reduction would not: the compiler picks the vector width per element type,
// and with it the order of the sums. The 16 lanes vectorize at any width.

#include <cmath>
#include <cstdint>

#include "zaya/core/bf16.h"

namespace zaya {

inline float widen_element(float v) { return v; }
inline float widen_element(uint16_t v) { return bf16_to_float(v); }

inline constexpr int kDotLanes = 16;

// acc + w x, rounded once where the target has FMA and twice where it has
// not, whatever the compiler would contract: GCC fused the same source line
// in one inlined copy and not in another, and the bits differed.
inline float dot_mul_add(float w, float x, float acc) {
#ifdef __FMA__
  return std::fma(w, x, acc);
#else
  return w * x + acc;  // no FMA instruction to contract into
#endif
}

// The end of the fixed order: elements [i, n) (fewer than kDotLanes) added to
// lanes 0, 1, ... in turn, then the lanes summed as a pairwise tree. matvec's
// AVX2 kernel runs its 16 lanes as two 8-float vectors and ends here too, so
// its bits are dot_widened's.
template <typename W>
inline float dot_widened_finish(float (&acc)[kDotLanes], const W* w, const float* x, int64_t i, int64_t n) {
  for (int j = 0; i < n; ++i, ++j) acc[j] = dot_mul_add(widen_element(w[i]), x[i], acc[j]);
  for (int width = kDotLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  return acc[0];
}

// sum_i widen(w[i]) * x[i] in the fixed order above.
template <typename W>
inline float dot_widened(const W* w, const float* x, int64_t n) {
  float acc[kDotLanes] = {};
  int64_t i = 0;
  for (; i + kDotLanes <= n; i += kDotLanes)
    for (int j = 0; j < kDotLanes; ++j) acc[j] = dot_mul_add(widen_element(w[i + j]), x[i + j], acc[j]);
  return dot_widened_finish(acc, w, x, i, n);
}

}  // namespace zaya
