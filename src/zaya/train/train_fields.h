#pragma once
// The keys of the training config's sections declared once, as ZayaConfig's
// fields are (model/config_fields.h): one row per key with its section, the
// member it sets, its range or allowed names, and what a recipe ([[phase]]
// tables, recipe.h) does with it. parse_train_config reads each section by
// iterating its rows, train_config_to_toml writes them in row order (a run's
// config.toml), and the rows are the section's known keys (an unknown key is
// named with the closest one). What depends on other values (the warmup's
// default, the recipe's step count), [model], [lora] and [[phase]] stay in
// train_config.cc. Adding a key: one row here plus its use
// (docs/developer-guide.md, "a config key").

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "zaya/train/train_config.h"

namespace zaya {

using TrainMember = std::variant<int64_t*, int*, uint64_t*, double*, float*, bool*, std::string*, std::vector<int64_t>*,
                                 GemmPrecision*, DirectoryLayout*, OnSaveError*>;

enum class RecipeRule {
  kKept,       // the same with and without [[phase]] tables
  kPhaseOwns,  // refused in a recipe (the phases set it; `why` says how) and not written with phases
};

struct TrainField {
  const char* section;
  const char* key;
  TrainMember (*member)(TrainConfig&);
  double lo = 0, hi = 0;                  // numbers: the range; integers inclusive
  std::vector<std::string> allowed = {};  // strings: the allowed values (empty: any string)
  RecipeRule recipe = RecipeRule::kKept;
  const char* why = nullptr;  // kPhaseOwns: the message's reason
  bool write_if_set = false;  // strings written only when non-empty (data.train, data.val)
};

// Every key of [data], [train], [optim], [schedule], [moe], [parallel], [checkpoint] and [ft], in the order a
// run's config.toml lists them.
std::span<const TrainField> train_fields();

// The keys of one section, in row order.
std::vector<std::string> train_section_keys(const std::string& section);

}  // namespace zaya
