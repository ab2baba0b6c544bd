#include "zaya/core/exp_f32.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::ulp_distance;

TEST(ExpF32, WithinTwoUlpOfExactOverTheNormalRange) {
  int64_t worst = 0;
  float worst_x = 0;
  for (float x = kExpF32FlushBelow; x <= kExpF32Overflow; x = std::nextafter(x + 1e-4f * std::fabs(x), 1e30f)) {
    const float exact = float(std::exp(double(x)));
    const int64_t d = ulp_distance(exp_f32(x), exact);
    if (d > worst) worst = d, worst_x = x;
  }
  EXPECT_LE(worst, 2) << "worst at x = " << worst_x;
  // Near zero, where softmax arguments cluster, every float in [-1, 1] / 2^10 steps.
  for (int i = -4096; i <= 4096; ++i) {
    const float x = float(i) / 4096.0f;
    EXPECT_LE(ulp_distance(exp_f32(x), float(std::exp(double(x)))), 2) << "x = " << x;
  }
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-0.0f), 1.0f);
}

TEST(ExpF32, Edges) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_f32(-inf), 0.0f);
  EXPECT_EQ(exp_f32(-86.5f), 0.0f);  // flushed: below e^-86
  EXPECT_GT(exp_f32(-86.0f), 0.0f);
  EXPECT_EQ(exp_f32(inf), inf);
  EXPECT_EQ(exp_f32(89.0f), inf);
  const float largest_finite = std::nextafter(kExpF32Overflow, 0.0f);  // the float below ln(FLT_MAX)
  EXPECT_TRUE(std::isfinite(exp_f32(largest_finite)));
  EXPECT_GT(exp_f32(largest_finite), 3.0e38f);
  EXPECT_EQ(exp_f32(kExpF32Overflow), inf);  // the float just above ln(FLT_MAX) rounds up to it
  EXPECT_TRUE(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
}

// The vectorised loop body and its scalar tail give the same bits: a value's
// result does not depend on its position in an array (or on threads).
TEST(ExpF32, SameBitsInAVectorLoopAsAlone) {
  std::vector<float> x = testing::spread_floats(1037, 7u, 4.5e-8f);  // about [-97, 97]: every branch
  x[5] = -std::numeric_limits<float>::infinity();
  x[700] = std::numeric_limits<float>::quiet_NaN();
  testing::expect_same_bits_in_vector_loop_as_alone(x, [](float v) { return exp_f32(v); });
}

TEST(ExpF32, DoubleInstantiationKeepsLibm) {
  EXPECT_EQ(exp_of<double>(0.37), std::exp(0.37));
  EXPECT_EQ(exp_of<float>(0.37f), exp_f32(0.37f));
}

}  // namespace
}  // namespace zaya
