#include "zaya/train/recipe.h"

#include <gtest/gtest.h>

#include <string>

#include "zaya/core/test_util.h"
#include "zaya/train/phase_controller.h"
#include "zaya/train/train_config.h"

namespace zaya {
namespace {

// Two phases: short context over two datasets, then long context with a larger RoPE base.
const char* kRecipe = R"([model]
preset = "tiny"
[train]
micro_batch = 4
grad_accum = 2
[optim]
lr = 0.002

[[phase]]
name = "short"
tokens = 10000
seq_len = 64
warmup_steps = 5
[[phase.data]]
dir = "data/a"
weight = 3
[[phase.data]]
dir = "data/b"
weight = 1

[[phase]]
name = "long"
tokens = 4096
seq_len = 256
micro_batch = 1
rope_theta = 100000
lr = 0.001
decay_fraction = 0.5
min_lr_ratio = 0
[[phase.data]]
dir = "data/b"
)";

std::string error_of(const std::string& text, const std::vector<std::string>& overrides = {}) {
  return testing::error_of([&] { parse_train_config(text, "recipe.toml", overrides); });
}

// kRecipe with the first occurrence of `from` replaced by `to`.
std::string edited(const std::string& from, const std::string& to) {
  std::string s = kRecipe;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(Recipe, ParsesWithDefaultsAndPlansSteps) {
  const TrainConfig t = parse_train_config(kRecipe, "recipe.toml");
  ASSERT_EQ(t.phases.size(), 2u);
  const PhaseConfig& a = t.phases[0];
  EXPECT_EQ(a.name, "short");
  EXPECT_EQ(a.micro_batch, 4);            // train.micro_batch
  EXPECT_DOUBLE_EQ(a.lr, 0.002);          // optim.lr
  EXPECT_DOUBLE_EQ(a.rope_theta, 10000);  // the preset's
  EXPECT_DOUBLE_EQ(a.decay_fraction, 0.2);
  ASSERT_EQ(a.data.size(), 2u);
  EXPECT_EQ(a.main_dataset(), 0u);
  EXPECT_EQ(t.phases[1].data[0].weight, 1.0);
  // The first phase's shape; steps = ceil(10000 / (4 x 64 x 2)) + ceil(4096 / (1 x 256 x 2)) = 20 + 8.
  EXPECT_EQ(t.run.seq_len, 64);
  EXPECT_EQ(t.run.steps, 28);
  const std::vector<PhasePlan> p = plan_phases(t, 1);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].steps, 20);
  EXPECT_EQ(p[1].first_step, 20);
  EXPECT_EQ(p[1].steps, 8);
  EXPECT_EQ(p[1].end_step(), 28);
  // Two data replicas halve the steps (rounded up).
  const std::vector<PhasePlan> p2 = plan_phases(t, 2);
  EXPECT_EQ(p2[0].steps, 10);
  EXPECT_EQ(p2[1].steps, 4);
  EXPECT_EQ(phase_at_step(p, 0), 0u);
  EXPECT_EQ(phase_at_step(p, 19), 0u);
  EXPECT_EQ(phase_at_step(p, 20), 1u);
  EXPECT_EQ(phase_at_step(p, 99), 1u);
}

TEST(Recipe, LearningRateIsWsdWithinEachPhase) {
  const TrainConfig t = parse_train_config(kRecipe, "recipe.toml");
  const std::vector<PhasePlan> p = plan_phases(t, 1);
  // Phase 1: warmup over 5 steps, stable, then a decay over the last 20% (4 steps) to 0.1.
  EXPECT_DOUBLE_EQ(phase_lr_multiplier(p[0], 0), 0.2);
  EXPECT_DOUBLE_EQ(phase_lr_multiplier(p[0], 4), 1.0);
  EXPECT_DOUBLE_EQ(phase_lr_multiplier(p[0], 15), 1.0);
  EXPECT_LT(phase_lr_multiplier(p[0], 16), 1.0);
  EXPECT_DOUBLE_EQ(phase_lr_multiplier(p[0], 19), 0.1);
  // Phase 2: peak 0.001 = 0.5 x optim.lr, no warmup, decay over its last 4 steps to 0.
  EXPECT_DOUBLE_EQ(phase_lr_multiplier(p[1], 20), 0.5);
  EXPECT_DOUBLE_EQ(phase_lr_multiplier(p[1], 23), 0.5);
  EXPECT_DOUBLE_EQ(phase_lr_multiplier(p[1], 24), 0.5 * 0.75);
  EXPECT_DOUBLE_EQ(phase_lr_multiplier(p[1], 27), 0.0);
  // decay_fraction = 0: the peak to the end.
  const TrainConfig flat = parse_train_config(edited("decay_fraction = 0.5", "decay_fraction = 0"), "r.toml");
  EXPECT_DOUBLE_EQ(phase_lr_multiplier(plan_phases(flat, 1)[1], 27), 0.5);
  // Without phases: one implicit phase with [schedule] unchanged.
  const TrainConfig plain =
      parse_train_config("[data]\ndir = \"d\"\n[train]\nsteps = 50\n[schedule]\nkind = \"cosine\"\n", "p.toml");
  const std::vector<PhasePlan> one = plan_phases(plain, 4);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].steps, 50);
  for (int64_t s : {0, 3, 20, 49}) EXPECT_EQ(phase_lr_multiplier(one[0], s), lr_multiplier(plain.schedule, s));
}

TEST(Recipe, TomlRoundTripAndPhaseOverrides) {
  const TrainConfig t = parse_train_config(kRecipe, "recipe.toml", {"phase.2.tokens=8192", "phase.1.name=warm"});
  EXPECT_EQ(t.phases[1].tokens, 8192);
  EXPECT_EQ(t.phases[0].name, "warm");
  EXPECT_EQ(t.run.steps, 20 + 16);
  const std::string toml = train_config_to_toml(t);
  const TrainConfig again = parse_train_config(toml, "again.toml");
  EXPECT_EQ(train_config_to_toml(again), toml);
  ASSERT_EQ(again.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(again.phases[1].rope_theta, 100000);
  EXPECT_EQ(again.phases[0].data[1].dir, "data/b");
  EXPECT_EQ(again.run.steps, t.run.steps);
  EXPECT_NE(error_of(kRecipe, {"phase.3.tokens=1"}).find("allowed: 1..2"), std::string::npos);
  EXPECT_NE(error_of(kRecipe, {"phase.1.tokenz=1"}).find("unknown key 'tokenz'"), std::string::npos);
  EXPECT_NE(error_of(kRecipe, {"phase.1.tokenz=1"})
                .find("--set phase.1.tokenz=1: unknown key 'tokenz' in [[phase]] "
                      "(did you mean 'phase.1.tokens'?)"),
            std::string::npos);
  EXPECT_THROW(parse_train_config(kRecipe, "recipe.toml", {"phase.1.tokenz=1"}), UsageError);
  EXPECT_THROW(parse_train_config(kRecipe, "recipe.toml", {"phase.9.tokens=1"}), UsageError);
  EXPECT_NE(error_of(kRecipe, {"phase.x=1"}).find("phase.N.key=value"), std::string::npos);
}

// A model with sliding-window blocks: a phase may change the sliding blocks'
// RoPE base with the full blocks' (defaults: the model's); the trainer's
// controller sets both as it enters a phase; a model without sliding blocks
// refuses the key by name.
TEST(Recipe, PhasesChangeTheSlidingBlocksRopeBaseToo) {
  std::string text = edited("preset = \"tiny\"", "preset = \"tiny\"\nsliding_window = 8\nsliding_rope_theta = 2000.0");
  const size_t at = text.find("rope_theta = 100000");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "sliding_rope_theta = 40000\n");
  TrainConfig t = parse_train_config(text, "recipe.toml");
  ASSERT_EQ(t.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(t.phases[0].sliding_rope_theta, 2000);  // the model's
  EXPECT_DOUBLE_EQ(t.phases[1].sliding_rope_theta, 40000);
  const std::vector<PhasePlan> p = plan_phases(t, 1);
  EXPECT_DOUBLE_EQ(p[0].sliding_rope_theta, 2000);
  EXPECT_DOUBLE_EQ(p[1].sliding_rope_theta, 40000);
  EXPECT_NE(describe_phase(t, 1, p[1]).find("sliding_rope_theta 40000"), std::string::npos)
      << describe_phase(t, 1, p[1]);
  // The config written beside a run reads back the same.
  const std::string toml = train_config_to_toml(t);
  EXPECT_NE(toml.find("sliding_rope_theta = 40000.0"), std::string::npos);
  EXPECT_DOUBLE_EQ(parse_train_config(toml, "again.toml").phases[1].sliding_rope_theta, 40000);
  PhaseController phases(t, 1, true);
  EXPECT_DOUBLE_EQ(t.model.sliding_rope_theta, 2000);
  EXPECT_TRUE(phases.enter(1, t));
  EXPECT_DOUBLE_EQ(t.model.rope_theta, 100000);
  EXPECT_DOUBLE_EQ(t.model.sliding_rope_theta, 40000);
  EXPECT_TRUE(phases.enter(0, t));
  EXPECT_DOUBLE_EQ(t.model.sliding_rope_theta, 2000);
  // Without sliding blocks the key has nothing to set.
  EXPECT_NE(error_of(edited("rope_theta = 100000", "sliding_rope_theta = 40000"))
                .find("phase[2].sliding_rope_theta is set, but the model has no sliding-window blocks"),
            std::string::npos)
      << error_of(edited("rope_theta = 100000", "sliding_rope_theta = 40000"));
}

TEST(Recipe, ErrorsNameFileKeyAndAllowed) {
  auto expect = [](const std::string& text, const std::string& want) {
    const std::string e = error_of(text);
    EXPECT_NE(e.find(want), std::string::npos) << "want '" << want << "' in: " << e;
  };
  expect(edited("weight = 3", "weight = 0"),
         "recipe.toml:16: phase[1].data[1].weight = 0 is invalid; allowed: a number in (0,");
  expect(edited("weight = 3", "weight = -2"), "phase[1].data[1].weight = -2 is invalid");
  expect(edited("dir = \"data/a\"", "dri = \"data/a\""), "phase[1].data[1].dir is missing");
  expect(edited("dir = \"data/a\"", "dir = \"data/b\""), "phase[1].data[2].dir = 'data/b' repeats phase[1].data[1]");
  expect(edited("seq_len = 64", "seq_len = 0"),
         "recipe.toml:12: phase[1].seq_len = 0 is invalid; allowed: an integer in 1..1024");
  expect(edited("seq_len = 256", "seq_len = 2048"),
         "phase[2].seq_len = 2048 is invalid; allowed: an integer in 1..1024");
  expect(edited("seq_len = 64\n", ""), "phase[1].seq_len is missing");
  expect(edited("tokens = 4096\n", ""), "phase[2].tokens is missing");
  expect(edited("name = \"long\"", "nmae = \"long\""),
         "unknown key 'phase[2].nmae' (did you mean 'phase[2].name'?); allowed keys in [phase[2]]: name, tokens");
  expect(edited("weight = 1\n", "wieght = 1\n"), "unknown key 'phase[1].data[2].wieght'");
  expect(edited("rope_theta = 100000", "rope_theta = 1"),
         "phase[2].rope_theta = 1 is invalid; allowed: a number in (1,");
  expect(edited("lr = 0.001", "lr = 2"), "phase[2].lr = 2 is invalid");
  expect(edited("warmup_steps = 5", "warmup_steps = 21"),
         "phase[1].warmup_steps = 21 is invalid; allowed: 0..20, the phase's steps");
  const std::string all = kRecipe;
  expect(all.substr(0, all.rfind("[[phase.data]]")), "phase[2].data is missing");
  expect(edited("[train]\n", "[train]\nsteps = 100\n"),
         "train.steps = 100 is not allowed here: the config has [[phase]]");
  expect(edited("[train]\n", "[train]\nseq_len = 64\n"), "train.seq_len = 64 is not allowed here");
  expect(edited("[train]\n", "[data]\ndir = \"x\"\n[train]\n"), "data.dir = 'x' is not allowed here");
  expect(edited("[train]\n", "[schedule]\nkind = \"wsd\"\n[train]\n"), "schedule.kind = 'wsd' is not allowed here");
  expect("[model]\npreset = \"tiny\"\n[phase]\ntokens = 5\n", "'phase' is invalid; allowed: [[phase]] tables");
  expect(edited("[train]\n", "[parallel]\ncp = 3\n[train]\n"), "phase[1].seq_len = 64 does not fit parallel.cp = 3");
}

}  // namespace
}  // namespace zaya
