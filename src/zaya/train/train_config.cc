#include "zaya/train/train_config.h"

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <span>
#include <sstream>

#include "zaya/core/error.h"
#include "zaya/core/suggest.h"
#include "zaya/formats/native_config.h"
#include "zaya/io/toml_section.h"
#include "zaya/model/config_toml.h"
#include "zaya/ops/matmul_bf16.h"
#include "zaya/train/recipe_config.h"
#include "zaya/train/train_fields.h"

namespace zaya {
namespace {

const std::vector<std::string> kSections = {"model",    "data",       "train", "optim", "schedule", "moe",
                                            "parallel", "checkpoint", "ft",    "lora",  "phase",    "rl"};

// Reads the rows of `section` (train_fields.cc) but `by_hand`; in a recipe a key the phases own is refused.
void read_section(TomlSection& s, const char* section, bool recipe, TrainConfig& t, std::string_view by_hand = "") {
  read_fields(train_fields(), section, s, t, recipe, by_hand);
}

// The section's rows as TOML ("[section]\nkey = value\n..."); in a recipe without the keys the phases own.
std::string section_to_toml(const TrainConfig& t, const char* section, bool recipe) {
  std::string out = fmt::format("[{}]\n", section);
  return out.append(fields_to_toml(train_fields(), section, t, recipe));
}

// [lora]: present means a LoRA run (model/lora.h).
void parse_lora(const toml::table* table, const std::string& source, TrainConfig& t) {
  if (table == nullptr) return;
  TomlSection s(table, "lora", source);
  t.lora.enabled = true;
  read_section(s, "lora", false, t);
  // PEFT's ParamWrapper, which applies an adapter to a stacked expert parameter, has no dropout.
  if (t.lora.has_expert_targets() && t.lora.dropout > 0)
    s.forbid("dropout",
             "dropout must be 0 with expert targets (mlp.experts.*): PEFT applies those with its ParamWrapper, which "
             "has no lora_dropout");
  s.finish(train_section_keys("lora"));
}

// [rl]: present means an RL run's settings (rl_config.h; `zaya rl`).
void parse_rl(const toml::table* table, const std::string& source, TrainConfig& t) {
  if (table == nullptr) return;
  TomlSection s(table, "rl", source);
  t.rl.enabled = true;
  read_section(s, "rl", false, t);
  if (t.rl.reward == RewardKind::kRegex) s.require("pattern", "rl.reward = \"regex\" needs its regular expression");
  if (t.rl.reward == RewardKind::kCommand)
    s.require("command", "rl.reward = \"command\" needs the reward program (run by /bin/sh -c)");
  s.finish(train_section_keys("rl"));
}

const toml::table* table_of(const toml::table& root, const char* name, const std::string& source) {
  const toml::node* n = root.get(name);
  if (n == nullptr) return nullptr;
  if (!n->is_table()) fail("{}: '{}' must be a table ([{}])", source, name, name);
  return n->as_table();
}

// " (did you mean 'x'?); allowed: ..." for a misspelt name, the list alone when no name is close.
std::string name_hint(const std::string& word, const std::vector<std::string>& names) {
  const std::optional<std::string> guess = closest_name(word, names);
  return fmt::format("{}; allowed: {}", guess ? fmt::format(" (did you mean '{}'?)", *guess) : "",
                     fmt::join(names, ", "));
}

// `--set section.key=value`: a mistake in it is the command line's (UsageError).
void apply_override(toml::table& root, const std::string& assignment, const std::string& source) {
  if (assignment.rfind("phase.", 0) == 0) return apply_phase_override(root, assignment);
  const size_t eq = assignment.find('=');
  const size_t dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    fail_usage("--set {} is invalid; expected section.key=value, e.g. train.steps=100", assignment);
  const std::string section = assignment.substr(0, dot), key = assignment.substr(dot + 1, eq - dot - 1);
  if (std::find(kSections.begin(), kSections.end(), section) == kSections.end())
    fail_usage("--set {}: unknown section '{}'{}", assignment, section, name_hint(section, kSections));
  if (!root.contains(section)) root.insert(section, toml::table{});
  toml::table* table = root[section].as_table();
  if (table == nullptr) fail("{}: '{}' must be a table ([{}])", source, section, section);
  insert_override(*table, key, assignment.substr(eq + 1), assignment);
}

TrainConfig build(const toml::table& root, const std::string& source) {
  for (auto&& [k, v] : root) {
    const std::string section(k.str());
    if (std::find(kSections.begin(), kSections.end(), section) == kSections.end())
      fail("{}: unknown section '{}'{}", source, section, name_hint(section, kSections));
  }
  TrainConfig t;
  t.source = source;
  // [model]: a preset, then explicit overrides of any size (model/config_toml.h).
  const ModelTable model = parse_model_table(table_of(root, "model", source), source);
  t.model_preset = model.preset;
  t.model = model.config;
  t.vocab_from_tokenizer = model.vocab_from_tokenizer;
  t.init_from = model.init_from;
  ZayaConfig& c = t.model;

  // A recipe ([[phase]] tables, recipe.h): the phases own the data, the
  // sequence length, the step count and the schedule.
  const bool recipe = root.contains("phase");
  TomlSection d(table_of(root, "data", source), "data", source);
  read_section(d, "data", recipe, t);
  d.finish(train_section_keys("data"));
  // An RL run ([rl], `zaya rl`) reads prompts instead of token shards.
  ZAYA_CHECK(recipe || root.contains("rl") || !t.data.dir.empty() || !t.data.train.empty(),
             "{}: data.dir is missing; set it to a directory made by `zaya data shards`, or set data.train and "
             "data.val to dataset prefixes (zaya shards or Megatron .bin/.idx pairs)",
             source);
  ZAYA_CHECK(recipe || root.contains("rl") || !t.data.dir.empty() || !t.data.val.empty(),
             "{}: data.val is missing; with data.train and no data.dir, set it to the validation dataset's prefix "
             "(PREFIX.bin + PREFIX.idx)",
             source);

  TomlSection r(table_of(root, "train", source), "train", source);
  RunConfig& run = t.run;
  read_section(r, "train", recipe, t);
  r.finish(train_section_keys("train"));
  if (const std::string why = native_layout_problem(c); run.save_layout == DirectoryLayout::kNative && !why.empty())
    fail("{}: train.save_layout = \"native\" is invalid for this model: {}; allowed: \"legacy\"", source, why);
  ZAYA_CHECK(recipe || run.seq_len <= c.max_position,
             "{}: train.seq_len = {} is invalid; allowed: <= model max_position_embeddings ({})", source, run.seq_len,
             c.max_position);

  TomlSection o(table_of(root, "optim", source), "optim", source);
  OptimizerConfig& op = t.optim;
  read_section(o, "optim", recipe, t);
  o.finish(train_section_keys("optim"));
  op.validate(source);

  if (recipe) {
    PhaseDefaults pd;
    pd.micro_batch = run.micro_batch;
    pd.lr = op.lr;
    pd.rope_theta = c.rope_theta;
    pd.sliding_rope_theta = c.sliding_rope_theta;
    pd.sliding = c.has_sliding();
    pd.max_position = c.max_position;
    pd.cp = int(std::max<int64_t>(1, root["parallel"]["cp"].value_or<int64_t>(1)));  // validated with [parallel]
    pd.ep = int(std::max<int64_t>(1, root["parallel"]["ep"].value_or<int64_t>(1)));
    t.phases = parse_phases(root, source, pd);
    // The first phase's shape; the trainer moves from phase to phase and sets
    // model.rope_theta to each phase's (so a checkpoint's config carries the
    // RoPE base its weights were trained with last).
    run.micro_batch = t.phases[0].micro_batch;
    run.seq_len = t.phases[0].seq_len;
    // Nominal steps, for the smallest world every phase fits (ep x the cp
    // sizes' least common multiple); the trainer plans for its own world.
    int64_t world = 1;
    for (const PhaseConfig& p : t.phases) world = std::lcm(world, int64_t(p.cp));
    t.parallel.ep = pd.ep;
    run.steps = 0;
    for (const PhasePlan& p : plan_phases(t, world * pd.ep)) run.steps += p.steps;
  }

  TomlSection s(table_of(root, "schedule", source), "schedule", source);
  ScheduleConfig& sc = t.schedule;
  read_section(s, "schedule", recipe, t, "warmup_steps");
  sc.warmup_steps = s.get_int("warmup_steps", std::min<int64_t>(100, run.steps / 10), 0, run.steps);
  sc.total_steps = run.steps;
  s.finish(train_section_keys("schedule"));
  sc.validate(source);

  TomlSection e(table_of(root, "moe", source), "moe", source);
  read_section(e, "moe", recipe, t);
  e.finish(train_section_keys("moe"));
  t.balance.validate(source);

  for (const char* section : {"parallel", "checkpoint", "ft"}) {
    TomlSection sec(table_of(root, section, source), section, source);
    read_section(sec, section, recipe, t);
    sec.finish(train_section_keys(section));
  }
  parse_lora(table_of(root, "lora", source), source, t);
  parse_rl(table_of(root, "rl", source), source, t);
  ZAYA_CHECK(c.experts % t.parallel.ep == 0,
             "{}: parallel.ep = {} is invalid; allowed: a divisor of the expert count ({})", source, t.parallel.ep,
             c.experts);
  const int64_t cp_unit = 4 * int64_t(t.parallel.cp);  // 2 cp chunks of at least 2 tokens (model/context_parallel.h)
  ZAYA_CHECK(t.parallel.cp == 1 || (t.run.seq_len % (2 * t.parallel.cp) == 0 && t.run.seq_len >= cp_unit),
             "{}: train.seq_len = {} does not fit parallel.cp = {}; allowed: a multiple of 2 * cp = {} and at least "
             "{} (every rank holds two chunks of at least 2 tokens of each sequence)",
             source, t.run.seq_len, t.parallel.cp, 2 * t.parallel.cp, cp_unit);
  ZAYA_CHECK(t.parallel.zero_gather_dtype == ValueDtype::kF32 || t.run.precision != GemmPrecision::kF32,
             "{}: parallel.zero_gather_dtype = \"bf16\" needs bf16 GEMMs; allowed with train.precision = \"f32\": "
             "\"f32\" (or set train.precision = \"bf16\" or \"auto\")",
             source);

  c.validate(source);
  return t;
}

}  // namespace

bool uses_bf16_gemms(const RunConfig& run) {
  return run.precision == GemmPrecision::kBF16 || (run.precision == GemmPrecision::kAuto && bf16_gemm_outruns_f32());
}

std::string TrainConfig::checkpoint_dir() const {
  return checkpoint.dir.empty() ? (std::filesystem::path(run.out_dir) / "checkpoints").string() : checkpoint.dir;
}

TrainConfig parse_train_config(const std::string& text, const std::string& source,
                               const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& err) {
    fail("{}:{}:{}: TOML syntax error: {}", source, err.source().begin.line, err.source().begin.column,
         err.description());
  }
  for (const std::string& o : overrides) apply_override(root, o, source);
  return build(root, source);
}

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  ZAYA_CHECK(in.good(), "cannot read config file '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_train_config(ss.str(), path, overrides);
}

std::string train_config_to_toml(const TrainConfig& t) {
  std::string s = model_table_to_toml(t.model_preset, t.model, t.init_from);
  // A recipe's phases own data.dir, train.seq_len, train.steps and [schedule] (written with the phases).
  const bool recipe = !t.phases.empty();
  for (const char* section : {"data", "train", "optim", "schedule", "moe", "parallel", "checkpoint"})
    if (!recipe || std::string_view(section) != "schedule") s += section_to_toml(t, section, recipe) + "\n";
  s += section_to_toml(t, "ft", recipe);
  if (t.lora.enabled) s.append("\n").append(section_to_toml(t, "lora", recipe));
  if (t.rl.enabled) s.append("\n").append(section_to_toml(t, "rl", recipe));
  s += phases_to_toml(t.phases, t.model.has_sliding());
  return s;
}

}  // namespace zaya
