#include "zaya/formats/hf_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "zaya/core/error.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/native_config.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_dir.h"
#include "zaya/io/safetensors_header.h"
#include "zaya/model/tensor_table.h"

namespace zaya {

void save_hf_tensors(const ZayaConfig& config, const std::vector<NamedTensor>& tensors, const std::string& dir,
                     const HfSaveOptions& options) {
  ZAYA_CHECK(options.dtype == "f32" || options.dtype == "bf16", "save dtype '{}' is invalid; allowed: f32, bf16",
             options.dtype);
  ZAYA_CHECK(options.experts.empty(), "quantized experts ({}) are written in the native layout only", options.experts);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ZAYA_CHECK(!ec, "cannot create directory '{}': {}", dir, ec.message());
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  for (const NamedTensor& t : tensors) {
    if (options.dtype == "bf16" && !t.always_f32)
      w.add_bf16(t.name, t.shape, t.data);
    else
      w.add_f32(t.name, t.shape, t.data);
  }
  write_sharded(dir, w, options.max_shard_bytes);
  const std::string dtype = options.dtype == "bf16" ? "bfloat16" : "float32";
  write_file_atomic((std::filesystem::path(dir) / "config.json").string(),
                    config_to_hf_json(config, dtype).dump(2) + "\n");
}

std::vector<NamedTensor> complete_model_tensors(const ZayaModel& model) {
  ZAYA_CHECK(model.params().experts().count == model.config().experts,
             "this rank holds experts {}..{} of {}: gather every expert before saving a complete model",
             model.params().experts().first, model.params().experts().first + model.params().experts().count - 1,
             model.config().experts);
  std::vector<NamedTensor> tensors;
  for (const ParamEntry& e : model.params().entries())
    tensors.push_back({e.name, e.shape, model.param_data() + e.offset, false});
  for (const ParamEntry& e : model.buffers().entries())
    tensors.push_back({e.name, e.shape, model.buffer_data() + e.offset, true});
  return tensors;
}

void save_hf_model(const ZayaModel& model, const std::string& dir, const HfSaveOptions& options) {
  save_hf_tensors(model.config(), complete_model_tensors(model), dir, options);
}

void load_hf_weights(ZayaModel& model, const std::string& dir) {
  SafetensorsDir st = SafetensorsDir::open(dir);
  std::set<std::string> expected;
  auto load_table = [&](const ParamTable& table, float* base) {
    for (const ParamEntry& e : table.entries()) {
      expected.insert(e.name);
      ZAYA_CHECK(st.has(e.name), "{}: missing tensor '{}' (shape {}); the checkpoint does not match config.json", dir,
                 e.name, fmt::join(e.shape, "x"));
      st.read_f32(e.name, base + e.offset, e.shape);
    }
  };
  load_table(model.params(), model.param_data());
  load_table(model.buffers(), model.buffer_data());
  for (const std::string& name : st.names()) {
    if (expected.count(name)) continue;
    if (model.config().tie_word_embeddings && name == "lm_head.weight") continue;  // tied (spec §6.1)
    fail("{}: unexpected tensor '{}' (not part of this model's layout; wrong config.json?)", dir, name);
  }
}

std::unique_ptr<ZayaModel> load_hf_model(const std::string& dir) {
  ZayaConfig config = load_hf_config((std::filesystem::path(dir) / "config.json").string());
  auto model = std::make_unique<ZayaModel>(config);
  load_hf_weights(*model, dir);
  return model;
}

}  // namespace zaya
