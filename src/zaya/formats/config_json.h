#pragma once
// The fields of ZayaConfig (config_fields.h) that a config.json spells as one
// key, read and written by iterating the table: `layout` picks the legacy or
// the native column. hf_config.cc and native_config.cc add what is structure
// (kCustom rows) by hand.

#include <string>

#include <nlohmann/json.hpp>

#include "zaya/model/config_fields.h"

namespace zaya {

using JsonColumn = JsonSpelling ConfigField::*;

// Writes every kScalar / kAttnList / kMoeList / kMoeListTwice field of `config` (and a written fallback key).
void write_config_json_fields(const ZayaConfig& config, JsonColumn layout, nlohmann::json& json);

// Reads the same fields into `config`, whose values are the defaults for absent keys (a field's fallback key is
// read when its key is absent). Per-half-layer lists must hold one value per layer kind (spec §2). Errors name
// `source`, the key and what is allowed.
void read_config_json_fields(const nlohmann::json& json, const std::string& source, JsonColumn layout,
                             ZayaConfig& config);

// Whether `key` spells a field in this layout (its key or fallback key), for the readers' unknown-key check.
bool is_config_json_key(const std::string& key, JsonColumn layout);

// The value of a per-half-layer list on the attention (parity 0) or MoE (parity 1) half-layers, all such entries
// being equal; or a scalar; `def` when absent.
int64_t json_layer_value(const nlohmann::json& json, const std::string& source, const char* key, int parity,
                         int64_t def);

}  // namespace zaya
