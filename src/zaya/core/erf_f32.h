#pragma once
// erf(x) in float32 as plain arithmetic the compiler vectorises, for GELU
// (the router MLP's activation: about 8 million erf values a `small` step,
// one libm call each before). Like exp_f32 (core/exp_f32.h), the vector body
// and a scalar tail run the same expression, so a value's result depends only
// on the value (bitwise determinism, docs/developer-guide.md "Determinism").
//
// Method, on a = |x| (erf is odd; the sign is put back at the end):
//   a < 0.921875:  erf(a) = a P(a^2), P of degree 6 (relative error of the
//                  approximation 4e-10, far under float's 6e-8);
//   a >= 0.921875: erf(a) = 1 - e^(-a^2) Q(a), Q(a) ~ erfc(a) e^(a^2) of
//                  degree 11 in a mapped onto [-1, 1] over [0.921875, 4]
//                  (relative error 2e-7 of erfc, which is at most 0.19 there:
//                  under 4e-8 absolute); a is clamped at 4, where
//                  erfc(4) = 1.5e-8 is below half an ulp of 1, so erf = 1.
// Both coefficient sets are least-squares fits (iteratively reweighted
// towards the smallest maximum error) against double erf and erfc.
// Accuracy: within 2 ulp of the exact erf over all floats
// (core/erf_f32_test.cc sweeps it against double erf). Edges: erf(+-inf) =
// +-1, erf(-0) = -0, NaN stays NaN.

#include <algorithm>
#include <cmath>

#include "zaya/core/exp_f32.h"

namespace zaya {

inline constexpr float kErfF32Split = 0.921875f;  // the two approximations meet here

inline float erf_f32(float x) {
  const float a = std::min(std::fabs(x), 4.0f);
  const float t = a * a;
  // Small a: a P(t).
  float p = 8.370365893094822e-05f;
  p = std::fma(p, t, -0.0008142778883089582f);
  p = std::fma(p, t, 0.005201040373726329f);
  p = std::fma(p, t, -0.026859402479564993f);
  p = std::fma(p, t, 0.1128369560142575f);
  p = std::fma(p, t, -0.37612633746896795f);
  p = std::fma(p, t, 1.1283791666411416f);
  const float small = a * p;
  // Large a: 1 - e^(-t) Q(s), s = (a - 2.4609375) / 1.5390625 in [-1, 1].
  const float s = (a - 2.4609375f) * (1.0f / 1.5390625f);
  float q = -5.246089131105691e-05f;
  q = std::fma(q, s, 0.0001424924557795748f);
  q = std::fma(q, s, -0.00020813253649976104f);
  q = std::fma(q, s, 0.0004884289228357375f);
  q = std::fma(q, s, -0.0013179780216887593f);
  q = std::fma(q, s, 0.0030613902490586042f);
  q = std::fma(q, s, -0.006778130307793617f);
  q = std::fma(q, s, 0.01466587744653225f);
  q = std::fma(q, s, -0.03061736561357975f);
  q = std::fma(q, s, 0.061347294598817825f);
  q = std::fma(q, s, -0.1174810454249382f);
  q = std::fma(q, s, 0.21374908089637756f);
  const float large = 1.0f - exp_f32(-t) * q;
  const float y = std::copysign(a < kErfF32Split ? small : large, x);
  return x != x ? x : y;
}

// erf for the ops' float and double instantiations: float takes erf_f32, the
// float64 references keep libm.
template <typename T>
inline T erf_of(T x) {
  return std::erf(x);
}
template <>
inline float erf_of<float>(float x) {
  return erf_f32(x);
}

}  // namespace zaya
