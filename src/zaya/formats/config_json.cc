#include "zaya/formats/config_json.h"

#include <fmt/format.h>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

using json = nlohmann::json;

bool generic_form(JsonForm form) { return form != JsonForm::kNone && form != JsonForm::kCustom; }

// A legacy per-half-layer list: `value` on the half-layers of `parity`, 0 on the others (spec §2).
json half_layer_list(int64_t num_blocks, int parity, int64_t value) {
  json list = json::array();
  for (int64_t b = 0; b < num_blocks; ++b) {
    list.push_back(parity == 0 ? value : 0);
    list.push_back(parity == 1 ? value : 0);
  }
  return list;
}

}  // namespace

int64_t json_layer_value(const json& j, const std::string& source, const char* key, int parity, int64_t def) {
  if (!j.contains(key)) return def;
  const json& v = j[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_array() || v.empty()) json_field_error(source, key, v, "an integer or a per-layer list");
  int64_t value = -1;
  for (size_t i = size_t(parity); i < v.size(); i += 2) {
    if (!v[i].is_number_integer()) json_field_error(source, key, v, "a list of integers");
    if (value >= 0 && v[i].get<int64_t>() != value)
      fail("{}: \"{}\" has different values across layers ({} and {}); zaya.cpp needs one value per layer kind", source,
           key, value, v[i].get<int64_t>());
    value = v[i].get<int64_t>();
  }
  return value;
}

bool is_config_json_key(const std::string& key, JsonColumn layout) {
  for (const ConfigField& f : zaya_config_fields()) {
    const JsonSpelling& s = f.*layout;
    if ((s.key != nullptr && key == s.key) || (s.fallback != nullptr && key == s.fallback)) return true;
  }
  return false;
}

void write_config_json_fields(const ZayaConfig& c, JsonColumn layout, json& j) {
  for (const ConfigField& f : zaya_config_fields()) {
    const JsonSpelling& s = f.*layout;
    if (!generic_form(s.form)) continue;
    std::visit(
        [&](auto ptr) {
          const auto& v = c.*ptr;
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            switch (s.form) {
              case JsonForm::kAttnList: j[s.key] = half_layer_list(c.num_blocks, 0, v); break;
              case JsonForm::kMoeList: j[s.key] = half_layer_list(c.num_blocks, 1, v); break;
              case JsonForm::kMoeListTwice: j[s.key] = half_layer_list(c.num_blocks, 1, 2 * v); break;
              default: j[s.key] = v;
            }
          } else if constexpr (std::is_same_v<T, double> || std::is_same_v<T, bool>) {
            j[s.key] = v;
          } else {
            fail("internal error: field '{}' needs a kCustom spelling in config.json", f.member);
          }
          if (s.write_fallback) j[s.fallback] = v;
        },
        f.ptr);
  }
}

void read_config_json_fields(const json& j, const std::string& source, JsonColumn layout, ZayaConfig& c) {
  for (const ConfigField& f : zaya_config_fields()) {
    const JsonSpelling& s = f.*layout;
    if (!generic_form(s.form)) continue;
    // The fallback key (a scalar) stands in for an absent key.
    const bool fallback = s.fallback != nullptr && !j.contains(s.key);
    std::visit(
        [&](auto ptr) {
          auto& v = c.*ptr;
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            const int64_t def = f.absent == AbsentRule::kVocabSize ? c.vocab_size : v;
            if (fallback) {
              v = json_int(j, source, s.fallback, def);
            } else if (s.form == JsonForm::kAttnList || s.form == JsonForm::kMoeList) {
              v = json_layer_value(j, source, s.key, s.form == JsonForm::kAttnList ? 0 : 1, def);
            } else if (s.form == JsonForm::kMoeListTwice) {
              const int64_t twice = json_layer_value(j, source, s.key, 1, 2 * def);
              if (twice % 2 != 0) fail("{}: \"{}\" entry {} must be even (gate and up fused)", source, s.key, twice);
              v = twice / 2;
            } else {
              v = json_int(j, source, s.key, def);
            }
          } else if constexpr (std::is_same_v<T, double>) {
            v = json_number(j, source, fallback ? s.fallback : s.key, v);
          } else if constexpr (std::is_same_v<T, bool>) {
            v = json_bool(j, source, fallback ? s.fallback : s.key, v);
          }
        },
        f.ptr);
  }
}

}  // namespace zaya
