#include "zaya/train/recipe_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "zaya/core/error.h"
#include "zaya/core/suggest.h"
#include "zaya/io/toml_section.h"
#include "zaya/train/train_fields.h"

namespace zaya {
namespace {

// The known keys of a [[phase]] table: its rows and its [[phase.data]] tables.
std::vector<std::string> phase_table_keys() {
  std::vector<std::string> keys = train_section_keys("phase");
  keys.push_back("data");
  return keys;
}

}  // namespace

std::vector<PhaseConfig> parse_phases(const toml::table& root, const std::string& source, const PhaseDefaults& d) {
  const toml::node* node = root.get("phase");
  if (node == nullptr) return {};
  const toml::array* phases = node->as_array();
  if (phases == nullptr || !phases->is_array_of_tables() || phases->empty())
    fail(
        "{}: 'phase' is invalid; allowed: [[phase]] tables (double brackets), one per phase, each with its "
        "[[phase.data]] tables",
        source);
  std::vector<PhaseConfig> out;
  for (size_t i = 0; i < phases->size(); ++i) {
    const std::string name = fmt::format("phase[{}]", i + 1);
    TomlSection s((*phases)[i].as_table(), name, source);
    // The defaults the run gives a phase; then its rows (train_fields.cc), seq_len by hand (its range is the model's).
    PhaseConfig p;
    p.name = fmt::format("phase {}", i + 1);
    p.rope_theta = d.rope_theta;
    p.sliding_rope_theta = d.sliding_rope_theta;
    p.micro_batch = d.micro_batch;
    p.lr = d.lr;
    p.cp = d.cp;
    ZAYA_CHECK(d.sliding || !s.has("sliding_rope_theta"),
               "{}: {}.sliding_rope_theta is set, but the model has no sliding-window blocks (model.sliding_window = "
               "0); allowed: rope_theta only",
               s.where_table(), name);
    read_fields(phase_fields(), "phase", s, p, false, "seq_len");
    s.require("seq_len", fmt::format("allowed: an integer in 1..{} (model.max_position_embeddings)", d.max_position));
    p.seq_len = s.get_int("seq_len", 0, 1, d.max_position);
    // Another cp re-cuts only the cp groups; with experts spread over ep ranks
    // their groups (and so each rank's experts) would change too.
    ZAYA_CHECK(p.cp == d.cp || d.ep == 1,
               "{}: {}.cp = {} differs from parallel.cp = {}, which needs parallel.ep = 1 (it is {}); allowed: cp = {} "
               "in every phase, or ep = 1",
               s.where_table(), name, p.cp, d.cp, d.ep, d.cp);
    // Context parallelism splits every sequence into 2 * cp chunks of at least 2 tokens (model/context_parallel.h).
    ZAYA_CHECK(p.cp <= 1 || (p.seq_len % (2 * p.cp) == 0 && p.seq_len >= 4 * p.cp),
               "{}: {}.seq_len = {} does not fit {}cp = {}; allowed: a multiple of 2 * cp = {} and at least {}",
               s.where_table(), name, p.seq_len, p.cp == d.cp ? "parallel." : name + ".", p.cp, 2 * p.cp, 4 * p.cp);
    const toml::array* data = s.get_table_array("data", "[[phase.data]] tables with dir and weight");
    if (data == nullptr)
      fail(
          "{}: {}.data is missing; give the phase at least one [[phase.data]] table with dir = \"DIR\" (made by "
          "`zaya data shards`) and weight = W (> 0)",
          s.where_table(), name);
    for (size_t j = 0; j < data->size(); ++j) {
      TomlSection ds((*data)[j].as_table(), fmt::format("{}.data[{}]", name, j + 1), source);
      PhaseData pd;
      read_fields(phase_data_fields(), "phase.data", ds, pd);
      ZAYA_CHECK(!pd.dir.empty(), "{}: {}.data[{}].dir is empty; allowed: a directory made by `zaya data shards`",
                 ds.where_table(), name, j + 1);
      ds.finish(train_section_keys("phase.data"));
      for (size_t k = 0; k < p.data.size(); ++k)
        ZAYA_CHECK(p.data[k].dir != pd.dir,
                   "{}: {}.data[{}].dir = '{}' repeats {}.data[{}]; allowed: each dataset once per phase (raise its "
                   "weight instead)",
                   ds.where_table(), name, j + 1, pd.dir, name, k + 1);
      p.data.push_back(pd);
    }
    s.finish(phase_table_keys());
    out.push_back(std::move(p));
  }
  return out;
}

void apply_phase_override(toml::table& root, const std::string& assignment) {
  // phase.N.key=value
  const size_t eq = assignment.find('=');
  const size_t dot = assignment.find('.', 6);
  const std::string usage =
      "expected phase.N.key=value with N counting the [[phase]] tables from 1, e.g. "
      "phase.2.tokens=1000000";
  ZAYA_CHECK_USAGE(eq != std::string::npos && dot != std::string::npos && dot < eq, "--set {} is invalid; {}",
                   assignment, usage);
  const std::string index = assignment.substr(6, dot - 6), key = assignment.substr(dot + 1, eq - dot - 1);
  char* end = nullptr;
  const long n = std::strtol(index.c_str(), &end, 10);
  toml::array* phases = root.get_as<toml::array>("phase");
  const size_t count = phases == nullptr ? 0 : phases->size();
  ZAYA_CHECK_USAGE(!index.empty() && *end == '\0' && n >= 1 && size_t(n) <= count,
                   "--set {}: phase '{}' is invalid; allowed: 1..{} (the config has {} [[phase]] tables)", assignment,
                   index, count, count);
  const std::vector<std::string> keys = train_section_keys("phase");  // not "data": a list of tables
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
    const std::optional<std::string> guess = closest_name(key, keys);
    fail_usage("--set {}: unknown key '{}' in [[phase]]{}; allowed: {}", assignment, key,
               guess ? fmt::format(" (did you mean 'phase.{}.{}'?)", index, *guess) : "", fmt::join(keys, ", "));
  }
  toml::table* table = (*phases)[size_t(n - 1)].as_table();
  ZAYA_ASSERT(table != nullptr);
  insert_override(*table, key, assignment.substr(eq + 1), assignment);
}

}  // namespace zaya
