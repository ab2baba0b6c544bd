#include "zaya/formats/model_directory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "zaya/core/error.h"
#include "zaya/core/fp8.h"
#include "zaya/core/mxfp4.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/native_config.h"
#include "zaya/formats/quantized_experts.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_dir.h"
#include "zaya/model/tensor_table.h"

namespace zaya {

ZayaConfig read_model_directory_config(const std::string& dir, bool* native) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  const nlohmann::json j = read_json_file(path, "", "a model directory holds config.json and the safetensors weights");
  const bool is_native = is_native_zaya_config(j);
  if (native != nullptr) *native = is_native;
  return is_native ? native_config_from_json(j, path) : config_from_hf_json(j, path);
}

std::unique_ptr<ZayaModel> load_model_directory(const std::string& dir, bool* native, WeightType expert_type) {
  auto model = std::make_unique<ZayaModel>(read_model_directory_config(dir, native), ExpertRange{}, ParamStorage::kF32,
                                           expert_type);
  load_model_directory_weights(*model, dir);
  return model;
}

namespace {

// Drops the mapped file pages wholly inside `bytes` from this process (they
// stay in the page cache): a tensor copied out of its mapping need not count
// in the resident set while the rest of the model loads.
void release_mapped_pages(const uint8_t* begin, size_t n) {
  const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(begin) + n) / page * page;
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);  // advice only: a failure changes nothing
}

// Where the loader puts each parameter: float32 values, or (when `bf16` is
// set) a BF16 tensor's bits as stored, without widening.
struct ParamSink {
  std::function<void(const ParamEntry&, const float*)> f32;
  std::function<void(const ParamEntry&, const uint16_t*)> bf16;
  // When set: a quantized expert's packed rows (the checkpoint's type), taken as stored when it returns true.
  std::function<bool(const ParamEntry&, WeightType, const uint8_t*)> packed;
};

void load_tensors(const std::string& dir, const ZayaConfig& c, const ParamTable& params, const ParamSink& sink,
                  const ParamTable& buffers, float* buffer_data) {
  bool native = false;
  read_model_directory_config(dir, &native);
  const SafetensorsDir st = SafetensorsDir::open(dir);
  // Quantized routed experts (formats/quantized_experts.h) are read dequantized to float32 here.
  const std::string config_path = (std::filesystem::path(dir) / "config.json").string();
  const ExpertQuant quant = native ? parse_expert_quant(read_json_file(config_path), config_path) : ExpertQuant{};
  std::set<std::string> quant_used;
  std::vector<uint8_t> packed;
  // Every name the complete model has in this layout (other ranks' experts included).
  std::set<std::string> known;
  for (const ParamTable& table : {ParamTable(c, true), ParamTable(c, false)})
    for (const ParamEntry& e : table.entries())
      known.insert(native ? native_tensor_ref(e.role, e.half_layer, e.expert, c).name : e.name);
  // A native [E, ...] tensor read as float32, kept while its experts follow each other in the table.
  std::string stacked_name;
  std::vector<float> stacked;
  std::vector<float> values;
  auto load_table = [&](const ParamTable& table, const ParamSink& to) {
    for (const ParamEntry& e : table.entries()) {
      const NativeTensorRef r = native ? native_tensor_ref(e.role, e.half_layer, e.expert, c) : NativeTensorRef{e.name};
      std::vector<int64_t> shape = e.shape;
      if (r.expert >= 0) shape.insert(shape.begin(), c.experts);
      if (quant.quantized() && (e.role == TensorRole::kExpertFc1 || e.role == TensorRole::kExpertFc2)) {
        const int64_t rows = e.shape[0], cols = e.shape[1], rb = weight_row_bytes(quant.weight_type(), cols);
        packed.resize(size_t(rows * rb));
        read_quantized_expert(st, quant, r.name, c.experts, r.expert, rows, cols, packed.data(), quant_used);
        if (to.packed && to.packed(e, quant.weight_type(), packed.data())) continue;
        values.resize(size_t(e.numel));
        for (int64_t i = 0; i < rows; ++i)
          weight_row_f32(quant.weight_type(), packed.data(), cols, i, values.data() + i * cols);
        to.f32(e, values.data());
        continue;
      }
      ZAYA_CHECK(st.has(r.name), "{}: missing tensor '{}' (shape {}); the checkpoint does not match config.json", dir,
                 r.name, fmt::join(shape, "x"));
      const int64_t first = r.expert >= 0 ? r.expert * e.numel : 0;  // this entry's first element in the tensor
      if (to.bf16) {
        // BF16 on disk: the stored bits, straight from the mapping (one tensor at a time).
        const SafetensorsTensorInfo& info = st.info(r.name);
        const std::span<const uint8_t> bytes = st.bytes(r.name);
        if (info.dtype == SafetensorsDtype::kBF16 && info.shape == shape &&
            reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint16_t) == 0) {
          to.bf16(e, reinterpret_cast<const uint16_t*>(bytes.data()) + first);
          release_mapped_pages(bytes.data() + first * 2, size_t(e.numel) * 2);
          continue;
        }
      }
      if (r.expert < 0) {
        values.resize(size_t(e.numel));
        st.read_f32(r.name, values.data(), e.shape);
        to.f32(e, values.data());
        continue;
      }
      if (stacked_name != r.name) {
        stacked.resize(size_t(c.experts * e.numel));
        st.read_f32(r.name, stacked.data(), shape);
        stacked_name = r.name;
      }
      to.f32(e, stacked.data() + first);
    }
  };
  load_table(params, sink);
  ParamSink to_buffers;
  to_buffers.f32 = [&](const ParamEntry& e, const float* v) { std::copy_n(v, e.numel, buffer_data + e.offset); };
  load_table(buffers, to_buffers);
  for (const std::string& name : st.names())
    if (!known.count(name) && !quant_used.count(name) && !(c.tie_word_embeddings && name == "lm_head.weight"))
      fail("{}: unexpected tensor '{}' (not part of the {} layout config.json describes; wrong config.json?)", dir,
           name, native ? "native" : "legacy");
}

}  // namespace

void load_model_directory_weights(ZayaModel& model, const std::string& dir) {
  ParamSink sink;
  sink.f32 = [&](const ParamEntry& e, const float* v) { model.set_param(e, v); };
  // A frozen bf16 base takes BF16 tensors as stored (no float32 of them ever exists).
  if (model.storage() == ParamStorage::kFrozenBf16)
    sink.bf16 = [&](const ParamEntry& e, const uint16_t* bits) { model.set_param_bf16(e, bits); };
  // A quantized LoRA base (model/model.h) takes experts of its own type as stored (no float32 of them exists).
  if (model.expert_type() != WeightType::kF32)
    sink.packed = [&](const ParamEntry& e, WeightType type, const uint8_t* rows) {
      if (!model.holds_packed(e, type)) return false;
      model.set_param_packed(e, rows);
      return true;
    };
  load_tensors(dir, model.config(), model.params(), sink, model.buffers(), model.buffer_data());
}

void load_model_directory_tensors(const std::string& dir, const ZayaConfig& c, const ParamTable& params,
                                  float* param_data, const ParamTable& buffers, float* buffer_data) {
  ParamSink sink;
  sink.f32 = [&](const ParamEntry& e, const float* v) { std::copy_n(v, e.numel, param_data + e.offset); };
  load_tensors(dir, c, params, sink, buffers, buffer_data);
}

void save_native_tensors(const ZayaConfig& config, const std::vector<NamedTensor>& tensors, const std::string& dir,
                         const HfSaveOptions& options) {
  ZAYA_CHECK(options.dtype == "f32" || options.dtype == "bf16", "save dtype '{}' is invalid; allowed: f32, bf16",
             options.dtype);
  nlohmann::json config_json = config_to_native_json(config, options.dtype == "bf16" ? "bfloat16" : "float32");
  ZAYA_CHECK(options.experts.empty() || options.experts == "mxfp4" || options.experts == "fp8",
             "quantized experts '{}' are invalid; allowed: mxfp4, fp8", options.experts);
  if (!options.experts.empty())
    config_json["quantization_config"] =
        options.experts == "mxfp4" ? mxfp4_quantization_config() : fp8_quantization_config();
  std::deque<std::vector<uint8_t>> packed;  // the quantized experts' bytes, alive until written (stable)
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
    if (options.experts.empty() || s.shape.size() != 3) {
      add(name, s.shape, s.values.data(), s.always_f32);
      continue;
    }
    const int64_t E = s.shape[0], rows = s.shape[1], cols = s.shape[2];
    if (options.experts == "fp8") {  // compressed-tensors float-quantized, channel (core/fp8.h): E4M3, one scale a row
      std::vector<uint8_t>& codes = packed.emplace_back(size_t(E * rows * cols));
      std::vector<uint8_t>& scales = packed.emplace_back(size_t(E * rows * 4));
      std::vector<uint8_t> row(size_t(fp8_row_bytes(cols)));
      for (int64_t r = 0; r < E * rows; ++r) {
        quantize_fp8_channel_row(s.values.data() + r * cols, cols, row.data());
        std::copy_n(row.data(), cols, codes.begin() + r * cols);
        std::copy_n(row.data() + cols, 4, scales.begin() + r * 4);  // the row's scale (every group holds it)
      }
      w.add_raw(name + ".weight", SafetensorsDtype::kF8E4M3, {E, rows, cols}, codes.data());
      w.add_raw(name + ".weight_scale", SafetensorsDtype::kF32, {E, rows, 1}, scales.data());
      continue;
    }
    // compressed-tensors mxfp4-pack-quantized (core/mxfp4.h): per row the packed codes, then the E8M0 scales.
    ZAYA_CHECK(cols % kMxBlock == 0, "'{}': {} columns; MXFP4 experts need a multiple of 32", name, cols);
    std::vector<uint8_t>& codes = packed.emplace_back(size_t(E * rows * cols / 2));
    std::vector<uint8_t>& scales = packed.emplace_back(size_t(E * rows * cols / kMxBlock));
    std::vector<uint8_t> row(size_t(mxfp4_row_bytes(cols)));
    for (int64_t r = 0; r < E * rows; ++r) {
      quantize_mxfp4_row(s.values.data() + r * cols, cols, row.data());
      std::copy_n(row.data(), cols / 2, codes.begin() + r * (cols / 2));
      std::copy_n(row.data() + cols / 2, cols / kMxBlock, scales.begin() + r * (cols / kMxBlock));
    }
    w.add_raw(name + ".weight_packed", SafetensorsDtype::kU8, {E, rows, cols / 2}, codes.data());
    w.add_raw(name + ".weight_scale", SafetensorsDtype::kU8, {E, rows, cols / kMxBlock}, scales.data());
  }
  write_sharded(dir, w, options.max_shard_bytes);
  write_file_atomic((std::filesystem::path(dir) / "config.json").string(), config_json.dump(2) + "\n");
}

DirectoryLayout parse_directory_layout(const std::string& name, const std::string& what) {
  if (const DirectoryLayout* layout = enum_find<DirectoryLayout>(kDirectoryLayoutNames, name)) return *layout;
  fail(
      "{} '{}' is invalid; allowed: legacy (ZAYA1-base's 80 half-layers), native (the 40-layer layout of ZAYA1-8B "
      "and later)",
      what, name);
}

const char* directory_layout_name(DirectoryLayout layout) {
  return enum_name<DirectoryLayout>(kDirectoryLayoutNames, layout);
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
  if (c.skip_output_zero) return "";  // the native rule already: the layout computes the same whatever is chosen
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
