#pragma once
// A block's LoRA adapters (BlockLora, model/lora.h) bound for one product, as
// the adapted-linear helper takes them (ops/adapted_linear.h). Every training
// block gets each adaptable matrix's branch here and hands it to the helper,
// adapted or not: a target that is not adapted (or a pass without adapters,
// lora == null) gives an empty branch, found without a lookup (a full
// training run passes here at every expert), and the helper makes the base
// product alone.

#include <cstdint>

#include "zaya/model/config.h"
#include "zaya/model/lora.h"
#include "zaya/ops/adapted_linear.h"

namespace zaya {

// Forward binds the adapter and its kept h; backward also its gradients (lora->grads).
enum class LoraPass : uint8_t { kForward, kBackward };

// Target t (an attention or router target) over `tokens` rows of an output
// whose rows are `out_stride` apart; a q/k/v target's row_offset is its
// columns of the fused projection (lora_slot).
LoraBranch<float> lora_branch(const ZayaConfig& config, const BlockLora* lora, LoraTarget t, int64_t tokens,
                              int64_t out_stride, LoraPass pass);

// Expert target t of global expert `expert` over its `rows` rows starting at
// row0 of the expert-major layout (its slice of lora->h); y rows are the
// target's own width apart.
LoraBranch<float> lora_expert_branch(const ZayaConfig& config, const BlockLora* lora, LoraTarget t, int64_t expert,
                                     int64_t row0, int64_t rows, LoraPass pass);

}  // namespace zaya
