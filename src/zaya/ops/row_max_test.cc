#include "zaya/ops/row_max.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "zaya/core/rng.h"

namespace zaya {
namespace {

// The running max the softmaxes used before, element by element.
float running_max(const std::vector<float>& x) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : x) mx = std::max(mx, v);
  return mx;
}

TEST(RowMax, EqualsTheRunningMaxAtEveryLengthAndPosition) {
  Rng rng{7, 0, 0};
  for (int64_t n = 0; n <= 70; ++n) {
    for (int64_t at = 0; at < n; ++at) {  // the maximum at every position, lanes and tail alike
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = float(rng.next_double()) * 2 - 1;
      x[size_t(at)] = 3.5f;
      EXPECT_EQ(row_max(x.data(), n), 3.5f) << "n " << n << " at " << at;
      EXPECT_EQ(row_max(x.data(), n), running_max(x));
    }
  }
  EXPECT_EQ(row_max<float>(nullptr, 0), -std::numeric_limits<float>::infinity());
}

TEST(RowMax, SkipsNaNsAndKeepsInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> x(37, -5.0f);
  x[3] = nan;
  x[20] = 2.0f;
  x[36] = nan;
  EXPECT_EQ(row_max(x.data(), 37), 2.0f);
  x[17] = inf;
  EXPECT_EQ(row_max(x.data(), 37), inf);
  std::vector<float> all_nan(19, nan);
  EXPECT_EQ(row_max(all_nan.data(), 19), -inf);
  std::vector<float> lows(40, -inf);
  EXPECT_EQ(row_max(lows.data(), 40), -inf);
}

}  // namespace
}  // namespace zaya
