#include "zaya/core/sum_squares.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace zaya {
namespace {

// The documented order, written out element by element: partial i mod 8,
// the partials added pairwise, then the tail.
double sum_squares_by_contract(const std::vector<float>& x) {
  const int64_t n = int64_t(x.size()), body = n / 8 * 8;
  double lane[8] = {};
  for (int64_t i = 0; i < body; ++i) lane[i % 8] += double(x[i]) * double(x[i]);
  double s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (int64_t i = body; i < n; ++i) s += double(x[i]) * double(x[i]);
  return s;
}

TEST(SumSquares, FollowsTheFixedOrderBitForBit) {
  for (int64_t n : {0, 1, 7, 8, 9, 63, 64, 65, 1000, 65537}) {
    std::vector<float> x(static_cast<size_t>(n));
    uint32_t state = 12345u + uint32_t(n);
    for (float& v : x) {
      state = state * 1664525u + 1013904223u;
      v = float(int32_t(state)) * 1e-9f * ((state >> 7) % 3 == 0 ? 1e4f : 1.0f);  // mixed magnitudes
    }
    const double got = sum_squares(x.data(), n), want = sum_squares_by_contract(x);
    EXPECT_EQ(got, want) << "n = " << n;
    double plain = 0;
    for (float v : x) plain += double(v) * v;
    EXPECT_NEAR(got, plain, 1e-12 * plain) << "n = " << n;
  }
}

TEST(SumSquares, PropagatesNonFiniteValues) {
  std::vector<float> x(20, 1.0f);
  x[13] = NAN;
  EXPECT_TRUE(std::isnan(sum_squares(x.data(), 20)));
  x[13] = INFINITY;
  EXPECT_TRUE(std::isinf(sum_squares(x.data(), 20)));
}

}  // namespace
}  // namespace zaya
