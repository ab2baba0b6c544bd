#include "zaya/plan/profile_measure.h"

#include <gtest/gtest.h>

#include "zaya/plan/step_model.h"

namespace zaya {
namespace {

// A quick measurement of this machine: tiny sweeps, every figure marked
// measured, and a profile the planner accepts (no timing is asserted).
TEST(ProfileMeasure, QuickProfileIsValidAndUsable) {
  auto world = make_world_comm();
  ProfileMeasureOptions o;
  o.quick = true;
  o.name = "unit-test";
  o.models = {"tiny"};
  o.micro_batches = {1};
  o.seq_lens = {64};
  const HardwareProfile p = measure_profile(o, *world);
  EXPECT_EQ(p.device_kind, "cpu");
  EXPECT_EQ(p.peak_f32_gflops.source, "measured");
  EXPECT_EQ(p.membw_gbps.source, "measured");
  ASSERT_TRUE(p.gemm_table.has_value());
  const HardwareProfile q = HardwareProfile::from_json(p.to_json(), "round trip");
  EXPECT_EQ(q.gemm_table->entries.size(), p.gemm_table->entries.size());
  // Every forward/backward GEMM of the model was measured exactly.
  const GemmModel g(q);
  TrainLayout L;
  L.micro_batch = 1;
  L.seq_len = 64;
  const StepPrediction r = predict_step(preset_config("tiny"), L, g);
  for (const GemmTime& t : r.gemms) EXPECT_EQ(t.estimate.basis, "measured") << t.gemm.name << " " << t.gemm.phase;
  EXPECT_GT(r.step, 0);
}

}  // namespace
}  // namespace zaya
