#include "zaya/core/erf_f32.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::ulp_distance;

// Every 128th float from the smallest positive normal to 4.5 (past the clamp),
// both signs: about 8.6 million values, each against double erf rounded once.
TEST(ErfF32, WithinTwoUlpOfExactOverAllFloats) {
  int64_t worst = 0;
  float worst_x = 0;
  uint32_t first, last;
  const float lo = std::numeric_limits<float>::min(), hi = 4.5f;
  std::memcpy(&first, &lo, 4);
  std::memcpy(&last, &hi, 4);
  for (uint32_t bits = first; bits <= last; bits += 128) {
    float x;
    std::memcpy(&x, &bits, 4);
    for (const float v : {x, -x}) {
      const int64_t d = ulp_distance(erf_f32(v), float(std::erf(double(v))));
      if (d > worst) worst = d, worst_x = v;
    }
  }
  EXPECT_LE(worst, 2) << "worst at x = " << worst_x;
  // Each side of the split between the two approximations, float by float.
  float x = std::nextafter(kErfF32Split, 0.0f);
  for (int i = 0; i < 2000; ++i, x = std::nextafter(x, 1.0f))
    EXPECT_LE(ulp_distance(erf_f32(x), float(std::erf(double(x)))), 2) << "x = " << x;
}

TEST(ErfF32, Edges) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(erf_f32(inf), 1.0f);
  EXPECT_EQ(erf_f32(-inf), -1.0f);
  EXPECT_EQ(erf_f32(4.0f), 1.0f);
  EXPECT_EQ(erf_f32(1e30f), 1.0f);
  EXPECT_EQ(erf_f32(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(erf_f32(-0.0f)));
  EXPECT_LE(ulp_distance(erf_f32(1e-30f), float(std::erf(double(1e-30f)))), 1);  // 2x / sqrt(pi) near zero
  EXPECT_TRUE(std::isnan(erf_f32(std::numeric_limits<float>::quiet_NaN())));
}

// The vectorised loop body and its scalar tail give the same bits.
TEST(ErfF32, SameBitsInAVectorLoopAsAlone) {
  // About [-5.4, 5.4]: both approximations and the clamp.
  std::vector<float> x = testing::spread_floats(1037, 11u, 2.5e-9f);
  x[3] = std::numeric_limits<float>::infinity();
  x[500] = std::numeric_limits<float>::quiet_NaN();
  testing::expect_same_bits_in_vector_loop_as_alone(x, [](float v) { return erf_f32(v); });
}

TEST(ErfF32, DoubleInstantiationKeepsLibm) {
  EXPECT_EQ(erf_of<double>(0.37), std::erf(0.37));
  EXPECT_EQ(erf_of<float>(0.37f), erf_f32(0.37f));
}

}  // namespace
}  // namespace zaya
