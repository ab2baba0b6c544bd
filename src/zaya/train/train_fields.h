#pragma once
// The keys of the training config's sections declared once, as ZayaConfig's
// fields are (model/config_fields.h): one row per key with its section, the
// member it sets, its range or allowed names, and what a recipe ([[phase]]
// tables, recipe.h) does with it. The sections [data] ... [ft] and [lora] are
// rows of train_fields(), the [[phase]] and [[phase.data]] tables rows of
// phase_fields() and phase_data_fields(). The readers (parse_train_config,
// parse_phases) read each table by iterating its rows (read_fields), the
// writers (train_config_to_toml, phases_to_toml) write them in row order
// (fields_to_toml, a run's config.toml), a resume compares the rows marked
// kResumeMatch (field_differences), and the rows are the table's known keys
// (an unknown key is named with the closest one). What depends on other values
// (the warmup's default, a phase's seq_len range, the recipe's step count),
// [model] (model/config_fields.h) and the checks across keys stay in
// train_config.cc and recipe_config.cc. Adding a key: one row here plus its
// use (docs/developer-guide.md, "a config key").

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "zaya/train/train_config.h"

namespace zaya {

class TomlSection;  // io/toml_section.h

// The member a row sets. An option that is a set of names is an enum with a name table (core/enum_names.h), listed
// here and in enum_names_of below.
using TrainMember =
    std::variant<int64_t*, int*, uint64_t*, double*, float*, bool*, std::string*, std::vector<int64_t>*,
                 std::vector<LoraTarget>*, std::vector<std::string>*, GemmPrecision*, DirectoryLayout*, OnSaveError*,
                 Recompute*, ScheduleKind*, NsDtype*, ValueDtype*, RewardKind*, LoraBaseDtype*>;

// The name table of the enum a row's member holds.
inline std::span<const EnumName<GemmPrecision>> enum_names_of(GemmPrecision*) { return kGemmPrecisionNames; }
inline std::span<const EnumName<LoraBaseDtype>> enum_names_of(LoraBaseDtype*) { return kLoraBaseDtypeNames; }
inline std::span<const EnumName<DirectoryLayout>> enum_names_of(DirectoryLayout*) { return kDirectoryLayoutNames; }
inline std::span<const EnumName<OnSaveError>> enum_names_of(OnSaveError*) { return kOnSaveErrorNames; }
inline std::span<const EnumName<Recompute>> enum_names_of(Recompute*) { return kRecomputeNames; }
inline std::span<const EnumName<ScheduleKind>> enum_names_of(ScheduleKind*) { return kScheduleKindNames; }
inline std::span<const EnumName<NsDtype>> enum_names_of(NsDtype*) { return kNsDtypeNames; }
inline std::span<const EnumName<ValueDtype>> enum_names_of(ValueDtype*) { return kValueDtypeNames; }
inline std::span<const EnumName<RewardKind>> enum_names_of(RewardKind*) { return kRewardKindNames; }

enum class RecipeRule {
  kKept,       // the same with and without [[phase]] tables
  kPhaseOwns,  // refused in a recipe (the phases set it; `why` says how) and not written with phases
};

// A row's flags (bits).
enum FieldFlag : unsigned {
  kWriteIfSet = 1u,    // a string written only when non-empty (data.train, data.val)
  kLoOpen = 2u,        // a number in (lo, hi] instead of [lo, hi]
  kFloatText = 4u,     // written as a TOML float ("40000.0", not "40000")
  kRequired = 8u,      // must be present; `why` says what is allowed
  kResumeMatch = 16u,  // a resume must give the value the checkpoint was trained with (field_differences)
};

// One key of a table whose members live in an `Owner` (TrainConfig, PhaseConfig, PhaseData).
template <typename Owner>
struct FieldRow {
  const char* section;  // "train", "lora", "phase", "phase.data"
  const char* key;
  TrainMember (*member)(Owner&);
  double lo = 0, hi = 0;                  // numbers: the range; integers inclusive
  std::vector<std::string> allowed = {};  // strings: the allowed values (empty: any string)
  RecipeRule recipe = RecipeRule::kKept;
  const char* why = nullptr;  // kPhaseOwns: the message's reason; kRequired: what is allowed
  unsigned flags = 0;         // FieldFlag bits
};
using TrainField = FieldRow<TrainConfig>;
using PhaseField = FieldRow<PhaseConfig>;
using PhaseDataField = FieldRow<PhaseData>;

// Every key of [data], [train], [optim], [schedule], [moe], [parallel], [checkpoint], [ft] and [lora], in the order
// a run's config.toml lists them.
std::span<const TrainField> train_fields();
// The keys of a [[phase]] table (but its [[phase.data]] tables), in the order phases_to_toml writes them.
std::span<const PhaseField> phase_fields();
// The keys of a [[phase.data]] table.
std::span<const PhaseDataField> phase_data_fields();

// The keys of one section ("train", "lora", "phase", "phase.data"), in row order.
std::vector<std::string> train_section_keys(const std::string& section);

// Reads the rows of `section` from `s` into `owner`, but the key `by_hand`; with `recipe`, a key the phases own is
// refused. Each value is checked against its row (range, allowed names: an error names the file, line, table, key,
// value and what is allowed); an enum's name is parsed into the enum here.
template <typename Owner>
void read_fields(std::span<const FieldRow<Owner>> rows, const char* section, TomlSection& s, Owner& owner,
                 bool recipe = false, std::string_view by_hand = "");

// The rows of `section` as TOML lines ("key = value\n", in row order), but `skip`; with `recipe`, without the keys
// the phases own.
template <typename Owner>
std::string fields_to_toml(std::span<const FieldRow<Owner>> rows, const char* section, Owner owner, bool recipe = false,
                           std::string_view skip = "");

// "section.key: A vs B" for each row of `section` marked kResumeMatch whose values differ.
template <typename Owner>
std::vector<std::string> field_differences(std::span<const FieldRow<Owner>> rows, const char* section, Owner a,
                                           Owner b);

}  // namespace zaya
