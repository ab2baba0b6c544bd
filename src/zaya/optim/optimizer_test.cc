#include "zaya/optim/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/model/weights.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/matmul_bf16.h"
#include "zaya/optim/schedule.h"

namespace zaya {
namespace {

std::vector<float> random_matrix(int64_t n, uint64_t seed) {
  std::vector<float> x(n);
  fill_normal(x.data(), n, 0.0f, 1.0f, seed, 0);
  return x;
}

// Singular values of the Newton-Schulz output lie near 1 (Muon's quintic
// iteration targets roughly [0.7, 1.2]): check via the Gram matrix's diagonal
// and that wide/tall orientations agree (NS(X^T) = NS(X)^T).
TEST(NewtonSchulz, OrthogonalisesAndIsTransposeConsistent) {
  const int64_t r = 24, c = 40, m = r;
  std::vector<float> x = random_matrix(r * c, 1), xt(c * r);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) xt[j * r + i] = x[i * c + j];
  std::vector<float> scratch(2 * r * c + 2 * m * m);
  std::vector<float> x16 = x;  // the bf16 variant, checked below
  newton_schulz(x.data(), r, c, 5, scratch.data(), nullptr);
  newton_schulz(xt.data(), c, r, 5, scratch.data(), nullptr);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) ASSERT_NEAR(x[i * c + j], xt[j * r + i], 1e-4);
  std::vector<float> gram(r * r);
  gemm<float>(false, true, r, r, c, 1.0f, x.data(), c, x.data(), c, 0.0f, gram.data(), r);
  for (int64_t i = 0; i < r; ++i) {
    EXPECT_GT(gram[i * r + i], 0.5f);  // squared singular-value scale in ~[0.5, 1.45]
    EXPECT_LT(gram[i * r + i], 1.45f);
  }
  // bf16 GEMMs (float32 iterate): the same result up to bf16 rounding.
  std::vector<uint16_t> scratch16(r * c + m * m);
  Bf16GemmCache gemms;
  newton_schulz(x16.data(), r, c, 5, scratch.data(), scratch16.data(), &gemms);
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < r * c; ++i) {
    diff += double(x16[i] - x[i]) * (x16[i] - x[i]);
    norm += double(x[i]) * x[i];
  }
  EXPECT_LT(std::sqrt(diff / norm), 0.05);
}

// The float32 iteration at sizes where it splits its symmetric products
// (m >= 256) and transposes a tall matrix: the textbook iteration in float64
// (A = X X^T or X^T X, B = b A + c A A, X = a X + B X or X B) within float32
// rounding (a block left out of the split products would be far off).
TEST(NewtonSchulz, Float32MatchesTheFloat64IterationAtSplitSizes) {
  for (const auto& [r, c] : std::vector<std::pair<int64_t, int64_t>>{{256, 320}, {320, 256}, {257, 257}}) {
    const int64_t m = std::min(r, c), n = r * c;
    std::vector<float> x = random_matrix(n, 7 + r);
    std::vector<double> ref(x.begin(), x.end()), A(m * m), B(m * m), y(n);
    double ss = 0;
    for (double v : ref) ss += v * v;
    for (double& v : ref) v /= std::sqrt(ss) + 1e-7;
    const bool wide = r <= c;
    for (int s = 0; s < 5; ++s) {
      gemm<double>(!wide, wide, m, m, wide ? c : r, 1.0, ref.data(), c, ref.data(), c, 0.0, A.data(), m);
      gemm<double>(false, false, m, m, m, 2.0315, A.data(), m, A.data(), m, 0.0, B.data(), m);
      for (int64_t i = 0; i < m * m; ++i) B[i] += -4.7750 * A[i];
      if (wide)
        gemm<double>(false, false, r, c, m, 1.0, B.data(), m, ref.data(), c, 0.0, y.data(), c);
      else
        gemm<double>(false, false, r, c, m, 1.0, ref.data(), c, B.data(), m, 0.0, y.data(), c);
      for (int64_t i = 0; i < n; ++i) ref[i] = 3.4445 * ref[i] + y[i];
    }
    std::vector<float> scratch(2 * n + 2 * m * m);
    newton_schulz(x.data(), r, c, 5, scratch.data(), nullptr);
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      diff += (x[i] - ref[i]) * (x[i] - ref[i]);
      norm += ref[i] * ref[i];
    }
    EXPECT_LT(std::sqrt(diff / norm), 1e-4) << r << " x " << c;
  }
}

TEST(Optimizer, AdamWFirstStepAndMuonRms) {
  ZayaConfig c = preset_config("tiny");
  c.num_blocks = 1;
  ParamTable table(c, true);
  OptimizerConfig oc;
  oc.lr = 1e-2;
  oc.weight_decay = 0.0;
  oc.grad_clip = 0.0;
  Optimizer opt(table, oc);
  const int64_t n = table.total_floats();
  std::vector<float> w(n, 0.5f), g = random_matrix(n, 3), w0 = w;
  opt.step(w.data(), g.data(), 1.0);
  // AdamW's first step moves every element by lr * sign(g) (bias-corrected m/sqrt(v) = g/|g|).
  const ParamEntry& norm = table.at("model.final_norm.weight");
  for (int64_t i = 0; i < norm.numel; ++i) {
    float gi = g[norm.offset + i];
    EXPECT_NEAR(w[norm.offset + i] - w0[norm.offset + i], -1e-2f * gi / (std::fabs(gi) + 1e-8f), 1e-5);
  }
  // Muon's update has the RMS of an AdamW update: 0.2 * lr (RMS matching).
  const ParamEntry& q = table.at("model.layers.0.self_attn.qkv.linear_q.weight");
  double ss = 0;
  for (int64_t i = 0; i < q.numel; ++i)
    ss += double(w[q.offset + i] - w0[q.offset + i]) * (w[q.offset + i] - w0[q.offset + i]);
  EXPECT_NEAR(std::sqrt(ss / double(q.numel)), 0.2 * 1e-2, 0.2 * 1e-2 * 0.35);
}

TEST(Optimizer, ClipsToGlobalNorm) {
  ZayaConfig c = preset_config("tiny");
  c.num_blocks = 1;
  ParamTable table(c, true);
  OptimizerConfig oc;
  oc.grad_clip = 1.0;
  Optimizer opt(table, oc);
  std::vector<float> w(table.total_floats(), 0.0f), g(table.total_floats(), 0.0f);
  g[0] = 3.0f;
  g[1] = 4.0f;
  EXPECT_NEAR(opt.step(w.data(), g.data(), 1.0), 5.0, 1e-9);
}

// The update's extras change nothing in the update: two steps with them give
// the parameters and moments of two steps without, bit for bit, plus the
// bf16 copy convert_to_bf16 would write and gradients zeroed, over Muon and
// AdamW entries alike.
TEST(Optimizer, UpdateExtrasWriteTheBf16CopyAndZeroTheGradientsWithoutChangingTheUpdate) {
  ZayaConfig c = preset_config("tiny");
  c.num_blocks = 1;
  ParamTable table(c, true);
  const int64_t n = table.total_floats();
  OptimizerConfig oc;
  oc.ns_dtype = NsDtype::kF32;
  Optimizer plain(table, oc), fused(table, oc);
  std::vector<float> w_plain = random_matrix(n, 5), w_fused = w_plain;
  std::vector<uint16_t> copy(n, 0), expected(n);
  for (int step = 0; step < 2; ++step) {
    const std::vector<float> g = random_matrix(n, 6 + step);
    std::vector<float> g_plain = g, g_fused = g;
    plain.update(w_plain.data(), g_plain.data(), 1.0, 0.5);
    UpdateExtras extras;
    extras.bf16_params = copy.data();
    extras.zero_grads = true;
    fused.update(w_fused.data(), g_fused.data(), 1.0, 0.5, extras);
    ASSERT_TRUE(w_fused == w_plain) << "step " << step;
    EXPECT_TRUE(g_plain == g) << "without extras the gradients stay";
    convert_to_bf16(expected.data(), w_plain.data(), n);
    for (const ParamEntry& e : table.entries())
      for (int64_t i = e.offset; i < e.offset + e.numel; ++i) {
        ASSERT_EQ(copy[i], expected[i]) << e.name << " [" << i - e.offset << "]";
        ASSERT_EQ(g_fused[i], 0.0f) << e.name << " [" << i - e.offset << "]";
      }
  }
  const auto same = [](Arena& a, Arena& b) { return std::equal(a.data(), a.data() + a.capacity(), b.data()); };
  EXPECT_TRUE(same(plain.first_moment(), fused.first_moment()));
  EXPECT_TRUE(same(plain.second_moment(), fused.second_moment()));
}

TEST(Schedule, WarmupCosineAndWsd) {
  ScheduleConfig s;
  s.kind = ScheduleKind::kCosine;
  s.warmup_steps = 10;
  s.total_steps = 110;
  s.min_lr_ratio = 0.1;
  EXPECT_NEAR(lr_multiplier(s, 0), 0.1, 1e-12);
  EXPECT_NEAR(lr_multiplier(s, 9), 1.0, 1e-12);
  EXPECT_NEAR(lr_multiplier(s, 60), 0.55, 1e-12);  // halfway through the cosine
  EXPECT_NEAR(lr_multiplier(s, 110), 0.1, 1e-12);
  s.kind = ScheduleKind::kWsd;
  s.decay_fraction = 0.2;  // last 22 steps decay
  EXPECT_NEAR(lr_multiplier(s, 50), 1.0, 1e-12);
  EXPECT_NEAR(lr_multiplier(s, 87), 1.0, 1e-12);
  EXPECT_NEAR(lr_multiplier(s, 88), 1.0 - 0.9 / 22, 1e-12);
  EXPECT_NEAR(lr_multiplier(s, 109), 0.1, 1e-12);
  // The kind is an enum parsed where the config is read (train/train_config_test.cc checks the message).
  EXPECT_THROW(enum_parse<ScheduleKind>(kScheduleKindNames, "linear", "x.toml: schedule.kind"), Error);
}

}  // namespace
}  // namespace zaya
