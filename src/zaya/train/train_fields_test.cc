// The training config's key tables (train_fields.h): every row, changed alone, is written to a run's config.toml
// and read back as the same value ([lora], [rl] and the [[phase]] tables too), and every section's keys are unique.

#include "zaya/train/train_fields.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>

namespace zaya {
namespace {

// tiny on bf16 GEMMs, so that parallel.zero_gather_dtype = "bf16" is allowed too.
TrainConfig base_train_config() {
  return parse_train_config("[data]\ndir = \"runs/data\"\n", "base.toml", {"train.precision=bf16"});
}

// Another valid value of the row's member: one more for an integer, the middle of a real range, the other boolean,
// another allowed name.
template <typename Owner>
void change(const FieldRow<Owner>& f, Owner& t) {
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>) {
          *p = !*p;
        } else if constexpr (std::is_same_v<T, std::string>) {
          *p = f.allowed.empty() ? "some/path" : (f.allowed[0] == *p ? f.allowed[1] : f.allowed[0]);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          *p = {3, 9};
        } else if constexpr (std::is_same_v<T, std::vector<LoraTarget>>) {
          *p = {LoraTarget::kO, LoraTarget::kRouterFc1};
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          *p = {"</answer>", "\n\n"};
        } else if constexpr (std::is_enum_v<T>) {  // the last name of its table, or the first
          const auto names = enum_names_of(p);
          *p = names.back().value == *p ? names.front().value : names.back().value;
        } else if constexpr (std::is_integral_v<T>) {
          *p = T(*p + 1);  // one more (within every range; warmup_steps's follows train.steps)
        } else {
          *p = T((f.lo + f.hi) / 2);
        }
      },
      f.member(t));
}

template <typename Owner>
bool same_value(const FieldRow<Owner>& f, Owner& a, Owner& b) {
  return std::visit([&](auto* p) { return *p == *std::get<decltype(p)>(f.member(b)); }, f.member(a));
}

TEST(TrainFields, EveryRowIsWrittenAndReadBack) {
  for (const TrainField& f : train_fields()) {
    SCOPED_TRACE(std::string(f.section) + "." + f.key);
    TrainConfig base = base_train_config(), t = base_train_config();
    base.lora.enabled = t.lora.enabled = std::string_view(f.section) == "lora";  // [lora] is written when enabled
    base.rl.enabled = t.rl.enabled = std::string_view(f.section) == "rl";        // [rl] too
    change(f, t);
    ASSERT_FALSE(same_value(f, t, base)) << "the change must change the value";
    TrainConfig back = parse_train_config(train_config_to_toml(t), "again.toml");
    EXPECT_TRUE(same_value(f, back, t));
  }
}

// A recipe on a model with sliding-window blocks (so that a phase may set sliding_rope_theta): two phases, the
// second with two datasets.
TrainConfig recipe_config() {
  return parse_train_config(R"([model]
preset = "tiny"
sliding_window = 8
[[phase]]
tokens = 100000
seq_len = 64
[[phase.data]]
dir = "data/a"
[[phase]]
tokens = 100000
seq_len = 128
[[phase.data]]
dir = "data/a"
[[phase.data]]
dir = "data/b"
)",
                            "recipe.toml");
}

TEST(TrainFields, EveryPhaseRowIsWrittenAndReadBack) {
  for (const PhaseField& f : phase_fields()) {
    SCOPED_TRACE(std::string("phase.") + f.key);
    TrainConfig base = recipe_config(), t = recipe_config();
    change(f, t.phases[1]);
    ASSERT_FALSE(same_value(f, t.phases[1], base.phases[1])) << "the change must change the value";
    const std::string toml = train_config_to_toml(t);
    TrainConfig back = parse_train_config(toml, "again.toml");
    EXPECT_TRUE(same_value(f, back.phases[1], t.phases[1])) << toml;
    EXPECT_TRUE(same_value(f, back.phases[0], base.phases[0]));
    EXPECT_EQ(train_config_to_toml(back), toml);
  }
  for (const PhaseDataField& f : phase_data_fields()) {
    SCOPED_TRACE(std::string("phase.data.") + f.key);
    TrainConfig t = recipe_config();
    change(f, t.phases[1].data[1]);
    TrainConfig back = parse_train_config(train_config_to_toml(t), "again.toml");
    EXPECT_TRUE(same_value(f, back.phases[1].data[1], t.phases[1].data[1]));
  }
}

// A resume compares the rows marked kResumeMatch: the adapters' rank and targets, not their alpha.
TEST(TrainFields, DifferencesNameTheRowsAResumeMustKeep) {
  TrainConfig a = base_train_config(), b = base_train_config();
  b.lora.alpha = 4;
  EXPECT_TRUE(field_differences(train_fields(), "lora", a, b).empty());
  b.lora.rank = 4;
  b.lora.targets = {LoraTarget::kQ};
  EXPECT_EQ(field_differences(train_fields(), "lora", a, b),
            (std::vector<std::string>{"lora.rank: 8 vs 4",
                                      "lora.targets: [\"q_proj\", \"k_proj\", \"v_proj_current\", \"v_proj_delayed\", "
                                      "\"o_proj\"] vs [\"q_proj\"]"}));
}

TEST(TrainFields, KeysAreUniquePerSection) {
  std::set<std::string> keys;
  for (const TrainField& f : train_fields()) EXPECT_TRUE(keys.insert(std::string(f.section) + "." + f.key).second);
  for (const PhaseField& f : phase_fields()) EXPECT_TRUE(keys.insert(std::string(f.section) + "." + f.key).second);
  for (const PhaseDataField& f : phase_data_fields())
    EXPECT_TRUE(keys.insert(std::string(f.section) + "." + f.key).second);
  EXPECT_EQ(train_section_keys("parallel"),
            (std::vector<std::string>{"ep", "cp", "comm_timeout", "zero_gather_dtype"}));
}

}  // namespace
}  // namespace zaya
