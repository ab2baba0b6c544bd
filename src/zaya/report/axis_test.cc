#include "zaya/report/axis.h"

#include <gtest/gtest.h>

#include <cmath>

namespace zaya {
namespace {

TEST(SvgAxis, LinearTicksAreNiceAndCoverTheData) {
  AxisTicks t = linear_ticks(0.3, 9.7);
  EXPECT_EQ(t.lo, 0);
  EXPECT_EQ(t.hi, 10);
  EXPECT_EQ(t.values, (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0", "2", "4", "6", "8", "10"}));

  t = linear_ticks(2.13, 10.84);  // a loss curve
  EXPECT_EQ(t.lo, 2);
  EXPECT_EQ(t.hi, 11);
  EXPECT_EQ(t.labels.front(), "2");
  EXPECT_EQ(t.labels.back(), "11");

  t = linear_ticks(-0.25, 0.35);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"-0.3", "-0.2", "-0.1", "0", "0.1", "0.2", "0.3", "0.4"}));
}

TEST(SvgAxis, LinearTickCountStaysReasonable) {
  for (double lo : {-1e9, -3.0, 0.0, 1e-7, 12345.0})
    for (double width : {1e-6, 0.37, 1.0, 99.0, 5e8}) {
      AxisTicks t = linear_ticks(lo, lo + width);
      EXPECT_GE(t.values.size(), 4u) << lo << " " << width;
      EXPECT_LE(t.values.size(), 12u) << lo << " " << width;
      // Data within 1e-9 of a step past a tick counts as on it (rounding noise).
      const double slack = 1e-9 * (t.hi - t.lo);
      EXPECT_LE(t.lo, lo + slack);
      EXPECT_GE(t.hi, lo + width - slack);
      EXPECT_EQ(t.values.front(), t.lo);
      EXPECT_EQ(t.values.back(), t.hi);
    }
}

TEST(SvgAxis, DegenerateRangesAreWidened) {
  AxisTicks zero = linear_ticks(0, 0);
  EXPECT_LT(zero.lo, 0);
  EXPECT_GT(zero.hi, 0);
  AxisTicks five = linear_ticks(5, 5);
  EXPECT_LT(five.lo, 5);
  EXPECT_GT(five.hi, 5);
  AxisTicks one = log10_ticks(3, 3);
  EXPECT_EQ(one.lo, 1);
  EXPECT_EQ(one.hi, 10);
}

TEST(SvgAxis, LargeAndSmallNumbersUseExponents) {
  AxisTicks t = linear_ticks(0, 2e9);
  EXPECT_EQ(t.labels[1], "5e8");
  EXPECT_EQ(t.labels.back(), "2e9");
  EXPECT_EQ(format_linear_tick(2.5e8, 5e7, 1e9), "2.5e8");
  EXPECT_EQ(format_linear_tick(2e-5, 1e-5, 5e-5), "2e-5");
}

TEST(SvgAxis, Log10TicksArePowersOfTen) {
  AxisTicks t = log10_ticks(0.003, 420);
  EXPECT_EQ(t.lo, 1e-3);
  EXPECT_EQ(t.hi, 1e3);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.001", "0.01", "0.1", "1", "10", "100", "1000"}));
  EXPECT_EQ(t.minor.size(), 6u * 8u);

  // Many decades: every k-th decade, still powers of ten, top labelled.
  t = log10_ticks(1e-12, 1e12);
  EXPECT_LE(t.values.size(), 12u);
  EXPECT_TRUE(t.minor.empty());
  for (size_t i = 0; i < t.values.size(); ++i) {
    double e = std::log10(t.values[i]);
    EXPECT_NEAR(e, std::round(e), 1e-9);
    EXPECT_EQ(std::strtod(t.labels[i].c_str(), nullptr), t.values[i]) << t.labels[i];
  }
  EXPECT_EQ(t.values.back(), t.hi);
  EXPECT_EQ(t.labels.front(), "1e-12");
  EXPECT_EQ(format_power_of_ten(-5, false), "1e-5");
  EXPECT_EQ(format_power_of_ten(6, false), "1e6");
  EXPECT_EQ(format_power_of_ten(-2, true), "0.01");
  EXPECT_EQ(format_power_of_ten(0, true), "1");
}

TEST(SvgAxis, MapsValuesToPixels) {
  AxisMap lin(AxisScale::kLinear, 0, 10, 100, 200);
  EXPECT_DOUBLE_EQ(lin(5), 150);
  AxisMap up(AxisScale::kLinear, 0, 10, 400, 0);  // screen y grows downwards
  EXPECT_DOUBLE_EQ(up(10), 0);
  AxisMap log(AxisScale::kLog10, 1, 1000, 0, 300);
  EXPECT_NEAR(log(10), 100, 1e-9);
  EXPECT_FALSE(log.valid(0));
  EXPECT_FALSE(log.valid(-1));
  EXPECT_FALSE(lin.valid(NAN));
  EXPECT_TRUE(lin.valid(-1));
}

}  // namespace
}  // namespace zaya
