// Activation recomputation (model/recompute.h): every setting gives the
// gradients, losses, logits and routing statistics of "none" bit for bit (the
// backward replays the same computation), and the workspace shrinks
// none > attention, moe > full.
#include "zaya/model/recompute.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/dist/comm.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

const Recompute kAll[] = {Recompute::kNone, Recompute::kAttention, Recompute::kMoe, Recompute::kFull};

struct Run {
  std::vector<LossParts> parts;     // per micro-batch
  std::vector<float> logits;        // of the last forward
  std::vector<float> grads;         // accumulated over the micro-batches
  std::vector<RoutingStats> stats;  // of all micro-batches
};

enum class Group { kNone, kExpertParallel, kContextParallel };  // a group of one rank: the exchange paths

// Two micro-batches accumulated into one gradient (the router losses on), as a training step does.
Run run(const ZayaConfig& c, Recompute r, bool bf16, Group group = Group::kNone) {
  ZayaModel model(c);
  model.init(5);
  float* p = model.param_data();
  const int64_t n = model.params().total_floats();
  for (int64_t i = 0; i < n; ++i) p[i] += 0.05f * normal01(81, 1, uint64_t(i));
  if (bf16) model.enable_bf16_gemms();
  const int64_t B = 2, S = 16;
  std::unique_ptr<Comm> self = make_self_comm();
  ModelWorkspace ws(c, B, S, true, group == Group::kExpertParallel ? self.get() : nullptr,
                    group == Group::kContextParallel ? self.get() : nullptr, r);
  EXPECT_EQ(ws.recompute(), r);
  Run out;
  out.grads.assign(size_t(n), 0.0f);
  const ModelWeights g = bind_weights(c, model.params(), out.grads.data());
  const MoeLossOptions loss{0.01f, 0.001f};
  ws.reset_routing();
  for (int micro = 0; micro < 2; ++micro) {
    std::vector<int32_t> ids(B * S), targets(B * S);
    for (int64_t i = 0; i < B * S; ++i) {
      ids[i] = int32_t(philox4x32(3, uint64_t(micro), uint64_t(i))[0] % uint32_t(c.real_vocab_size));
      targets[i] = int32_t(philox4x32(4, uint64_t(micro), uint64_t(i))[0] % uint32_t(c.real_vocab_size));
    }
    out.parts.push_back(model_forward(model, ws, ids.data(), targets.data(), B, S, loss));
    model_backward(model, ws, g, 1.0f / float(2 * B * S), 0.5f, loss);
  }
  // After backward: the logits' gradient in float32, the logits themselves under bf16 GEMMs.
  out.logits.assign(ws.logits(), ws.logits() + ws.rows() * c.vocab_size);
  out.stats = ws.routing();
  return out;
}

void expect_same_bits(const Run& want, const Run& got, const std::string& what) {
  ASSERT_EQ(want.parts.size(), got.parts.size());
  for (size_t i = 0; i < want.parts.size(); ++i) {
    EXPECT_EQ(want.parts[i].xent_sum, got.parts[i].xent_sum) << what;
    EXPECT_EQ(want.parts[i].router_loss, got.parts[i].router_loss) << what;
    EXPECT_GT(got.parts[i].router_loss, 0.0) << what;
  }
  ASSERT_EQ(want.grads.size(), got.grads.size());
  EXPECT_EQ(0, std::memcmp(want.grads.data(), got.grads.data(), sizeof(float) * want.grads.size()))
      << "gradients differ: " << what;
  EXPECT_EQ(0, std::memcmp(want.logits.data(), got.logits.data(), sizeof(float) * want.logits.size()))
      << "dlogits differ: " << what;
  // Counted once: the recomputed forwards add no routing statistics.
  ASSERT_EQ(want.stats.size(), got.stats.size());
  for (size_t l = 0; l < want.stats.size(); ++l) {
    EXPECT_EQ(want.stats[l].choices_N, got.stats[l].choices_N) << what << ", MoE layer " << l;
    EXPECT_EQ(want.stats[l].tokens, got.stats[l].tokens) << what;
    EXPECT_EQ(want.stats[l].entropy_sum, got.stats[l].entropy_sum) << what;
    EXPECT_EQ(want.stats[l].aux_loss, got.stats[l].aux_loss) << what;
    EXPECT_EQ(want.stats[l].z_loss, got.stats[l].z_loss) << what;
  }
}

void check_every_setting(const ZayaConfig& c, bool bf16, Group group = Group::kNone) {
  const Run none = run(c, Recompute::kNone, bf16, group);
  int64_t nonzero = 0;
  for (float v : none.grads) nonzero += v != 0.0f;
  EXPECT_GT(nonzero, int64_t(none.grads.size()) / 2);
  EXPECT_EQ(none.stats[0].tokens, 2.0 * 2 * 16) << "two micro-batches of 32 tokens";
  for (Recompute r : kAll)
    if (r != Recompute::kNone)
      expect_same_bits(none, run(c, r, bf16, group), recompute_name(r) + (bf16 ? ", bf16" : ", f32"));
}

TEST(Recompute, EverySettingGivesTheGradientsOfNoneBitwise) {
  check_every_setting(testing::model_test_config(), false);
}

TEST(Recompute, EverySettingGivesTheGradientsOfNoneBitwiseInBf16) {
  check_every_setting(testing::model_test_config(), true);
}

// Without EDA (no router state between MoE layers), with top-2 routing and sliding-window blocks.
TEST(Recompute, EverySettingGivesTheGradientsOfNoneBitwiseInOtherArchitectures) {
  ZayaConfig c = testing::model_test_config();
  c.use_eda = false;
  check_every_setting(c, false);
  c = testing::model_test_config();
  c.top_k = 2;
  c.sliding_window = 5;
  c.sliding_blocks = sliding_block_pattern("even", c.num_blocks, "test");
  c.sliding_rope_theta = 500;
  check_every_setting(c, false);
}

// The expert exchange and the context-parallel halo and K/V gather run again
// in backward for recomputed blocks (here on groups of one rank;
// tests/mpi/recompute_test.cc runs them over several).
TEST(Recompute, EverySettingGivesTheGradientsOfNoneBitwiseThroughTheExchangePaths) {
  check_every_setting(testing::model_test_config(), false, Group::kExpertParallel);
  check_every_setting(testing::model_test_config(), false, Group::kContextParallel);
}

TEST(Recompute, WorkspaceShrinksNoneAttentionMoeFull) {
  const ZayaConfig c = testing::model_test_config();
  auto bytes = [&](Recompute r) { return ModelWorkspace(c, 4, 32, true, nullptr, nullptr, r).bytes(); };
  auto acts = [&](Recompute r) { return ModelWorkspace(c, 4, 32, true, nullptr, nullptr, r).activation_bytes(); };
  const int64_t none = bytes(Recompute::kNone), attention = bytes(Recompute::kAttention);
  const int64_t moe = bytes(Recompute::kMoe), full = bytes(Recompute::kFull);
  EXPECT_GT(none, attention);
  EXPECT_GT(none, moe);
  EXPECT_GT(attention, full);
  EXPECT_GT(moe, full);
  // Only the activations shrink: the scratch is the same in every setting.
  for (Recompute r : kAll) EXPECT_EQ(bytes(r) - acts(r), none - acts(Recompute::kNone)) << recompute_name(r);
}

TEST(Recompute, NamesRoundTripAndAWrongOneIsNamed) {
  for (Recompute r : kAll) EXPECT_EQ(parse_recompute(recompute_name(r), "train.recompute"), r);
  try {
    parse_recompute("selective", "x.toml: train.recompute");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.toml: train.recompute = \"selective\" is invalid; allowed: none, "
                                         "attention, moe, full"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zaya
