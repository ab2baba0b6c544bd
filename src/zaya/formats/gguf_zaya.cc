// Writing and reading ZAYA GGUF files (gguf_zaya.h); the mapping itself is in
// gguf_zaya_map.cc.

#include "zaya/formats/gguf_zaya.h"

#include <fmt/format.h>

#include <cstring>
#include <unordered_set>

#include "zaya/core/error.h"
#include "zaya/formats/hf_config.h"
#include "zaya/io/safetensors_header.h"
#include "zaya/io/utf8.h"
#include "zaya/model/params.h"

namespace zaya {
namespace {

// Every parameter then every buffer of `config`, in ParamTable order.
std::vector<ZayaGgufFile::LegacyTensor> legacy_tensors_of(const ZayaConfig& config) {
  std::vector<ZayaGgufFile::LegacyTensor> out;
  for (bool trainable : {true, false}) {
    const ParamTable table(config, trainable);  // a named table: entries() of a temporary would dangle
    for (const ParamEntry& e : table.entries()) out.push_back({e.name, e.shape, e.numel});
  }
  return out;
}

}  // namespace

void write_zaya_gguf(const ZayaConfig& config, const std::vector<NamedTensor>& tensors, const std::string& path,
                     const GgufSaveOptions& options) {
  const GgmlType dtype = zaya_gguf_dtype(options.dtype);
  ZAYA_CHECK(options.experts.empty() || options.experts == "mxfp4", "GGUF experts '{}' are invalid; allowed: mxfp4",
             options.experts);
  ZAYA_CHECK(options.experts.empty() || (config.hidden % 32 == 0 && config.expert_ffn % 32 == 0),
             "{}: MXFP4 experts need hidden and expert_ffn multiples of 32 (this model: {}, {})", path, config.hidden,
             config.expert_ffn);
  std::unordered_map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : tensors) {
    if (config.tie_word_embeddings && t.name == "lm_head.weight") continue;  // tied (spec §6.1)
    ZAYA_CHECK(by_name.emplace(t.name, &t).second, "{}: tensor '{}' given twice", path, t.name);
  }
  std::unordered_set<std::string> expected;
  for (const auto& legacy : legacy_tensors_of(config)) {
    auto it = by_name.find(legacy.name);
    ZAYA_CHECK(it != by_name.end(), "{}: tensor '{}' (shape {}) is missing; the GGUF export needs the whole model",
               path, legacy.name, format_shape(legacy.shape));
    ZAYA_CHECK(it->second->shape == legacy.shape, "{}: tensor '{}' has shape {}, the config gives {}", path,
               legacy.name, format_shape(it->second->shape), format_shape(legacy.shape));
    ZAYA_CHECK(it->second->data != nullptr || legacy.numel == 0, "{}: tensor '{}' has no data", path, legacy.name);
    expected.insert(legacy.name);
  }
  for (const NamedTensor& t : tensors)
    ZAYA_CHECK((config.tie_word_embeddings && t.name == "lm_head.weight") || expected.count(t.name) != 0,
               "{}: unexpected tensor '{}' (not part of this config's model)", path, t.name);

  GgufWriter w(options.alignment);
  write_zaya_gguf_metadata(config, options, w);
  for (const ZayaGgufTensor& t : zaya_gguf_tensor_map(config)) {
    std::vector<std::span<const float>> pieces;
    bool keep_f32 = t.keep_f32;
    for (const ZayaGgufSegment& s : t.segments) {
      const NamedTensor& src = *by_name.at(s.legacy_name);
      keep_f32 = keep_f32 || src.always_f32;
      pieces.emplace_back(src.data + s.first, static_cast<size_t>(s.count));
    }
    w.add_f32_pieces(t.name, t.shape, std::move(pieces),
                     keep_f32 ? GgmlType::kF32 : zaya_gguf_tensor_type(t, dtype, options.experts == "mxfp4"));
  }
  w.write(path);
}

void save_gguf_model(const ZayaModel& model, const std::string& path, const GgufSaveOptions& options) {
  write_zaya_gguf(model.config(), complete_model_tensors(model), path, options);
}

ZayaGgufFile ZayaGgufFile::open(const std::string& path) {
  GgufFile file = GgufFile::open(path);
  ZayaConfig config = zaya_config_from_gguf(file.metadata());
  return ZayaGgufFile(std::move(file), config);
}

ZayaGgufFile::ZayaGgufFile(GgufFile file, ZayaConfig config)
    : file_(std::move(file)), config_(config), legacy_(legacy_tensors_of(config_)) {
  for (size_t i = 0; i < legacy_.size(); ++i) legacy_index_.emplace(legacy_[i].name, i);
  sources_.resize(legacy_.size());
  const std::vector<ZayaGgufTensor> map = zaya_gguf_tensor_map(config_);
  check_zaya_gguf_tensors(file_.path(), map, file_.tensors());
  for (const ZayaGgufTensor& t : map) {
    uint64_t at = 0;
    for (const ZayaGgufSegment& s : t.segments) {
      sources_[legacy_index_.at(s.legacy_name)].push_back({t.name, at, s.first, s.count});
      at += static_cast<uint64_t>(s.count);
    }
  }
}

const std::vector<ZayaGgufFile::Source>& ZayaGgufFile::sources_of(const std::string& name,
                                                                  const std::vector<int64_t>& expected_shape) const {
  auto it = legacy_index_.find(name);
  ZAYA_CHECK(it != legacy_index_.end(), "{}: the model of this file has no tensor '{}'", file_.path(), name);
  const LegacyTensor& t = legacy_[it->second];
  ZAYA_CHECK(t.shape == expected_shape, "{}: tensor '{}': expected shape {}, the file's config gives {}", file_.path(),
             name, format_shape(expected_shape), format_shape(t.shape));
  return sources_[it->second];
}

void ZayaGgufFile::read_legacy(const std::string& name, float* dst, const std::vector<int64_t>& expected_shape) const {
  for (const Source& s : sources_of(name, expected_shape))
    file_.read_f32_range(s.gguf_name, s.gguf_first, static_cast<uint64_t>(s.count), dst + s.legacy_first);
}

bool ZayaGgufFile::has_q8_0() const {
  for (const GgufTensorInfo& t : file_.tensors())
    if (t.type == GgmlType::kQ8_0) return true;
  return false;
}

bool ZayaGgufFile::is_q8_0(const std::string& name) const {
  auto it = legacy_index_.find(name);
  if (it == legacy_index_.end()) return false;
  for (const Source& s : sources_[it->second])
    if (file_.tensor(s.gguf_name).type != GgmlType::kQ8_0) return false;
  return !sources_[it->second].empty();
}

void ZayaGgufFile::read_legacy_q8_0(const std::string& name, uint8_t* dst,
                                    const std::vector<int64_t>& expected_shape) const {
  ZAYA_CHECK(is_q8_0(name), "{}: tensor '{}' is not stored as Q8_0", file_.path(), name);
  for (const Source& s : sources_of(name, expected_shape)) {
    const std::span<const uint8_t> src = file_.range_bytes(s.gguf_name, s.gguf_first, static_cast<uint64_t>(s.count));
    std::memcpy(dst + ggml_nbytes(GgmlType::kQ8_0, static_cast<uint64_t>(s.legacy_first)), src.data(), src.size());
  }
}

ZayaGgufContents read_zaya_gguf(const std::string& path) {
  const ZayaGgufFile file = ZayaGgufFile::open(path);
  ZayaGgufContents out;
  out.config = file.config();
  for (const auto& t : file.legacy_tensors()) {
    ZayaTensorData d{t.name, t.shape, std::vector<float>(static_cast<size_t>(t.numel))};
    file.read_legacy(t.name, d.data.data(), t.shape);
    out.tensors.push_back(std::move(d));
  }
  return out;
}

void load_gguf_weights(ZayaModel& model, const ZayaGgufFile& file, bool skip_q8_0) {
  // Same config, compared through its complete JSON form.
  ZAYA_CHECK(config_to_hf_json(model.config(), "float32") == config_to_hf_json(file.config(), "float32"),
             "{}: the file's model config differs from the model being loaded", file.gguf().path());
  for (const ParamEntry& e : model.params().entries())
    if (!skip_q8_0 || !file.is_q8_0(e.name)) file.read_legacy(e.name, model.param_data() + e.offset, e.shape);
  for (const ParamEntry& e : model.buffers().entries())
    file.read_legacy(e.name, model.buffer_data() + e.offset, e.shape);
}

void load_gguf_weights(ZayaModel& model, const std::string& path) {
  load_gguf_weights(model, ZayaGgufFile::open(path));
}

std::unique_ptr<ZayaModel> load_gguf_model(const std::string& path) {
  const ZayaGgufFile file = ZayaGgufFile::open(path);
  auto model = std::make_unique<ZayaModel>(file.config());
  load_gguf_weights(*model, file);
  return model;
}

}  // namespace zaya
