#include <gtest/gtest.h>

#include <cmath>

#include "zaya/bench/gemm_bench.h"
#include "zaya/bench/gemm_run.h"
#include "zaya/bench/gemm_shapes.h"
#include "zaya/bench/gemm_table.h"
#include "zaya/core/test_util.h"
#include "zaya/model/model.h"

namespace zaya {
namespace {

using testing::expect_error;

TEST(GemmShapes, DimensionListsAndRanges) {
  EXPECT_EQ(parse_dim_list("512,1024", "-m"), (std::vector<int64_t>{512, 1024}));
  EXPECT_EQ(parse_dim_list("256:2048", "-m"), (std::vector<int64_t>{256, 512, 1024, 2048}));
  EXPECT_EQ(parse_dim_list("256:4096:*4", "-m"), (std::vector<int64_t>{256, 1024, 4096}));
  EXPECT_EQ(parse_dim_list("64:256:+64", "-m"), (std::vector<int64_t>{64, 128, 192, 256}));
  EXPECT_EQ(parse_dim_list("4K, 100", "-m"), (std::vector<int64_t>{4096, 100}));
  EXPECT_EQ(parse_dim_list("100:300", "-m"), (std::vector<int64_t>{100, 200}));
  expect_error([] { parse_dim_list("0", "-k"); }, "-k: '0' is not a positive dimension");
  expect_error([] { parse_dim_list("512:256", "-k"); }, "range '512:256' runs backwards");
  expect_error([] { parse_dim_list("1:8:/2", "-k"); }, "must be *F (multiply) or +S (add)");
  expect_error([] { parse_dim_list("1:8:*1", "-k"); }, "at least 2");
  expect_error([] { parse_dim_list(",", "-k"); }, "no dimensions");
  bool ta = false, tb = false;
  parse_gemm_layout("nt", ta, tb);
  EXPECT_FALSE(ta);
  EXPECT_TRUE(tb);
  expect_error([&] { parse_gemm_layout("nx", ta, tb); }, "layout 'nx' is invalid");
}

TEST(GemmShapes, ExplicitShapes) {
  EXPECT_EQ(parse_gemm_shape("2048x4096x1024", "--shape"), (GemmShape{2048, 4096, 1024, false, false}));
  EXPECT_EQ(parse_gemm_shape("2Kx64x1K", "--shape"), (GemmShape{2048, 64, 1024, false, false}));
  expect_error([] { parse_gemm_shape("64x64", "--shape"); }, "--shape '64x64' must be MxNxK, e.g. 2048x4096x1024");
  expect_error([] { parse_gemm_shape("64xx64", "--shape"); }, "--shape: no dimensions");
  expect_error([] { parse_gemm_shape("64x0x64", "--shape"); }, "--shape: '0' is not a positive dimension");
}

// The GEMM list accounts for exactly the model's FLOPs (model_forward_flops,
// which MFU uses), except that attention runs whole 64-query blocks.
TEST(GemmShapes, ModelGemmsMatchTheModelFlopCount) {
  for (const std::string preset : {"tiny", "small", "tiny-k34"}) {
    ZayaConfig c = preset_config(preset == "tiny-k34" ? "tiny" : preset);
    if (preset == "tiny-k34") {  // convolution kernels of 3 and 4 taps (cca_time0 / cca_time1)
      c.conv_kernel0 = 3;
      c.conv_kernel1 = 4;
    }
    ModelGemmOptions o;
    o.micro_batch = 2;
    o.seq_len = 128;
    const std::vector<ModelGemm> gemms = model_gemms(c, o);
    double fwd = 0, bwd = 0, attn_fwd = 0;
    for (const ModelGemm& g : gemms) {
      const double f = g.shape.flops() * g.count;
      if (g.phase == "fwd")
        fwd += f;
      else
        bwd += f;
      if (g.phase == "fwd" && g.approximate) attn_fwd += f;
    }
    const double T = double(o.micro_batch * o.seq_len), L = double(c.num_blocks);
    const double routed = L * T * double(c.top_k);
    const double model_attn = L * T * 2 * double(c.q_width()) * double(o.seq_len + 1);
    EXPECT_NEAR(fwd - attn_fwd, model_forward_flops(c, o.micro_batch, o.seq_len, routed) - model_attn, 1e-6 * fwd)
        << preset;
    EXPECT_NEAR(attn_fwd, L * T * 2 * double(c.q_width()) * double(o.seq_len + 64), 1e-6 * attn_fwd);
    // Backward: two GEMMs of the forward's size per linear layer, three for attention (recompute, dprobs, dq) + 2.
    EXPECT_NEAR(bwd, 2 * (fwd - attn_fwd) + 2.5 * attn_fwd, 1e-6 * bwd) << preset;
  }
}

// The grouped convolution is one d x d GEMM per tap, sequence and head group:
// cca_time1 = 4 taps doubles ZAYA1's two, in the list and in the FLOP count.
TEST(GemmShapes, GroupedConvolutionCountsItsTaps) {
  ZayaConfig two = preset_config("tiny"), four = two;
  four.conv_kernel1 = 4;
  ModelGemmOptions o;
  o.micro_batch = 2;
  o.seq_len = 128;
  auto conv_count = [&](const ZayaConfig& c) {
    double n = 0;
    for (const ModelGemm& g : model_gemms(c, o))
      if (g.name == "attn.conv_qk.1" && g.phase == "fwd") n += g.count;
    return n;
  };
  const double groups = double(two.conv_channels() / two.head_dim), L = double(two.num_blocks);
  EXPECT_EQ(conv_count(two), L * 2 * groups * 2);
  EXPECT_EQ(conv_count(four), L * 2 * groups * 4);
  const double T = 2 * 128, routed = L * T * double(two.top_k);
  EXPECT_DOUBLE_EQ(model_forward_flops(four, 2, 128, routed) - model_forward_flops(two, 2, 128, routed),
                   L * T * 2 * 2 * double(two.conv_channels()) * double(two.head_dim));
}

// Sliding-window blocks (spec §12): their attention GEMMs are rows of their
// own, whose key dimension is the mean over 64-query blocks of min((j + 1) x
// 64, W + 63); the full blocks keep (S + 64) / 2; a window covering the
// sequence gives the full blocks' keys; everything else is unchanged.
TEST(GemmShapes, SlidingBlocksCountTheKeysInsideTheWindow) {
  ZayaConfig c = preset_config("tiny");
  c.num_blocks = 4;
  c.sliding_window = 100;
  c.sliding_blocks = sliding_block_pattern("even", c.num_blocks, "test");
  ModelGemmOptions o;
  o.micro_batch = 2;
  o.seq_len = 512;  // 8 query blocks
  ZayaConfig full = c;
  full.sliding_window = 0;
  full.sliding_blocks.clear();
  const std::vector<ModelGemm> with = model_gemms(c, o), without = model_gemms(full, o);
  auto find = [](const std::vector<ModelGemm>& gemms, const std::string& name, const std::string& phase) {
    for (const ModelGemm& g : gemms)
      if (g.name == name && g.phase == phase) return g;
    ADD_FAILURE() << "no " << name << " " << phase;
    return ModelGemm{};
  };
  const double per_kind = 2.0 * double(o.micro_batch * c.q_heads) * 8;  // 2 blocks of each kind x B x heads x 8
  const ModelGemm s = find(with, "attn.scores.sliding", "fwd"), f = find(with, "attn.scores", "fwd");
  EXPECT_EQ(s.shape.n, (64 + 128 + 6 * 163 + 4) / 8);  // mean of min(64 (j + 1), 163), rounded
  EXPECT_EQ(s.count, per_kind);
  EXPECT_EQ(f.shape.n, (512 + 64) / 2);
  EXPECT_EQ(f.count, per_kind);
  EXPECT_EQ(find(with, "attn.values.sliding", "fwd").shape.k, s.shape.n);
  EXPECT_EQ(find(with, "attn.dk.sliding", "bwd.dw").shape.m, s.shape.n);
  EXPECT_EQ(find(with, "attn.dv.sliding", "bwd.dw").count, per_kind);
  EXPECT_EQ(find(without, "attn.scores", "fwd").count, 2 * per_kind);
  // Every other GEMM is the same; attention loses what the window saves.
  double attn_with = 0, attn_without = 0, rest_with = 0, rest_without = 0;
  for (const ModelGemm& g : with) (g.approximate ? attn_with : rest_with) += g.shape.flops() * g.count;
  for (const ModelGemm& g : without) (g.approximate ? attn_without : rest_without) += g.shape.flops() * g.count;
  EXPECT_EQ(rest_with, rest_without);
  EXPECT_NEAR(attn_without - attn_with, 7.0 * per_kind * 2 * 64 * double(c.head_dim) * double(f.shape.n - s.shape.n),
              1e-9 * attn_without);
  // A window covering the sequence computes what full attention does.
  c.sliding_window = 512 + 64;
  EXPECT_EQ(find(model_gemms(c, o), "attn.scores.sliding", "fwd").shape.n, f.shape.n);
}

TEST(GemmShapes, ExpertRowsFollowRoutingAndParallelism) {
  ZayaConfig c = preset_config("small");  // 8 experts, top-1
  ModelGemmOptions o;
  o.micro_batch = 4;
  o.seq_len = 256;
  EXPECT_EQ(expected_expert_tokens(c, o), 128);
  o.ep = 4;
  EXPECT_EQ(expected_expert_tokens(c, o), 512);  // each rank's 2 experts serve 4 ranks' tokens
  o.skip_fraction = 0.25;
  EXPECT_EQ(expected_expert_tokens(c, o), 384);
  o.expert_tokens = 7;
  EXPECT_EQ(expected_expert_tokens(c, o), 7);
  o.expert_tokens = 0;
  const auto gemms = model_gemms(c, o);
  for (const ModelGemm& g : gemms)
    if (g.name == "moe.expert.fc1" && g.phase == "fwd") {
      EXPECT_EQ(g.shape, (GemmShape{384, 2 * c.expert_ffn, c.hidden, false, true}));
      EXPECT_EQ(g.count, double(c.num_blocks * 2));
    }
  o.ep = 3;
  expect_error([&] { model_gemms(c, o); }, "8 experts cannot be split over an expert-parallel size of 3");
}

GemmResult fake(int64_t m, int64_t n, int64_t k, double gflops) {
  GemmResult r;
  r.timing.shape = {m, n, k, false, false};
  r.timing.gflops = gflops;
  r.timing.best_seconds = r.timing.shape.flops() / gflops / 1e9;
  return r;
}

TEST(GemmBench, FalloffsAgainstContainedShapesAndPadding) {
  std::vector<GemmResult> rs = {fake(64, 64, 64, 100), fake(128, 64, 64, 200), fake(129, 64, 64, 120),
                                fake(256, 256, 256, 190)};
  rs[2].has_padded = true;
  rs[2].padded = fake(192, 64, 64, 250).timing;
  mark_falloffs(rs, 0.85);
  EXPECT_FALSE(rs[0].falls_off);
  EXPECT_FALSE(rs[1].falls_off);
  EXPECT_TRUE(rs[2].falls_off);  // below 85% of the contained 128x64x64, and its padding is faster
  EXPECT_NE(rs[2].falloff_reason.find("padding to 192x64x64"), std::string::npos) << rs[2].falloff_reason;
  EXPECT_FALSE(rs[3].falls_off);  // 190 >= 0.85 * 200
  EXPECT_EQ(padded_shape({100, 64, 1, false, true}, 64), (GemmShape{128, 64, 64, false, true}));
  EXPECT_NEAR(arithmetic_intensity(GemmDType::kF32, {1024, 1024, 1024, false, false}), 2.0 * 1024 / 12, 1e-9);
}

TEST(GemmBench, TimesARealGemm) {
  GemmTimingOptions o;
  o.min_seconds = 0;
  o.min_calls = 2;
  for (GemmDType d : {GemmDType::kF32, GemmDType::kBF16}) {
    GemmTiming t = time_gemm(d, {64, 48, 32, false, true}, o);
    EXPECT_EQ(t.calls, 2);
    EXPECT_GT(t.gflops, 0);
    EXPECT_LE(t.best_seconds, t.median_seconds);
  }
  EXPECT_EQ(parse_gemm_dtype("bfloat16"), GemmDType::kBF16);
  expect_error([] { parse_gemm_dtype("f8"); }, "unknown GEMM data type 'f8'");
}

TEST(GemmTable, RoundTripsAndEstimates) {
  GemmEfficiencyTable t;
  t.peak_gflops["f32"] = 100;
  t.membw_gbps = 10;
  GemmTableEntry a;
  a.shape = {128, 128, 128, false, false};
  a.gflops = 50;
  a.efficiency = 0.5;
  a.seconds = a.shape.flops() / 50e9;
  GemmTableEntry b = a;
  b.shape = {1024, 1024, 1024, false, true};
  b.gflops = 90;
  b.efficiency = 0.9;
  b.falls_off = true;
  b.falloff_reason = "test";
  b.seconds = b.shape.flops() / 90e9;
  b.has_padded = true;
  b.padded = {1024, 1024, 1088, false, true};
  b.padded_seconds = 0.5;
  t.entries = {a, b};
  t.model = "tiny";
  t.micro_batch = 2;
  t.seq_len = 64;
  t.model_gemms.push_back({"lm_head", "fwd", GemmDType::kF32, b.shape, 3, false, 1});
  const nlohmann::json j = t.to_json();
  EXPECT_EQ(j["format"], "zaya.gemm_efficiency");
  EXPECT_NEAR(j["model"]["summary"]["f32"]["efficiency"].get<double>(), 0.9, 1e-9);
  const GemmEfficiencyTable back = GemmEfficiencyTable::from_json(j, "t.json");
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[1].shape, b.shape);
  EXPECT_TRUE(back.entries[1].falls_off);
  EXPECT_EQ(back.entries[1].padded, b.padded);
  ASSERT_EQ(back.model_gemms.size(), 1u);
  EXPECT_EQ(back.model_gemms[0].entry, 1);
  // Exact hit, nearest neighbour, layout mismatch as a tie-breaker.
  EXPECT_DOUBLE_EQ(back.efficiency(GemmDType::kF32, {128, 128, 128, false, false}), 0.5);
  EXPECT_DOUBLE_EQ(back.efficiency(GemmDType::kF32, {900, 1100, 1000, false, true}), 0.9);
  EXPECT_DOUBLE_EQ(back.efficiency(GemmDType::kF32, {150, 120, 128, true, true}), 0.5);
  EXPECT_NEAR(back.estimate_seconds(GemmDType::kF32, {1024, 1024, 1024, false, true}), 2.0 * std::pow(1024, 3) / 90e9,
              1e-12);
  expect_error([&] { back.efficiency(GemmDType::kBF16, a.shape); }, "has no bf16 entries");
  expect_error(
      [] {
        GemmEfficiencyTable::from_json({{"format", "x"}}, "bad.json");
      },
      "bad.json: not a GEMM efficiency");
}

}  // namespace
}  // namespace zaya
