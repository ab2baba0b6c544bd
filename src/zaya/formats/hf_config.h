#pragma once
// config.json of a Hugging Face-style ZAYA1 directory, in the legacy keys of
// ZAYA1-base (spec §2): per-half-layer lists (zaya_layers, cca_num_q_heads,
// num_query_groups_list, ffn_hidden_size_list, zaya_mlp_expansion), so the
// files load in the reference implementation and its ports. Two keys of our
// own travel with it: zaya_real_vocab_size (tokenizer entries; the rest of the
// vocab_size rows are padding) and zaya_router_norm_eps; zaya_rope_precision
// too when the model computes RoPE in float32.

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

// zaya_rope_precision, our key in both layouts (docs/formats.md): "f32" is
// written for a model whose RoPE angles are float32 (model.rope_precision),
// nothing for the default f64; reading gives f64 when the key is absent and
// refuses any value but "f32" and "f64".
void write_rope_precision(const ZayaConfig& config, nlohmann::json& json);
RopePrecision read_rope_precision(const nlohmann::json& json, const std::string& source);

}  // namespace zaya
