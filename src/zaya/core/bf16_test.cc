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

}  // namespace
}  // namespace zaya
