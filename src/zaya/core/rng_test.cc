#include "zaya/core/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace zaya {
namespace {

// Known-answer test from the Random123 distribution (kat_vectors, philox4x32_10):
// counter = 0, key = 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
TEST(Rng, PhiloxKnownAnswer) {
  auto b = philox4x32(0, 0, 0);
  EXPECT_EQ(b[0], 0x6627e8d5u);
  EXPECT_EQ(b[1], 0xe169c58du);
  EXPECT_EQ(b[2], 0xbc57ac4cu);
  EXPECT_EQ(b[3], 0x9b00dbd8u);
}

TEST(Rng, NormalMomentsAndDeterminism) {
  const size_t n = 200000;
  std::vector<float> a(n), b(n);
  fill_normal(a.data(), n, 0.0f, 1.0f, 42, 7);
  fill_normal(b.data(), n, 0.0f, 1.0f, 42, 7);
  double sum = 0, sq = 0;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(a[i], b[i]);
    sum += a[i];
    sq += double(a[i]) * a[i];
  }
  double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(var, 1.0, 0.02);
  std::vector<float> c(n);
  fill_normal(c.data(), n, 0.0f, 1.0f, 42, 8);
  EXPECT_NE(a[0], c[0]);
}

TEST(Rng, NextBelowIsInRangeAndResumable) {
  Rng r{1, 2, 0};
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.next_below(17), 17u);
  Rng copy = r;
  EXPECT_EQ(r.next_u64(), copy.next_u64());
}

}  // namespace
}  // namespace zaya
