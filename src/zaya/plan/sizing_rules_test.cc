#include "zaya/plan/sizing_rules.h"

#include <gtest/gtest.h>

#include "zaya/core/error.h"
#include "zaya/plan/builtin_profiles.h"

namespace zaya {
namespace {

TrainLayout layout() {
  TrainLayout L;
  L.micro_batch = 1;
  L.seq_len = 4096;
  L.dtype = "bf16";
  return L;
}

TEST(SizingRules, ZayaOneBaseFollowsTheRules) {
  const GemmModel g(*find_builtin_profile("mi300x-pollara"));
  EXPECT_TRUE(check_config(preset_config("zaya1-base"), layout(), g).empty());
}

TEST(SizingRules, FlagsOffMultipleDimensionsWithASlowdown) {
  const GemmModel g(*find_builtin_profile("mi300x-pollara"));
  ZayaConfig c = preset_config("zaya1-base");
  c.head_dim = 96;
  c.expert_ffn = 2000;
  c.vocab_size = 262150;
  const std::vector<SizingFinding> f = check_config(c, layout(), g);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].field, "kv_channels (head_dim)");
  EXPECT_EQ(f[0].suggested, 128);
  EXPECT_EQ(f[1].field, "expert_ffn");
  EXPECT_EQ(f[1].suggested, 2048);
  EXPECT_GT(f[1].slowdown, 0);
  EXPECT_EQ(f[2].suggested, 262208);
  for (const SizingFinding& x : f) EXPECT_EQ(x.basis, "model");
}

TEST(SizingRules, FlagsTooFewRowsPerExpert) {
  const GemmModel g(*find_builtin_profile("mi300x-pollara"));
  TrainLayout L = layout();
  L.seq_len = 512;  // 512 tokens / 16 experts = 32 rows, below a 256-row tile
  const std::vector<SizingFinding> f = check_config(preset_config("zaya1-base"), L, g);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].value, 32);
  EXPECT_GT(f[0].slowdown, 0.5);
}

TEST(SizingRules, ProposalsHitTheTargetWithAlignedDimensions) {
  const GemmModel g(*find_builtin_profile("mi300x-pollara"));
  SizeTarget t;
  t.total_params = 8.8e9;
  const std::vector<SizeProposal> props = propose_configs(t, layout(), g, 3);
  ASSERT_FALSE(props.empty());
  for (const SizeProposal& p : props) {
    EXPECT_NEAR(double(p.total_params), 8.8e9, 0.2 * 8.8e9);
    EXPECT_EQ(p.config.head_dim % 64, 0);
    EXPECT_EQ(p.config.hidden % 256, 0);
    EXPECT_EQ(p.config.vocab_size % 128, 0);
    EXPECT_TRUE(check_config(p.config, layout(), g).empty());
    EXPECT_GE(p.reasons.size(), 5u);
  }
  for (size_t i = 1; i < props.size(); ++i) EXPECT_GE(props[i - 1].step.mfu, props[i].step.mfu);
  SizeTarget none;
  EXPECT_THROW(propose_configs(none, layout(), g), Error);
}

}  // namespace
}  // namespace zaya
