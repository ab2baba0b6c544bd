#include "zaya/plan/comm_model.h"

#include <gtest/gtest.h>

#include "zaya/plan/builtin_profiles.h"

namespace zaya {
namespace {

HardwareProfile two_curve_profile() {
  HardwareProfile p = *find_builtin_profile("h100");
  p.comm.clear();
  CommCurve c;
  c.collective = "all_reduce";
  c.ranks = 8;
  c.scope = "intra";
  c.points = {{1 << 20, 10.0}, {4 << 20, 40.0}};
  p.comm.push_back(c);
  c.ranks = 64;
  c.scope = "inter";
  c.points = {{1 << 20, 1.0}, {4 << 20, 4.0}};
  p.comm.push_back(c);
  return p;
}

TEST(CommModel, BusbwFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(comm_busbw_factor("all_reduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(comm_busbw_factor("reduce_scatter", 4), 0.75);
  EXPECT_DOUBLE_EQ(comm_busbw_factor("all_to_all", 2), 0.5);
  EXPECT_DOUBLE_EQ(comm_busbw_factor("broadcast", 8), 1.0);
}

TEST(CommModel, InterpolatesAndConvertsBusbwToTime) {
  const HardwareProfile p = two_curve_profile();
  const CommEstimate at = estimate_collective(p, "all_reduce", 8, 4 << 20);
  EXPECT_DOUBLE_EQ(at.busbw_gbps, 40.0);
  // time = bytes / (busbw / (2 (n-1) / n))
  EXPECT_NEAR(at.seconds, double(4 << 20) / (40e9 / 1.75), 1e-12);
  const CommEstimate mid = estimate_collective(p, "all_reduce", 8, 2 << 20);
  EXPECT_NEAR(mid.busbw_gbps, 20.0,
              1e-9);  // halfway in log(size) between 10 and 40
  // Below the first point: the first point's time (latency-bound).
  EXPECT_DOUBLE_EQ(estimate_collective(p, "all_reduce", 8, 1024).seconds,
                   estimate_collective(p, "all_reduce", 8, 1 << 20).seconds);
  // Above the last: constant busbw, so time grows linearly.
  EXPECT_NEAR(estimate_collective(p, "all_reduce", 8, 16 << 20).seconds, 4 * at.seconds, 1e-12);
}

TEST(CommModel, PicksTheScopeAndNearestGroupSize) {
  const HardwareProfile p = two_curve_profile();
  EXPECT_EQ(estimate_collective(p, "all_reduce", 4, 1 << 20).curve->ranks, 8);
  EXPECT_EQ(estimate_collective(p, "all_reduce", 16, 1 << 20).curve->ranks,
            64);  // crosses nodes
  EXPECT_EQ(estimate_collective(p, "all_reduce", 1, 1 << 20).seconds, 0);
  const CommEstimate none = estimate_collective(p, "all_to_all", 8, 1 << 20);
  EXPECT_TRUE(none.missing);
}

TEST(CommModel, BuiltinCurvesGrowTowardsTheirPeak) {
  const HardwareProfile& p = *find_builtin_profile("mi300x-pollara");
  double last = 0;
  for (double bytes = 4096; bytes < 1e9; bytes *= 8) {
    const CommEstimate e = estimate_collective(p, "reduce_scatter", 1024, bytes);
    EXPECT_GT(e.busbw_gbps, last);
    EXPECT_LE(e.busbw_gbps, 45.0);
    last = e.busbw_gbps;
  }
}

}  // namespace
}  // namespace zaya
