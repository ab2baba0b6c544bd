// The training config's key table (train_fields.h): every row, changed alone, is written to a run's config.toml
// and read back as the same value, and every section's keys are unique.

#include "zaya/train/train_fields.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace zaya {
namespace {

// tiny on bf16 GEMMs, so that parallel.zero_gather_dtype = "bf16" is allowed too.
TrainConfig base_train_config() {
  return parse_train_config("[data]\ndir = \"runs/data\"\n", "base.toml", {"train.precision=bf16"});
}

// Another valid value of the row's member: one more for an integer, the middle of a real range, the other boolean,
// another allowed name.
void change(const TrainField& f, TrainConfig& t) {
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, bool>) {
          *p = !*p;
        } else if constexpr (std::is_same_v<T, std::string>) {
          *p = f.allowed.empty() ? "some/path" : (f.allowed[0] == *p ? f.allowed[1] : f.allowed[0]);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          *p = {3, 9};
        } else if constexpr (std::is_same_v<T, GemmPrecision>) {
          *p = *p == GemmPrecision::kAuto ? GemmPrecision::kF32 : GemmPrecision::kAuto;
        } else if constexpr (std::is_same_v<T, DirectoryLayout>) {
          *p = DirectoryLayout::kNative;
        } else if constexpr (std::is_same_v<T, OnSaveError>) {
          *p = OnSaveError::kStop;
        } else if constexpr (std::is_integral_v<T>) {
          *p = T(*p + 1);  // one more (within every range; warmup_steps's follows train.steps)
        } else {
          *p = T((f.lo + f.hi) / 2);
        }
      },
      f.member(t));
}

bool same_value(const TrainField& f, TrainConfig& a, TrainConfig& b) {
  return std::visit([&](auto* p) { return *p == *std::get<decltype(p)>(f.member(b)); }, f.member(a));
}

TEST(TrainFields, EveryRowIsWrittenAndReadBack) {
  for (const TrainField& f : train_fields()) {
    SCOPED_TRACE(std::string(f.section) + "." + f.key);
    TrainConfig base = base_train_config(), t = base_train_config();
    change(f, t);
    ASSERT_FALSE(same_value(f, t, base)) << "the change must change the value";
    TrainConfig back = parse_train_config(train_config_to_toml(t), "again.toml");
    EXPECT_TRUE(same_value(f, back, t));
  }
}

TEST(TrainFields, KeysAreUniquePerSection) {
  std::set<std::string> keys;
  for (const TrainField& f : train_fields()) EXPECT_TRUE(keys.insert(std::string(f.section) + "." + f.key).second);
  EXPECT_EQ(train_section_keys("parallel"),
            (std::vector<std::string>{"ep", "cp", "comm_timeout", "zero_gather_dtype"}));
}

}  // namespace
}  // namespace zaya
