#include "zaya/core/bf16.h"

#include <cstring>

namespace zaya {

float f16_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));  // quiet NaN
  // 65520 = 0x477ff000 is halfway between the largest half (65504) and 2^16;
  // the tie goes to the even neighbour, which is infinity.
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs <= 0x33000000u) return sign;  // at most 2^-25 (half the smallest subnormal): rounds to zero
  uint32_t h;
  uint32_t rem;
  uint32_t halfway;
  if (abs < 0x38800000u) {  // below 2^-14: a half subnormal, units of 2^-24
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24 in this range
    h = mantissa >> shift;
    rem = mantissa & ((uint32_t{1} << shift) - 1);
    halfway = uint32_t{1} << (shift - 1);
  } else {  // normal: rebias the exponent, drop 13 mantissa bits
    const uint32_t rebased = abs - (uint32_t{127 - 15} << 23);
    h = rebased >> 13;
    rem = rebased & 0x1fffu;
    halfway = 0x1000u;
  }
  if (rem > halfway || (rem == halfway && (h & 1u))) ++h;  // a carry moves into the exponent, as it should
  return static_cast<uint16_t>(sign | h);
}

}  // namespace zaya
