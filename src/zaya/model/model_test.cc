#include "zaya/model/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/dist/comm.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

ZayaConfig test_config() { return testing::model_test_config(); }

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
TEST(Model, DirectionalDerivativesMatchFiniteDifferences) {
  ZayaConfig c = test_config();
  ZayaModel model(c);
  model.init(3);
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
  LossParts l0 = model_forward(model, ws, ids.data(), targets.data(), B, S, opts);
  std::vector<int32_t> choice0 = ws.routing().empty() ? std::vector<int32_t>() : std::vector<int32_t>();
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

// The context-parallel path on a group of one rank (its two chunks, the halo
// and the K/V gather as copies to itself) computes what the plain path does:
// the exchanges' bookkeeping, checked in one process (and under the
// sanitizers); tests/mpi/context_parallel_test.cc checks 2 to 4 ranks.
TEST(Model, ContextParallelPathOnOneRankMatchesPlainPath) {
  ZayaConfig c = test_config();
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

}  // namespace
}  // namespace zaya
