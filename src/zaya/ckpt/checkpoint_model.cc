#include "zaya/ckpt/checkpoint_model.h"

#include <toml++/toml.h>

#include <filesystem>

#include "zaya/core/error.h"
#include "zaya/formats/gguf_zaya.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/model_directory.h"
#include "zaya/io/safetensors_header.h"
#include "zaya/model/config_toml.h"

namespace zaya {
namespace {

// The training config of a checkpoint as TOML (older checkpoints).
toml::table config_table(const CheckpointReader& ck) {
  try {
    return toml::parse(ck.meta().config_toml, ck.dir() + "/metadata.json (config)");
  } catch (const toml::parse_error& err) {
    fail("{}/metadata.json: the recorded training config is not valid TOML: {}", ck.dir(), err.description());
  }
}

}  // namespace

nlohmann::json checkpoint_model_json(const ZayaConfig& config) { return config_to_hf_json(config, "float32"); }

ZayaConfig checkpoint_model_config(const CheckpointReader& ck) {
  const CheckpointMeta& meta = ck.meta();
  if (!meta.model_config.is_null()) return config_from_hf_json(meta.model_config, ck.dir() + "/metadata.json (model)");
  const toml::table root = config_table(ck);
  const ModelTable model = parse_model_table(root["model"].as_table(), ck.dir() + "/metadata.json (config)");
  model.config.validate(ck.dir() + "/metadata.json (config)");
  return model.config;
}

std::string checkpoint_tokenizer(const CheckpointReader& ck) {
  const CheckpointMeta& meta = ck.meta();
  if (!meta.model_config.is_null()) return meta.tokenizer;
  const toml::table root = config_table(ck);
  return root["data"]["tokenizer"].value_or(std::string());
}

std::unique_ptr<ZayaModel> load_checkpoint_model(const CheckpointReader& ck) {
  auto model = std::make_unique<ZayaModel>(checkpoint_model_config(ck));
  auto read_table = [&](const ParamTable& table, float* base) {
    for (const ParamEntry& e : table.entries()) {
      ZAYA_CHECK(ck.has(e.name), "{}: missing tensor '{}' (shape {}); the checkpoint does not match its config",
                 ck.dir(), e.name, format_shape(e.shape));
      ck.read(e.name, base + e.offset, CkptDType::kF32, e.shape);
    }
  };
  read_table(model->params(), model->param_data());
  read_table(model->buffers(), model->buffer_data());
  return model;
}

std::unique_ptr<ZayaModel> load_reference_model(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) return load_gguf_model(path);
  if (std::filesystem::exists(std::filesystem::path(path) / "metadata.json", ec))
    return load_checkpoint_model(CheckpointReader::open(path));
  return load_model_directory(path);  // either layout
}

}  // namespace zaya
