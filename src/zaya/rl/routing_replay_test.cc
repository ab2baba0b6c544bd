// Routing replay (docs/rl.md "Routing replay"): the cached decoder records the
// experts it routed each fed token to (GeneratorOptions::routing), the
// training rows carry the record (RolloutBatches::keep_routing) and the
// trainer's forward compares its routers with it or routes by it
// (ModelWorkspace::set_routing_record). Replaying the routers' own choices
// changes no bit; a replayed path's gradient is the derivative of the
// replayed loss (the gates from the trainer's router); on a model whose
// routers nearly tie, the trainer's routers disagree with the decoder's on
// some token x layer choices, and with replay no choice it routes by does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "zaya/infer/generator.h"
#include "zaya/infer/test_util.h"
#include "zaya/ops/routing.h"
#include "zaya/rl/rl_batch.h"

namespace zaya {
namespace {

constexpr int64_t kPrompts = 2, kGroup = 3, kNew = 8;

// The rollout of a step as training rows, with the decoder's routing records and log-probabilities.
struct ReplayRows {
  std::vector<RlPrompt> prompts;
  std::unique_ptr<RolloutBatches> batches;
  int64_t B = 0, S = 0;
};

ReplayRows rollout_rows(const ZayaModel& model) {
  const ZayaConfig& c = model.config();
  ReplayRows out;
  out.prompts.resize(kPrompts);
  for (int64_t p = 0; p < kPrompts; ++p)
    for (int64_t i = 0; i < 5 + 2 * p; ++i)
      out.prompts[size_t(p)].ids.push_back(int32_t(philox4x32(41, uint64_t(p), uint64_t(i))[0] % c.real_vocab_size));
  std::vector<GenerationRequest> requests;
  for (int64_t k = 0; k < kPrompts * kGroup; ++k) {
    GenerationRequest r;
    r.prompt = out.prompts[size_t(k / kGroup)].ids;
    r.max_new_tokens = kNew;
    r.sampling = {1.0, 0, 1.0, uint64_t(100 + k)};
    requests.push_back(r);
  }
  GeneratorOptions o;
  o.max_batch = int64_t(requests.size());
  o.bf16_activations = false;
  o.logprobs = true;
  o.routing = true;
  const std::unique_ptr<InferModel> im = InferModel::from_model(model, "f32");
  std::vector<GenerationResult> results = generate(*im, requests, o);
  std::vector<RolloutSample> samples;
  for (size_t k = 0; k < results.size(); ++k) {
    RolloutSample s;
    s.prompt = &out.prompts[k / size_t(kGroup)];
    s.tokens = results[k].tokens;
    s.logprobs = results[k].logprobs;
    s.routing = results[k].routing;
    // Every fed token: the prompt, and each generated one but the last.
    EXPECT_EQ(s.routing.size(), (s.prompt->ids.size() + s.tokens.size() - 1) * size_t(c.num_blocks) * size_t(c.top_k));
    samples.push_back(std::move(s));
  }
  out.B = int64_t(samples.size());
  out.S = 7 + kNew;
  out.batches = std::make_unique<RolloutBatches>(out.B, out.S, 1);
  out.batches->keep_routing(c.num_blocks, c.top_k);
  out.batches->fill(samples, std::vector<float>(samples.size(), 0.0f));
  return out;
}

struct Pass {
  std::vector<float> token_loss, grads;
  double compared = 0, flips = 0, used = 0;
};

// A forward (and, with grads, a backward) of the rows, with the record (null: none) compared or forced.
Pass pass(const ZayaModel& model, const ReplayRows& rows, const int32_t* record, bool force, bool grads) {
  const ZayaConfig& c = model.config();
  ModelWorkspace ws(c, rows.B, rows.S, true);
  ws.set_routing_record(record, force);
  model_forward(model, ws, rows.batches->ids(), rows.batches->targets(), rows.B, rows.S, {});
  Pass out;
  out.token_loss.assign(ws.token_loss(), ws.token_loss() + rows.B * rows.S);
  for (const RoutingStats& s : ws.routing()) {
    out.compared += s.replay_compared;
    out.flips += s.replay_flips;
    out.used += s.replay_used_flips;
  }
  if (grads) {
    out.grads.assign(size_t(model.params().total_floats()), 0.0f);
    const ModelWeights g = bind_weights(c, model.params(), out.grads.data());
    model_backward(model, ws, g, 1.0f / float(rows.B * rows.S), 0.0f, {});
  }
  return out;
}

double mean_loss(const Pass& p, const ReplayRows& rows) {
  double s = 0;
  for (int64_t t = 0; t < rows.B * rows.S; ++t) s += p.token_loss[size_t(t)];
  return s / double(rows.B * rows.S);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

// Each recorded choice moved to the next slot (a set of distinct slots stays one): a record the router disagrees
// with on every recorded row.
std::vector<int32_t> rotated(const RolloutBatches& b, int64_t entries, int64_t slots) {
  std::vector<int32_t> r(b.routing(0), b.routing(0) + entries);
  for (int32_t& x : r)
    if (x >= 0) x = int32_t((x + 1) % slots);
  return r;
}

// The small test model, its rollout, and a record every recorded row of which the router disagrees with.
struct ForcedSetup {
  ZayaConfig c = testing::small_test_config();
  std::unique_ptr<ZayaModel> model = testing::random_model(c, 3);
  ReplayRows rows = rollout_rows(*model);
  std::vector<int32_t> other = rotated(*rows.batches, c.num_blocks* rows.B* rows.S* c.top_k, c.router_slots());
};

TEST(RoutingReplay, TheRoutersOwnChoicesChangeNoBit) {
  const ZayaConfig c = testing::small_test_config();
  const std::unique_ptr<ZayaModel> model = testing::random_model(c, 3);
  const ReplayRows rows = rollout_rows(*model);
  const Pass plain = pass(*model, rows, nullptr, false, true);
  const Pass replayed = pass(*model, rows, rows.batches->routing(0), true, true);
  // Every input position of every sample has a record in every layer; on this model (clear router decisions, f32)
  // the decoder's routers and the trainer's agree on all of them, so the replay forces the routers' own choices.
  int64_t inputs = 0;
  for (int64_t t = 0; t < rows.B * rows.S; ++t) inputs += rows.batches->routing(0)[t * c.top_k] != kNotRecorded;
  EXPECT_EQ(replayed.compared, double(inputs * c.num_blocks));
  ASSERT_EQ(replayed.flips, 0.0);
  EXPECT_EQ(replayed.used, 0.0);
  EXPECT_TRUE(same_bits(replayed.token_loss, plain.token_loss));
  EXPECT_TRUE(same_bits(replayed.grads, plain.grads));
  EXPECT_EQ(plain.compared, 0.0);
}

TEST(RoutingReplay, ForcedRoutingCountsFlipsAndChangesTheOutput) {
  const ForcedSetup f;
  const ZayaModel* model = f.model.get();
  const ReplayRows& rows = f.rows;
  const std::vector<int32_t>& other = f.other;
  const Pass compared = pass(*model, rows, other.data(), false, false);
  const Pass forced = pass(*model, rows, other.data(), true, false);
  const Pass plain = pass(*model, rows, nullptr, false, false);
  // Compared only: every recorded row flips, the forward is the plain one.
  EXPECT_GT(compared.compared, 0.0);
  EXPECT_EQ(compared.flips, compared.compared);
  EXPECT_EQ(compared.used, compared.compared);
  EXPECT_TRUE(same_bits(compared.token_loss, plain.token_loss));
  // Forced: the first layer's router flips on every row (later layers see other inputs), nothing routes otherwise,
  // and the output changes.
  EXPECT_EQ(forced.compared, compared.compared);
  EXPECT_GT(forced.flips, 0.0);
  EXPECT_EQ(forced.used, 0.0);
  EXPECT_FALSE(same_bits(forced.token_loss, plain.token_loss));
}

// The replayed loss is smooth in the routers' weights (no argmax can switch): a central difference along the
// routers' output matrices matches the backward's directional derivative. The gates are the trainer's router's
// probabilities of the recorded slots, so the router receives this gradient.
TEST(RoutingReplay, ReplayedGradientMatchesFiniteDifferences) {
  ForcedSetup f;
  const ZayaConfig& c = f.c;
  ZayaModel* model = f.model.get();
  const ReplayRows& rows = f.rows;
  const std::vector<int32_t>& other = f.other;
  const Pass base = pass(*model, rows, other.data(), true, true);
  // Direction: +-1 on every router output matrix entry (and down projection), the gradient's inner product with it.
  const ModelWeights g = bind_weights(c, model->params(), const_cast<float*>(base.grads.data()));
  const ModelWeights w = bind_weights(c, model->params(), model->param_data());
  std::vector<std::pair<float*, float>> dir;
  double analytic = 0, norm = 0;
  for (int64_t l = 0; l < c.num_blocks; ++l) {
    const int64_t sizes[2] = {c.router_slots() * c.router_hidden, c.router_hidden * c.hidden};
    float* ws[2] = {const_cast<float*>(w.moe[l].mlp4_NR), const_cast<float*>(w.moe[l].down_RD)};
    const float* gs[2] = {g.moe[l].mlp4_NR, g.moe[l].down_RD};
    for (int m = 0; m < 2; ++m)
      for (int64_t i = 0; i < sizes[m]; ++i) {
        const float v = (philox4x32(77, uint64_t(l * 2 + m), uint64_t(i))[0] & 1) ? 1.0f : -1.0f;
        dir.push_back({ws[m] + i, v});
        analytic += double(v) * gs[m][i];
        norm += double(gs[m][i]) * gs[m][i];
      }
  }
  ASSERT_GT(norm, 0.0) << "the routers get a gradient through the replayed gates";
  const float h = 1e-3f;
  auto shifted = [&](float by) {
    for (auto& [p, v] : dir) *p += by * v;
    const double l = mean_loss(pass(*model, rows, other.data(), true, false), rows);
    for (auto& [p, v] : dir) *p -= by * v;
    return l;
  };
  const double numeric = (shifted(h) - shifted(-h)) / (2.0 * double(h));
  EXPECT_NEAR(numeric, analytic, 0.02 * std::fabs(analytic) + 1e-5) << "analytic " << analytic;
}

// Near-tie routing: each MoE layer's experts 0 and 1 have router output rows a few float32 roundings apart and the
// other slots lose by their balancing bias, so which of the two wins depends on float rounding, and the decoder's
// kernels (matvec, cached attention) and the trainer's (GEMMs) round differently.
TEST(RoutingReplay, FlipsOnANearTieWithoutReplayAndNoneRoutedWithIt) {
  const ZayaConfig c = testing::small_test_config();
  const std::unique_ptr<ZayaModel> model = testing::random_model(c, 3);
  const ModelWeights w = bind_weights(c, model->params(), model->param_data());
  const int64_t R = c.router_hidden;
  for (int64_t l = 0; l < c.num_blocks; ++l) {
    float* mlp4 = const_cast<float*>(w.moe[l].mlp4_NR);
    for (int64_t i = 0; i < R; ++i) mlp4[R + i] = mlp4[i] * (1.0f + 3e-7f * normal01(9, uint64_t(l), uint64_t(i)));
    float* bias = model->balancing_biases()[size_t(l)];
    for (int64_t e = 0; e < c.router_slots(); ++e) bias[e] = e < 2 ? 0.0f : -2.0f;
  }
  const ReplayRows rows = rollout_rows(*model);
  const Pass off = pass(*model, rows, rows.batches->routing(0), false, false);
  const Pass on = pass(*model, rows, rows.batches->routing(0), true, false);
  EXPECT_GT(off.flips, 0.0) << "of " << off.compared;
  EXPECT_EQ(off.used, off.flips);
  EXPECT_EQ(on.used, 0.0);
  EXPECT_EQ(on.compared, off.compared);
  std::printf("near tie: router flip rate %.4f without replay, %.4f with (routed: %.4f, %.4f) of %.0f choices\n",
              off.flips / off.compared, on.flips / on.compared, off.used / off.compared, on.used / on.compared,
              off.compared);
}

}  // namespace
}  // namespace zaya
