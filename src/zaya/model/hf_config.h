#pragma once
// config.json of a Hugging Face-style ZAYA1 directory, in the legacy keys of
// ZAYA1-base (spec §2): per-half-layer lists (zaya_layers, cca_num_q_heads,
// num_query_groups_list, ffn_hidden_size_list, zaya_mlp_expansion), so the
// files load in the reference implementation and its ports. Two keys of our
// own travel with it: zaya_real_vocab_size (tokenizer entries; the rest of the
// vocab_size rows are padding) and zaya_router_norm_eps.

#include <string>

#include <nlohmann/json.hpp>

#include "zaya/model/config.h"

namespace zaya {

// dtype: "float32" or "bfloat16" (written as torch_dtype).
nlohmann::json config_to_hf_json(const ZayaConfig& config, const std::string& dtype);

// Reads and validates; errors name `source` and the key. Unknown keys are an
// error unless they are known Hugging Face bookkeeping keys (listed in the .cc).
ZayaConfig config_from_hf_json(const nlohmann::json& json, const std::string& source);

ZayaConfig load_hf_config(const std::string& path);

}  // namespace zaya
