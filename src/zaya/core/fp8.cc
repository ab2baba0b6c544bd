#include "zaya/core/fp8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace zaya {

float e4m3_to_float(uint8_t code) {
  if (e4m3_is_nan(code)) return std::numeric_limits<float>::quiet_NaN();
  const int e = (code >> 3) & 15, m = code & 7;
  const float mag = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(float(8 + m), e - 10);
  return code & 0x80 ? -mag : mag;
}

uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= 448.0f) return uint8_t(sign | 0x7e);              // saturate (ties at 464 go to 448, the even code, too)
  if (a < 0.015625f)                                         // below 2^-6: subnormal steps of 2^-9, ties to even
    return uint8_t(sign | int(std::nearbyint(a * 512.0f)));  // 8 = 2^-6, the smallest normal's code
  uint32_t u;
  std::memcpy(&u, &a, 4);
  u += 0x7ffffu + ((u >> 20) & 1u);  // round the mantissa to 3 bits, ties to even (a carry bumps the exponent)
  const uint32_t code = (u >> 20) - (120u << 3);  // exponent bias 127 -> 7
  return uint8_t(sign | std::min<uint32_t>(code, 0x7e));
}

void quantize_fp8_channel_row(const float* x, int64_t n, uint8_t* dst) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float scale = amax > 0 ? amax / 448.0f : 1.0f;
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_e4m3(x[i] / scale);
  for (int64_t g = 0; g * kFp8ScaleGroup < n; ++g) std::memcpy(dst + n + 4 * g, &scale, 4);
}

void dequantize_fp8_row(const uint8_t* src, int64_t n, float* dst) {
  const uint8_t* scales = src + n;
  for (int64_t g = 0; g * kFp8ScaleGroup < n; ++g) {
    float s;
    std::memcpy(&s, scales + 4 * g, 4);
    for (int64_t i = g * kFp8ScaleGroup; i < std::min(n, (g + 1) * kFp8ScaleGroup); ++i)
      dst[i] = e4m3_to_float(src[i]) * s;
  }
}

}  // namespace zaya
