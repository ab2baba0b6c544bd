#pragma once
// The native layout of the later ZAYA1 checkpoints (ZAYA1-8B, 74B-preview;
// upstream transformers `models/zaya`, spec §6.3): 40 combined decoder layers
// instead of 80 alternating half-layers, renamed tensors, experts stacked in
// one [E, 2F, D] / [E, D, F] tensor per layer, and a config.json with
// `num_hidden_layers`, `layer_types`, `num_experts`, `moe_intermediate_size`,
// `router_hidden_size`, `head_dim` and `rope_parameters`.
//
// The compute graph is the legacy one with two semantic differences (spec §8):
// a token routed to the skip expert gets output 0 (legacy: p_skip * x), and
// the router's RMSNorm uses rms_norm_eps (legacy ZAYA1-base: 1e-6).
// InferModel::load detects the layout from config.json; the native tensor
// names come from the tensor table (tensor_table.h), so one engine serves both.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "zaya/model/config.h"

namespace zaya {

// True for a native config.json (it has no "zaya_layers" but native keys).
bool is_native_zaya_config(const nlohmann::json& json);

// The native config.json of `config` (dtype: "float32" or "bfloat16", written as `dtype`): layer_types
// "hybrid" / "hybrid_sliding", sliding_window W, rope_parameters per layer type. zaya_real_vocab_size and, when it
// differs from rms_norm_eps, zaya_router_norm_eps are our own keys. Requires what the native layout can express:
// top-1 routing with the skip expert and EDA (native_layout_problem).
nlohmann::json config_to_native_json(const ZayaConfig& config, const std::string& dtype);

// Why `config` has no native spelling (top_k != 1, no skip expert, no EDA), or empty.
std::string native_layout_problem(const ZayaConfig& config);

// Parses and validates a native config.json; errors name `source` and the key.
ZayaConfig native_config_from_json(const nlohmann::json& json, const std::string& source);

}  // namespace zaya
