#include "zaya/model/lora_peft.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_file.h"
#include "zaya/io/safetensors_writer.h"

namespace zaya {

namespace {

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

std::string join(const std::string& dir, const char* file) { return (std::filesystem::path(dir) / file).string(); }

}  // namespace

std::string peft_lora_a_name(const ZayaConfig& c, int64_t block, LoraTarget t) {
  return "base_model.model." + lora_module_path(c, block, t) + ".lora_A.weight";
}

std::string peft_lora_b_name(const ZayaConfig& c, int64_t block, LoraTarget t) {
  return "base_model.model." + lora_module_path(c, block, t) + ".lora_B.weight";
}

void write_peft_adapter(const std::string& dir, const LoraAdapters& adapters, const std::string& base_model) {
  const ZayaConfig& c = adapters.model_config();
  const LoraConfig& lora = adapters.config();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ZAYA_CHECK(!ec, "cannot create the adapter directory '{}': {}", dir, ec.message());
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  for (const LoraAdapters::Entry& e : adapters.entries()) {
    w.add_f32(peft_lora_a_name(c, e.block, e.target), {lora.rank, e.slot.in}, adapters.data() + e.a_offset);
    w.add_f32(peft_lora_b_name(c, e.block, e.target), {e.slot.out, lora.rank}, adapters.data() + e.b_offset);
  }
  w.write(join(dir, kWeightsFile));
  nlohmann::json targets = nlohmann::json::array();
  for (LoraTarget t : lora.targets) targets.push_back(std::string(lora_target_name(t)));
  nlohmann::json j = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", base_model},
      {"r", lora.rank},
      {"lora_alpha", lora.alpha},
      {"lora_dropout", lora.dropout},
      {"target_modules", targets},
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
  write_file_atomic(join(dir, kConfigFile), j.dump(2) + "\n");
}

LoraConfig read_peft_adapter_config(const std::string& dir) {
  const std::string path = join(dir, kConfigFile);
  const nlohmann::json j =
      read_json_file(path, "LoRA adapter config", "a PEFT adapter directory holds adapter_config.json");
  ZAYA_CHECK(j.is_object(), "{}: expected a JSON object", path);
  json_require(j, path, "peft_type", "LORA", "only LoRA adapters are supported");
  json_require(j, path, "use_dora", false, "DoRA adapters are not supported");
  json_require(j, path, "use_rslora", false, "rank-stabilised LoRA is not supported");
  json_require(j, path, "fan_in_fan_out", false, "the weights must be stored as [out, in]");
  json_require(j, path, "bias", "none", "adapters with trained biases are not supported");
  json_require(j, path, "layers_to_transform", nullptr, "adapters must cover every layer");
  for (const char* key : {"rank_pattern", "alpha_pattern"}) {
    if (j.contains(key) && !j.at(key).is_null() && !j.at(key).empty())
      json_field_error(path, key, j.at(key), "an empty object (one rank and alpha for every module)");
  }
  if (j.contains("modules_to_save") && !j.at("modules_to_save").is_null() && !j.at("modules_to_save").empty())
    json_field_error(path, "modules_to_save", j.at("modules_to_save"), "null (no fully trained modules)");
  LoraConfig lora;
  lora.enabled = true;
  lora.rank = json_int(j, path, "r", 8);
  if (lora.rank < 1) json_field_error(path, "r", j.at("r"), "an integer >= 1");
  lora.alpha = json_number(j, path, "lora_alpha", 8);
  lora.dropout = json_number(j, path, "lora_dropout", 0);
  if (!j.contains("target_modules") || !j.at("target_modules").is_array() || j.at("target_modules").empty()) {
    json_field_error(path, "target_modules", j.value("target_modules", nlohmann::json()),
                     "a non-empty list of module names out of " + lora_target_names());
  }
  lora.targets.clear();
  for (const nlohmann::json& t : j.at("target_modules")) {
    if (!t.is_string()) json_field_error(path, "target_modules", t, "module names out of " + lora_target_names());
    const LoraTarget target = parse_lora_target(t.get<std::string>(), path + ": \"target_modules\"");
    if (!lora.targets_has(target)) lora.targets.push_back(target);
  }
  return lora;
}

std::unique_ptr<LoraAdapters> read_peft_adapter(const std::string& dir, const ZayaConfig& c) {
  const LoraConfig lora = read_peft_adapter_config(dir);
  auto adapters = std::make_unique<LoraAdapters>(c, lora);
  const std::string path = join(dir, kWeightsFile);
  const SafetensorsFile st = SafetensorsFile::open(path);
  std::set<std::string> expected;
  for (const LoraAdapters::Entry& e : adapters->entries()) {
    const std::string a = peft_lora_a_name(c, e.block, e.target), b = peft_lora_b_name(c, e.block, e.target);
    for (const auto& [name, shape] : {std::pair{a, std::vector<int64_t>{lora.rank, e.slot.in}},
                                      std::pair{b, std::vector<int64_t>{e.slot.out, lora.rank}}}) {
      ZAYA_CHECK(st.has(name), "{}: tensor '{}' is missing (expected shape [{}], from target_modules in {})", path,
                 name, fmt::join(shape, ", "), kConfigFile);
      expected.insert(name);
    }
    st.read_f32(a, adapters->data() + e.a_offset, {lora.rank, e.slot.in});
    st.read_f32(b, adapters->data() + e.b_offset, {e.slot.out, lora.rank});
  }
  std::string targets;
  for (LoraTarget t : lora.targets) targets += (targets.empty() ? "" : ", ") + std::string(lora_target_name(t));
  for (const std::string& name : st.names()) {
    ZAYA_CHECK(expected.count(name) != 0,
               "{}: unexpected tensor '{}': an adapter of target_modules [{}] for this model ({} layers) holds "
               "only base_model.model.model.layers.N.self_attn.<module>.lora_A.weight / lora_B.weight",
               path, name, targets, c.num_blocks);
  }
  return adapters;
}

}  // namespace zaya
