#include "zaya/core/bf16.h"

#include <gtest/gtest.h>

#include <cmath>

namespace zaya {
namespace {

TEST(Bf16, RoundTripAndRounding) {
  for (float f : {0.0f, 1.0f, -2.5f, 3.140625f, 0.15625f, 65536.0f, -0.0078125f})
    EXPECT_EQ(bf16_to_float(float_to_bf16(f)), f);
  // 1 + 2^-8 lies exactly between two bf16 values; ties go to even (1.0).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

TEST(Bf16, HalfToFloat) {
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0xc000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(f16_to_float(0x7c00)));
}

// Every half value survives float and back; ties round to even; overflow gives infinity.
TEST(Bf16, FloatToHalf) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float f = f16_to_float(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(f)))) << h;
      continue;
    }
    EXPECT_EQ(float_to_f16(f), uint16_t(h)) << h;
  }
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // halfway to 1 + 2^-10: to even (1)
  EXPECT_EQ(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // halfway, odd below: up
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);                          // halfway past the largest: infinity
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: to even (0)
  EXPECT_EQ(float_to_f16(-2048.0f), 0xe800);
}

}  // namespace
}  // namespace zaya
