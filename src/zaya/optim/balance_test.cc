#include "zaya/optim/balance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/model/model.h"

namespace zaya {
namespace {

// A router deliberately skewed towards expert 0 is brought back to balance by
// the controller alone (parameters frozen, only the biases move).
TEST(BalanceController, RestoresBalanceOfASkewedRouter) {
  ZayaConfig c = preset_config("tiny");
  c.num_blocks = 2;
  c.real_vocab_size = c.vocab_size = 256;
  ZayaModel model(c);
  model.init(7);
  // Diverse per-token preferences (a wide router output layer), skewed towards
  // expert 0: its row gets a positive offset. The router's last GELU output is
  // positive on average, so expert 0 wins for most tokens. (A saturated router
  // with identical preferences for every token cannot be balanced by per-expert
  // biases at all; that is not what this tests.)
  const int64_t R = c.router_hidden, N = c.router_slots();
  const float scale = 1.0f / std::sqrt(float(R));
  for (const MoeWeights& m : model.weights().moe) {
    for (int64_t i = 0; i < R * R; ++i) {
      m.mlp0_RR[i] = 2 * scale * normal01(9, 1, i);
      m.mlp2_RR[i] = 2 * scale * normal01(9, 2, i);
    }
    for (int64_t i = 0; i < N * R; ++i) m.mlp4_NR[i] = 2 * scale * normal01(9, 3, i);
    for (int64_t r = 0; r < R; ++r) m.mlp4_NR[r] += 4.0f / float(R);  // expert 0's logit: + 4 * mean(g2)
  }
  const int64_t B = 4, S = 64, T = B * S;
  ModelWorkspace ws(c, B, S, false);
  std::vector<int32_t> ids(T);
  for (int64_t i = 0; i < T; ++i) ids[i] = int32_t((i * 37 + 11) % c.real_vocab_size);
  BalanceConfig bc;
  bc.lr = 0.01;
  BalanceController ctl(c.num_blocks, c.experts, c.use_skip, bc);
  double least = 1;  // smallest share of any expert in the last forward
  auto max_share = [&] {
    ws.reset_routing();
    model_forward(model, ws, ids.data(), nullptr, B, S, {});
    double worst = 0;
    least = 1;
    for (auto& r : ws.routing()) {
      for (int64_t e = 0; e < c.experts; ++e) {
        worst = std::max(worst, r.choices_N[e] / double(T));
        least = std::min(least, r.choices_N[e] / double(T));
      }
    }
    return worst;
  };
  const double before = max_share();
  EXPECT_GT(before, 0.7);
  double late_share = 0, late_least = 0;  // means of the largest / smallest share over the last 100 updates
  for (int step = 0; step < 400; ++step) {
    const double share = max_share();
    if (step >= 300) {
      late_share += share / 100;
      late_least += least / 100;
    }
    std::vector<std::vector<double>> counts;
    for (auto& r : ws.routing()) counts.push_back(r.choices_N);
    ctl.update(counts, model.balancing_biases());
  }
  // Uniform would be 0.25; top-1 routing of a fixed batch flips tokens in
  // blocks, so the controller settles into a small oscillation around it.
  EXPECT_LT(late_share, 1.6 / double(c.experts)) << "before " << before;
  EXPECT_GT(late_least, 0.5 / double(c.experts));
  // The skip slot was not steered (skip_target = 0): its bias is untouched.
  for (float* b : model.balancing_biases()) EXPECT_EQ(b[c.experts], -1.0f);
}

}  // namespace
}  // namespace zaya
