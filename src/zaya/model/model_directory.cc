#include "zaya/model/model_directory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_dir.h"
#include "zaya/model/hf_config.h"
#include "zaya/model/native_config.h"
#include "zaya/model/tensor_table.h"

namespace zaya {

ZayaConfig read_model_directory_config(const std::string& dir, bool* native) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  const nlohmann::json j = read_json_file(path, "", "a model directory holds config.json and the safetensors weights");
  const bool is_native = is_native_zaya_config(j);
  if (native != nullptr) *native = is_native;
  return is_native ? native_config_from_json(j, path) : config_from_hf_json(j, path);
}

std::unique_ptr<ZayaModel> load_model_directory(const std::string& dir, bool* native) {
  auto model = std::make_unique<ZayaModel>(read_model_directory_config(dir, native));
  load_model_directory_weights(*model, dir);
  return model;
}

void load_model_directory_weights(ZayaModel& model, const std::string& dir) {
  load_model_directory_tensors(dir, model.config(), model.params(), model.param_data(), model.buffers(),
                               model.buffer_data());
}

void load_model_directory_tensors(const std::string& dir, const ZayaConfig& c, const ParamTable& params,
                                  float* param_data, const ParamTable& buffers, float* buffer_data) {
  bool native = false;
  read_model_directory_config(dir, &native);
  const SafetensorsDir st = SafetensorsDir::open(dir);
  // Every name the complete model has in this layout (other ranks' experts included).
  std::set<std::string> known;
  for (const ParamTable& table : {ParamTable(c, true), ParamTable(c, false)})
    for (const ParamEntry& e : table.entries())
      known.insert(native ? native_tensor_ref(e.role, e.half_layer, e.expert, c).name : e.name);
  std::map<std::string, std::vector<float>> stacked;  // native [E, ...] tensors, read once each
  auto load_table = [&](const ParamTable& table, float* base) {
    for (const ParamEntry& e : table.entries()) {
      const NativeTensorRef r = native ? native_tensor_ref(e.role, e.half_layer, e.expert, c) : NativeTensorRef{e.name};
      std::vector<int64_t> shape = e.shape;
      if (r.expert >= 0) shape.insert(shape.begin(), c.experts);
      ZAYA_CHECK(st.has(r.name), "{}: missing tensor '{}' (shape {}); the checkpoint does not match config.json", dir,
                 r.name, fmt::join(shape, "x"));
      if (r.expert < 0) {
        st.read_f32(r.name, base + e.offset, e.shape);
        continue;
      }
      auto it = stacked.find(r.name);
      if (it == stacked.end()) {
        it = stacked.emplace(r.name, std::vector<float>(size_t(c.experts * e.numel))).first;
        st.read_f32(r.name, it->second.data(), shape);
      }
      std::copy_n(it->second.data() + r.expert * e.numel, e.numel, base + e.offset);
    }
  };
  load_table(params, param_data);
  load_table(buffers, buffer_data);
  for (const std::string& name : st.names())
    if (!known.count(name) && !(c.tie_word_embeddings && name == "lm_head.weight"))
      fail("{}: unexpected tensor '{}' (not part of the {} layout config.json describes; wrong config.json?)", dir,
           name, native ? "native" : "legacy");
}

void save_native_tensors(const ZayaConfig& config, const std::vector<NamedTensor>& tensors, const std::string& dir,
                         const HfSaveOptions& options) {
  ZAYA_CHECK(options.dtype == "f32" || options.dtype == "bf16", "save dtype '{}' is invalid; allowed: f32, bf16",
             options.dtype);
  const nlohmann::json config_json = config_to_native_json(config, options.dtype == "bf16" ? "bfloat16" : "float32");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ZAYA_CHECK(!ec, "cannot create directory '{}': {}", dir, ec.message());
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  struct Stack {
    std::vector<int64_t> shape;
    std::vector<float> values;
    std::vector<bool> filled;
    bool always_f32 = false;
  };
  std::map<std::string, Stack> stacks;
  std::vector<std::string> order;  // stacked tensors in first-seen order
  auto add = [&](const std::string& name, const std::vector<int64_t>& shape, const float* data, bool f32) {
    if (options.dtype == "bf16" && !f32)
      w.add_bf16(name, shape, data);
    else
      w.add_f32(name, shape, data);
  };
  for (const NamedTensor& t : tensors) {
    const NativeTensorRef r = native_tensor_for(t.name, config);
    if (r.expert < 0) {
      add(r.name, t.shape, t.data, t.always_f32);
      continue;
    }
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    auto [it, fresh] = stacks.try_emplace(r.name);
    Stack& s = it->second;
    if (fresh) {
      order.push_back(r.name);
      s.shape = t.shape;
      s.shape.insert(s.shape.begin(), config.experts);
      s.values.resize(size_t(config.experts * numel));
      s.filled.assign(size_t(config.experts), false);
      s.always_f32 = t.always_f32;
    }
    ZAYA_CHECK(!s.filled[size_t(r.expert)], "internal error: expert {} of '{}' given twice", r.expert, r.name);
    s.filled[size_t(r.expert)] = true;
    std::copy_n(t.data, numel, s.values.begin() + r.expert * numel);
  }
  for (const std::string& name : order) {
    const Stack& s = stacks.at(name);
    ZAYA_CHECK(std::all_of(s.filled.begin(), s.filled.end(), [](bool f) { return f; }),
               "'{}': every expert is needed to write the native layout (gather them first)", name);
    add(name, s.shape, s.values.data(), s.always_f32);
  }
  write_sharded(dir, w, options.max_shard_bytes);
  write_file_atomic((std::filesystem::path(dir) / "config.json").string(), config_json.dump(2) + "\n");
}

DirectoryLayout parse_directory_layout(const std::string& name, const std::string& what) {
  if (name == "legacy") return DirectoryLayout::kLegacy;
  if (name == "native") return DirectoryLayout::kNative;
  fail(
      "{} '{}' is invalid; allowed: legacy (ZAYA1-base's 80 half-layers), native (the 40-layer layout of ZAYA1-8B "
      "and later)",
      what, name);
}

const char* directory_layout_name(DirectoryLayout layout) {
  return layout == DirectoryLayout::kNative ? "native" : "legacy";
}

std::vector<int> live_skip_half_layers(const ZayaConfig& c, const ParamTable& buffers, const float* buffer_data) {
  std::vector<int> live;
  if (!c.use_skip) return live;
  for (const ParamEntry& e : buffers.entries()) {
    if (e.role != TensorRole::kBalancingBias) continue;
    const float* b = buffer_data + e.offset;
    std::vector<float> experts(b, b + c.experts);
    std::sort(experts.begin(), experts.end(), std::greater<float>());
    const float kth = experts[size_t(std::min<int64_t>(c.top_k, c.experts) - 1)];
    if (!(1.0f + b[c.skip_slot()] < kth)) live.push_back(e.half_layer);
  }
  return live;
}

std::string native_export_problem(const ZayaConfig& c, const ParamTable& buffers, const float* buffer_data,
                                  const std::string& source) {
  if (const std::string why = native_layout_problem(c); !why.empty())
    return fmt::format("{} has no native layout: {}", source, why);
  const std::vector<int> live = live_skip_half_layers(c, buffers, buffer_data);
  if (live.empty()) return "";
  return fmt::format(
      "{} cannot be written in the native layout exactly: in half-layer(s) {} the balancing biases let the skip "
      "slot be chosen, where this model computes p_skip * x (legacy) and the native layout 0 (docs/spec.md §8.1); "
      "write the legacy layout",
      source, fmt::join(live, ", "));
}

void save_model_directory(const ZayaConfig& config, const std::vector<NamedTensor>& tensors, const std::string& dir,
                          DirectoryLayout layout, const HfSaveOptions& options) {
  if (layout == DirectoryLayout::kNative)
    save_native_tensors(config, tensors, dir, options);
  else
    save_hf_tensors(config, tensors, dir, options);
}

}  // namespace zaya
