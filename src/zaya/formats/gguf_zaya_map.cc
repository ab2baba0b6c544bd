// The ZAYA <-> GGUF mapping: tensor names and stacking, and the config as
// metadata (docs/formats-gguf.md). Reading and writing files: gguf_zaya.cc.

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "zaya/core/error.h"
#include "zaya/core/q8_0.h"
#include "zaya/formats/gguf_zaya_map.h"
#include "zaya/io/safetensors_header.h"
#include "zaya/io/utf8.h"
#include "zaya/model/config_fields.h"
#include "zaya/model/params.h"

namespace zaya {
namespace {

// The config's keys are in config_fields.cc (standard llama.cpp keys, ggml docs/gguf.md "LLM" with [llm] = zaya,
// and zaya.cpp's own); these are the ones spelled by hand here.
constexpr const char* kLayout = "zaya.tensor_data_layout";
constexpr const char* kValueLength = "zaya.attention.value_length";  // = key_length: CCA heads have one size
constexpr const char* kRopeDims = "zaya.rope.dimension_count";       // rotary_dim()
// Sliding-window layers (llama.cpp's names; written only when some block slides): the window W (keys per query,
// the query included, as llama.cpp's n_swa), one bool per block, and the sliding blocks' RoPE base.
constexpr const char* kSlidingWindow = "zaya.attention.sliding_window";
constexpr const char* kSlidingPattern = "zaya.attention.sliding_window_pattern";
constexpr const char* kRopeFreqBaseSwa = "zaya.rope.freq_base_swa";
constexpr const char* kRopeFreqBaseSwa64 = "zaya.rope.freq_base_swa_f64";

// llama_ftype values for general.file_type.
constexpr uint32_t kFileTypeAllF32 = 0, kFileTypeMostlyF16 = 1, kFileTypeMostlyQ8_0 = 7, kFileTypeMostlyBF16 = 32,
                   kFileTypeMostlyMxfp4Moe = 38;  // llama.cpp LLAMA_FTYPE_MOSTLY_MXFP4_MOE

// Upper bounds checked before a value enters the config, so that no size
// product in ParamTable (or ZayaConfig::validate) can overflow int64 on a
// hostile file.
// hostile file (the bounds of the table's keys are in config_fields.cc).
constexpr int64_t kMaxSize = int64_t{1} << 20;     // rotary dims
constexpr int64_t kMaxHeadDim = int64_t{1} << 16;  // head size

uint32_t as_u32(const char* key, int64_t v) {
  ZAYA_CHECK(v >= 0 && v <= int64_t{UINT32_MAX}, "GGUF metadata '{}' = {} does not fit in a uint32", key, v);
  return static_cast<uint32_t>(v);
}

int64_t bounded(const GgufMetadata& m, const char* key, int64_t lo, int64_t hi) {
  const uint64_t v = m.get_uint(key);
  if (v < static_cast<uint64_t>(lo) || v > static_cast<uint64_t>(hi))
    fail("{}: metadata key '{}' is {}, outside the range {}..{}", m.label(), key, v, lo, hi);
  return static_cast<int64_t>(v);
}

// The float32 standard key, or its exact float64 twin when present (they must agree).
double exact_float(const GgufMetadata& m, const char* key32, const char* key64) {
  const double v32 = m.get_float(key32);
  if (!m.has(key64)) return v32;
  const double v64 = m.get_float(key64);
  if (static_cast<float>(v64) != static_cast<float>(v32))
    fail("{}: metadata keys '{}' ({}) and '{}' ({}) disagree", m.label(), key32, v32, key64, v64);
  return v64;
}

// The table's fields that GGUF spells, in slot order (the order of the metadata in a file).
std::vector<const ConfigField*> gguf_fields() {
  std::vector<const ConfigField*> out;
  for (const ConfigField& f : zaya_config_fields())
    if (f.gguf.form != GgufForm::kNone) out.push_back(&f);
  std::stable_sort(out.begin(), out.end(),
                   [](const ConfigField* a, const ConfigField* b) { return a->gguf.slot < b->gguf.slot; });
  return out;
}

template <typename T>
bool is_field(const ConfigField& f, T ZayaConfig::*member) {
  return f.ptr == ConfigMember(member);
}

// The kCustom fields of config_fields.cc: heads of one size, the rotary width as llama.cpp's dimension count and
// our exact factor, the RoPE precision's name, and the sliding-window keys (written together at the window's slot).
void write_custom_field(const ConfigField& f, const ZayaConfig& c, GgufWriter& w) {
  const char* key = f.gguf.key;
  if (is_field(f, &ZayaConfig::head_dim)) {
    w.set_u32(key, as_u32(key, c.head_dim));
    w.set_u32(kValueLength, as_u32(kValueLength, c.head_dim));
  } else if (is_field(f, &ZayaConfig::partial_rotary_factor)) {
    w.set_u32(kRopeDims, as_u32(kRopeDims, c.rotary_dim()));
    w.set_f64(key, c.partial_rotary_factor);
  } else if (is_field(f, &ZayaConfig::rope_precision)) {
    w.set_string(key, enum_name<RopePrecision>(kRopePrecisionNames, c.rope_precision));
  } else if (is_field(f, &ZayaConfig::sliding_window) && c.has_sliding()) {
    std::vector<bool> pattern(size_t(c.num_blocks));
    for (int64_t b = 0; b < c.num_blocks; ++b) pattern[size_t(b)] = c.is_sliding(b);
    w.set_u32(kSlidingWindow, as_u32(kSlidingWindow, c.sliding_window));
    w.set(kSlidingPattern, GgufValue::bools(pattern));
    w.set_f32(kRopeFreqBaseSwa, static_cast<float>(c.sliding_rope_theta));
    w.set_f64(kRopeFreqBaseSwa64, c.sliding_rope_theta);
  }
}

void write_field(const ConfigField& f, const ZayaConfig& c, GgufWriter& w) {
  if (f.gguf.form == GgufForm::kCustom) return write_custom_field(f, c, w);
  const char* key = f.gguf.key;
  std::visit(
      [&](auto ptr) {
        const auto& v = c.*ptr;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          w.set_u32(key, as_u32(key, v));
        } else if constexpr (std::is_same_v<T, double>) {
          if (f.gguf.f64 == nullptr) return w.set_f64(key, v);
          w.set_f32(key, static_cast<float>(v));
          w.set_f64(f.gguf.f64, v);
        } else if constexpr (std::is_same_v<T, bool>) {
          w.set_bool(key, v);
        } else {
          fail("internal error: field '{}' needs a kCustom GGUF spelling", f.member);
        }
      },
      f.ptr);
}

// Reads a kCustom field; `rope_dims` receives the dimension count, checked against the config after validation.
void read_custom_field(const ConfigField& f, const GgufMetadata& m, ZayaConfig& c, int64_t& rope_dims) {
  const char* key = f.gguf.key;
  if (is_field(f, &ZayaConfig::head_dim)) {
    c.head_dim = bounded(m, key, f.gguf.lo, f.gguf.hi);
    if (m.has(kValueLength) && bounded(m, kValueLength, 1, kMaxHeadDim) != c.head_dim)
      fail("{}: {} ({}) differs from {} ({}); CCA heads have one size", m.label(), kValueLength,
           m.get_uint(kValueLength), key, c.head_dim);
  } else if (is_field(f, &ZayaConfig::partial_rotary_factor)) {
    rope_dims = bounded(m, kRopeDims, 1, kMaxSize);
    c.partial_rotary_factor = m.has(key) ? m.get_float(key) : double(rope_dims) / double(c.head_dim);
  } else if (is_field(f, &ZayaConfig::rope_precision)) {
    if (!m.has(key)) return;
    const std::string& p = m.get_string(key);
    const RopePrecision* v = enum_find<RopePrecision>(kRopePrecisionNames, p);
    if (v == nullptr)
      fail("{}: metadata key '{}' is '{}'; allowed: {}", m.label(), key, printable(p),
           enum_allowed<RopePrecision>(kRopePrecisionNames));
    c.rope_precision = *v;
  } else if (is_field(f, &ZayaConfig::sliding_window) && (m.has(kSlidingWindow) || m.has(kSlidingPattern))) {
    c.sliding_window = bounded(m, kSlidingWindow, 1, int64_t{1} << 30);
    const GgufValue& pattern = m.get_array(kSlidingPattern, GgufType::kBool);
    if (int64_t(pattern.size()) != c.num_blocks)
      fail("{}: {} has {} entries; {} is {}", m.label(), kSlidingPattern, pattern.size(),
           zaya_config_field("num_blocks").gguf.key, c.num_blocks);
    for (int64_t b = 0; b < c.num_blocks; ++b)
      if (pattern.element(uint64_t(b)).as_bool()) c.sliding_blocks.push_back(b);
    c.sliding_rope_theta = exact_float(m, kRopeFreqBaseSwa, kRopeFreqBaseSwa64);
  }
}

void read_field(const ConfigField& f, const GgufMetadata& m, ZayaConfig& c, int64_t& rope_dims) {
  if (f.gguf.form == GgufForm::kCustom) return read_custom_field(f, m, c, rope_dims);
  const char* key = f.gguf.key;
  if (f.gguf.form == GgufForm::kOptional && !m.has(key)) {
    if (f.absent == AbsentRule::kVocabSize) c.real_vocab_size = c.vocab_size;
    return;  // older exports: the default
  }
  std::visit(
      [&](auto ptr) {
        auto& v = c.*ptr;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>)
          v = bounded(m, key, f.gguf.lo, f.gguf.hi);
        else if constexpr (std::is_same_v<T, double>)
          v = f.gguf.f64 != nullptr ? exact_float(m, key, f.gguf.f64) : m.get_float(key);
        else if constexpr (std::is_same_v<T, bool>)
          v = m.get_bool(key);
      },
      f.ptr);
}

}  // namespace

GgmlType zaya_gguf_dtype(const std::string& dtype) {
  if (dtype == "f32") return GgmlType::kF32;
  if (dtype == "bf16") return GgmlType::kBF16;
  if (dtype == "f16") return GgmlType::kF16;
  if (dtype == "q8_0") return GgmlType::kQ8_0;
  fail("GGUF export dtype '{}' is invalid; allowed: f32, bf16, f16, q8_0", dtype);
}

GgmlType zaya_gguf_tensor_type(const ZayaGgufTensor& t, GgmlType dtype, bool experts_mxfp4) {
  if (t.keep_f32) return GgmlType::kF32;
  if (experts_mxfp4 && t.expert) return GgmlType::kMXFP4;
  if (dtype == GgmlType::kQ8_0) return t.int8 ? GgmlType::kQ8_0 : t.decoder_f32 ? GgmlType::kF32 : GgmlType::kBF16;
  return dtype;
}

bool zaya_int8_matrix(TensorRole role, int64_t cols, bool tied_head) {
  if (cols <= 0 || cols % kQ8Block != 0) return false;
  switch (role) {
    case TensorRole::kAttnQ:
    case TensorRole::kAttnK:
    case TensorRole::kAttnVCurrent:
    case TensorRole::kAttnVDelayed:
    case TensorRole::kAttnOut:
    case TensorRole::kExpertFc1:
    case TensorRole::kExpertFc2:
    case TensorRole::kLmHead: return true;
    case TensorRole::kEmbedding: return tied_head;
    default: return false;
  }
}

std::vector<ZayaGgufTensor> zaya_gguf_tensor_map(const ZayaConfig& c) {
  const ParamTable params(c, true);
  const ParamTable buffers(c, false);
  const int64_t E = c.experts, F = c.expert_ffn, D = c.hidden;
  std::vector<ZayaGgufTensor> out;
  const bool tied = c.tie_word_embeddings;
  auto single = [&](const ParamEntry& e) {
    const bool int8 = e.shape.size() == 2 && zaya_int8_matrix(e.role, e.shape[1], tied);
    out.push_back({gguf_tensor_name(e.role, e.half_layer),
                   e.shape,
                   {{e.name, 0, e.numel}},
                   e.shape.size() == 1,
                   int8,
                   e.role == TensorRole::kConvDepthwise});
  };
  // Stacked experts (llama.cpp's layout): fc1 [2F, D] splits into gate rows
  // [0, F) and up rows [F, 2F); fc2 [D, F] is the down projection.
  auto experts = [&](int n) {
    const bool fc1_int8 = zaya_int8_matrix(TensorRole::kExpertFc1, D, tied);
    const bool fc2_int8 = zaya_int8_matrix(TensorRole::kExpertFc2, F, tied);
    ZayaGgufTensor gate{gguf_tensor_name(TensorRole::kExpertFc1, n, 0), {E, F, D}, {}, false, fc1_int8, false, true};
    ZayaGgufTensor up{gguf_tensor_name(TensorRole::kExpertFc1, n, 1), {E, F, D}, {}, false, fc1_int8, false, true};
    ZayaGgufTensor down{gguf_tensor_name(TensorRole::kExpertFc2, n), {E, D, F}, {}, false, fc2_int8, false, true};
    for (const ParamEntry& e : params.entries()) {
      if (e.half_layer != n) continue;
      if (e.role == TensorRole::kExpertFc1) {
        gate.segments.push_back({e.name, 0, F * D});
        up.segments.push_back({e.name, F * D, F * D});
      } else if (e.role == TensorRole::kExpertFc2) {
        down.segments.push_back({e.name, 0, D * F});
      }
    }
    out.push_back(std::move(gate));
    out.push_back(std::move(up));
    out.push_back(std::move(down));
  };
  auto dense_of = [&](const ParamTable& table, int n) {
    for (const ParamEntry& e : table.entries())
      if (e.half_layer == n && tensor_decl(e.role).scope != TensorScope::kExpert && e.role != TensorRole::kEmbedding)
        single(e);
  };
  // File order: the embedding, each block (attention, then MoE with its
  // balancing biases and experts), then the final norm and merge.
  single(params.at(legacy_tensor_name(TensorRole::kEmbedding, -1)));
  for (int n = 0; n < c.half_layers(); ++n) {
    dense_of(params, n);
    if (n % 2 == 0) continue;
    dense_of(buffers, n);
    experts(n);
  }
  dense_of(params, -1);

  // Every element of every parameter and buffer in exactly one segment: a new
  // parameter that the mapping forgets fails here, not silently in a file.
  std::unordered_map<std::string, std::vector<std::pair<int64_t, int64_t>>> runs;
  for (const ZayaGgufTensor& t : out)
    for (const ZayaGgufSegment& s : t.segments) runs[s.legacy_name].emplace_back(s.first, s.count);
  for (const ParamTable* table : {&params, &buffers})
    for (const ParamEntry& e : table->entries()) {
      auto it = runs.find(e.name);
      ZAYA_CHECK(it != runs.end(), "internal error: tensor '{}' has no place in the GGUF mapping", e.name);
      auto& r = it->second;
      std::sort(r.begin(), r.end());
      int64_t next = 0;
      for (auto [first, count] : r) {
        ZAYA_CHECK(first == next, "internal error: the GGUF mapping covers tensor '{}' unevenly", e.name);
        next += count;
      }
      ZAYA_CHECK(next == e.numel, "internal error: the GGUF mapping covers {} of the {} elements of '{}'", next,
                 e.numel, e.name);
      runs.erase(it);
    }
  ZAYA_CHECK(runs.empty(), "internal error: the GGUF mapping names tensors the parameter table lacks");
  return out;
}

void write_zaya_gguf_metadata(const ZayaConfig& c, const GgufSaveOptions& options, GgufWriter& w) {
  const GgmlType dtype = zaya_gguf_dtype(options.dtype);
  w.set_string("general.architecture", kZayaGgufArchitecture);
  w.set_string("general.name", options.name);
  w.set_u32("general.file_type", options.experts == "mxfp4" ? kFileTypeMostlyMxfp4Moe
                                 : dtype == GgmlType::kF32  ? kFileTypeAllF32
                                 : dtype == GgmlType::kF16  ? kFileTypeMostlyF16
                                 : dtype == GgmlType::kQ8_0 ? kFileTypeMostlyQ8_0
                                                            : kFileTypeMostlyBF16);
  w.set_string(kLayout, kZayaGgufLayout);
  for (const ConfigField* f : gguf_fields()) write_field(*f, c, w);
  for (const GgufKeyValue& kv : options.extra_metadata) w.set(kv.key, kv.value);
}

ZayaConfig zaya_config_from_gguf(const GgufMetadata& m) {
  // What zaya reads, for the messages about files it does not.
  const std::string supported = fmt::format(
      "zaya reads the GGUF files `zaya ckpt export` writes (general.architecture '{}', {} '{}'); for other models "
      "use a Hugging Face directory of ZAYA1 (config.json + safetensors)",
      kZayaGgufArchitecture, kLayout, kZayaGgufLayout);
  const GgufValue* arch_value = m.find("general.architecture");
  if (arch_value == nullptr || arch_value->type() != GgufType::kString)
    fail("{}: no general.architecture string: not a model file zaya can read; {}", m.label(), supported);
  const std::string& arch = arch_value->as_string();
  if (arch != kZayaGgufArchitecture)
    fail("{}: a '{}' model (general.architecture), not a ZAYA model; {}", m.label(), printable(arch), supported);
  const GgufValue* layout_value = m.find(kLayout);
  if (layout_value == nullptr || layout_value->type() != GgufType::kString)
    fail("{}: architecture '{}' but no {} string: written by another tool?; {}", m.label(), arch, kLayout, supported);
  const std::string& layout = layout_value->as_string();
  if (layout != kZayaGgufLayout)
    fail("{}: {} is '{}' (written by a newer or different tool?); {}", m.label(), kLayout, printable(layout),
         supported);
  ZayaConfig c;
  int64_t rope_dims = 0;
  for (const ConfigField* f : gguf_fields()) read_field(*f, m, c, rope_dims);
  c.validate(m.label());
  if (c.rotary_dim() != rope_dims)
    fail("{}: {} is {}, but head_dim {} x {} {} gives {}", m.label(), kRopeDims, rope_dims, c.head_dim,
         zaya_config_field("partial_rotary_factor").gguf.key, c.partial_rotary_factor, c.rotary_dim());
  return c;
}

void check_zaya_gguf_tensors(std::string_view label, const std::vector<ZayaGgufTensor>& map,
                             const std::vector<GgufTensorInfo>& tensors) {
  std::unordered_map<std::string, const GgufTensorInfo*> by_name;
  for (const GgufTensorInfo& t : tensors) by_name.emplace(t.name, &t);
  std::unordered_set<std::string> expected;
  for (const ZayaGgufTensor& t : map) {
    expected.insert(t.name);
    auto it = by_name.find(t.name);
    ZAYA_CHECK(it != by_name.end(), "{}: tensor '{}' (shape {}, from '{}') is missing", label, t.name,
               format_shape(t.shape), t.segments.front().legacy_name);
    const GgufTensorInfo& info = *it->second;
    ZAYA_CHECK(gguf_same_shape(info.shape, t.shape), "{}: tensor '{}' has shape {}, the config gives {}", label, t.name,
               format_shape(info.shape), format_shape(t.shape));
    if (info.type == GgmlType::kMXFP4)
      ZAYA_CHECK(t.expert,
                 "{}: tensor '{}' has ggml type MXFP4, but it is not a stacked expert tensor (ffn_*_exps; "
                 "docs/formats-gguf.md); expected F32, F16, BF16 or F64",
                 label, t.name);
    else if (info.type == GgmlType::kQ8_0)
      ZAYA_CHECK(t.int8,
                 "{}: tensor '{}' has ggml type Q8_0, but it is not one of the int8 matrices (attention "
                 "projections, experts, LM head; docs/formats-gguf.md); expected F32, F16, BF16 or F64",
                 label, t.name);
    else
      ZAYA_CHECK(ggml_type_is_float(info.type), "{}: tensor '{}' has ggml type {}; expected F32, F16, BF16 or F64{}",
                 label, t.name, ggml_type_name(info.type),
                 t.int8 && t.expert ? " (or Q8_0, MXFP4)"
                 : t.int8           ? " (or Q8_0)"
                                    : "");
  }
  for (const GgufTensorInfo& t : tensors)
    ZAYA_CHECK(expected.count(t.name) != 0, "{}: unexpected tensor '{}' (not part of the ZAYA mapping for this config)",
               label, printable(t.name));
}

}  // namespace zaya
