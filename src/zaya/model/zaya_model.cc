// ZayaModel (model/model.h): parameters, buffers and their bf16 copy.
#include "zaya/model/model.h"

#include <algorithm>
#include <cstring>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/ops/matmul_bf16.h"

namespace zaya {

ZayaModel::ZayaModel(const ZayaConfig& config, ExpertRange experts, ParamStorage storage)
    : config_(config), params_(config, true, experts), buffers_(config, false) {
  config_.validate("model config");
  if (storage == ParamStorage::kFrozenBf16) {
    frozen_ = std::make_unique<FrozenF32Space>(params_);
    const int64_t n = params_.total_floats();
    bf16_arena_ = aligned_alloc_array<uint16_t>(size_t(n));
    bf16_ = {frozen_->data(), n, bf16_arena_.get()};
  } else {
    param_arena_.reset(params_.total_floats());
  }
  buffer_arena_.reset(std::max<int64_t>(buffers_.total_floats(), 1));
  weights_ = bind_weights(config_, params_, param_data());
  biases_ = bind_balancing_biases(config_, buffers_, buffer_arena_.data());
  init_buffers(config_, buffers_, buffer_arena_.data());
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

void ZayaModel::set_param(const ParamEntry& e, const float* values) {
  const bool bf16_only = frozen_ && bf16_only_role(e.role);
  if (!bf16_only) std::memcpy(param_data() + e.offset, values, sizeof(float) * size_t(e.numel));
  if (frozen_) convert_to_bf16(bf16_arena_.get() + e.offset, values, e.numel);
}

void ZayaModel::set_param_bf16(const ParamEntry& e, const uint16_t* bits) {
  if (frozen_) std::memcpy(bf16_arena_.get() + e.offset, bits, sizeof(uint16_t) * size_t(e.numel));
  if (frozen_ && bf16_only_role(e.role)) return;
  float* dst = param_data() + e.offset;
  for (int64_t i = 0; i < e.numel; ++i) dst[i] = bf16_to_float(bits[i]);
}

void ZayaModel::read_param(const ParamEntry& e, float* out) const {
  if (!(frozen_ && bf16_only_role(e.role))) {
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
  return bf16_arena_ ? int64_t(sizeof(uint16_t)) * params_.total_floats() : 0;
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
  // A frozen bf16 base: the bf16-only tensors have no float32 to copy from.
  for (const ParamEntry& e : params_.entries())
    if (!bf16_only_role(e.role)) convert_to_bf16(bf16_arena_.get() + e.offset, param_data() + e.offset, e.numel);
}

Bf16KeptInputs bf16_kept_inputs(const LoraConfig* lora) {
  Bf16KeptInputs kept;
  kept.attention = lora == nullptr || !lora->has_qkv_targets();
  kept.experts = lora == nullptr || !lora->has_expert_targets();
  return kept;
}

}  // namespace zaya
