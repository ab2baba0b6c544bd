#include "zaya/formats/quantized_experts.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/fp8.h"
#include "zaya/core/mxfp4.h"
#include "zaya/io/safetensors_header.h"

namespace zaya {

namespace {

std::string dump_or_null(const nlohmann::json& j, const char* key) {
  return j.contains(key) ? j[key].dump() : std::string("null");
}

// One compressed-tensors config group's weights: checked against `format`'s scheme.
void check_ct_weights(const nlohmann::json& group, const std::string& format, const std::string& where) {
  ZAYA_CHECK(group.contains("weights") && group["weights"].is_object(),
             "{}: quantization_config group without \"weights\"; expected a weight-only scheme", where);
  const nlohmann::json& w = group["weights"];
  const std::string type = w.value("type", std::string());
  const int bits = w.value("num_bits", 0);
  const std::string strategy =
      w.contains("strategy") && w["strategy"].is_string() ? w["strategy"].get<std::string>() : std::string();
  if (format == "mxfp4-pack-quantized") {
    const int group_size = w.contains("group_size") && w["group_size"].is_number() ? w["group_size"].get<int>() : 0;
    ZAYA_CHECK(type == "float" && bits == 4 && group_size == 32,
               "{}: mxfp4-pack-quantized weights are {}; expected num_bits 4, type \"float\", group_size 32", where,
               w.dump());
  } else {
    ZAYA_CHECK(type == "float" && bits == 8 && strategy == "channel",
               "{}: float-quantized weights are {}; supported: num_bits 8, type \"float\", strategy \"channel\" "
               "(FP8 E4M3 with one scale per output row)",
               where, w.dump());
  }
  ZAYA_CHECK(w.value("symmetric", true), "{}: asymmetric weights (a zero point) are not supported: {}", where,
             w.dump());
}

ExpertQuant parse_compressed_tensors(const nlohmann::json& qc, const std::string& where) {
  const std::string top = qc.value("format", std::string());
  ZAYA_CHECK(qc.contains("config_groups") && qc["config_groups"].is_object() && !qc["config_groups"].empty(),
             "{}: compressed-tensors quantization_config without config_groups", where);
  std::string format;
  for (const auto& [name, group] : qc["config_groups"].items()) {
    const std::string f =
        group.contains("format") && group["format"].is_string() ? group["format"].get<std::string>() : top;
    ZAYA_CHECK(f == "mxfp4-pack-quantized" || f == "float-quantized",
               "{}: config group '{}' has format '{}'; supported: mxfp4-pack-quantized, float-quantized", where, name,
               f);
    ZAYA_CHECK(format.empty() || format == f, "{}: config groups of two formats ({}, {}); supported: one", where,
               format, f);
    format = f;
    check_ct_weights(group, f, where + " config group '" + name + "'");
  }
  const std::string status = qc.value("quantization_status", std::string("compressed"));
  ZAYA_CHECK(status == "compressed", "{}: quantization_status '{}'; supported: compressed (the packed tensors)", where,
             status);
  ExpertQuant q;
  q.format = format == "mxfp4-pack-quantized" ? ExpertQuantFormat::kMxfp4 : ExpertQuantFormat::kFp8Channel;
  return q;
}

ExpertQuant parse_hf_fp8(const nlohmann::json& qc, const std::string& where) {
  const nlohmann::json bs = qc.contains("weight_block_size") ? qc["weight_block_size"] : nlohmann::json();
  ZAYA_CHECK(bs.is_array() && bs.size() == 2 && bs[0].is_number_integer() && bs[1].is_number_integer() &&
                 bs[0].get<int64_t>() > 0 && bs[1].get<int64_t>() == kFp8ScaleGroup,
             "{}: fp8 weight_block_size is {}; supported: [rows, 128] (fine-grained blocks of 128 columns)", where,
             dump_or_null(qc, "weight_block_size"));
  ExpertQuant q;
  q.format = ExpertQuantFormat::kFp8Block;
  q.block_rows = bs[0].get<int64_t>();
  return q;
}

// The float value of element i of a scale tensor.
float scale_value(const SafetensorsTensorInfo& info, const uint8_t* bytes, int64_t i, const std::string& where) {
  switch (info.dtype) {
    case SafetensorsDtype::kF32: {
      float v;
      std::memcpy(&v, bytes + 4 * i, 4);
      return v;
    }
    case SafetensorsDtype::kBF16: {
      uint16_t v;
      std::memcpy(&v, bytes + 2 * i, 2);
      return bf16_to_float(v);
    }
    case SafetensorsDtype::kF16: {
      uint16_t v;
      std::memcpy(&v, bytes + 2 * i, 2);
      return f16_to_float(v);
    }
    default: fail("{}: scale dtype {}; expected F32, BF16 or F16", where, dtype_name(info.dtype));
  }
}

// One tensor pair holding `rows` rows of the matrix: stacked ([E, ...], taking `expert`) or 2-D (expert < 0).
struct Part {
  std::string weight, scale;
  int64_t expert = -1;
  int64_t rows = 0;
};

struct Suffixes {
  std::vector<std::string> weight, scale;
};

Suffixes quant_suffixes(ExpertQuantFormat f) {
  switch (f) {
    case ExpertQuantFormat::kMxfp4: return {{".weight_packed", "_packed"}, {".weight_scale", "_scale"}};
    case ExpertQuantFormat::kFp8Channel: return {{".weight", ""}, {".weight_scale", "_scale"}};
    default: return {{"", ".weight"}, {".weight_scale_inv", "_scale_inv"}};
  }
}

const std::string* first_present(const SafetensorsDir& st, const std::vector<std::string>& names) {
  for (const std::string& n : names)
    if (st.has(n)) return &n;
  return nullptr;
}

std::vector<std::string> names_with(const std::string& stem, const std::vector<std::string>& sfx) {
  std::vector<std::string> v;
  for (const std::string& s : sfx) v.push_back(stem + s);
  return v;
}

std::string join_names(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "'" : ", '") + x + "'";
  return s;
}

// A part whose weight tensor is `weight`, its scale one of `stem` + the scale suffixes.
Part part_of(const SafetensorsDir& st, const std::string& weight, const std::string& stem, const Suffixes& sfx,
             int64_t expert, int64_t rows) {
  const std::vector<std::string> scales = names_with(stem, sfx.scale);
  const std::string* scale = first_present(st, scales);
  ZAYA_CHECK(scale != nullptr, "{}: quantized tensor '{}' has no scale tensor; expected one of {}",
             st.file_of(weight).path(), weight, join_names(scales));
  return {weight, *scale, expert, rows};
}

std::vector<Part> locate(const SafetensorsDir& st, const ExpertQuant& q, const std::string& base, int64_t expert,
                         int64_t rows) {
  const Suffixes sfx = quant_suffixes(q.format);
  std::vector<std::string> tried = names_with(base, sfx.weight);
  if (const std::string* w = first_present(st, tried)) return {part_of(st, *w, base, sfx, expert, rows)};
  const size_t dot = base.rfind('.');
  const std::string prefix = base.substr(0, dot), leaf = base.substr(dot + 1);
  const std::string one = prefix + "." + std::to_string(expert) + "." + leaf;
  const std::vector<std::string> per_expert = names_with(one, sfx.weight);
  tried.insert(tried.end(), per_expert.begin(), per_expert.end());
  if (const std::string* w = first_present(st, per_expert)) return {part_of(st, *w, one, sfx, -1, rows)};
  if (leaf == "gate_up_proj" && rows % 2 == 0) {  // separate gate and up tensors: gate rows first
    std::vector<Part> parts;
    for (const char* half : {"gate_proj", "up_proj"}) {
      const std::string stem = prefix + "." + std::to_string(expert) + "." + half;
      const std::vector<std::string> names = names_with(stem, sfx.weight);
      tried.insert(tried.end(), names.begin(), names.end());
      if (const std::string* w = first_present(st, names)) parts.push_back(part_of(st, *w, stem, sfx, -1, rows / 2));
    }
    if (parts.size() == 2) return parts;
  }
  fail("{}: expert {} of '{}' ({}): no quantized weight tensor; expected one of {}", st.shards().front().path(), expert,
       base, q.description(), join_names(tried));
}

void check_shape(const SafetensorsDir& st, const std::string& name, SafetensorsDtype dtype, std::vector<int64_t> shape,
                 int64_t experts, bool stacked) {
  if (stacked) shape.insert(shape.begin(), experts);
  const SafetensorsTensorInfo& info = st.info(name);
  ZAYA_CHECK(info.shape == shape, "{}: tensor '{}': expected shape {}, found {}", st.file_of(name).path(), name,
             format_shape(shape), format_shape(info.shape));
  ZAYA_CHECK(info.dtype == dtype, "{}: tensor '{}': expected dtype {}, found {}", st.file_of(name).path(), name,
             dtype_name(dtype), dtype_name(info.dtype));
}

// Part p into rows [0, p.rows) of dst.
void read_part(const SafetensorsDir& st, const ExpertQuant& q, const Part& p, int64_t experts, int64_t cols,
               uint8_t* dst) {
  const WeightType type = q.weight_type();
  const int64_t row_bytes = weight_row_bytes(type, cols), rows = p.rows;
  const bool stacked = p.expert >= 0;
  const int64_t slice = stacked ? p.expert : 0;
  const std::string& wpath = st.file_of(p.weight).path();
  const std::string& spath = st.file_of(p.scale).path();
  if (q.format == ExpertQuantFormat::kMxfp4) {
    check_shape(st, p.weight, SafetensorsDtype::kU8, {rows, cols / 2}, experts, stacked);
    check_shape(st, p.scale, SafetensorsDtype::kU8, {rows, cols / kMxBlock}, experts, stacked);
    const uint8_t* packed = st.bytes(p.weight).data() + slice * rows * (cols / 2);
    const uint8_t* scales = st.bytes(p.scale).data() + slice * rows * (cols / kMxBlock);
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* row = dst + r * row_bytes;
      std::memcpy(row, packed + r * (cols / 2), size_t(cols / 2));
      std::memcpy(row + cols / 2, scales + r * (cols / kMxBlock), size_t(cols / kMxBlock));
      for (int64_t b = 0; b < cols / kMxBlock; ++b)
        ZAYA_CHECK(row[cols / 2 + b] != kE8M0Nan,
                   "{}: tensor '{}': scale byte 255 (NaN in the MX spec) at [{}{}, {}]; a valid E8M0 scale is 0-254",
                   spath, p.scale, stacked ? std::to_string(p.expert) + ", " : "", r, b);
    }
    return;
  }
  check_shape(st, p.weight, SafetensorsDtype::kF8E4M3, {rows, cols}, experts, stacked);
  const SafetensorsTensorInfo& sinfo = st.info(p.scale);
  const int64_t groups = (cols + kFp8ScaleGroup - 1) / kFp8ScaleGroup;
  const int64_t srows = q.format == ExpertQuantFormat::kFp8Block ? (rows + q.block_rows - 1) / q.block_rows : rows;
  const int64_t scols = q.format == ExpertQuantFormat::kFp8Block ? groups : 1;
  std::vector<int64_t> sshape = {srows, scols};
  if (stacked) sshape.insert(sshape.begin(), experts);
  ZAYA_CHECK(sinfo.shape == sshape, "{}: tensor '{}': expected shape {} ({}), found {}", spath, p.scale,
             format_shape(sshape), q.description(), format_shape(sinfo.shape));
  const uint8_t* codes = st.bytes(p.weight).data() + slice * rows * cols;
  const uint8_t* sbytes = st.bytes(p.scale).data();
  const int64_t sbase = slice * srows * scols;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = dst + r * row_bytes;
    std::memcpy(row, codes + r * cols, size_t(cols));
    for (int64_t i = 0; i < cols; ++i)
      ZAYA_CHECK(!e4m3_is_nan(row[i]), "{}: tensor '{}': FP8 NaN code 0x{:02x} at row {} column {}", wpath, p.weight,
                 row[i], r, i);
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t si = q.format == ExpertQuantFormat::kFp8Block ? sbase + (r / q.block_rows) * scols + g : sbase + r;
      const float s = scale_value(sinfo, sbytes, si, spath + ": tensor '" + p.scale + "'");
      ZAYA_CHECK(std::isfinite(s), "{}: tensor '{}': scale {} (element {}); expected a finite number", spath, p.scale,
                 s, si);
      std::memcpy(row + cols + 4 * g, &s, 4);
    }
  }
}

}  // namespace

WeightType ExpertQuant::weight_type() const {
  return format == ExpertQuantFormat::kMxfp4  ? WeightType::kMXFP4
         : format == ExpertQuantFormat::kNone ? WeightType::kF32
                                              : WeightType::kFP8;
}

std::string ExpertQuant::description() const {
  switch (format) {
    case ExpertQuantFormat::kMxfp4: return "mxfp4 (compressed-tensors mxfp4-pack-quantized)";
    case ExpertQuantFormat::kFp8Channel: return "fp8 (compressed-tensors float-quantized, E4M3 per output channel)";
    case ExpertQuantFormat::kFp8Block:
      return "fp8 (Hugging Face fine-grained E4M3, blocks of " + std::to_string(block_rows) + " x 128)";
    default: return "not quantized (counted as bf16)";
  }
}

ExpertQuant parse_expert_quant(const nlohmann::json& config, const std::string& source) {
  if (!config.contains("quantization_config") || config["quantization_config"].is_null()) return {};
  const nlohmann::json& qc = config["quantization_config"];
  const std::string where = source + ": quantization_config";
  ZAYA_CHECK(qc.is_object(), "{}: expected an object, found {}", where, qc.dump());
  const std::string method = qc.value("quant_method", std::string());
  if (method == "compressed-tensors") return parse_compressed_tensors(qc, where);
  if (method == "fp8") return parse_hf_fp8(qc, where);
  fail(
      "{}: quant_method '{}'; supported: compressed-tensors (mxfp4-pack-quantized, float-quantized), fp8 "
      "(fine-grained blocks)",
      where, method);
}

void read_quantized_expert(const SafetensorsDir& st, const ExpertQuant& q, const std::string& base, int64_t experts,
                           int64_t expert, int64_t rows, int64_t cols, uint8_t* dst, std::set<std::string>& used) {
  ZAYA_ASSERT(q.quantized());
  ZAYA_CHECK(cols % kMxBlock == 0, "{}: '{}' has {} columns; quantized experts need a multiple of 32",
             st.shards().front().path(), base, cols);
  int64_t row0 = 0;
  for (const Part& p : locate(st, q, base, expert, rows)) {
    read_part(st, q, p, experts, cols, dst + row0 * weight_row_bytes(q.weight_type(), cols));
    row0 += p.rows;
    used.insert(p.weight);
    used.insert(p.scale);
  }
}

namespace {

// compressed-tensors' quantization_config of one weight-only scheme (`format`, `weights`) on every module whose name
// has "experts", as its QuantizationConfig writes it.
nlohmann::json ct_experts_config(const char* format, const nlohmann::json& weights) {
  return {{"quant_method", "compressed-tensors"},
          {"format", format},
          {"quantization_status", "compressed"},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights", weights},
              {"input_activations", nullptr},
              {"output_activations", nullptr},
              {"format", format}}}}},
          {"ignore", {"re:^(?!.*experts).*$"}}};
}

}  // namespace

nlohmann::json mxfp4_quantization_config() {
  return ct_experts_config("mxfp4-pack-quantized", {{"num_bits", 4},
                                                    {"type", "float"},
                                                    {"symmetric", true},
                                                    {"group_size", 32},
                                                    {"strategy", "group"},
                                                    {"dynamic", false},
                                                    {"scale_dtype", "torch.uint8"}});
}

nlohmann::json fp8_quantization_config() {
  return ct_experts_config("float-quantized", {{"num_bits", 8},
                                               {"type", "float"},
                                               {"symmetric", true},
                                               {"group_size", nullptr},
                                               {"strategy", "channel"},
                                               {"dynamic", false}});
}

int64_t quantized_matrix_bytes(const ExpertQuant& q, int64_t rows, int64_t cols) {
  return q.quantized() ? rows * weight_row_bytes(q.weight_type(), cols) : rows * cols * 2;
}

}  // namespace zaya
