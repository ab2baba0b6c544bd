#include "zaya/train/train_fields.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <type_traits>

#include "zaya/io/toml_section.h"

namespace zaya {
namespace {

// The member a row sets, as a pointer into the config (phase, dataset) being read or written.
#define ZAYA_MEMBER(expr) [](TrainConfig& t) -> TrainMember { return &t.expr; }
#define ZAYA_PHASE(expr) [](PhaseConfig& p) -> TrainMember { return &p.expr; }
#define ZAYA_PHASE_DATA(expr) [](PhaseData& d) -> TrainMember { return &d.expr; }

constexpr double k2e16 = double(1 << 16), k2e20 = double(1 << 20), k2e40 = double(int64_t(1) << 40);
constexpr const char* kDataWhy =
    "the config has [[phase]] tables, and with phases each phase names its datasets in [[phase.data]] tables";
constexpr const char* kSeqLenWhy = "the config has [[phase]] tables, and with phases each phase sets its seq_len";
constexpr const char* kStepsWhy =
    "the config has [[phase]] tables, and with phases the steps come from each phase's token budget: ceil(tokens / "
    "(micro_batch x seq_len x grad_accum x data replicas)); use --stop-at to stop early";
constexpr const char* kScheduleWhy =
    "the config has [[phase]] tables, and with phases the learning-rate schedule is WSD within each phase (phase "
    "keys lr, warmup_steps, decay_fraction, min_lr_ratio)";
constexpr RecipeRule kPhase = RecipeRule::kPhaseOwns;
constexpr RecipeRule kKept = RecipeRule::kKept;

const std::vector<TrainField>& fields() {
  static const std::vector<TrainField> f = {
      // [data] (docs/training.md)
      {"data", "dir", ZAYA_MEMBER(data.dir), 0, 0, {}, kPhase, kDataWhy},
      {"data", "tokenizer", ZAYA_MEMBER(data.tokenizer)},
      {"data", "train", ZAYA_MEMBER(data.train), 0, 0, {}, kPhase, kDataWhy, kWriteIfSet},
      {"data", "val", ZAYA_MEMBER(data.val), 0, 0, {}, kPhase, kDataWhy, kWriteIfSet},
      {"data", "document_masking", ZAYA_MEMBER(data.document_masking)},
      // [train]
      {"train", "seed", ZAYA_MEMBER(run.seed), 0, double(INT64_MAX)},
      {"train", "micro_batch", ZAYA_MEMBER(run.micro_batch), 1, k2e16},
      {"train", "seq_len", ZAYA_MEMBER(run.seq_len), 1, k2e20, {}, kPhase, kSeqLenWhy},
      {"train", "grad_accum", ZAYA_MEMBER(run.grad_accum), 1, k2e16},
      {"train", "steps", ZAYA_MEMBER(run.steps), 1, k2e40, {}, kPhase, kStepsWhy},
      {"train", "eval_every", ZAYA_MEMBER(run.eval_every), 0, k2e40},
      {"train", "eval_batches", ZAYA_MEMBER(run.eval_batches), 1, k2e20},
      {"train", "log_every", ZAYA_MEMBER(run.log_every), 1, k2e40},
      {"train", "threads", ZAYA_MEMBER(run.threads), 0, 4096},
      {"train", "out_dir", ZAYA_MEMBER(run.out_dir)},
      {"train", "save_dtype", ZAYA_MEMBER(run.save_dtype)},
      {"train", "save_layout", ZAYA_MEMBER(run.save_layout)},
      {"train", "precision", ZAYA_MEMBER(run.precision)},
      {"train", "recompute", ZAYA_MEMBER(run.recompute)},
      {"train", "loss_chunk", ZAYA_MEMBER(run.loss_chunk), 0, k2e40},
      // [optim]
      {"optim", "lr", ZAYA_MEMBER(optim.lr), 1e-9, 1.0},
      {"optim", "beta1", ZAYA_MEMBER(optim.beta1), 0.0, 0.999999},
      {"optim", "beta2", ZAYA_MEMBER(optim.beta2), 0.0, 0.999999},
      {"optim", "eps", ZAYA_MEMBER(optim.eps), 1e-30, 1.0},
      {"optim", "weight_decay", ZAYA_MEMBER(optim.weight_decay), 0.0, 10.0},
      {"optim", "muon", ZAYA_MEMBER(optim.use_muon)},
      {"optim", "muon_momentum", ZAYA_MEMBER(optim.muon_momentum), 0.0, 0.999999},
      {"optim", "muon_nesterov", ZAYA_MEMBER(optim.muon_nesterov)},
      {"optim", "ns_steps", ZAYA_MEMBER(optim.ns_steps), 1, 20},
      {"optim", "ns_dtype", ZAYA_MEMBER(optim.ns_dtype)},
      {"optim", "grad_clip", ZAYA_MEMBER(optim.grad_clip), 0.0, 1e9},
      // [schedule]; warmup_steps's default and range follow train.steps (read in train_config.cc)
      {"schedule", "kind", ZAYA_MEMBER(schedule.kind), 0, 0, {}, kPhase, kScheduleWhy},
      {"schedule", "warmup_steps", ZAYA_MEMBER(schedule.warmup_steps), 0, 0, {}, kPhase, kScheduleWhy},
      {"schedule", "min_lr_ratio", ZAYA_MEMBER(schedule.min_lr_ratio), 0.0, 1.0, {}, kPhase, kScheduleWhy},
      {"schedule", "decay_fraction", ZAYA_MEMBER(schedule.decay_fraction), 1e-9, 1.0, {}, kPhase, kScheduleWhy},
      // [moe]
      {"moe", "balance", ZAYA_MEMBER(balance.enabled)},
      {"moe", "balance_lr", ZAYA_MEMBER(balance.lr), 0.0, 0.999},
      {"moe", "balance_beta1", ZAYA_MEMBER(balance.beta1), 0.0, 0.999999},
      {"moe", "balance_beta2", ZAYA_MEMBER(balance.beta2), 0.0, 0.999999},
      {"moe", "skip_target", ZAYA_MEMBER(balance.skip_target), 0.0, 0.999},
      {"moe", "switch_aux_coeff", ZAYA_MEMBER(router_losses.switch_aux_coeff), 0.0, 100.0},
      {"moe", "z_loss_coeff", ZAYA_MEMBER(router_losses.z_loss_coeff), 0.0, 100.0},
      // [parallel]
      {"parallel", "ep", ZAYA_MEMBER(parallel.ep), 1, 4096},
      {"parallel", "cp", ZAYA_MEMBER(parallel.cp), 1, 4096},
      {"parallel", "comm_timeout", ZAYA_MEMBER(parallel.comm_timeout), 0.0, 1e7},
      {"parallel", "zero_gather_dtype", ZAYA_MEMBER(parallel.zero_gather_dtype)},
      // [checkpoint] (docs/checkpoints.md)
      {"checkpoint", "every", ZAYA_MEMBER(checkpoint.every), 0, k2e40},
      {"checkpoint", "final", ZAYA_MEMBER(checkpoint.final)},
      {"checkpoint", "keep_last", ZAYA_MEMBER(checkpoint.keep_last), 1, k2e20},
      {"checkpoint", "keep_every", ZAYA_MEMBER(checkpoint.keep_every), 0, k2e40},
      {"checkpoint", "async", ZAYA_MEMBER(checkpoint.async)},
      {"checkpoint", "dir", ZAYA_MEMBER(checkpoint.dir)},
      // [ft] (docs/fault-tolerance.md)
      {"ft", "spike_z", ZAYA_MEMBER(ft.spike_z), 0.0, 1e6},
      {"ft", "spike_warmup", ZAYA_MEMBER(ft.spike_warmup), 2, 128},
      {"ft", "rollback_after", ZAYA_MEMBER(ft.rollback_after), 0, k2e20},
      {"ft", "max_rollbacks", ZAYA_MEMBER(ft.max_rollbacks), 1, k2e20},
      {"ft", "on_save_error", ZAYA_MEMBER(ft.on_save_error)},
      {"ft", "max_failed_saves", ZAYA_MEMBER(ft.max_failed_saves), 0, k2e20},
      {"ft", "straggler_ratio", ZAYA_MEMBER(ft.straggler_ratio), 1.0, 1e6},
      {"ft", "skip_steps", ZAYA_MEMBER(ft.skip_steps), 1, k2e40},
      // [lora] (model/lora.h, docs/training.md "LoRA"): read and written when the section is present
      // (lora.enabled); a resume keeps the adapters' shapes.
      {"lora", "rank", ZAYA_MEMBER(lora.rank), 1, 4096, {}, kKept, nullptr, kResumeMatch},
      {"lora", "alpha", ZAYA_MEMBER(lora.alpha), 0.0, 1e6, {}, kKept, nullptr, kLoOpen},
      {"lora", "dropout", ZAYA_MEMBER(lora.dropout), 0.0, 0.99},
      {"lora", "targets", ZAYA_MEMBER(lora.targets), 0, 0, {}, kKept, nullptr, kResumeMatch},
      {"lora", "train_biases", ZAYA_MEMBER(lora.train_biases)},
      // QLoRA (docs/training.md "LoRA over a quantized base"): the base's experts as packed rows.
      {"lora", "base_dtype", ZAYA_MEMBER(lora.base_dtype), 0, 0, {}, kKept, nullptr, kResumeMatch},
      // [rl] (rl_config.h, docs/rl.md): read and written when the section is present (rl.enabled).
      {"rl", "prompts", ZAYA_MEMBER(rl.prompts), 0, 0, {}, kKept, "allowed: a JSONL file of prompts", kRequired},
      {"rl", "eval_prompts", ZAYA_MEMBER(rl.eval_prompts), 0, 0, {}, kKept, nullptr, kWriteIfSet},
      {"rl", "eval_every", ZAYA_MEMBER(rl.eval_every), 0, k2e40},
      {"rl", "prompts_per_step", ZAYA_MEMBER(rl.prompts_per_step), 1, k2e16},
      {"rl", "group_size", ZAYA_MEMBER(rl.group_size), 1, 4096},
      {"rl", "max_new_tokens", ZAYA_MEMBER(rl.max_new_tokens), 1, k2e20},
      {"rl", "temperature", ZAYA_MEMBER(rl.temperature), 0.0, 100.0, {}, kKept, nullptr, kLoOpen},
      {"rl", "top_p", ZAYA_MEMBER(rl.top_p), 0.0, 1.0, {}, kKept, nullptr, kLoOpen},
      {"rl", "top_k", ZAYA_MEMBER(rl.top_k), 0, k2e20},
      {"rl", "stop", ZAYA_MEMBER(rl.stop)},
      {"rl", "reward", ZAYA_MEMBER(rl.reward)},
      {"rl", "answer_field", ZAYA_MEMBER(rl.answer_field)},
      {"rl", "pattern", ZAYA_MEMBER(rl.pattern), 0, 0, {}, kKept, nullptr, kWriteIfSet},
      {"rl", "tolerance", ZAYA_MEMBER(rl.tolerance), 0.0, 1e30},
      {"rl", "command", ZAYA_MEMBER(rl.command), 0, 0, {}, kKept, nullptr, kWriteIfSet},
      {"rl", "timeout", ZAYA_MEMBER(rl.timeout), 0.0, 1e7, {}, kKept, nullptr, kLoOpen},
      {"rl", "clip", ZAYA_MEMBER(rl.clip), 0.0, 10.0},
      {"rl", "kl_coef", ZAYA_MEMBER(rl.kl_coef), 0.0, 1e6},
      {"rl", "std_normalize", ZAYA_MEMBER(rl.std_normalize)},
      {"rl", "updates_per_rollout", ZAYA_MEMBER(rl.updates_per_rollout), 1, 4096},
      {"rl", "routing_replay", ZAYA_MEMBER(rl.routing_replay)},
      {"rl", "sample_with_trainer", ZAYA_MEMBER(rl.sample_with_trainer)},
  };
  return f;
}

// [[phase]] (recipe.h, docs/context-extension.md), in the order phases_to_toml writes them. A phase's defaults are
// the run's (train.micro_batch, optim.lr, the model's RoPE bases, parallel.cp: recipe_config.cc sets them before the
// rows are read); seq_len's range is the model's longest position, so it is read by hand there.
const std::vector<PhaseField>& phase_rows() {
  static const std::vector<PhaseField> f = {
      {"phase", "name", ZAYA_PHASE(name)},
      {"phase",
       "tokens",
       ZAYA_PHASE(tokens),
       1,
       double(int64_t(1) << 60),
       {},
       kKept,
       "allowed: an integer >= 1, the phase's token budget (its steps are ceil(tokens / global tokens per step))",
       kRequired},
      {"phase", "seq_len", ZAYA_PHASE(seq_len)},
      {"phase", "rope_theta", ZAYA_PHASE(rope_theta), 1.0, 1e12, {}, kKept, nullptr, kLoOpen | kFloatText},
      {"phase", "micro_batch", ZAYA_PHASE(micro_batch), 1, k2e16},
      {"phase", "lr", ZAYA_PHASE(lr), 1e-9, 1.0},
      {"phase", "warmup_steps", ZAYA_PHASE(warmup_steps), 0, k2e40},
      {"phase", "decay_fraction", ZAYA_PHASE(decay_fraction), 0.0, 1.0},
      {"phase", "min_lr_ratio", ZAYA_PHASE(min_lr_ratio), 0.0, 1.0},
      {"phase", "cp", ZAYA_PHASE(cp), 1, 4096},
      // only for a model with sliding-window blocks (recipe_config.cc refuses it otherwise)
      {"phase",
       "sliding_rope_theta",
       ZAYA_PHASE(sliding_rope_theta),
       1.0,
       1e12,
       {},
       kKept,
       nullptr,
       kLoOpen | kFloatText},
  };
  return f;
}

// [[phase.data]]: one dataset of a phase's mixture.
const std::vector<PhaseDataField>& phase_data_rows() {
  static const std::vector<PhaseDataField> f = {
      {"phase.data",
       "dir",
       ZAYA_PHASE_DATA(dir),
       0,
       0,
       {},
       kKept,
       "allowed: a directory with train.{bin,idx} and val.{bin,idx} (zaya data shards)",
       kRequired},
      {"phase.data", "weight", ZAYA_PHASE_DATA(weight), 0.0, 1e12, {}, kKept, nullptr, kLoOpen},
  };
  return f;
}

#undef ZAYA_MEMBER
#undef ZAYA_PHASE
#undef ZAYA_PHASE_DATA

template <typename T>
constexpr bool kIsEnum = std::is_enum_v<T>;

// A string key whose values are an enum's names: parsed once here, so that nothing past the config compares the
// strings; the error lists the allowed names (TomlSection::get_string).
template <typename E>
E get_enum(TomlSection& s, const char* key, E def, std::span<const EnumName<E>> names) {
  std::vector<std::string> allowed;
  for (const EnumName<E>& n : names) allowed.push_back(n.name);
  return *enum_find(names, s.get_string(key, enum_name(names, def), allowed));
}

// [lora] targets: a list of the tensor table's LoRA names (model/lora.h).
std::vector<LoraTarget> get_lora_targets(TomlSection& s, const char* key, const std::vector<LoraTarget>& def) {
  std::vector<std::string> defaults, allowed;
  for (LoraTarget t : def) defaults.emplace_back(lora_target_name(t));
  for (LoraTarget t : all_lora_targets()) allowed.emplace_back(lora_target_name(t));
  std::vector<LoraTarget> out;
  for (const std::string& n : s.get_string_list(key, defaults, allowed)) out.push_back(parse_lora_target(n, key));
  return out;
}

// A TOML basic string: a JSON string has the same escapes.
std::string toml_quoted(const std::string& s) { return nlohmann::json(s).dump(); }

// A row's value as TOML ("" for an unset kWriteIfSet string).
template <typename Owner>
std::string value_text(const FieldRow<Owner>& f, Owner& owner) {
  return std::visit(
      [&](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return (f.flags & kWriteIfSet) && p->empty() ? "" : toml_quoted(*p);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          return fmt::format("[{}]", fmt::join(*p, ", "));
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          if (p->empty()) return "";  // not written: a list read back must not be empty
          std::vector<std::string> quoted;
          for (const std::string& x : *p) quoted.push_back(toml_quoted(x));
          return fmt::format("[{}]", fmt::join(quoted, ", "));
        } else if constexpr (std::is_same_v<T, std::vector<LoraTarget>>) {
          std::vector<std::string> names;
          for (LoraTarget t : *p) names.push_back(toml_quoted(std::string(lora_target_name(t))));
          return fmt::format("[{}]", fmt::join(names, ", "));
        } else if constexpr (kIsEnum<T>) {
          return toml_quoted(enum_name(enum_names_of(p), *p));
        } else if constexpr (std::is_floating_point_v<T>) {
          std::string text = fmt::format("{}", *p);
          if ((f.flags & kFloatText) && text.find_first_of(".einf") == std::string::npos) text += ".0";
          return text;
        } else {
          return fmt::format("{}", *p);
        }
      },
      f.member(owner));
}

}  // namespace

std::span<const TrainField> train_fields() { return fields(); }
std::span<const PhaseField> phase_fields() { return phase_rows(); }
std::span<const PhaseDataField> phase_data_fields() { return phase_data_rows(); }

std::vector<std::string> train_section_keys(const std::string& section) {
  std::vector<std::string> keys;
  const auto add = [&](const auto& rows) {
    for (const auto& f : rows)
      if (section == f.section) keys.push_back(f.key);
  };
  add(fields());
  add(phase_rows());
  add(phase_data_rows());
  return keys;
}

template <typename Owner>
void read_fields(std::span<const FieldRow<Owner>> rows, const char* section, TomlSection& s, Owner& owner, bool recipe,
                 std::string_view by_hand) {
  for (const FieldRow<Owner>& f : rows) {
    if (std::string_view(f.section) != section) continue;
    if (recipe && f.recipe == RecipeRule::kPhaseOwns) s.forbid(f.key, f.why);
    if (f.key == by_hand) continue;
    if (f.flags & kRequired) s.require(f.key, f.why);
    const auto lo = int64_t(f.lo), hi = int64_t(f.hi);
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, int64_t>)
            *p = s.get_int(f.key, *p, lo, hi);
          else if constexpr (std::is_same_v<T, int>)
            *p = int(s.get_int(f.key, *p, lo, hi));
          else if constexpr (std::is_same_v<T, uint64_t>)  // a seed: any non-negative TOML integer
            *p = uint64_t(s.get_int(f.key, int64_t(*p), 0, INT64_MAX));
          else if constexpr (std::is_floating_point_v<T>)
            *p = T(s.get_double(f.key, *p, f.lo, f.hi, (f.flags & kLoOpen) != 0));
          else if constexpr (std::is_same_v<T, bool>)
            *p = s.get_bool(f.key, *p);
          else if constexpr (std::is_same_v<T, std::string>)
            *p = s.get_string(f.key, *p, f.allowed);
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            *p = s.get_int_list(f.key, *p, lo, hi);
          else if constexpr (std::is_same_v<T, std::vector<LoraTarget>>)
            *p = get_lora_targets(s, f.key, *p);
          else if constexpr (std::is_same_v<T, std::vector<std::string>>)
            *p = s.get_string_list(f.key, *p, f.allowed);
          else
            *p = get_enum<T>(s, f.key, *p, enum_names_of(p));
        },
        f.member(owner));
  }
}

template <typename Owner>
std::string fields_to_toml(std::span<const FieldRow<Owner>> rows, const char* section, Owner owner, bool recipe,
                           std::string_view skip) {
  std::string out;
  for (const FieldRow<Owner>& f : rows) {
    if (std::string_view(f.section) != section || (recipe && f.recipe == RecipeRule::kPhaseOwns) || f.key == skip)
      continue;
    if (const std::string value = value_text(f, owner); !value.empty()) out += fmt::format("{} = {}\n", f.key, value);
  }
  return out;
}

template <typename Owner>
std::vector<std::string> field_differences(std::span<const FieldRow<Owner>> rows, const char* section, Owner a,
                                           Owner b) {
  std::vector<std::string> out;
  for (const FieldRow<Owner>& f : rows) {
    if (std::string_view(f.section) != section || !(f.flags & kResumeMatch)) continue;
    if (const std::string x = value_text(f, a), y = value_text(f, b); x != y)
      out.push_back(fmt::format("{}.{}: {} vs {}", f.section, f.key, x, y));
  }
  return out;
}

#define ZAYA_FIELD_FUNCTIONS(Owner)                                                                                \
  template void read_fields<Owner>(std::span<const FieldRow<Owner>>, const char*, TomlSection&, Owner&, bool,      \
                                   std::string_view);                                                              \
  template std::string fields_to_toml<Owner>(std::span<const FieldRow<Owner>>, const char*, Owner, bool,           \
                                             std::string_view);                                                    \
  template std::vector<std::string> field_differences<Owner>(std::span<const FieldRow<Owner>>, const char*, Owner, \
                                                             Owner);
ZAYA_FIELD_FUNCTIONS(TrainConfig)
ZAYA_FIELD_FUNCTIONS(PhaseConfig)
ZAYA_FIELD_FUNCTIONS(PhaseData)
#undef ZAYA_FIELD_FUNCTIONS

}  // namespace zaya
