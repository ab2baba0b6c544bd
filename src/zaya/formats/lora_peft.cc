#include "zaya/formats/lora_peft.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_file.h"
#include "zaya/io/safetensors_writer.h"
#include "zaya/model/tensor_table.h"

namespace zaya {

namespace {

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

// adapter_config.json keys whose non-null value changes what the adapter computes, and what each is.
constexpr std::pair<const char*, const char*> kPeftUnsupported[] = {
    {"modules_to_save", "fully trained copies of modules"},
    {"trainable_token_indices", "trained embedding rows"},
    {"exclude_modules", "excluding modules from the targets"},
    {"layer_replication", "replicated layers"},
    {"alora_invocation_tokens", "activated LoRA (aLoRA)"},
    {"use_bdlora", "block-diagonal LoRA"},
    {"velora_config", "VeLoRA"},
    {"monteclora_config", "MonteCLoRA"},
    {"arrow_config", "Arrow routing"},
    {"kasa_config", "KaSA"},
    {"megatron_config", "Megatron-parallel LoRA layers"},
};

std::string adapter_file(const std::string& dir, const char* file) {
  return (std::filesystem::path(dir) / file).string();
}

// An expert target's PEFT module: the stacked parameter's path without the parameter.
std::string experts_module(const ZayaConfig& c, int64_t block, LoraTarget t) {
  const std::string path = lora_module_path(c, block, t);
  return path.substr(0, path.rfind('.'));
}

// Whether this expert target's ParamWrapper is the inner one (under base_layer):
// gate_up_proj when down_proj is targeted too.
bool nested_inside(const LoraConfig& lora, LoraTarget t) {
  return t == LoraTarget::kExpertGateUp && lora.targets_has(LoraTarget::kExpertDown);
}

std::string expert_pair_name(const ZayaConfig& c, int64_t block, LoraTarget t, bool inner, bool lora_b) {
  return "base_model.model." + experts_module(c, block, t) + (inner ? ".base_layer" : "") +
         (lora_b ? ".lora_B.weight" : ".lora_A.weight");
}

// PEFT's shapes of an expert target's pair (peft 0.21: a [E, out, in] parameter of a module that is not
// `is_transposed` has its in and out features swapped to the parameter's own): lora_A [r E, in], lora_B [out, r E].
std::vector<int64_t> expert_pair_shape(const LoraAdapters::Entry& e, int64_t rank, bool lora_b) {
  return lora_b ? std::vector<int64_t>{e.slot.out, rank * e.experts}
                : std::vector<int64_t>{rank * e.experts, e.slot.in};
}

// PEFT's lora_A row e r + k is A_e[k, :]; its lora_B column k E + e is B_e[:, k]. zaya: A_e [r, in] at
// a + e r in, B_e [out, r] at b + e out r.
void stack_expert_pair(const LoraAdapters::Entry& e, int64_t r, const float* a, const float* b, float* pa, float* pb) {
  const int64_t E = e.experts, in = e.slot.in, out = e.slot.out;
  std::copy(a, a + E * r * in, pa);
  for (int64_t x = 0; x < E; ++x)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < r; ++k) pb[(o * r + k) * E + x] = b[(x * out + o) * r + k];
}

void unstack_expert_pair(const LoraAdapters::Entry& e, int64_t r, const float* pa, const float* pb, float* a,
                         float* b) {
  const int64_t E = e.experts, in = e.slot.in, out = e.slot.out;
  std::copy(pa, pa + E * r * in, a);
  for (int64_t x = 0; x < E; ++x)
    for (int64_t o = 0; o < out; ++o)
      for (int64_t k = 0; k < r; ++k) b[(x * out + o) * r + k] = pb[(o * r + k) * E + x];
}

// The path of a target below "model.layers.N." (what PEFT's suffix match sees
// of it): the tensor table's native name, less ".weight" for nn.Linear modules.
std::string relative_path(LoraTarget t) {
  std::string path = tensor_decl(lora_target_role(t)).native;
  const std::string_view weight = ".weight";
  if (path.ends_with(weight)) path.resize(path.size() - weight.size());
  return path;
}

// The targets a target_modules (parameters = false) or target_parameters entry selects.
std::vector<LoraTarget> targets_named(const std::string& name, bool parameters) {
  std::vector<LoraTarget> out;
  for (LoraTarget t : all_lora_targets()) {
    if (lora_is_expert(t) != parameters) continue;
    const std::string rel = relative_path(t);
    if (rel == name || (rel.size() > name.size() && rel.compare(rel.size() - name.size(), name.size(), name) == 0 &&
                        rel[rel.size() - name.size() - 1] == '.'))
      out.push_back(t);
  }
  return out;
}

std::string names_of(bool parameters) {
  std::string s;
  for (LoraTarget t : all_lora_targets())
    if (lora_is_expert(t) == parameters) s += (s.empty() ? "" : ", ") + std::string(lora_target_name(t));
  return s;
}

}  // namespace

std::string peft_tensor_name(const ZayaConfig& c, const LoraConfig& lora, int64_t block, LoraTarget t, bool lora_b) {
  if (!lora_is_expert(t)) return lora_b ? peft_lora_b_name(c, block, t) : peft_lora_a_name(c, block, t);
  return expert_pair_name(c, block, t, nested_inside(lora, t), lora_b);
}

void write_peft_adapter(const std::string& dir, const LoraAdapters& adapters, const std::string& base_model) {
  const ZayaConfig& c = adapters.model_config();
  const LoraConfig& lora = adapters.config();
  const int64_t r = lora.rank;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ZAYA_CHECK(!ec, "cannot create the adapter directory '{}': {}", dir, ec.message());
  // The expert pairs in PEFT's layout (the writer keeps pointers until write()).
  std::vector<std::vector<float>> stacked;
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  for (const LoraAdapters::Entry& e : adapters.entries()) {
    const float* a = adapters.data() + e.a_offset;
    const float* b = adapters.data() + e.b_offset;
    const std::string a_name = peft_tensor_name(c, lora, e.block, e.target, false);
    const std::string b_name = peft_tensor_name(c, lora, e.block, e.target, true);
    if (!lora_is_expert(e.target)) {
      w.add_f32(a_name, {r, e.slot.in}, a);
      w.add_f32(b_name, {e.slot.out, r}, b);
      continue;
    }
    std::vector<float> pa(size_t(r * e.experts * e.slot.in)), pb(size_t(e.slot.out * r * e.experts));
    stack_expert_pair(e, r, a, b, pa.data(), pb.data());
    stacked.push_back(std::move(pa));
    w.add_f32(a_name, expert_pair_shape(e, r, false), stacked.back().data());
    stacked.push_back(std::move(pb));
    w.add_f32(b_name, expert_pair_shape(e, r, true), stacked.back().data());
  }
  w.write(adapter_file(dir, kWeightsFile));
  nlohmann::json modules = nlohmann::json::array(), parameters = nlohmann::json::array();
  for (LoraTarget t : lora.targets)
    (lora_is_expert(t) ? parameters : modules).push_back(std::string(lora_target_name(t)));
  nlohmann::json j = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model},
      {"r", lora.rank},
      {"lora_alpha", lora.alpha},
      {"lora_dropout", lora.dropout},
      {"target_modules", modules},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"use_rslora", false},
      {"use_dora", false},
      {"init_lora_weights", true},
      {"inference_mode", true},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},
      {"rank_pattern", nlohmann::json::object()},
      {"alpha_pattern", nlohmann::json::object()},
      {"revision", nullptr},
  };
  // Only with expert targets: a PEFT older than target_parameters could not apply those anyway.
  if (!parameters.empty()) j["target_parameters"] = parameters;
  write_file_atomic(adapter_file(dir, kConfigFile), j.dump(2) + "\n");
}

LoraConfig read_peft_adapter_config(const std::string& dir) {
  const std::string path = adapter_file(dir, kConfigFile);
  const nlohmann::json j =
      read_json_file(path, "LoRA adapter config", "a PEFT adapter directory holds adapter_config.json");
  ZAYA_CHECK(j.is_object(), "{}: expected a JSON object", path);
  json_require(j, path, "peft_type", "LORA", "\"LORA\" (only LoRA adapters are supported)");
  json_require(j, path, "use_dora", false, "false (DoRA adapters are not supported)");
  json_require(j, path, "use_rslora", false, "false (rank-stabilised LoRA, scaling alpha / sqrt(r), is not supported)");
  json_require(j, path, "fan_in_fan_out", false, "false (the weights must be stored as [out, in])");
  json_require(j, path, "bias", "none", "\"none\" (adapters with trained biases are not supported)");
  json_require(j, path, "layers_to_transform", nullptr, "null (adapters must cover every layer)");
  json_require(j, path, "lora_bias", false, "false (LoRA biases on lora_B are not supported)");
  json_require(j, path, "use_qalora", false, "false (QA-LoRA is not supported)");
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    if (j.contains(key) && !j.at(key).is_null() && !j.at(key).empty())
      json_field_error(path, key, j.at(key), "an empty object (one rank and alpha for every module)");
  }
  // PEFT options that change what the adapter computes and that zaya cannot apply: each must be null (or empty).
  for (const auto& [key, what] : kPeftUnsupported) {
    if (j.contains(key) && !j.at(key).is_null() && !(j.at(key).is_array() && j.at(key).empty()) &&
        !(j.at(key).is_object() && j.at(key).empty()) && j.at(key) != false)
      json_field_error(path, key, j.at(key), fmt::format("null ({} is not supported)", what));
  }
  LoraConfig lora;
  lora.enabled = true;
  lora.rank = json_int(j, path, "r", 8);
  if (lora.rank < 1) json_field_error(path, "r", j.at("r"), "an integer >= 1");
  lora.alpha = json_number(j, path, "lora_alpha", 8);
  lora.dropout = json_number(j, path, "lora_dropout", 0);
  lora.targets.clear();
  // target_modules (nn.Linear modules) and target_parameters (the stacked expert parameters).
  for (const bool parameters : {false, true}) {
    const char* key = parameters ? "target_parameters" : "target_modules";
    const std::string names = names_of(parameters) + " (or a suffix of their paths below model.layers.N.)";
    const std::string allowed = "a list of names out of " + names;
    if (!j.contains(key) || j.at(key).is_null()) continue;
    if (!j.at(key).is_array()) json_field_error(path, key, j.at(key), allowed);
    for (const nlohmann::json& n : j.at(key)) {
      if (!n.is_string()) json_field_error(path, key, n, allowed);
      const std::vector<LoraTarget> found = targets_named(n.get<std::string>(), parameters);
      if (found.empty())
        fail("{}: \"{}\": LoRA target '{}' is not supported; allowed: {}", path, key, n.get<std::string>(), names);
      for (LoraTarget t : found)
        if (!lora.targets_has(t)) lora.targets.push_back(t);
    }
  }
  if (lora.targets.empty())
    json_field_error(path, "target_modules", j.value("target_modules", nlohmann::json()),
                     "a non-empty list of module names out of " + names_of(false) +
                         ", or a non-empty \"target_parameters\" out of " + names_of(true));
  // LoraAdapters lays them out in the canonical order; keep the config's in that order too.
  std::vector<LoraTarget> ordered;
  for (LoraTarget t : all_lora_targets())
    if (lora.targets_has(t)) ordered.push_back(t);
  lora.targets = ordered;
  if (lora.has_expert_targets() && lora.dropout != 0)
    json_field_error(path, "lora_dropout", j.at("lora_dropout"),
                     "0 with target_parameters (PEFT's ParamWrapper has no dropout)");
  return lora;
}

std::unique_ptr<LoraAdapters> read_peft_adapter(const std::string& dir, const ZayaConfig& c) {
  const LoraConfig lora = read_peft_adapter_config(dir);
  const int64_t r = lora.rank;
  auto adapters = std::make_unique<LoraAdapters>(c, lora);
  const std::string path = adapter_file(dir, kWeightsFile);
  const SafetensorsFile st = SafetensorsFile::open(path);
  std::set<std::string> expected;
  auto require = [&](const std::string& name, const std::vector<int64_t>& shape) {
    ZAYA_CHECK(st.has(name), "{}: tensor '{}' is missing (expected shape [{}], from the targets in {})", path, name,
               fmt::join(shape, ", "), kConfigFile);
    expected.insert(name);
  };
  auto shape_is = [&](const std::string& name, const std::vector<int64_t>& shape) {
    return st.has(name) && st.info(name).shape == shape;
  };
  for (const LoraAdapters::Entry& e : adapters->entries()) {
    float* a = adapters->data() + e.a_offset;
    float* b = adapters->data() + e.b_offset;
    if (!lora_is_expert(e.target)) {
      const std::string an = peft_lora_a_name(c, e.block, e.target), bn = peft_lora_b_name(c, e.block, e.target);
      require(an, {r, e.slot.in});
      require(bn, {e.slot.out, r});
      st.read_f32(an, a, {r, e.slot.in});
      st.read_f32(bn, b, {e.slot.out, r});
      continue;
    }
    const std::vector<int64_t> a_shape = expert_pair_shape(e, r, false), b_shape = expert_pair_shape(e, r, true);
    bool inner = nested_inside(lora, e.target);
    if (lora.targets_has(LoraTarget::kExpertGateUp) && lora.targets_has(LoraTarget::kExpertDown)) {
      // Both nested on one module: take the other nesting when only it fits this target's shapes.
      auto fits = [&](bool in) {
        return shape_is(expert_pair_name(c, e.block, e.target, in, false), a_shape) &&
               shape_is(expert_pair_name(c, e.block, e.target, in, true), b_shape);
      };
      if (!fits(inner) && fits(!inner)) inner = !inner;
    }
    const std::string an = expert_pair_name(c, e.block, e.target, inner, false);
    const std::string bn = expert_pair_name(c, e.block, e.target, inner, true);
    require(an, a_shape);
    require(bn, b_shape);
    std::vector<float> pa(size_t(a_shape[0] * a_shape[1])), pb(size_t(b_shape[0] * b_shape[1]));
    st.read_f32(an, pa.data(), a_shape);
    st.read_f32(bn, pb.data(), b_shape);
    unstack_expert_pair(e, r, pa.data(), pb.data(), a, b);
  }
  std::string targets;
  for (LoraTarget t : lora.targets) targets += (targets.empty() ? "" : ", ") + std::string(lora_target_name(t));
  for (const std::string& name : st.names()) {
    ZAYA_CHECK(expected.count(name) != 0,
               "{}: unexpected tensor '{}': an adapter of targets [{}] for this model ({} layers) holds only "
               "base_model.model.model.layers.N.<module>.lora_A.weight / lora_B.weight of those targets",
               path, name, targets, c.num_blocks);
  }
  return adapters;
}

}  // namespace zaya
