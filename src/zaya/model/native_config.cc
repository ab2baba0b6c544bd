#include "zaya/model/native_config.h"

#include <set>

#include "zaya/core/error.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

using json = nlohmann::json;

// Keys of the upstream ZayaConfig and Hugging Face bookkeeping.
const std::set<std::string> kNativeKeys = {"model_type",
                                           "architectures",
                                           "vocab_size",
                                           "hidden_size",
                                           "num_hidden_layers",
                                           "num_attention_heads",
                                           "num_key_value_heads",
                                           "hidden_act",
                                           "max_position_embeddings",
                                           "initializer_range",
                                           "rms_norm_eps",
                                           "use_cache",
                                           "tie_word_embeddings",
                                           "rope_parameters",
                                           "rope_theta",
                                           "partial_rotary_factor",
                                           "rope_scaling",
                                           "rope_type",
                                           "sliding_window",
                                           "attention_dropout",
                                           "moe_intermediate_size",
                                           "num_experts_per_tok",
                                           "num_experts",
                                           "output_router_logits",
                                           "router_aux_loss_coef",
                                           "layer_types",
                                           "pad_token_id",
                                           "bos_token_id",
                                           "eos_token_id",
                                           "head_dim",
                                           "attention_bias",
                                           "lm_head_bias",
                                           "router_hidden_size",
                                           "cca_time0",
                                           "cca_time1",
                                           "transformers_version",
                                           "torch_dtype",
                                           "dtype",
                                           "_name_or_path",
                                           "auto_map",
                                           "zaya_real_vocab_size"};

}  // namespace

bool is_native_zaya_config(const json& j) {
  return j.is_object() && !j.contains("zaya_layers") &&
         (j.contains("layer_types") || j.contains("num_experts") || j.contains("moe_intermediate_size") ||
          j.contains("router_hidden_size"));
}

ZayaConfig native_config_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) fail("{}: expected a JSON object", source);
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!kNativeKeys.count(it.key()))
      fail("{}: unknown config key \"{}\" for the native ZAYA1 layout (docs/inference.md)", source, it.key());
  json_require(j, source, "model_type", "zaya", "\"zaya\"");
  json_require(j, source, "hidden_act", "silu", "\"silu\" (SwiGLU experts)");
  json_require(j, source, "tie_word_embeddings", true, "true (the LM head is the embedding)");
  json_require(j, source, "attention_bias", false, "false");
  json_require(j, source, "lm_head_bias", false, "false");
  json_require(j, source, "num_experts_per_tok", 1, "1 (ZAYA1 routes top-1)");
  if (j.contains("sliding_window") && !j["sliding_window"].is_null())
    json_field_error(source, "sliding_window", j["sliding_window"], "null (sliding-window layers are not supported)");
  if (j.contains("rope_scaling") && !(j["rope_scaling"].is_null() || j["rope_scaling"] == false))
    json_field_error(source, "rope_scaling", j["rope_scaling"], "null or false (no RoPE scaling)");

  ZayaConfig c;
  c.hidden = json_int(j, source, "hidden_size", 2048);
  c.num_blocks = json_int(j, source, "num_hidden_layers", 40);
  if (j.contains("layer_types")) {
    const json& lt = j["layer_types"];
    if (!lt.is_array() || int64_t(lt.size()) != c.num_blocks)
      json_field_error(source, "layer_types", lt,
                       fmt::format("a list of {} layer types (num_hidden_layers)", c.num_blocks));
    for (const json& t : lt)
      if (t != "hybrid")
        json_field_error(source, "layer_types", lt, "\"hybrid\" for every layer (hybrid_sliding is not supported)");
  }
  c.q_heads = json_int(j, source, "num_attention_heads", 8);
  c.kv_heads = json_int(j, source, "num_key_value_heads", 2);
  c.head_dim = json_int(j, source, "head_dim", 128);
  c.conv_kernel0 = json_int(j, source, "cca_time0", 2);
  c.conv_kernel1 = json_int(j, source, "cca_time1", 2);
  c.experts = json_int(j, source, "num_experts", 16);
  c.expert_ffn = json_int(j, source, "moe_intermediate_size", 2048);
  c.router_hidden = json_int(j, source, "router_hidden_size", 256);
  c.top_k = 1;
  c.use_skip = true;  // num_experts + 1 router classes, the last the skip expert
  c.use_eda = true;
  c.norm_eps = json_number(j, source, "rms_norm_eps", 1e-5);
  c.router_norm_eps = c.norm_eps;  // the native router norm uses rms_norm_eps (spec §8.2)
  c.max_position = json_int(j, source, "max_position_embeddings", 131072);
  c.vocab_size = json_int(j, source, "vocab_size", 262272);
  c.real_vocab_size = json_int(j, source, "zaya_real_vocab_size", c.vocab_size);
  // RoPE: {"hybrid": {"rope_type": "default", "rope_theta": ..., "partial_rotary_factor": ...}},
  // a flat object, or top-level keys; the hub file also carries a stray top-level "rope_type".
  c.rope_theta = json_number(j, source, "rope_theta", 5e6);
  c.partial_rotary_factor = json_number(j, source, "partial_rotary_factor", 0.5);
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const json& rp = j["rope_parameters"];
    if (!rp.is_object()) json_field_error(source, "rope_parameters", rp, "an object");
    const json& p = rp.contains("hybrid") ? rp["hybrid"] : rp;
    if (!p.is_object()) json_field_error(source, "rope_parameters.hybrid", p, "an object");
    if (p.contains("rope_type") && p["rope_type"] != "default")
      json_field_error(source, "rope_parameters.rope_type", p["rope_type"], "\"default\" (no RoPE scaling)");
    c.rope_theta = json_number(p, source, "rope_theta", c.rope_theta);
    c.partial_rotary_factor = json_number(p, source, "partial_rotary_factor", c.partial_rotary_factor);
  }
  c.pad_token_id = json_int(j, source, "pad_token_id", 0);
  c.bos_token_id = json_int(j, source, "bos_token_id", 2);
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array() && !j["eos_token_id"].empty()) {
    const json first = {{"eos_token_id", j["eos_token_id"][0]}};
    c.eos_token_id = json_int(first, source, "eos_token_id", 1);
  } else {
    c.eos_token_id = json_int(j, source, "eos_token_id", 106);
  }
  c.validate(source);
  return c;
}

}  // namespace zaya
