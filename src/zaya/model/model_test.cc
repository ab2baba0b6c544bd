#include "zaya/model/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/core/test_util.h"
#include "zaya/dist/comm.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

ZayaConfig test_config() { return testing::model_test_config(); }

// The test model with sliding-window attention (spec §12) on `pattern`'s blocks.
ZayaConfig sliding_config(int64_t window, const std::string& pattern = "even", double theta = 500) {
  ZayaConfig c = test_config();
  c.sliding_window = window;
  c.sliding_blocks = sliding_block_pattern(pattern, c.num_blocks, "test");
  c.sliding_rope_theta = theta;
  return c;
}

// Logits of one forward over ids (B x S) of a model initialised from `seed`.
std::vector<float> logits_of(const ZayaConfig& c, const std::vector<int32_t>& ids, int64_t B, int64_t S) {
  ZayaModel model(c);
  model.init(9);
  float* p = model.param_data();
  for (int64_t i = 0; i < model.params().total_floats(); ++i) p[i] += 0.05f * normal01(79, 1, i);
  ModelWorkspace ws(c, B, S, false);
  model_forward(model, ws, ids.data(), nullptr, B, S, {});
  return {ws.logits(), ws.logits() + B * S * c.vocab_size};
}

TEST(Model, ParameterCountsOfZaya1Base) {
  ParamCounts p = count_parameters(preset_config("zaya1-base"));
  // spec §2 / docs/systems-notes.md §6.1: ~8.84B total, ~8.30B without embedding, ~0.75B active without.
  EXPECT_NEAR(double(p.total) / 1e9, 8.84, 0.01);
  EXPECT_NEAR(double(p.total_without_embedding()) / 1e9, 8.30, 0.01);
  EXPECT_NEAR(double(p.active_without_embedding()) / 1e9, 0.754, 0.01);
  ParamTable t(preset_config("zaya1-base"), true);
  ParamTable b(preset_config("zaya1-base"), false);
  EXPECT_EQ(t.entries().size() + b.entries().size(), 2483u);  // spec §6.1 expected tensor count
}

TEST(Model, InitialLossIsNearLogVocab) {
  ZayaConfig c = test_config();
  ZayaModel model(c);
  model.init(1);
  const int64_t B = 2, S = 16;
  ModelWorkspace ws(c, B, S, false);
  std::vector<int32_t> ids(B * S), targets(B * S);
  for (int64_t i = 0; i < B * S; ++i) {
    ids[i] = int32_t(i * 7 % c.real_vocab_size);
    targets[i] = int32_t((i * 13 + 5) % c.real_vocab_size);
  }
  LossParts l = model_forward(model, ws, ids.data(), targets.data(), B, S, {});
  EXPECT_NEAR(l.xent_mean(), std::log(double(c.real_vocab_size)), 0.1);
}

// Directional derivative of the loss along a random direction in each tensor,
// compared with central differences (float32, so a loose tolerance; the exact
// check is the PyTorch golden test).
// `seed`: the initialisation; one whose routing does not flip within the step is needed (argmax choices).
// `skip_bias`: when set, every router's skip-slot balancing bias, so that the skip slot wins for some tokens.
void check_directional_derivatives(const ZayaConfig& c, uint64_t seed = 3, std::optional<float> skip_bias = {}) {
  ZayaModel model(c);
  model.init(seed);
  if (skip_bias)
    for (float* b : bind_balancing_biases(c, model.buffers(), model.buffer_data())) b[c.skip_slot()] = *skip_bias;
  // Make every parameter matter: perturb ones/zeros away from their init.
  float* p = model.param_data();
  const int64_t n = model.params().total_floats();
  for (int64_t i = 0; i < n; ++i) p[i] += 0.05f * normal01(77, 1, i);
  const int64_t B = 2, S = 9;
  ModelWorkspace ws(c, B, S, true);
  std::vector<int32_t> ids(B * S), targets(B * S);
  for (int64_t i = 0; i < B * S; ++i) {
    ids[i] = int32_t((i * 11 + 3) % c.real_vocab_size);
    targets[i] = int32_t((i * 5 + 1) % c.real_vocab_size);
  }
  MoeLossOptions opts{0.01f, 0.001f};
  Arena grad(n);
  grad.zero();
  ModelWeights g = bind_weights(c, model.params(), grad.data());
  ws.reset_routing();
  LossParts l0 = model_forward(model, ws, ids.data(), targets.data(), B, S, opts);
  if (skip_bias) {
    double skips = 0;
    for (const RoutingStats& r : ws.routing()) skips += r.choices_N.back();
    EXPECT_GT(skips, 0) << "the skip slot is never chosen: its rule would go untested";
    EXPECT_LT(skips, double(B * S * c.num_blocks)) << "the skip slot always wins: the experts would go untested";
  }
  model_backward(model, ws, g, 1.0f / float(l0.xent_tokens), 1.0f, opts);
  auto loss = [&] {
    LossParts l = model_forward(model, ws, ids.data(), targets.data(), B, S, opts);
    return l.xent_mean() + l.router_loss;
  };
  int checked = 0;
  for (const ParamEntry& e : model.params().entries()) {
    std::vector<float> dir(e.numel);
    double analytic = 0, norm = 0;
    for (int64_t i = 0; i < e.numel; ++i) {
      dir[i] = normal01(5, uint64_t(e.offset), i);
      analytic += double(dir[i]) * grad.data()[e.offset + i];
      norm += double(dir[i]) * dir[i];
    }
    const float eps = 2e-3f / float(std::sqrt(norm));
    for (int64_t i = 0; i < e.numel; ++i) p[e.offset + i] += eps * dir[i];
    double up = loss();
    for (int64_t i = 0; i < e.numel; ++i) p[e.offset + i] -= 2 * eps * dir[i];
    double down = loss();
    for (int64_t i = 0; i < e.numel; ++i) p[e.offset + i] += eps * dir[i];
    double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic, numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << e.name;
    if (getenv("ZAYA_DEBUG")) printf("%-70s %12.6f %12.6f\n", e.name.c_str(), analytic, numeric);
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(Model, DirectionalDerivativesMatchFiniteDifferences) { check_directional_derivatives(test_config()); }

// The skip slot live in every layer (its bias lets it win for some tokens), under both rules (spec §8.1): the
// legacy p_skip * x, whose gradient reaches x and the gate, and the native 0, which sends none back.
TEST(Model, DirectionalDerivativesMatchFiniteDifferencesWithALiveSkipSlotUnderBothRules) {
  ZayaConfig c = test_config();
  for (const bool zero : {false, true}) {
    SCOPED_TRACE(zero ? "skip_output_zero" : "p_skip * x");
    c.skip_output_zero = zero;
    check_directional_derivatives(c, 3, 0.0f);
  }
}

// The two skip rules give the same loss while the skip slot is never chosen, and differ once it is.
TEST(Model, SkipRulesAgreeUntilTheSkipSlotIsChosen) {
  const int64_t B = 2, S = 9;
  std::vector<int32_t> ids(B * S), targets(B * S);
  for (int64_t i = 0; i < B * S; ++i) {
    ids[i] = int32_t((i * 11 + 3) % 90);
    targets[i] = int32_t((i * 5 + 1) % 90);
  }
  auto loss = [&](bool zero, float skip_bias) {
    ZayaConfig c = test_config();
    c.skip_output_zero = zero;
    ZayaModel model(c);
    model.init(3);
    for (float* b : bind_balancing_biases(c, model.buffers(), model.buffer_data())) b[c.skip_slot()] = skip_bias;
    ModelWorkspace ws(c, B, S, false);
    return model_forward(model, ws, ids.data(), targets.data(), B, S, {}).xent_mean();
  };
  EXPECT_EQ(loss(false, -1.0f), loss(true, -1.0f));
  EXPECT_NE(loss(false, 0.35f), loss(true, 0.35f));
}

// Convolution kernels of 3 and 4 taps (cca_time0 / cca_time1, the
// zaya1-legacy reference's other sizes): the whole model's gradients, through
// the convolutions' k-tap forward and backward, match finite differences;
// the conv tensors have the reference's [C, 1, k0] and [C, d, k1] shapes.
TEST(Model, DirectionalDerivativesMatchFiniteDifferencesWithOtherKernelSizes) {
  ZayaConfig c = test_config();
  c.conv_kernel0 = 3;
  c.conv_kernel1 = 4;
  ParamTable t(c, true);
  int conv_tensors = 0;
  for (const ParamEntry& e : t.entries()) {
    if (e.name.find("conv_qk.0.weight") != std::string::npos) {
      EXPECT_EQ(e.shape, (std::vector<int64_t>{c.conv_channels(), 1, 3})) << e.name;
      ++conv_tensors;
    }
    if (e.name.find("conv_qk.1.weight") != std::string::npos) {
      EXPECT_EQ(e.shape, (std::vector<int64_t>{c.conv_channels(), c.head_dim, 4})) << e.name;
      ++conv_tensors;
    }
  }
  EXPECT_EQ(conv_tensors, 2 * c.num_blocks);
  // Seeds 3, 4 and 9 put a token's routing within a step of a tie (a router tensor's finite difference jumps);
  // since core/exp_f32.h so do 10, and 2 in the sanitizer build (-O1). Seed 11's worst check uses 0.41 of
  // the tolerance in both builds.
  check_directional_derivatives(c, 11);
}

// scale_residual_merge = false (spec §11): no residual-scaling tensors, every merge a plain sum.
TEST(Model, DirectionalDerivativesMatchFiniteDifferencesWithoutResidualScaling) {
  ZayaConfig c = test_config();
  c.scale_residual_merge = false;
  // Seeds 3, 5 and 7 put a token's routing within a step of a tie: there the router MLP's
  // finite difference jumps (a discrete choice flips) while every other tensor agrees.
  check_directional_derivatives(c, 6);
}

// tie_word_embeddings = false: lm_head.weight is its own parameter with its own gradient.
TEST(Model, DirectionalDerivativesMatchFiniteDifferencesWithAnUntiedHead) {
  ZayaConfig c = test_config();
  c.tie_word_embeddings = false;
  ParamTable t(c, true);
  ASSERT_NE(t.find("lm_head.weight"), nullptr);
  check_directional_derivatives(c);
}

// Without residual scaling the merges are exactly those of a scaled model whose
// vectors are 1 and 0; an untied head equal to the embedding gives the tied
// model's logits; each differs from the tied, scaled model otherwise.
TEST(Model, PlainMergesAndAnUntiedHeadComputeWhatTheReferenceDefines) {
  const ZayaConfig scaled = test_config();
  ZayaConfig plain = scaled, untied = scaled;
  plain.scale_residual_merge = false;
  untied.tie_word_embeddings = false;
  const int64_t B = 1, S = 7;
  std::vector<int32_t> ids(B * S);
  for (int64_t i = 0; i < B * S; ++i) ids[i] = int32_t((i * 17 + 2) % scaled.real_vocab_size);
  auto forward = [&](const ZayaModel& m) {
    ModelWorkspace ws(m.config(), B, S, false);
    model_forward(m, ws, ids.data(), nullptr, B, S, {});
    return std::vector<float>(ws.logits(), ws.logits() + B * S * m.config().vocab_size);
  };
  ZayaModel a(scaled);
  a.init(4);
  float* pa = a.param_data();
  for (int64_t i = 0; i < a.params().total_floats(); ++i) pa[i] += 0.05f * normal01(81, 1, i);
  const std::vector<float> ref = forward(a);
  // The same weights in the other layouts of the table.
  auto copy_into = [&](ZayaModel& m) {
    for (const ParamEntry& e : m.params().entries()) {
      const ParamEntry* src = a.params().find(e.name == "lm_head.weight" ? "model.embed_tokens.weight" : e.name);
      ASSERT_NE(src, nullptr) << e.name;
      std::copy_n(a.param_data() + src->offset, e.numel, m.param_data() + e.offset);
    }
    std::copy_n(a.buffer_data(), a.buffers().total_floats(), m.buffer_data());
  };
  ZayaModel u(untied);
  copy_into(u);
  EXPECT_EQ(forward(u), ref);
  ZayaModel p(plain);
  copy_into(p);
  EXPECT_NE(forward(p), ref);
  for (const ParamEntry& e : a.params().entries())
    if (tensor_decl(e.role).scope == TensorScope::kMerge)
      std::fill_n(pa + e.offset, e.numel, tensor_decl(e.role).init == InitKind::kOnes ? 1.0f : 0.0f);
  EXPECT_EQ(forward(p), forward(a));
  // An untied head of its own changes the logits.
  const ParamEntry& head = u.params().at("lm_head.weight");
  for (int64_t i = 0; i < head.numel; ++i) u.param_data()[head.offset + i] += 0.05f * normal01(82, 1, i);
  EXPECT_NE(forward(u), forward(a));
}

// Sliding-window blocks 0 and 2 with a window of 3 (< S = 9) and their own RoPE base.
TEST(Model, DirectionalDerivativesMatchFiniteDifferencesWithSlidingWindow) {
  check_directional_derivatives(sliding_config(3));
}

// With every block sliding, information travels at most W - 1 positions per
// attention (plus the convolutions' two rows and the value shift's one), so a
// token far enough back cannot change a logit; with full attention it does.
// "Cannot change" is up to float32 rounding: the changed token routes to other
// experts, so the experts' row counts change, and oneDNN's float32 GEMM may
// sum a row in another order for another row count (seen with AVX2 kernels:
// 1.3e-7 here, where full attention moves the far logits by about 0.1).
TEST(Model, SlidingWindowLimitsHowFarBackATokenReaches) {
  const int64_t B = 1, S = 40, W = 3;
  std::vector<int32_t> ids(S), changed;
  for (int64_t i = 0; i < S; ++i) ids[i] = int32_t((i * 13 + 4) % 90);
  changed = ids;
  changed[0] = 77;
  const ZayaConfig sliding = sliding_config(W, "all"), full = test_config();
  const int64_t reach = sliding.num_blocks * (W - 1 + 2 + 1), V = sliding.vocab_size;
  const std::vector<float> a = logits_of(sliding, ids, B, S), b = logits_of(sliding, changed, B, S);
  const std::vector<float> fa = logits_of(full, ids, B, S), fb = logits_of(full, changed, B, S);
  bool near_changed = false, far_changed_full = false;
  for (int64_t t = 0; t < S; ++t)
    for (int64_t v = 0; v < V; ++v) {
      const int64_t i = t * V + v;
      if (t > reach) {
        ASSERT_NEAR(a[i], b[i], 1e-5) << "position " << t << " sees token 0 through a window of " << W;
        far_changed_full |= std::fabs(fa[i] - fb[i]) > 1e-3;
      }
      if (t <= W - 1) near_changed |= a[i] != b[i];
    }
  EXPECT_TRUE(near_changed);
  EXPECT_TRUE(far_changed_full);
}

// A window as long as the sequence is full attention: with the sliding base
// equal to rope_theta the model is the plain one; with another base the
// sliding blocks rotate with it (here every block, so it is the plain model
// with rope_theta = that base).
TEST(Model, SlidingBlocksRotateWithTheirOwnRopeBase) {
  const int64_t B = 2, S = 12;
  std::vector<int32_t> ids(B * S);
  for (int64_t i = 0; i < B * S; ++i) ids[i] = int32_t((i * 29 + 1) % 90);
  ZayaConfig plain = test_config();
  EXPECT_EQ(logits_of(sliding_config(S, "all", plain.rope_theta), ids, B, S), logits_of(plain, ids, B, S));
  ZayaConfig other_base = plain;
  other_base.rope_theta = 500;
  const std::vector<float> sliding = logits_of(sliding_config(S, "all", 500), ids, B, S);
  EXPECT_EQ(sliding, logits_of(other_base, ids, B, S));
  EXPECT_NE(sliding, logits_of(plain, ids, B, S));
  // Only the even blocks slide: neither all-plain nor all-other.
  const std::vector<float> even = logits_of(sliding_config(S, "even", 500), ids, B, S);
  EXPECT_NE(even, sliding);
  EXPECT_NE(even, logits_of(plain, ids, B, S));
}

// MFU counts only the keys inside a sliding block's window.
TEST(Model, ForwardFlopsCountTheKeysInsideTheWindow) {
  const ZayaConfig full = test_config();
  const int64_t B = 2, S = 40, W = 3;
  const double routed = 123;
  EXPECT_EQ(model_forward_flops(sliding_config(S), B, S, routed), model_forward_flops(full, B, S, routed));
  EXPECT_EQ(model_forward_flops(sliding_config(1000), B, S, routed), model_forward_flops(full, B, S, routed));
  // Per sequence: S (S + 1) / 2 visible keys causally, W (W + 1) / 2 + (S - W) W in the window; 4 Q FLOPs each,
  // on the two sliding blocks (0 and 2) of three.
  const double saved = 2.0 * B * 4 * double(full.q_width()) * (S * (S + 1) / 2.0 - (W * (W + 1) / 2.0 + (S - W) * W));
  EXPECT_DOUBLE_EQ(model_forward_flops(full, B, S, routed) - model_forward_flops(sliding_config(W), B, S, routed),
                   saved);
}

// The context-parallel path on a group of one rank (its two chunks, the halo
// and the K/V gather as copies to itself) computes what the plain path does:
// the exchanges' bookkeeping, checked in one process (and under the
// sanitizers); tests/mpi/context_parallel_test.cc checks 2 to 4 ranks.
void check_cp_path_on_one_rank(const ZayaConfig& c) {
  ZayaModel model(c);
  model.init(5);
  float* p = model.param_data();
  const int64_t n = model.params().total_floats();
  for (int64_t i = 0; i < n; ++i) p[i] += 0.05f * normal01(78, 1, i);
  const int64_t B = 2, S = 20;
  std::vector<int32_t> ids(B * S), targets(B * S);
  for (int64_t i = 0; i < B * S; ++i) {
    ids[i] = int32_t((i * 17 + 2) % c.real_vocab_size);
    targets[i] = int32_t((i * 7 + 3) % c.real_vocab_size);
  }
  auto self = make_self_comm();
  ModelWorkspace plain(c, B, S, true), split(c, B, S, true, nullptr, self.get());
  std::vector<float> g_plain(n, 0.0f), g_split(n, 0.0f);
  ModelWeights gp = bind_weights(c, model.params(), g_plain.data());
  ModelWeights gs = bind_weights(c, model.params(), g_split.data());
  LossParts lp = model_forward(model, plain, ids.data(), targets.data(), B, S, {});
  LossParts ls = model_forward(model, split, ids.data(), targets.data(), B, S, {});
  EXPECT_NEAR(ls.xent_sum, lp.xent_sum, 1e-6 * std::fabs(lp.xent_sum));
  for (int64_t i = 0; i < B * S * c.vocab_size; ++i) ASSERT_NEAR(split.logits()[i], plain.logits()[i], 1e-5) << i;
  model_backward(model, plain, gp, 1.0f / float(B * S), 1.0f, {});
  model_backward(model, split, gs, 1.0f / float(B * S), 1.0f, {});
  for (const ParamEntry& e : model.params().entries()) {
    double diff = 0, norm = 0;
    for (int64_t i = e.offset; i < e.offset + e.numel; ++i) {
      diff += double(g_split[i] - g_plain[i]) * double(g_split[i] - g_plain[i]);
      norm += double(g_plain[i]) * g_plain[i];
    }
    EXPECT_LE(std::sqrt(diff), 1e-5 * std::sqrt(norm) + 1e-8) << e.name;
  }
}

TEST(Model, ContextParallelPathOnOneRankMatchesPlainPath) { check_cp_path_on_one_rank(test_config()); }
TEST(Model, ContextParallelPathOnOneRankMatchesPlainPathWithSlidingWindow) {
  check_cp_path_on_one_rank(sliding_config(3));
}
// Kernels of 3/4 taps need a halo of 5 rows, 1/2 of one (the value shift's), 1/1 none for the convolutions.
TEST(Model, ContextParallelPathOnOneRankMatchesPlainPathWithOtherKernelSizes) {
  for (const auto& [k0, k1] : {std::pair{3, 4}, std::pair{1, 2}, std::pair{1, 1}}) {
    SCOPED_TRACE(::testing::Message() << "cca_time " << k0 << "/" << k1);
    ZayaConfig c = test_config();
    c.conv_kernel0 = k0;
    c.conv_kernel1 = k1;
    check_cp_path_on_one_rank(c);
  }
}

// A chunk shorter than the halo would need rows from two chunks back: refused, naming the kernel keys.
TEST(Model, ContextParallelRefusesChunksShorterThanTheConvolutionHalo) {
  ZayaConfig c = test_config();
  c.conv_kernel0 = 4;
  c.conv_kernel1 = 4;  // halo of 6 rows
  auto self = make_self_comm();
  testing::expect_error([&] { ModelWorkspace ws(c, 1, 8, true, nullptr, self.get()); },
                        "chunks of at least 6 tokens (the halo of 6 rows that cca_time0 + cca_time1 - 2 asks for)");
  ModelWorkspace ok(c, 1, 12, true, nullptr, self.get());
  EXPECT_EQ(ok.cp_size(), 1);
}

}  // namespace
}  // namespace zaya
