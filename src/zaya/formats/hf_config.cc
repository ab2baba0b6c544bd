#include "zaya/formats/hf_config.h"

#include <fmt/format.h>

#include <fstream>
#include <set>

#include "zaya/core/error.h"
#include "zaya/formats/config_json.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

using json = nlohmann::json;

// Keys besides the fields of config_fields.cc: training knobs of the
// reference, bookkeeping, and keys checked for the one value zaya.cpp computes
// (config_from_hf_json); all accepted.
const std::set<std::string> kOtherKeys = {"transformers_version",
                                          "_name_or_path",
                                          "auto_map",
                                          "initializer_range",
                                          "init_method_std",
                                          "use_cache",
                                          "attention_dropout",
                                          "hidden_dropout",
                                          "bias_activation_fusion",
                                          "apply_rope_fusion",
                                          "fused_add_norm",
                                          "lm_head_bias",
                                          "attention_bias",
                                          "add_bias_linear",
                                          "gated_linear_unit",
                                          "activation_func",
                                          "normalization",
                                          "residual_in_fp32",
                                          "zaya_high_prec",
                                          "model_type",
                                          "architectures",
                                          "torch_dtype",
                                          "dtype",
                                          "num_hidden_layers",
                                          "num_attention_heads",
                                          "sliding_window",
                                          "max_window_layers",
                                          "use_sliding_window",
                                          "clamp_temp",
                                          "rope_scaling",
                                          "cca",
                                          "head_dim",
                                          "num_query_groups",
                                          "ffn_hidden_size",
                                          "output_router_logits",
                                          "router_aux_loss_coef",
                                          "moe_aux_loss_coeff",
                                          "tokenizer_class",
                                          "rope_type"};

// swa_layers (one entry per zaya_layers entry: 0 = full attention, v > 0 on an attention half-layer = a window
// of v earlier tokens, W = v + 1; spec §12) and swa_rotary_base.
void read_sliding_windows(const json& j, const std::string& source, ZayaConfig& c) {
  c.sliding_window = 0;
  c.sliding_blocks.clear();
  c.sliding_rope_theta = json_number(j, source, "swa_rotary_base", 1e4);
  if (!j.contains("swa_layers") || j["swa_layers"].is_null()) return;
  const json& swa = j["swa_layers"];
  if (!swa.is_array() || int64_t(swa.size()) != c.half_layers())
    json_field_error(source, "swa_layers", swa,
                     fmt::format("a list of {} integers, one per zaya_layers entry", c.half_layers()));
  for (size_t i = 0; i < swa.size(); ++i) {
    if (!swa[i].is_number_integer() || swa[i].get<int64_t>() < 0)
      fail(
          "{}: \"swa_layers\"[{}] = {} is invalid; allowed: 0 (full attention) or the number of earlier tokens a "
          "sliding attention half-layer sees",
          source, i, json_preview(swa[i]));
    const int64_t v = swa[i].get<int64_t>();
    if (v == 0) continue;
    if (i % 2 != 0)
      fail("{}: \"swa_layers\"[{}] = {} is invalid; allowed: 0 on a MoE half-layer (odd index)", source, i, v);
    if (c.sliding_window > 0 && v + 1 != c.sliding_window)
      fail("{}: \"swa_layers\" has different windows ({} and {}); zaya.cpp needs one window for all sliding layers",
           source, c.sliding_window - 1, v);
    c.sliding_window = v + 1;
    c.sliding_blocks.push_back(int64_t(i / 2));
  }
}

}  // namespace

json config_to_hf_json(const ZayaConfig& c, const std::string& dtype) {
  json j;
  // What the reference's modeling code expects and zaya.cpp computes (config_from_hf_json refuses other values).
  j["model_type"] = "zaya";
  j["architectures"] = {"ZayaForCausalLM"};
  j["num_hidden_layers"] = c.half_layers();
  j["num_attention_heads"] = c.legacy_attention_heads();
  j["zaya_high_prec"] = true;
  j["residual_in_fp32"] = true;
  j["activation_func"] = "swiglu";
  j["gated_linear_unit"] = true;
  j["add_bias_linear"] = false;
  j["normalization"] = "RMSNorm";
  j["rope_scaling"] = false;
  j["lm_head_bias"] = false;
  j["attention_bias"] = false;
  j["torch_dtype"] = dtype;
  write_config_json_fields(c, &ConfigField::legacy, j);
  // The kCustom fields of config_fields.cc.
  json layers = json::array();
  for (int64_t b = 0; b < c.num_blocks; ++b) {
    layers.push_back("a");
    layers.push_back(c.experts);
  }
  j["zaya_layers"] = layers;
  j["kv_channels"] = c.head_dim;
  if (c.has_sliding()) {
    // spec §12: one entry per half-layer, the number of EARLIER tokens an attention half-layer sees (W - 1), 0 on
    // full-attention and MoE half-layers; W = 1 has no legacy spelling (0 means full attention).
    if (c.sliding_window < 2)
      fail("sliding_window = {} cannot be written as legacy swa_layers (0 there means full attention); allowed: >= 2",
           c.sliding_window);
    json swa = json::array();
    for (int64_t b = 0; b < c.num_blocks; ++b) {
      swa.push_back(c.window_of(b) > 0 ? c.window_of(b) - 1 : 0);
      swa.push_back(0);
    }
    j["swa_layers"] = swa;
    j["swa_rotary_base"] = c.sliding_rope_theta;
  }
  j["eos_token_id"] = c.eos_token_ids.size() > 1 ? json(c.eos_token_ids) : json(c.eos_token_id);
  write_rope_precision(c, j);
  // The native skip rule (spec §8.1) in a legacy file: our own key, only when set (Zyphra's code knows only p_skip x).
  if (c.skip_output_zero) j["zaya_skip_output_zero"] = true;
  return j;
}

ZayaConfig config_from_hf_json(const json& j, const std::string& source) {
  if (!j.is_object()) fail("{}: expected a JSON object", source);
  for (auto it = j.begin(); it != j.end(); ++it)
    if (kOtherKeys.count(it.key()) == 0 && !is_config_json_key(it.key(), &ConfigField::legacy))
      fail("{}: unknown config key \"{}\"; zaya.cpp reads the legacy ZAYA1 keys (docs/formats.md)", source, it.key());
  if (j.contains("model_type") && j["model_type"] != "zaya")
    json_field_error(source, "model_type", j["model_type"], "\"zaya\"");
  if (j.contains("rope_scaling") && !(j["rope_scaling"].is_null() || j["rope_scaling"] == false))
    json_field_error(source, "rope_scaling", j["rope_scaling"], "false or null (no RoPE scaling)");
  if (j.contains("sliding_window") && !j["sliding_window"].is_null())
    json_field_error(source, "sliding_window", j["sliding_window"], "null (no sliding-window layers)");
  // Keys that would change the computation if they took another value (spec
  // §11): refused rather than ignored, so a model is never run as something it is not.
  json_require(j, source, "gated_linear_unit", true, "true (SwiGLU experts)");
  json_require(j, source, "activation_func", "swiglu", "\"swiglu\"");
  json_require(j, source, "normalization", "RMSNorm", "\"RMSNorm\"");
  for (const char* bias : {"add_bias_linear", "lm_head_bias", "attention_bias"})
    json_require(j, source, bias, false, "false (no biases on those projections)");
  json_require(j, source, "clamp_temp", false, "false (the key temperature is a plain multiplier, spec §3 step 6)");
  json_require(j, source, "use_sliding_window", false,
               "false (sliding windows are given per half-layer by \"swa_layers\")");
  json_require(j, source, "residual_in_fp32", true, "true (zaya.cpp keeps the residual stream in float32)");
  // Absent keys keep ZAYA1-base's values, except the RoPE base: the zaya-branch default 10000.
  ZayaConfig c;
  c.rope_theta = 10000.0;
  read_config_json_fields(j, source, &ConfigField::legacy, c);
  // zaya_layers: ['a', E, 'a', E, ...] (spec §2). Always use its length, never num_hidden_layers.
  if (!j.contains("zaya_layers")) fail("{}: missing key \"zaya_layers\" (the legacy layer list)", source);
  const json& layers = j["zaya_layers"];
  if (!layers.is_array() || layers.empty() || layers.size() % 2 != 0)
    json_field_error(source, "zaya_layers", layers, "a list ['a', E, 'a', E, ...] of even length");
  for (size_t i = 0; i < layers.size(); ++i) {
    const bool ok = i % 2 == 0 ? layers[i] == "a" : layers[i].is_number_integer();
    if (!ok)
      fail("{}: \"zaya_layers\"[{}] = {} is invalid; expected {} (attention and MoE half-layers alternate)", source, i,
           json_preview(layers[i]), i % 2 == 0 ? "\"a\"" : "an expert count");
  }
  c.num_blocks = int64_t(layers.size() / 2);
  c.experts = json_layer_value(j, source, "zaya_layers", 1, c.experts);
  if (j.contains("head_dim"))
    c.head_dim = json_int(j, source, "head_dim", c.head_dim);
  else if (j.contains("kv_channels"))
    c.head_dim = json_int(j, source, "kv_channels", c.head_dim);
  else {
    const int64_t heads = json_int(j, source, "num_attention_heads", c.hidden / c.head_dim);
    if (heads < 1 || heads > c.hidden)
      json_field_error(source, "num_attention_heads", j["num_attention_heads"], "an integer in 1..hidden_size");
    c.head_dim = c.hidden / heads;
  }
  c.rope_precision = read_rope_precision(j, source);
  c.skip_output_zero = json_bool(j, source, "zaya_skip_output_zero", false);
  // eos_token_id may be a list (chat models add <end_of_turn>); the first is the document end.
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array() && !j["eos_token_id"].empty()) {
    json first = {{"eos_token_id", j["eos_token_id"][0]}};
    c.eos_token_id = json_int(first, source, "eos_token_id", c.eos_token_id);
  } else {
    c.eos_token_id = json_int(j, source, "eos_token_id", c.eos_token_id);
  }
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array() && j["eos_token_id"].size() > 1)
    for (const json& id : j["eos_token_id"]) {
      if (!id.is_number_integer()) json_field_error(source, "eos_token_id", j["eos_token_id"], "a list of token ids");
      c.eos_token_ids.push_back(id.get<int64_t>());
    }
  read_sliding_windows(j, source, c);
  c.validate(source);
  return c;
}

void write_rope_precision(const ZayaConfig& c, json& j) {
  if (c.rope_precision == RopePrecision::kF32)
    j["zaya_rope_precision"] = enum_name<RopePrecision>(kRopePrecisionNames, c.rope_precision);
}

RopePrecision read_rope_precision(const json& j, const std::string& source) {
  if (!j.contains("zaya_rope_precision")) return RopePrecision::kF64;
  const json& v = j["zaya_rope_precision"];
  const RopePrecision* p =
      v.is_string() ? enum_find<RopePrecision>(kRopePrecisionNames, v.get<std::string>()) : nullptr;
  if (p == nullptr)
    json_field_error(source, "zaya_rope_precision", v, "\"f32\" or \"f64\" (how RoPE angles are computed)");
  return *p;
}

ZayaConfig load_hf_config(const std::string& path) {
  return config_from_hf_json(read_json_file(path, "", "a model directory holds config.json and model.safetensors"),
                             path);
}

}  // namespace zaya
