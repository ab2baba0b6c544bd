#pragma once
// The fields of ZayaConfig declared once (spec §2; torchtitan's "one
// declaration per config field"): each row names the member, its key in a
// training config's [model] table (TOML), in the legacy and the native
// config.json, in GGUF metadata, the range a [model] table may give, how the
// config diff treats it, and a doc line. The readers and writers of the four
// formats (config_toml.cc, hf_config.cc, native_config.cc, gguf_zaya_map.cc)
// and model_differences iterate this table; a spelling that is structure
// rather than one key (the legacy per-half-layer lists, the native
// rope_parameters, sliding windows, eos lists) is marked kCustom and spelled
// by hand in that format's file, next to the loop. Adding a field: one row
// here plus its use (docs/developer-guide.md, "Adding a model config field").

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "zaya/core/enum_names.h"
#include "zaya/model/config.h"

namespace zaya {

// The names of RopePrecision in every format (TOML, config.json, GGUF).
inline constexpr EnumName<RopePrecision> kRopePrecisionNames[] = {{RopePrecision::kF32, "f32"},
                                                                  {RopePrecision::kF64, "f64"}};

// Where the value lives in ZayaConfig.
using ConfigMember = std::variant<int64_t ZayaConfig::*, double ZayaConfig::*, bool ZayaConfig::*,
                                  RopePrecision ZayaConfig::*, std::vector<int64_t> ZayaConfig::*>;

// How a field is spelled in a config.json (legacy or native layout).
enum class JsonForm {
  kNone,          // not in this layout (the reader keeps the default; the writer may refuse, see native_config.h)
  kScalar,        // "key": value
  kAttnList,      // legacy per-half-layer list (spec §2): the value on attention half-layers, 0 on MoE ones
  kMoeList,       // legacy per-half-layer list: 0 on attention half-layers, the value on MoE ones
  kMoeListTwice,  // as kMoeList with the value doubled (ffn_hidden_size_list counts fc1's 2F rows)
  kCustom,        // spelled by hand next to the loop in that layout's file (the key is the main one)
};

struct JsonSpelling {
  const char* key = nullptr;
  JsonForm form = JsonForm::kNone;
  const char* fallback = nullptr;  // read when `key` is absent (another tool's spelling), same form
  bool write_fallback = false;     // the fallback key is written too (as a scalar)
};

// How a field is spelled in GGUF metadata (docs/formats-gguf.md).
enum class GgufForm {
  kNone,
  kRequired,  // a file without it is refused
  kOptional,  // absent: the ZayaConfig default (older exports)
  kCustom,    // spelled by hand in gguf_zaya_map.cc at this row's slot
};

struct GgufSpelling {
  const char* key = nullptr;
  GgufForm form = GgufForm::kNone;
  int slot = 0;               // position in the metadata: keys are written (and read) in slot order, so exports
                              // stay byte-identical; a new field takes the next free slot
  const char* f64 = nullptr;  // double fields: the exact float64 twin beside the float32 standard key (llama.cpp
                              // reads the standard one); a double without `f64` has the key only, as float64
  int64_t lo = 0, hi = 0;     // integer fields: the range accepted on read (bounds that keep size products in int64)
};

// model_differences: whether the field is part of the architecture a checkpoint's weights fit.
enum class DiffRule {
  kAlways,
  kNever,        // token ids and numerics that do not change the tensors (rope_precision)
  kWhenSliding,  // compared when either model has sliding blocks (sliding_rope_theta)
};

// A field's default when a file lacks it, if not ZayaConfig's own.
enum class AbsentRule {
  kDefault,
  kVocabSize,  // real_vocab_size: vocab_size (no padding rows)
};

struct ConfigField {
  const char* member;  // the ZayaConfig member, for messages and docs
  ConfigMember ptr;
  // Training config [model] table: key (nullptr: not settable there), range (integers: inclusive), and whether the
  // value is written as a float literal ("1000000.0": a TOML float even when whole).
  const char* toml;
  double lo, hi;
  bool toml_float_literal;
  JsonSpelling legacy, native;
  GgufSpelling gguf;
  DiffRule diff;
  AbsentRule absent;
  const char* doc;
};

// Every field, in the order of a run directory's config.toml [model] table.
std::span<const ConfigField> zaya_config_fields();

// The field whose member is `member` (internal error when none: a typo in a format file).
const ConfigField& zaya_config_field(std::string_view member);

// The value of a field in words, as the TOML writer and the diff print it ("128", "1e-05", "true", "f32", "[0, 2]").
std::string config_field_text(const ConfigField& field, const ZayaConfig& config);

// Whether `a` and `b` hold the same value of the field (doubles by value).
bool config_field_equal(const ConfigField& field, const ZayaConfig& a, const ZayaConfig& b);

}  // namespace zaya
