#include "zaya/plan/gemm_model.h"

#include <gtest/gtest.h>

#include "zaya/plan/builtin_profiles.h"

namespace zaya {
namespace {

TEST(GemmModel, TileQuantizationPenalisesOneRowOverATile) {
  HardwareProfile p = *find_builtin_profile("mi300x-pollara");
  p.compute_units = 1;  // no wave effects: tiles alone
  const GemmModel g(p);
  const GemmEstimate a = g.analytic("bf16", GemmShape{4096, 4096, 4096, false, true});
  const GemmEstimate b = g.analytic("bf16", GemmShape{4097, 4096, 4096, false, true});
  EXPECT_DOUBLE_EQ(a.tile_efficiency, 1.0);
  EXPECT_LT(b.tile_efficiency, 0.95);
  const double fa = GemmShape{4096, 4096, 4096, false, true}.flops(),
               fb = GemmShape{4097, 4096, 4096, false, true}.flops();
  EXPECT_GT(b.seconds / fb, 1.04 * a.seconds / fa);
}

TEST(GemmModel, WaveQuantization) {
  HardwareProfile p = *find_builtin_profile("h100");
  p.op_overhead_us.value = 0;
  const GemmModel g(p);
  // 132 tiles of 128 x 256 fill one wave; 133 need two.
  const GemmEstimate full = g.analytic("bf16", GemmShape{128 * 132, 256, 8192, false, true});
  const GemmEstimate over = g.analytic("bf16", GemmShape{128 * 133, 256, 8192, false, true});
  EXPECT_DOUBLE_EQ(full.wave_efficiency, 1.0);
  EXPECT_NEAR(over.wave_efficiency, 133.0 / 264.0, 1e-12);
}

TEST(GemmModel, SmallGemmsAreMemoryBound) {
  const GemmModel g(*find_builtin_profile("h200"));
  EXPECT_TRUE(g.analytic("bf16", GemmShape{1, 8192, 8192, false, true}).memory_bound);
  EXPECT_FALSE(g.analytic("bf16", GemmShape{8192, 8192, 8192, false, true}).memory_bound);
}

TEST(GemmModel, MeasuredTableTakesPrecedence) {
  GemmEfficiencyTable t;
  t.peak_gflops["f32"] = 100;
  GemmTableEntry e;
  e.dtype = GemmDType::kF32;
  e.shape = GemmShape{512, 512, 512, false, true};
  e.efficiency = 0.5;
  t.entries.push_back(e);
  HardwareProfile p = *find_builtin_profile("h100");
  const GemmModel g(p, {t});
  EXPECT_TRUE(g.has_measurements("f32"));
  EXPECT_FALSE(g.has_measurements("bf16"));
  const GemmEstimate exact = g.estimate("f32", e.shape);
  EXPECT_EQ(exact.basis, "measured");
  EXPECT_NEAR(exact.seconds, e.shape.flops() / (0.5 * 100e9), 1e-15);
  const GemmEstimate near = g.estimate("f32", GemmShape{1024, 512, 512, false, true});
  EXPECT_NE(near.basis.find("nearest measured 512x512x512"), std::string::npos) << near.basis;
  EXPECT_NEAR(near.seconds, 2 * exact.seconds, 1e-15);
  // The median call, when the table has it, is what a step pays.
  t.entries[0].seconds = 1e-3;
  t.entries[0].median_seconds = 3e-3;
  EXPECT_NEAR(GemmModel(p, {t}).estimate("f32", e.shape).seconds, 3 * exact.seconds, 1e-15);
  EXPECT_EQ(g.estimate("bf16", e.shape).basis, "model");
}

}  // namespace
}  // namespace zaya
