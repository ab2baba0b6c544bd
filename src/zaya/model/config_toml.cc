#include "zaya/model/config_toml.h"

#include <fmt/format.h>

#include <vector>

#include "zaya/io/toml_section.h"
#include "zaya/model/config_fields.h"

namespace zaya {
namespace {

// The keys a [model] table may hold: the preset, the fields of config_fields.cc, and init_from.
std::vector<std::string> model_keys() {
  std::vector<std::string> keys = {"preset"};
  for (const ConfigField& f : zaya_config_fields())
    if (f.toml != nullptr) keys.push_back(f.toml);
  keys.push_back("init_from");
  return keys;
}

// One scalar field from the table (sliding_blocks, a list or a pattern, is read by hand below).
void read_toml_field(TomlSection& m, const ConfigField& f, ZayaConfig& c) {
  std::visit(
      [&](auto ptr) {
        auto& v = c.*ptr;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          // real_vocab_size follows a given vocab_size (no padding rows), else keeps the preset's.
          const int64_t def = f.absent == AbsentRule::kVocabSize && m.has("vocab_size") ? c.vocab_size : v;
          v = m.get_int(f.toml, def, int64_t(f.lo), int64_t(f.hi));
        } else if constexpr (std::is_same_v<T, double>) {
          v = m.get_double(f.toml, v, f.lo, f.hi);
        } else if constexpr (std::is_same_v<T, bool>) {
          v = m.get_bool(f.toml, v);
        } else if constexpr (std::is_same_v<T, RopePrecision>) {
          std::vector<std::string> allowed;
          for (const auto& n : kRopePrecisionNames) allowed.push_back(n.name);
          v = *enum_find<RopePrecision>(
              kRopePrecisionNames, m.get_string(f.toml, enum_name<RopePrecision>(kRopePrecisionNames, v), allowed));
        }
      },
      f.ptr);
}

// A field as its TOML value: strings quoted, rope_theta-like bases as float literals.
std::string toml_value(const ConfigField& f, const ZayaConfig& c) {
  if (std::holds_alternative<RopePrecision ZayaConfig::*>(f.ptr)) return fmt::format("\"{}\"", config_field_text(f, c));
  if (f.toml_float_literal) return fmt::format("{:.1f}", c.*std::get<double ZayaConfig::*>(f.ptr));
  return config_field_text(f, c);
}

}  // namespace

ModelTable parse_model_table(const toml::table* table, const std::string& source) {
  TomlSection m(table, "model", source);
  ModelTable t;
  t.preset = m.get_string("preset", "tiny", preset_names());
  ZayaConfig& c = t.config;
  c = preset_config(t.preset);
  t.vocab_from_tokenizer = !m.has("vocab_size") && !m.has("real_vocab_size");
  for (const ConfigField& f : zaya_config_fields())
    if (f.toml != nullptr && !std::holds_alternative<std::vector<int64_t> ZayaConfig::*>(f.ptr))
      read_toml_field(m, f, c);
  // Sliding windows (spec §12): a window alone slides the even blocks (the 74B's pattern); sliding_blocks is
  // "even", "all", "none" or a list of block indices.
  const toml::node* blocks = table == nullptr ? nullptr : table->get("sliding_blocks");
  if (blocks != nullptr && blocks->is_array()) {
    c.sliding_blocks = m.get_int_list("sliding_blocks", {}, 0, c.num_blocks - 1);
  } else if (blocks != nullptr || m.has("sliding_window") || m.has("num_blocks")) {
    const std::string pattern =
        m.get_string("sliding_blocks", c.sliding_window > 0 ? "even" : "none", {"even", "all", "none"});
    c.sliding_blocks = sliding_block_pattern(pattern, c.num_blocks, source);
  }
  if (c.sliding_window == 0 && blocks == nullptr) c.sliding_blocks.clear();
  // A model directory (either layout) whose weights a fresh run starts from; checked against the sizes at start-up.
  t.init_from = m.get_string("init_from", "");
  m.finish(model_keys());
  return t;
}

std::string model_table_to_toml(const std::string& preset, const ZayaConfig& c, const std::string& init_from) {
  std::string s = fmt::format("[model]\npreset = \"{}\"\n", preset);
  for (const ConfigField& f : zaya_config_fields())
    if (f.toml != nullptr) s += fmt::format("{} = {}\n", f.toml, toml_value(f, c));
  if (!init_from.empty()) s += fmt::format("init_from = \"{}\"\n", init_from);
  return s + "\n";
}

}  // namespace zaya
