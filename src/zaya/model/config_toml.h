#pragma once
// The [model] table of a config file (docs/training.md): a preset, then any of
// its sizes overridden. Parsed and validated here, in one place, for the
// training config and for checkpoints that carry only the training config.

#include <toml++/toml.h>
#include <string>

#include "zaya/model/config.h"

namespace zaya {

struct ModelTable {
  std::string preset;                // the preset the sizes start from
  ZayaConfig config;                 // the preset with the table's keys applied (validated by the caller)
  bool vocab_from_tokenizer = true;  // neither vocab_size nor real_vocab_size given: the data decides
  std::string init_from;             // a model directory whose weights a fresh run starts from (empty: none)
};

// `table` may be null (no [model] table: the default preset). Errors name
// `source`, the line, the key, the value and what is allowed.
ModelTable parse_model_table(const toml::table* table, const std::string& source);

// The table with every key explicit, for a run directory's config.toml.
std::string model_table_to_toml(const std::string& preset, const ZayaConfig& config, const std::string& init_from = "");

}  // namespace zaya
