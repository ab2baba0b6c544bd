#include "zaya/model/lora_branch.h"

#include <gtest/gtest.h>

#include <vector>

#include "zaya/model/test_config.h"

namespace zaya {
namespace {

constexpr int64_t kTokens = 6, kRank = 4;

LoraConfig config_of(std::vector<LoraTarget> targets) {
  LoraConfig l;
  l.enabled = true;
  l.rank = kRank;
  l.alpha = 8;
  l.dropout = 0;  // the pass's dropout is BlockLora's (below); expert targets refuse it here
  l.targets = std::move(targets);
  return l;
}

// A block's adapters as the model's workspace sets them up for a pass.
struct Block {
  ZayaConfig c = testing::model_test_config();
  LoraAdapters adapters;
  std::vector<float> grads, h, scratch = std::vector<float>(64);
  LoraViews grad_views;
  BlockLora lora;
  explicit Block(std::vector<LoraTarget> targets) : adapters(c, config_of(std::move(targets))) {
    grads.assign(size_t(adapters.total_floats()), 0.0f);
    grad_views = adapters.bind(grads.data());
    h.assign(size_t(kLoraTargetCount * kTokens * c.top_k * kRank), 0.0f);
    lora.weights = &adapters.views()[1];
    lora.grads = &grad_views[1];
    for (int t = 0; t < kLoraTargetCount; ++t) lora.h[size_t(t)] = h.data() + t * kTokens * c.top_k * kRank;
    lora.scratch = scratch.data();
    lora.rank = kRank;
    lora.scale = 2.0;
    lora.dropout = 0.1;
    lora.seed = 3;
    lora.stream = 9;
  }
};

TEST(LoraBranch, BindsADenseTargetsAdapterItsColumnsAndItsGradients) {
  Block b({LoraTarget::kK, LoraTarget::kRouterFc1});
  const int64_t P = b.c.q_width() + 2 * b.c.kv_width();
  const LoraBranch<float> fwd = lora_branch(b.c, &b.lora, LoraTarget::kK, kTokens, P, LoraPass::kForward);
  ASSERT_TRUE(fwd.adapted());
  EXPECT_EQ(fwd.a_rI, b.adapters.views()[1][size_t(LoraTarget::kK)].a_rI);
  EXPECT_EQ(fwd.b_Or, b.adapters.views()[1][size_t(LoraTarget::kK)].b_Or);
  EXPECT_EQ(fwd.da_rI, nullptr) << "the forward does not touch the gradients";
  EXPECT_EQ(fwd.h_Tr, b.lora.h[size_t(LoraTarget::kK)]);
  EXPECT_EQ(fwd.row_offset, b.c.q_width()) << "k's rows follow q's in the fused projection";
  const LoraShape want = b.lora.shape(b.c, LoraTarget::kK, kTokens, P);
  EXPECT_EQ(fwd.shape.out_stride, P);
  EXPECT_EQ(fwd.shape.stream, want.stream);
  EXPECT_EQ(fwd.shape.dropout, 0.1);
  const LoraBranch<float> bwd =
      lora_branch(b.c, &b.lora, LoraTarget::kRouterFc1, kTokens, b.c.router_hidden, LoraPass::kBackward);
  EXPECT_EQ(bwd.da_rI, b.grad_views[1][size_t(LoraTarget::kRouterFc1)].a_rI);
  EXPECT_EQ(bwd.db_Or, b.grad_views[1][size_t(LoraTarget::kRouterFc1)].b_Or);
  EXPECT_EQ(bwd.row_offset, 0);
}

TEST(LoraBranch, BindsOneExpertsAdapterAndItsRowsOfTheKeptInput) {
  Block b({LoraTarget::kExpertDown});
  const int64_t expert = 2, row0 = 5, rows = 3;
  const LoraBranch<float> l =
      lora_expert_branch(b.c, &b.lora, LoraTarget::kExpertDown, expert, row0, rows, LoraPass::kBackward);
  const LoraMatrices m = b.adapters.views()[1][size_t(LoraTarget::kExpertDown)].expert(expert);
  const LoraMatrices g = b.grad_views[1][size_t(LoraTarget::kExpertDown)].expert(expert);
  ASSERT_TRUE(l.adapted());
  EXPECT_EQ(l.a_rI, m.a_rI);
  EXPECT_EQ(l.b_Or, m.b_Or);
  EXPECT_EQ(l.da_rI, g.a_rI);
  EXPECT_EQ(l.db_Or, g.b_Or);
  EXPECT_EQ(l.h_Tr, b.lora.h[size_t(LoraTarget::kExpertDown)] + row0 * kRank);
  EXPECT_EQ(l.shape.tokens, rows);
  EXPECT_EQ(l.shape.in, b.c.expert_ffn);
  EXPECT_EQ(l.shape.out, b.c.hidden);
  EXPECT_EQ(l.shape.out_stride, b.c.hidden);
  EXPECT_EQ(l.shape.dropout, 0.0) << "no dropout on expert targets (PEFT's ParamWrapper has none)";
}

// A matrix without an adapter (or a pass without adapters) gets an empty
// branch: the helper then makes the base product alone.
TEST(LoraBranch, AnUnadaptedMatrixGivesAnEmptyBranch) {
  Block b({LoraTarget::kQ});
  for (const BlockLora* lora : {static_cast<const BlockLora*>(&b.lora), static_cast<const BlockLora*>(nullptr)}) {
    EXPECT_FALSE(lora_branch(b.c, lora, LoraTarget::kO, kTokens, b.c.hidden, LoraPass::kBackward).adapted());
    EXPECT_FALSE(lora_expert_branch(b.c, lora, LoraTarget::kExpertGateUp, 1, 0, 4, LoraPass::kForward).adapted());
  }
  EXPECT_TRUE(lora_branch(b.c, &b.lora, LoraTarget::kQ, kTokens, b.c.hidden, LoraPass::kForward).adapted());
}

}  // namespace
}  // namespace zaya
