#include "zaya/model/hf_config.h"

#include <fmt/format.h>

#include <fstream>
#include <set>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

using json = nlohmann::json;

// Keys that carry no information for our compute graph (training knobs of the
// reference, bookkeeping) and are accepted silently.
const std::set<std::string> kIgnoredKeys = {"transformers_version",
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
                                            "scale_residual_merge",
                                            "residual_in_fp32",
                                            "zaya_high_prec",
                                            "tie_word_embeddings",
                                            "model_type",
                                            "architectures",
                                            "torch_dtype",
                                            "dtype",
                                            "num_hidden_layers",
                                            "num_attention_heads",
                                            "num_key_value_heads",
                                            "sliding_window",
                                            "max_window_layers",
                                            "use_sliding_window",
                                            "clamp_temp",
                                            "rope_scaling",
                                            "cca",
                                            "kv_channels",
                                            "head_dim",
                                            "cca_num_q_heads",
                                            "num_query_groups_list",
                                            "num_query_groups",
                                            "ffn_hidden_size_list",
                                            "ffn_hidden_size",
                                            "zaya_mlp_expansion",
                                            "zaya_layers",
                                            "hidden_size",
                                            "vocab_size",
                                            "moe_router_topk",
                                            "zaya_use_mod",
                                            "zaya_use_eda",
                                            "rope_theta",
                                            "partial_rotary_factor",
                                            "max_position_embeddings",
                                            "norm_epsilon",
                                            "rms_norm_eps",
                                            "bos_token_id",
                                            "eos_token_id",
                                            "pad_token_id",
                                            "cca_time0",
                                            "cca_time1",
                                            "zaya_real_vocab_size",
                                            "zaya_router_norm_eps",
                                            "output_router_logits",
                                            "router_aux_loss_coef",
                                            "moe_aux_loss_coeff",
                                            "layernorm_epsilon",
                                            "tokenizer_class",
                                            "rope_type",
                                            "swa_layers",
                                            "swa_rotary_base",
                                            "zaya_rope_precision"};

// The value of a per-half-layer list on the first attention (parity 0) or MoE
// (parity 1) half-layer, all such entries being equal; or a scalar.
int64_t layer_value(const json& j, const std::string& source, const char* key, int parity, int64_t def) {
  if (!j.contains(key)) return def;
  const json& v = j[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_array() || v.empty()) json_field_error(source, key, v, "an integer or a per-layer list");
  int64_t value = -1;
  for (size_t i = parity; i < v.size(); i += 2) {
    if (!v[i].is_number_integer()) json_field_error(source, key, v, "a list of integers");
    if (value >= 0 && v[i].get<int64_t>() != value)
      fail("{}: \"{}\" has different values across layers ({} and {}); zaya.cpp needs one value per layer kind", source,
           key, value, v[i].get<int64_t>());
    value = v[i].get<int64_t>();
  }
  return value;
}

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
  j["model_type"] = "zaya";
  j["architectures"] = {"ZayaForCausalLM"};
  j["hidden_size"] = c.hidden;
  json layers = json::array(), q = json::array(), kv = json::array(), ffn = json::array(), mlp = json::array();
  for (int64_t b = 0; b < c.num_blocks; ++b) {
    layers.push_back("a");
    layers.push_back(c.experts);
    q.push_back(c.q_heads);
    q.push_back(0);
    kv.push_back(c.kv_heads);
    kv.push_back(0);
    ffn.push_back(0);
    ffn.push_back(2 * c.expert_ffn);
    mlp.push_back(0);
    mlp.push_back(c.router_hidden);
  }
  j["zaya_layers"] = layers;
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
  j["num_hidden_layers"] = c.half_layers();
  j["num_attention_heads"] = c.legacy_attention_heads();
  j["kv_channels"] = c.head_dim;
  j["cca_num_q_heads"] = q;
  j["num_query_groups_list"] = kv;
  j["num_key_value_heads"] = c.kv_heads;
  j["cca_time0"] = c.conv_kernel0;
  j["cca_time1"] = c.conv_kernel1;
  j["ffn_hidden_size_list"] = ffn;
  j["zaya_mlp_expansion"] = mlp;
  j["moe_router_topk"] = c.top_k;
  j["zaya_use_mod"] = c.use_skip;
  j["zaya_use_eda"] = c.use_eda;
  j["zaya_high_prec"] = true;
  j["scale_residual_merge"] = c.scale_residual_merge;
  j["residual_in_fp32"] = true;
  j["activation_func"] = "swiglu";
  j["gated_linear_unit"] = true;
  j["add_bias_linear"] = false;
  j["normalization"] = "RMSNorm";
  j["norm_epsilon"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["partial_rotary_factor"] = c.partial_rotary_factor;
  j["rope_scaling"] = false;
  j["max_position_embeddings"] = c.max_position;
  j["vocab_size"] = c.vocab_size;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["lm_head_bias"] = false;
  j["attention_bias"] = false;
  j["bos_token_id"] = c.bos_token_id;
  j["eos_token_id"] = c.eos_token_ids.size() > 1 ? json(c.eos_token_ids) : json(c.eos_token_id);
  j["pad_token_id"] = c.pad_token_id;
  j["torch_dtype"] = dtype;
  j["zaya_real_vocab_size"] = c.real_vocab_size;
  j["zaya_router_norm_eps"] = c.router_norm_eps;
  write_rope_precision(c, j);
  return j;
}

ZayaConfig config_from_hf_json(const json& j, const std::string& source) {
  if (!j.is_object()) fail("{}: expected a JSON object", source);
  for (auto it = j.begin(); it != j.end(); ++it)
    if (kIgnoredKeys.count(it.key()) == 0)
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
  ZayaConfig c;
  c.hidden = json_int(j, source, "hidden_size", c.hidden);
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
  c.experts = layer_value(j, source, "zaya_layers", 1, c.experts);
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
  c.q_heads = layer_value(j, source, "cca_num_q_heads", 0, c.q_heads);
  c.kv_heads = j.contains("num_query_groups_list") ? layer_value(j, source, "num_query_groups_list", 0, c.kv_heads)
                                                   : json_int(j, source, "num_key_value_heads", c.kv_heads);
  c.conv_kernel0 = json_int(j, source, "cca_time0", 2);
  c.conv_kernel1 = json_int(j, source, "cca_time1", 2);
  const int64_t fc1 = layer_value(j, source, "ffn_hidden_size_list", 1, 2 * c.expert_ffn);
  if (fc1 % 2 != 0) fail("{}: \"ffn_hidden_size_list\" entry {} must be even (gate and up fused)", source, fc1);
  c.expert_ffn = fc1 / 2;
  c.router_hidden = layer_value(j, source, "zaya_mlp_expansion", 1, c.router_hidden);
  c.top_k = json_int(j, source, "moe_router_topk", c.top_k);
  c.use_skip = json_bool(j, source, "zaya_use_mod", c.use_skip);
  c.use_eda = json_bool(j, source, "zaya_use_eda", c.use_eda);
  c.rope_theta = json_number(j, source, "rope_theta", 10000.0);  // the zaya-branch default when absent
  c.partial_rotary_factor = json_number(j, source, "partial_rotary_factor", c.partial_rotary_factor);
  c.max_position = json_int(j, source, "max_position_embeddings", c.max_position);
  c.vocab_size = json_int(j, source, "vocab_size", c.vocab_size);
  c.real_vocab_size = json_int(j, source, "zaya_real_vocab_size", c.vocab_size);
  c.norm_eps = json_number(j, source, "norm_epsilon", json_number(j, source, "rms_norm_eps", c.norm_eps));
  // The router's RMSNorm epsilon: ours, or the reference's layernorm_epsilon when given, else its 1e-6 (spec §11).
  c.router_norm_eps = json_number(j, source, "zaya_router_norm_eps", json_number(j, source, "layernorm_epsilon", 1e-6));
  // Untied heads read lm_head.weight; without residual scaling every merge is a plain sum (spec §11).
  c.tie_word_embeddings = json_bool(j, source, "tie_word_embeddings", true);
  c.scale_residual_merge = json_bool(j, source, "scale_residual_merge", true);
  c.rope_precision = read_rope_precision(j, source);
  c.bos_token_id = json_int(j, source, "bos_token_id", c.bos_token_id);
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
  c.pad_token_id = json_int(j, source, "pad_token_id", c.pad_token_id);
  read_sliding_windows(j, source, c);
  c.validate(source);
  return c;
}

void write_rope_precision(const ZayaConfig& c, json& j) {
  if (c.rope_precision == RopePrecision::kF32) j["zaya_rope_precision"] = "f32";
}

RopePrecision read_rope_precision(const json& j, const std::string& source) {
  if (!j.contains("zaya_rope_precision")) return RopePrecision::kF64;
  const json& v = j["zaya_rope_precision"];
  if (v == "f32") return RopePrecision::kF32;
  if (v == "f64") return RopePrecision::kF64;
  json_field_error(source, "zaya_rope_precision", v, "\"f32\" or \"f64\" (how RoPE angles are computed)");
}

ZayaConfig load_hf_config(const std::string& path) {
  return config_from_hf_json(read_json_file(path, "", "a model directory holds config.json and model.safetensors"),
                             path);
}

}  // namespace zaya
