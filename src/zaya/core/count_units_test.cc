// Counts in readable units: each in its own, and a group in its largest's.
#include "zaya/core/count_units.h"

#include <gtest/gtest.h>

namespace zaya {
namespace {

TEST(CountUnits, OwnUnit) {
  EXPECT_EQ(format_count(1550152), "1.55M");
  EXPECT_EQ(format_count(8.84e9), "8.84B");
  EXPECT_EQ(format_count(28672), "28.7K");
  EXPECT_EQ(format_count(436040), "436K");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(99.96e6), "100M");
  EXPECT_EQ(format_count(1.2e12), "1.20T");
}

TEST(CountUnits, SharedUnitOfTheLargest) {
  const CountUnit u = count_unit(1550152);
  EXPECT_STREQ(u.suffix, "M");
  EXPECT_EQ(format_count(436040, u), "0.44M");
  EXPECT_EQ(format_count(1550152, u), "1.55M");
}

}  // namespace
}  // namespace zaya
