// zaya plan's job: every prediction from one setup, the GEMMs by time, the
// inference layout's defaults, the optional trade-off, and the JSON document.
#include "zaya/plan/plan_job.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

PlanJobOptions small_plan() {
  PlanJobOptions o;
  o.common.profile = "h100";
  o.common.model = "small";
  o.common.world = 16;
  o.common.ep = 8;
  o.common.global_batch = 256;
  return o;
}

TEST(PlanJob, EveryPredictionFromOneSetup) {
  const PlanJobOptions o = small_plan();
  const PlanJobResult r = run_plan_job(o);
  const PlanSetup s = setup_plan(o.common);
  EXPECT_EQ(r.setup.profile.name, "h100");
  EXPECT_EQ(r.setup.layout.grad_accum, s.layout.grad_accum);
  EXPECT_EQ(r.counts.total, count_parameters(s.config).total);
  EXPECT_DOUBLE_EQ(r.step.step, predict_step(s.config, s.layout, *s.gemm).step);
  EXPECT_DOUBLE_EQ(r.memory.total(), predict_memory(s.config, s.layout).total());
  ASSERT_EQ(r.gemms_by_time.size(), r.step.gemms.size());
  for (size_t i = 1; i < r.gemms_by_time.size(); ++i)
    EXPECT_GE(r.gemms_by_time[i - 1].seconds, r.gemms_by_time[i].seconds);
  // Inference: batch 1 at 4096 in the training dtype (bf16 on a GPU), the layout's skip share.
  EXPECT_EQ(r.inference.batch, 1);
  EXPECT_EQ(r.inference.context, 4096);
  EXPECT_EQ(r.inference.dtype, "bf16");
  EXPECT_EQ(r.inference.skip_fraction, s.layout.skip_fraction);
  EXPECT_DOUBLE_EQ(r.latency.decode_seconds, predict_latency(s.config, r.inference, *s.gemm).decode_seconds);
  ASSERT_FALSE(r.tradeoff.empty());
  int base = 0;
  for (const MoeTradeoffRow& t : r.tradeoff) base += t.is_base;
  EXPECT_EQ(base, 1);
}

TEST(PlanJob, InferenceOptionsAndNoTradeoff) {
  PlanJobOptions o = small_plan();
  o.batch = 4;
  o.context = 128;
  o.infer_dtype = "f32";
  o.common.skip_fraction = 0.25;
  o.tradeoff = false;
  const PlanJobResult r = run_plan_job(o);
  EXPECT_EQ(r.inference.batch, 4);
  EXPECT_EQ(r.inference.context, 128);
  EXPECT_EQ(r.inference.dtype, "f32");
  EXPECT_EQ(r.inference.skip_fraction, 0.25);
  EXPECT_TRUE(r.tradeoff.empty());
  o.common.ep = 3;
  testing::expect_error([&] { run_plan_job(o); }, "--ep = 3 is invalid; allowed: a divisor of --world (16)");
}

TEST(PlanJob, JsonDocument) {
  const PlanJobResult r = run_plan_job(small_plan());
  const nlohmann::json j = plan_json(r, "small");
  EXPECT_EQ(j["plan"], "zaya");
  EXPECT_EQ(j["format_version"], 1);
  EXPECT_EQ(j["model"], "small");
  EXPECT_EQ(j["profile"], "h100");
  EXPECT_EQ(j["layout"]["world"], 16);
  EXPECT_EQ(j["layout"]["dp"], r.setup.layout.dp());
  EXPECT_EQ(j["layout"]["ep"], 8);
  EXPECT_EQ(j["layout"]["dtype"], "bf16");
  EXPECT_EQ(j["step"]["step_seconds"], r.step.step);
  EXPECT_EQ(j["step"]["optimizer_seconds"], r.step.optimizer_gemm + r.step.optimizer_stream);
  EXPECT_EQ(j["memory_bytes"]["total"], r.memory.total());
  EXPECT_EQ(j["inference"]["kv_bytes"], r.latency.kv_bytes);
  ASSERT_EQ(j["moe_tradeoff"].size(), r.tradeoff.size());
  EXPECT_EQ(j["moe_tradeoff"][0]["experts"], r.tradeoff[0].config.experts);
  EXPECT_EQ(j["moe_tradeoff"][0]["train_mfu"], r.tradeoff[0].train_mfu);
  PlanJobOptions none = small_plan();
  none.tradeoff = false;
  EXPECT_EQ(plan_json(run_plan_job(none), "small")["moe_tradeoff"], nlohmann::json::array());
}

}  // namespace
}  // namespace zaya
