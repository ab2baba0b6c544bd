#pragma once
// e^x in float32 as plain arithmetic the compiler vectorises: inside a
// `#pragma omp simd` loop it runs 16 lanes per AVX-512 instruction, where
// libm's expf is one call per element (the softmaxes, the cross-entropy over
// the vocabulary and SwiGLU's sigmoid spent 5-9% of a bf16 training step in
// it). The same expression runs in the vector body and the scalar tail, so a
// value's result does not depend on where it sits in an array or on the
// thread count (bitwise determinism, docs/developer-guide.md "Determinism").
//
// Method: x = n ln2 + r with n = round(x / ln2) and |r| <= ln2 / 2 (ln2 split
// in two so n ln2 is exact); e^r by its Taylor series to r^7 (truncation
// below 1e-8 relative, under one float ulp); 2^n by building the exponent
// bits. Accuracy: within 2 ulp of the exact e^x over the normal range
// (core/exp_f32_test.cc sweeps it against double exp). Edges: x < -86 gives
// 0 (e^-86 = 4.5e-38; the softmax weights this flushes are below float's
// resolution next to the row maximum's 1), x > ln(FLT_MAX) gives +inf, -inf
// gives 0, NaN stays NaN.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace zaya {

inline constexpr float kExpF32FlushBelow = -86.0f;
inline constexpr float kExpF32Overflow = 88.72283905f;  // ln(FLT_MAX) rounded to float (just above it)

inline float exp_f32(float x) {
  const float xc = std::min(std::max(x, kExpF32FlushBelow), kExpF32Overflow);
  // n = round(x / ln2): adding 1.5 * 2^23 leaves n in the low mantissa bits.
  constexpr float kShift = 12582912.0f;
  const float shifted = std::fma(xc, 1.44269504088896341f, kShift);
  const float n = shifted - kShift;
  int32_t n_int;
  std::memcpy(&n_int, &shifted, 4);
  n_int -= 0x4B400000;  // the bits of kShift
  // r = x - n ln2 with ln2 = 0.693145751953125 (few bits: n * it is exact) + 1.4286068e-6.
  float r = std::fma(n, -0.693145751953125f, xc);
  r = std::fma(n, -1.42860682030941723212e-6f, r);
  // e^r = sum r^k / k!, k <= 7, by Horner.
  float p = 1.0f / 5040.0f;
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  // 2^n as 2 * 2^(n-1): n is in [-124, 128], so n - 1 + 127 is a normal exponent field
  // (shifted unsigned: a NaN input's garbage n stays defined; its result is replaced below).
  const uint32_t bits = uint32_t(n_int + 126) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  float y = (p * 2.0f) * scale;
  y = x < kExpF32FlushBelow ? 0.0f : y;
  y = x > kExpF32Overflow ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

// exp for the ops' float and double instantiations: float takes exp_f32, the
// float64 references keep libm.
template <typename T>
inline T exp_of(T x) {
  return std::exp(x);
}
template <>
inline float exp_of<float>(float x) {
  return exp_f32(x);
}

}  // namespace zaya
