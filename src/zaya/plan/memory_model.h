#pragma once
// Memory per device during training (docs/plan.md):
//   weights      params held (dense + experts / ep) x weight bytes; with bf16
//                GEMMs a bf16 copy plus the f32 master (mixed precision)
//   gradients    params held x 4 (f32 accumulation)
//   optimizer    ZeRO-1: this rank's shard of Muon momentum (1 float) and
//                AdamW moments (2 floats) (+ Newton-Schulz scratch)
//   activations  what one micro-batch keeps for its backward pass (the
//                buffers of model/attention_block.h and moe_block.h per token,
//                plus the f32 logits), in the activation dtype

#include <cstdint>

#include "zaya/model/config.h"
#include "zaya/plan/step_model.h"

namespace zaya {

struct MemoryPrediction {
  double params_held = 0;  // parameters on one device
  double weights = 0, gradients = 0, optimizer = 0, activations = 0,
         logits = 0;  // bytes
  double total() const { return weights + gradients + optimizer + activations + logits; }
};

MemoryPrediction predict_memory(const ZayaConfig& c, const TrainLayout& layout);

// Activation floats kept per token by one attention + MoE pair (forward, for
// backward).
double activation_floats_per_token(const ZayaConfig& c, double skip_fraction);

}  // namespace zaya
