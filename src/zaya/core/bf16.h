#pragma once
// bfloat16 and IEEE half <-> float conversions, the only ones in zaya.cpp
// (round to nearest even, NaN kept quiet).

#include <cstdint>
#include <cstring>

namespace zaya {

inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// x[i] = the float of x[i]'s bf16 rounding, in place (values a bf16 store will hold exactly).
inline void round_to_bf16(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_float(float_to_bf16(x[i]));
}

// IEEE half -> float (F16 safetensors and GGUF, half-precision reductions).
float f16_to_float(uint16_t h);
// float -> IEEE half, round to nearest even (overflow to infinity, subnormals kept).
uint16_t float_to_f16(float f);

}  // namespace zaya
