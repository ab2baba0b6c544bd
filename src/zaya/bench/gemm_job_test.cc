// zaya bench gemm's options resolved (defaults that depend on --model, sizes),
// the sweep's shapes in order, the model/sweep choice with its errors, and the
// summary sums, on runs small enough to take milliseconds.
#include "zaya/bench/gemm_job.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::expect_error;

TEST(GemmJob, RunOptionsFromTheFlags) {
  GemmJobOptions o;
  GemmRunOptions r = gemm_run_options(o);
  EXPECT_EQ(r.dtypes, (std::vector<GemmDType>{GemmDType::kF32, GemmDType::kBF16}));
  EXPECT_EQ(r.align, 0);  // a sweep: no padded timing unless asked
  EXPECT_EQ(r.peak_side_f32, 2048);
  EXPECT_EQ(r.peak_side_bf16, 4096);
  EXPECT_DOUBLE_EQ(r.max_bytes, 8.0 * (1u << 30));
  o.model = "tiny";
  EXPECT_EQ(gemm_run_options(o).align, 64);  // a model's shapes: is padding worth it?
  o.align = 0;
  EXPECT_EQ(gemm_run_options(o).align, 0);
  o.dtypes = {"bf16"};
  o.peak_side = 512;
  o.max_memory = "16K";
  o.min_time = 0.5;
  o.min_calls = 7;
  o.falloff = 0.6;
  o.peak_f32 = 11;
  o.peak_bf16 = 22;
  o.membw = 33;
  r = gemm_run_options(o);
  EXPECT_EQ(r.dtypes, std::vector<GemmDType>{GemmDType::kBF16});
  EXPECT_EQ(r.peak_side_f32, 512);
  EXPECT_EQ(r.peak_side_bf16, 512);
  EXPECT_DOUBLE_EQ(r.max_bytes, 16384);
  EXPECT_DOUBLE_EQ(r.timing.min_seconds, 0.5);
  EXPECT_EQ(r.timing.min_calls, 7);
  EXPECT_DOUBLE_EQ(r.falloff, 0.6);
  EXPECT_DOUBLE_EQ(r.peak_f32, 11);
  EXPECT_DOUBLE_EQ(r.peak_bf16, 22);
  EXPECT_DOUBLE_EQ(r.membw_gbps, 33);
  o.dtypes = {"f16"};
  expect_error([&] { gemm_run_options(o); }, "f16");
}

TEST(GemmJob, SweepShapesPerLayout) {
  GemmJobOptions o;
  o.m = "64,96";
  o.n = "32";
  o.k = "16:32";
  o.layouts = {"nn", "nt"};
  const std::vector<GemmShape> s = gemm_sweep_shapes(o);
  ASSERT_EQ(s.size(), 8u);
  EXPECT_EQ(s[0], (GemmShape{64, 32, 16, false, false}));
  EXPECT_EQ(s[1], (GemmShape{64, 32, 32, false, false}));
  EXPECT_EQ(s[2], (GemmShape{96, 32, 16, false, false}));
  EXPECT_EQ(s[4], (GemmShape{64, 32, 16, false, true}));
  EXPECT_EQ(s[7], (GemmShape{96, 32, 32, false, true}));
  // Explicit shapes replace the product, under every layout.
  o.shapes = {"8x16x24", "1Kx2x3"};
  o.layouts = {"tn"};
  EXPECT_EQ(gemm_sweep_shapes(o), (std::vector<GemmShape>{{8, 16, 24, true, false}, {1024, 2, 3, true, false}}));
  o.shapes = {"8x16"};
  expect_error([&] { gemm_sweep_shapes(o); }, "--shape '8x16' must be MxNxK");
  o.shapes.clear();
  o.layouts = {"xx"};
  expect_error([&] { gemm_sweep_shapes(o); }, "layout 'xx' is invalid");
  o.layouts = {"nn"};
  o.m = "64:abc";
  expect_error([&] { gemm_sweep_shapes(o); }, "-m/--m: 'abc' is not a positive dimension");
  o.m = "64";
  o.k = "0";
  expect_error([&] { gemm_sweep_shapes(o); }, "-k/--k: '0' is not a positive dimension");
}

// Given peaks and bandwidth, and one call per shape: nothing is measured but the shapes.
GemmJobOptions quick() {
  GemmJobOptions o;
  o.dtypes = {"f32"};
  o.min_time = 0;
  o.min_calls = 1;
  o.peak_f32 = 1000;
  o.membw = 10;
  return o;
}

TEST(GemmJob, RunsTheSweepOrTheModel) {
  GemmJobOptions o = quick();
  o.shapes = {"16x16x16", "32x16x8"};
  std::vector<GemmShape> seen;
  const GemmEfficiencyTable sweep =
      run_gemm_job(o, gemm_run_options(o), [&](GemmDType, const GemmShape& s, const GemmTableEntry* e) {
        EXPECT_NE(e, nullptr);
        seen.push_back(s);
      });
  ASSERT_EQ(sweep.entries.size(), 2u);
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_TRUE(sweep.model.empty());
  EXPECT_TRUE(sweep.model_gemms.empty());

  o.shapes.clear();
  o.model = "tiny";
  o.micro_batch = 1;
  o.seq_len = 16;
  o.align = 0;
  const GemmEfficiencyTable model = run_gemm_job(o, gemm_run_options(o));
  EXPECT_EQ(model.model, "tiny");
  EXPECT_EQ(model.micro_batch, 1);
  EXPECT_EQ(model.seq_len, 16);
  ASSERT_FALSE(model.model_gemms.empty());
  // The total is every measured GEMM's time and FLOPs as often as a micro-batch calls it.
  double seconds = 0, flops = 0;
  for (const GemmModelEntry& g : model.model_gemms) {
    ASSERT_GE(g.entry, 0);
    seconds += model.entries[size_t(g.entry)].seconds * g.count;
    flops += g.shape.flops() * g.count;
  }
  const GemmModelTotal total = gemm_model_total(model, GemmDType::kF32);
  EXPECT_DOUBLE_EQ(total.seconds, seconds);
  EXPECT_DOUBLE_EQ(total.flops, flops);
  EXPECT_EQ(gemm_model_total(model, GemmDType::kBF16).seconds, 0);  // not measured

  o.shapes = {"16x16x16"};
  expect_error([&] { run_gemm_job(o, gemm_run_options(o)); }, "--model measures the model's own shapes; drop --shape");
  o.shapes.clear();
  o.model = "nosuch";
  expect_error([&] { run_gemm_job(o, gemm_run_options(o)); }, "--model 'nosuch' is neither a preset");
}

TEST(GemmJob, SkippedShapesCountNowhere) {
  GemmEfficiencyTable t;
  t.entries.resize(3);
  t.entries[0].seconds = 1;
  t.entries[1].seconds = 2;
  t.entries[1].falls_off = true;
  t.entries[2].seconds = 4;
  t.entries[2].dtype = GemmDType::kBF16;
  t.entries[2].falls_off = true;
  t.model_gemms.push_back({"a", "fwd", GemmDType::kF32, {2, 3, 4, false, false}, 10, false, 0});
  t.model_gemms.push_back({"b", "fwd", GemmDType::kF32, {1, 1, 1, false, false}, 5, false, -1});  // skipped
  t.model_gemms.push_back({"c", "fwd", GemmDType::kF32, {1, 2, 1, false, false}, 2, false, 1});
  t.model_gemms.push_back({"d", "fwd", GemmDType::kBF16, {1, 1, 1, false, false}, 3, false, 2});
  const GemmModelTotal f32 = gemm_model_total(t, GemmDType::kF32);
  EXPECT_DOUBLE_EQ(f32.seconds, 1 * 10 + 2 * 2);
  EXPECT_DOUBLE_EQ(f32.flops, 48 * 10 + 4 * 2);
  EXPECT_DOUBLE_EQ(gemm_model_total(t, GemmDType::kBF16).seconds, 12);
  EXPECT_EQ(count_falloffs(t), 2);
}

}  // namespace
}  // namespace zaya
