#include "zaya/formats/native_config.h"

#include <fmt/format.h>

#include <set>

#include "zaya/core/error.h"
#include "zaya/formats/config_json.h"
#include "zaya/formats/hf_config.h"
#include "zaya/io/json_file.h"

namespace zaya {
namespace {

using json = nlohmann::json;

// Keys of the upstream ZayaConfig and Hugging Face bookkeeping besides the fields of config_fields.cc
// (quantization_config: read by InferModel::load, formats/quantized_experts.h).
const std::set<std::string> kNativeOtherKeys = {"model_type",
                                                "architectures",
                                                "hidden_act",
                                                "initializer_range",
                                                "use_cache",
                                                "rope_theta",
                                                "partial_rotary_factor",
                                                "rope_scaling",
                                                "rope_type",
                                                "attention_dropout",
                                                "output_router_logits",
                                                "router_aux_loss_coef",
                                                "attention_bias",
                                                "lm_head_bias",
                                                "transformers_version",
                                                "torch_dtype",
                                                "dtype",
                                                "_name_or_path",
                                                "auto_map",
                                                "residual_in_fp32",
                                                "quantization_config"};

// One per-layer-type entry of rope_parameters: {"rope_type": "default", "rope_theta": ..., "partial_rotary_factor":
// ...}; refuses RoPE scaling by name.
void read_rope_entry(const json& p, const std::string& source, const std::string& name, double& theta, double& factor) {
  if (!p.is_object()) json_field_error(source, name, p, "an object");
  if (p.contains("rope_type") && p["rope_type"] != "default")
    json_field_error(source, name + ".rope_type", p["rope_type"], "\"default\" (no RoPE scaling)");
  for (auto it = p.begin(); it != p.end(); ++it)
    if (it.key() != "rope_type" && it.key() != "rope_theta" && it.key() != "partial_rotary_factor")
      fail("{}: unknown key \"{}\" in \"{}\"; allowed: rope_type, rope_theta, partial_rotary_factor", source, it.key(),
           name);
  theta = json_number(p, source, "rope_theta", theta);
  factor = json_number(p, source, "partial_rotary_factor", factor);
}

// A layer type of layer_types or a key of rope_parameters: "hybrid" / "hybrid_sliding" (transformers' ZayaConfig
// since 5.13, the hub files), or "full_attention" / "sliding_attention", the spelling of an earlier upstream
// revision, read as the same types; "" for anything else.
std::string canonical_layer_type(const std::string& type) {
  if (type == "hybrid" || type == "full_attention") return "hybrid";
  if (type == "hybrid_sliding" || type == "sliding_attention") return "hybrid_sliding";
  return "";
}

}  // namespace

bool is_native_zaya_config(const json& j) {
  return j.is_object() && !j.contains("zaya_layers") &&
         (j.contains("layer_types") || j.contains("num_experts") || j.contains("moe_intermediate_size") ||
          j.contains("router_hidden_size"));
}

std::string native_layout_problem(const ZayaConfig& c) {
  if (c.top_k != 1) return fmt::format("top_k = {} (the native layout routes top-1)", c.top_k);
  if (!c.use_skip) return "use_skip = false (the native router always has the skip expert)";
  if (!c.use_eda) return "use_eda = false (the native router always has EDA)";
  if (!c.scale_residual_merge)
    return "scale_residual_merge = false (the native layers always scale their residual merges)";
  return "";
}

json config_to_native_json(const ZayaConfig& c, const std::string& dtype) {
  if (const std::string why = native_layout_problem(c); !why.empty())
    fail("this model has no native-layout config.json: {}; write the legacy layout", why);
  json layer_types = json::array();
  for (int64_t b = 0; b < c.num_blocks; ++b) layer_types.push_back(c.is_sliding(b) ? "hybrid_sliding" : "hybrid");
  json rope = {
      {"hybrid",
       {{"rope_type", "default"}, {"rope_theta", c.rope_theta}, {"partial_rotary_factor", c.partial_rotary_factor}}}};
  if (c.has_sliding())
    rope["hybrid_sliding"] = {{"rope_type", "default"},
                              {"rope_theta", c.sliding_rope_theta},
                              {"partial_rotary_factor", c.partial_rotary_factor}};
  json j = {{"architectures", {"ZayaForCausalLM"}},
            {"model_type", "zaya"},
            {"hidden_act", "silu"},
            {"attention_bias", false},
            {"lm_head_bias", false},
            {"dtype", dtype}};
  write_config_json_fields(c, &ConfigField::native, j);
  // The kCustom fields of config_fields.cc.
  j["rope_parameters"] = rope;
  j["sliding_window"] = c.has_sliding() ? json(c.sliding_window) : json(nullptr);
  j["layer_types"] = layer_types;
  j["eos_token_id"] = c.eos_token_ids.size() > 1 ? json(c.eos_token_ids) : json(c.eos_token_id);
  if (c.router_norm_eps != c.norm_eps) j["zaya_router_norm_eps"] = c.router_norm_eps;
  if (!c.skip_output_zero) j["zaya_skip_output_zero"] = false;
  write_rope_precision(c, j);
  return j;
}

ZayaConfig native_config_from_json(const json& j, const std::string& source) {
  if (!j.is_object()) fail("{}: expected a JSON object", source);
  for (auto it = j.begin(); it != j.end(); ++it)
    if (kNativeOtherKeys.count(it.key()) == 0 && !is_config_json_key(it.key(), &ConfigField::native))
      fail("{}: unknown config key \"{}\" for the native ZAYA1 layout (docs/inference.md)", source, it.key());
  json_require(j, source, "model_type", "zaya", "\"zaya\"");
  json_require(j, source, "hidden_act", "silu", "\"silu\" (SwiGLU experts)");
  json_require(j, source, "attention_bias", false, "false");
  json_require(j, source, "lm_head_bias", false, "false");
  json_require(j, source, "num_experts_per_tok", 1, "1 (ZAYA1 routes top-1)");
  json_require(j, source, "residual_in_fp32", true, "true (zaya.cpp keeps the residual stream in float32)");
  if (j.contains("rope_scaling") && !(j["rope_scaling"].is_null() || j["rope_scaling"] == false))
    json_field_error(source, "rope_scaling", j["rope_scaling"], "null or false (no RoPE scaling)");

  // Absent keys keep ZAYA1-8B's values (the upstream ZayaConfig defaults): RoPE base 5e6, 131072 positions, eos
  // <end_of_turn>; top-1 routing with the skip expert and EDA is all the layout expresses.
  ZayaConfig c = preset_config("zaya1-8b");
  read_config_json_fields(j, source, &ConfigField::native, c);
  // The kCustom fields of config_fields.cc.
  // layer_types[i]: "hybrid" (full attention) or "hybrid_sliding" (a window of sliding_window keys, the query
  // included; spec §12).
  if (j.contains("layer_types")) {
    const json& lt = j["layer_types"];
    if (!lt.is_array() || int64_t(lt.size()) != c.num_blocks)
      json_field_error(source, "layer_types", lt,
                       fmt::format("a list of {} layer types (num_hidden_layers)", c.num_blocks));
    for (size_t i = 0; i < lt.size(); ++i) {
      const std::string type = lt[i].is_string() ? canonical_layer_type(lt[i].get<std::string>()) : "";
      if (type.empty())
        fail(
            "{}: \"layer_types\"[{}] = {} is invalid; allowed: \"hybrid\", \"hybrid_sliding\" (or an earlier "
            "upstream revision's \"full_attention\", \"sliding_attention\")",
            source, i, json_preview(lt[i]));
      if (type == "hybrid_sliding") c.sliding_blocks.push_back(int64_t(i));
    }
  }
  const bool window_given = j.contains("sliding_window") && !j["sliding_window"].is_null();
  if (!c.sliding_blocks.empty()) {
    if (!window_given)
      fail(
          "{}: \"layer_types\" has hybrid_sliding layers but \"sliding_window\" is missing or null; allowed: the "
          "window W >= 1 (keys per query, the query included)",
          source);
    c.sliding_window = json_int(j, source, "sliding_window", 0);
    if (c.sliding_window < 1) json_field_error(source, "sliding_window", j["sliding_window"], "an integer >= 1");
  }
  // The native router norm uses rms_norm_eps (spec §8.2); zaya_router_norm_eps (ours) keeps another value exact.
  c.router_norm_eps = json_number(j, source, "zaya_router_norm_eps", c.norm_eps);
  // RoPE: {"hybrid": {"rope_type": "default", "rope_theta": ..., "partial_rotary_factor": ...}},
  // a flat object, or top-level keys; the hub file also carries a stray top-level "rope_type".
  c.rope_theta = json_number(j, source, "rope_theta", c.rope_theta);
  c.partial_rotary_factor = json_number(j, source, "partial_rotary_factor", c.partial_rotary_factor);
  // Sliding layers: rope_parameters.hybrid_sliding (rope_theta 1e4 when absent, spec §12: ZayaConfig's default).
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const json& rp = j["rope_parameters"];
    if (!rp.is_object()) json_field_error(source, "rope_parameters", rp, "an object");
    bool nested = false;
    for (auto it = rp.begin(); it != rp.end(); ++it) nested = nested || !canonical_layer_type(it.key()).empty();
    if (nested) {
      const json* full = nullptr;
      const json* sliding = nullptr;
      std::string full_name, sliding_name;
      for (auto it = rp.begin(); it != rp.end(); ++it) {
        // Zyphra/ZAYA1-8B's released file has a stray "rope_type": "default" beside the layer types.
        if (it.key() == "rope_type") {
          if (it.value() != "default")
            json_field_error(source, "rope_parameters.rope_type", it.value(), "\"default\" (no RoPE scaling)");
          continue;
        }
        const std::string type = canonical_layer_type(it.key());
        if (type.empty())
          fail(
              "{}: unknown layer type \"{}\" in \"rope_parameters\"; allowed: hybrid, hybrid_sliding (or "
              "full_attention, sliding_attention)",
              source, it.key());
        const json*& entry = type == "hybrid" ? full : sliding;
        std::string& name = type == "hybrid" ? full_name : sliding_name;
        if (entry != nullptr)
          fail("{}: \"rope_parameters\" has both \"{}\" and \"{}\" (two spellings of one layer type)", source, name,
               it.key());
        entry = &it.value();
        name = it.key();
      }
      if (full != nullptr)
        read_rope_entry(*full, source, "rope_parameters." + full_name, c.rope_theta, c.partial_rotary_factor);
      if (sliding != nullptr) {
        double factor = c.partial_rotary_factor;
        read_rope_entry(*sliding, source, "rope_parameters." + sliding_name, c.sliding_rope_theta, factor);
        if (factor != c.partial_rotary_factor)
          fail(
              "{}: rope_parameters.{}.partial_rotary_factor = {} differs from the full layers' {}; zaya.cpp needs "
              "one rotary width",
              source, sliding_name, factor, c.partial_rotary_factor);
      }
    } else {
      read_rope_entry(rp, source, "rope_parameters", c.rope_theta, c.partial_rotary_factor);
    }
  }
  c.rope_precision = read_rope_precision(j, source);
  // The native layout's skip rule (spec §8.1): a token routed to the skip slot gets 0, as upstream transformers
  // computes; zaya_skip_output_zero = false (ours) keeps the legacy rule (p_skip * x) of a zaya-trained model
  // exported with a skip slot that is never chosen (native_export_problem), where the two rules agree.
  c.skip_output_zero = json_bool(j, source, "zaya_skip_output_zero", true);
  if (j.contains("eos_token_id") && j["eos_token_id"].is_array() && !j["eos_token_id"].empty()) {
    const json first = {{"eos_token_id", j["eos_token_id"][0]}};
    c.eos_token_id = json_int(first, source, "eos_token_id", 1);
    if (j["eos_token_id"].size() > 1)
      for (const json& id : j["eos_token_id"]) {
        if (!id.is_number_integer()) json_field_error(source, "eos_token_id", j["eos_token_id"], "a list of token ids");
        c.eos_token_ids.push_back(id.get<int64_t>());
      }
  } else {
    c.eos_token_id = json_int(j, source, "eos_token_id", c.eos_token_id);
  }
  c.validate(source);
  return c;
}

}  // namespace zaya
