// ZayaModel (model/model.h): parameters, buffers and their bf16 copy.
#include "zaya/model/model.h"

#include <algorithm>
#include <cstring>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/ops/matmul_bf16.h"
#include "zaya/ops/quant_linear.h"

namespace zaya {

ZayaModel::ZayaModel(const ZayaConfig& config, ExpertRange experts, ParamStorage storage, WeightType expert_type)
    : config_(config), params_(config, true, experts), buffers_(config, false) {
  config_.validate("model config");
  bf16_frozen_ = storage == ParamStorage::kFrozenBf16;
  ZAYA_CHECK(expert_type == WeightType::kF32 || expert_type == WeightType::kMXFP4 || expert_type == WeightType::kFP8 ||
                 expert_type == WeightType::kI8,
             "internal error: quantized experts of type {}", weight_type_name(expert_type));
  quant_.type = expert_type;
  if (expert_type == WeightType::kMXFP4 || expert_type == WeightType::kI8)
    ZAYA_CHECK(config_.hidden % 32 == 0 && config_.expert_ffn % 32 == 0,
               "routed experts held as {} need rows of a multiple of 32 values, and this model has hidden = {}, "
               "expert_ffn = {}; allowed: [lora] base_dtype = \"float\" or \"fp8\" for it",
               weight_type_name(expert_type), config_.hidden, config_.expert_ffn);
  if (bf16_frozen_ || expert_type != WeightType::kF32)
    frozen_ = std::make_unique<FrozenF32Space>(params_, bf16_frozen_, expert_type != WeightType::kF32);
  else
    param_arena_.reset(params_.total_floats());
  if (bf16_frozen_) {
    const int64_t n = params_.total_floats();
    bf16_arena_ = aligned_alloc_array<uint16_t>(size_t(n));
    bf16_ = {frozen_->data(), n, bf16_arena_.get()};
  }
  if (expert_type != WeightType::kF32) {
    // Each quantized matrix's rows, in table order (address order of their views).
    std::vector<int64_t> offsets;
    for (const ParamEntry& e : params_.entries()) {
      if (!quantized(e)) continue;
      offsets.push_back(quant_bytes_);
      quant_bytes_ += e.shape[0] * weight_row_bytes(expert_type, e.shape[1]);
    }
    quant_arena_ = aligned_alloc_array<uint8_t>(size_t(std::max<int64_t>(quant_bytes_, 1)));
    size_t i = 0;
    for (const ParamEntry& e : params_.entries())
      if (quantized(e))
        quant_.matrices.push_back(
            {frozen_->data() + e.offset, e.shape[0], e.shape[1], quant_arena_.get() + offsets[i++]});
    quant_.sort();
  }
  buffer_arena_.reset(std::max<int64_t>(buffers_.total_floats(), 1));
  weights_ = bind_weights(config_, params_, param_data());
  biases_ = bind_balancing_biases(config_, buffers_, buffer_arena_.data());
  init_buffers(config_, buffers_, buffer_arena_.data());
}

bool ZayaModel::quantized(const ParamEntry& e) const {
  return quant_.type != WeightType::kF32 && quantized_base_role(e.role);
}

bool ZayaModel::f32_absent(const ParamEntry& e) const {
  return (bf16_frozen_ && bf16_only_role(e.role)) || quantized(e);
}

void ZayaModel::init(uint64_t seed) {
  if (!frozen_) {
    init_params(params_, param_arena_.data(), config_, seed);
  } else {
    std::vector<float> values;
    for (const ParamEntry& e : params_.entries()) {
      values.resize(size_t(e.numel));
      init_param(e, values.data(), config_, seed);
      set_param(e, values.data());
    }
  }
  init_buffers(config_, buffers_, buffer_arena_.data());
}

bool ZayaModel::holds_packed(const ParamEntry& e, WeightType type) const { return quantized(e) && quant_.type == type; }

void ZayaModel::set_param_packed(const ParamEntry& e, const uint8_t* rows) {
  ZAYA_CHECK(quantized(e), "internal error: '{}' is not held quantized", e.name);
  const uint8_t* dst = quant_.rows_of(param_data() + e.offset, e.shape[1]);
  std::memcpy(const_cast<uint8_t*>(dst), rows, size_t(e.shape[0] * weight_row_bytes(quant_.type, e.shape[1])));
}

void ZayaModel::set_param(const ParamEntry& e, const float* values) {
  if (quantized(e)) {
    // Quantized at load, row by row, as the decoder's --dtype quantizes (ops/quant_linear.h quantize_weight_row).
    const int64_t rows = e.shape[0], cols = e.shape[1], rb = weight_row_bytes(quant_.type, cols);
    auto* dst = const_cast<uint8_t*>(quant_.rows_of(param_data() + e.offset, cols));
#pragma omp parallel for schedule(static) if (e.numel >= 65536)
    for (int64_t r = 0; r < rows; ++r) quantize_weight_row(quant_.type, values + r * cols, cols, dst + r * rb);
    return;
  }
  const bool bf16_only = bf16_frozen_ && bf16_only_role(e.role);
  if (!bf16_only) std::memcpy(param_data() + e.offset, values, sizeof(float) * size_t(e.numel));
  if (bf16_frozen_) convert_to_bf16(bf16_arena_.get() + e.offset, values, e.numel);
}

void ZayaModel::set_param_bf16(const ParamEntry& e, const uint16_t* bits) {
  if (quantized(e)) {
    std::vector<float> values(size_t(e.numel));
    for (int64_t i = 0; i < e.numel; ++i) values[size_t(i)] = bf16_to_float(bits[i]);
    set_param(e, values.data());
    return;
  }
  if (bf16_frozen_) std::memcpy(bf16_arena_.get() + e.offset, bits, sizeof(uint16_t) * size_t(e.numel));
  if (bf16_frozen_ && bf16_only_role(e.role)) return;
  float* dst = param_data() + e.offset;
  for (int64_t i = 0; i < e.numel; ++i) dst[i] = bf16_to_float(bits[i]);
}

void ZayaModel::read_param(const ParamEntry& e, float* out) const {
  if (quantized(e)) {
    const uint8_t* rows = quant_.rows_of(param_data() + e.offset, e.shape[1]);
    for (int64_t r = 0; r < e.shape[0]; ++r) weight_row_f32(quant_.type, rows, e.shape[1], r, out + r * e.shape[1]);
    return;
  }
  if (!f32_absent(e)) {
    std::memcpy(out, param_data() + e.offset, sizeof(float) * size_t(e.numel));
    return;
  }
  const uint16_t* bits = bf16_arena_.get() + e.offset;
  for (int64_t i = 0; i < e.numel; ++i) out[i] = bf16_to_float(bits[i]);
}

int64_t ZayaModel::f32_param_bytes() const {
  return frozen_ ? frozen_->backed_bytes() : int64_t(sizeof(float)) * params_.total_floats();
}

int64_t ZayaModel::bf16_param_bytes() const {
  if (!bf16_arena_) return 0;
  int64_t n = params_.total_floats();  // less the quantized experts' ranges, which are never written (no memory)
  for (const ParamEntry& e : params_.entries())
    if (quantized(e)) n -= e.numel;
  return int64_t(sizeof(uint16_t)) * n;
}

void ZayaModel::enable_bf16_gemms() {
  const int64_t n = params_.total_floats();
  if (!bf16_arena_) bf16_arena_ = aligned_alloc_array<uint16_t>(size_t(n));
  bf16_ = {param_data(), n, bf16_arena_.get()};
  refresh_bf16_weights();
}

void ZayaModel::refresh_bf16_weights() {
  if (!bf16_arena_) return;
  if (!frozen_) {
    convert_to_bf16(bf16_arena_.get(), param_arena_.data(), bf16_.count);
    return;
  }
  // A frozen base: the bf16-only and the quantized tensors have no float32 to copy from (a quantized expert's
  // bf16 range is never read: its products take the quantized path first, ops/matmul.h).
  for (const ParamEntry& e : params_.entries())
    if (!f32_absent(e)) convert_to_bf16(bf16_arena_.get() + e.offset, param_data() + e.offset, e.numel);
}

Bf16KeptInputs bf16_kept_inputs(const LoraConfig* lora) {
  Bf16KeptInputs kept;
  kept.attention = lora == nullptr || !lora->has_qkv_targets();
  // A quantized base's experts run over their packed rows in float32 (ops/quant_linear.h), never in bf16.
  kept.experts = (lora == nullptr || !lora->has_expert_targets()) && (lora == nullptr || !lora->quantized_base());
  return kept;
}

}  // namespace zaya
