// Activation recomputation (model/recompute.h) over real groups: the
// recomputed blocks' expert all-to-all (ep) and context-parallel halo and K/V
// gathers (cp) run again in backward, and every setting gives the gradients
// and losses of "none" on the same layout bit for bit; so does a loss chunk
// of every row (train.loss_chunk: the head's backward in the forward).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "tests/mpi/mpi_test_env.h"
#include "zaya/core/rng.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

using testing::world;

struct RecomputeResult {
  std::vector<LossParts> parts;
  std::vector<float> grads;
  std::vector<double> choices;
};

// Two micro-batches (router losses on) on a model holding `experts` of c.
RecomputeResult run(const ZayaConfig& c, ExpertRange experts, Comm* ep, Comm* cp, uint64_t group, Recompute r,
                    int64_t loss_chunk = 0) {
  ZayaModel model(c, experts);
  model.init(13);
  float* p = model.param_data();
  for (int64_t i = 0; i < model.params().total_floats(); ++i) p[i] += 0.05f * normal01(22, 2, uint64_t(i));
  const int64_t B = 2, S = c.max_position;
  ModelWorkspace ws(c, B, S, true, ep, cp, r, {}, loss_chunk);
  RecomputeResult out;
  out.grads.assign(size_t(model.params().total_floats()), 0.0f);
  const ModelWeights g = bind_weights(c, model.params(), out.grads.data());
  const MoeLossOptions loss{0.01f, 0.001f};
  ws.reset_routing();
  for (uint64_t micro = 0; micro < 2; ++micro) {
    std::vector<int32_t> ids(B * S), targets(B * S);
    for (int64_t i = 0; i < B * S; ++i) {
      ids[i] = int32_t(philox4x32(7, group * 2 + micro, uint64_t(i))[0] % uint32_t(c.real_vocab_size));
      targets[i] = int32_t(philox4x32(8, group * 2 + micro, uint64_t(i))[0] % uint32_t(c.real_vocab_size));
    }
    const HeadGradient head{g.lm_head_VD, 1.0f / float(2 * B * S)};
    out.parts.push_back(
        model_forward(model, ws, ids.data(), targets.data(), B, S, loss, nullptr, loss_chunk > 0 ? &head : nullptr));
    model_backward(model, ws, g, head.xent_scale, 0.5f, loss);
  }
  for (const RoutingStats& s : ws.routing())
    out.choices.insert(out.choices.end(), s.choices_N.begin(), s.choices_N.end());
  return out;
}

void expect_same(const RecomputeResult& a, const RecomputeResult& b, const char* what, Recompute r) {
  for (size_t i = 0; i < a.parts.size(); ++i) {
    EXPECT_EQ(a.parts[i].xent_sum, b.parts[i].xent_sum) << what << " " << recompute_name(r);
    EXPECT_EQ(a.parts[i].router_loss, b.parts[i].router_loss) << what << " " << recompute_name(r);
  }
  EXPECT_EQ(0, std::memcmp(a.grads.data(), b.grads.data(), sizeof(float) * a.grads.size()))
      << "gradients differ: " << what << ", " << recompute_name(r) << ", rank " << world().rank();
  EXPECT_EQ(a.choices, b.choices) << what << " " << recompute_name(r);
}

TEST(Recompute, ExpertParallelGradientsAreThoseOfNoneBitwise) {
  const int n = world().size();
  int checked = 0;
  for (int ep_size = 2; ep_size <= n; ++ep_size) {
    ZayaConfig c = testing::model_test_config();  // 4 experts
    c.max_position = 16;
    if (n % ep_size != 0 || c.experts % ep_size != 0) continue;
    Comm& w = world();
    auto ep = w.split(w.rank() / ep_size, w.rank() % ep_size, "ep");
    const int64_t local = c.experts / ep_size;
    const ExpertRange experts{ep->rank() * local, local};
    const uint64_t group = uint64_t(w.rank());  // every rank its own tokens
    const RecomputeResult none = run(c, experts, ep.get(), nullptr, group, Recompute::kNone);
    for (Recompute r : {Recompute::kAttention, Recompute::kMoe, Recompute::kFull})
      expect_same(none, run(c, experts, ep.get(), nullptr, group, r), "ep", r);
    expect_same(none, run(c, experts, ep.get(), nullptr, group, Recompute::kFull, 1 << 20), "ep, loss chunk",
                Recompute::kFull);
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no ep size of 2 or more divides both " << n << " ranks and 4 experts";
}

TEST(Recompute, ContextParallelGradientsAreThoseOfNoneBitwise) {
  const int n = world().size();
  for (int cp_size = 2; cp_size <= n; ++cp_size) {
    if (n % cp_size != 0) continue;
    Comm& w = world();
    auto cp = w.split(w.rank() / cp_size, w.rank() % cp_size, "cp");
    ZayaConfig c = testing::model_test_config();
    c.max_position = 12 * cp_size;
    const uint64_t group = uint64_t(w.rank() / cp_size);  // a cp group shares its sequences
    const RecomputeResult none = run(c, {}, nullptr, cp.get(), group, Recompute::kNone);
    for (Recompute r : {Recompute::kAttention, Recompute::kMoe, Recompute::kFull})
      expect_same(none, run(c, {}, nullptr, cp.get(), group, r), "cp", r);
    expect_same(none, run(c, {}, nullptr, cp.get(), group, Recompute::kFull, 1 << 20), "cp, loss chunk",
                Recompute::kFull);
  }
}

}  // namespace
}  // namespace zaya
