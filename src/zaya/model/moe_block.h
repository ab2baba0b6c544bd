#pragma once
// One MoE half-layer (spec §4): the ZAYA1 router and the experts.
//
// Router (ops/router.h): r = x Wdown^T + b (+ s * r_prev: exponential depth
//   averaging, EDA), rn = RMSNorm(r), two GELU layers, logits over E experts +
//   skip slot, p = softmax, slot = argmax(p + balancing_bias), gate = p[slot].
// Experts: tokens permuted by expert, one SwiGLU GEMM pair per expert,
//   out[t] = gate * expert(x[t]); for the skip slot gate * x[t] (legacy rule) or 0
//   (skip_output_zero: the native layout's rule, spec §8.1).

#include <cstdint>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/model/batch.h"
#include "zaya/model/config.h"
#include "zaya/model/lora.h"
#include "zaya/model/moe_experts.h"
#include "zaya/model/weights.h"
#include "zaya/ops/moe_dispatch.h"
#include "zaya/ops/router.h"

namespace zaya {

// Kept for backward (per MoE half-layer).
struct MoeActs {
  RouterActs<float> router;  // router.r_TR feeds the next layer's EDA; router.choice_TJ points into choice_TJ
  std::vector<int32_t> choice_TJ;
  ExpertPlan plan;  // routed rows grouped by (global) expert
  ExpertActs experts;
};

struct MoeScratch {
  ExpertScratch experts;
  float* dy_MD = nullptr;   // gradient of the plan-order expert outputs
  float* dxp_MD = nullptr;  // gradient of the plan-order expert inputs
  float* dgate_TJ = nullptr;
  RouterScratch<float> router;
  float* eda_carry_TR = nullptr;  // gradient flowing to the previous MoE layer's router state
};

// Routing statistics of one MoE half-layer, accumulated over micro-batches.
struct RoutingStats {
  std::vector<double> choices_N;  // choices per slot (skip slot last)
  double entropy_sum = 0;         // sum over tokens of -sum_e p log p
  double tokens = 0;
  double aux_loss = 0, z_loss = 0;
  // Routing replay (ops/routing.h RoutingReplay, docs/rl.md): token rows with a record, those whose router chose
  // other slots than the record, and those whose routing used other slots than the record.
  double replay_compared = 0, replay_flips = 0, replay_used_flips = 0;
  void reset(int64_t slots) {
    choices_N.assign(slots, 0.0);
    entropy_sum = tokens = aux_loss = z_loss = 0;
    replay_compared = replay_flips = replay_used_flips = 0;
  }
};

struct MoeLossOptions {
  float switch_aux_coeff = 0.0f;
  float z_loss_coeff = 0.0f;
};

// The slot whose tokens get gate * x from the combine: the skip slot under the legacy rule, none (-1: those tokens
// get 0) under the native one (model.skip_output_zero, spec §8.1). The training block and the cached decoder both
// combine with it.
int64_t skip_input_slot(const ZayaConfig& c);

// Lay the buffers out in `arena` (or count them, on Arena::measuring());
// ep_ranks sizes the rows an expert-parallel rank may receive.
// keep_bf16: the experts' GEMM inputs kept as bf16 (model/moe_experts.h).
void carve_moe_acts(MoeActs& a, const ZayaConfig& c, int64_t batch, int64_t seq, int64_t ep_ranks, bool keep_bf16,
                    Arena& arena);
void carve_moe_scratch(MoeScratch& s, const ZayaConfig& c, int64_t batch, int64_t seq, int64_t ep_ranks, bool keep_bf16,
                       Arena& arena);

// out_TD = block(x_TD), its products in `precision` (ops/precision.h). r_prev_TR: previous MoE layer's router state
// (null for the first). ep: expert-parallel group (null: one rank holds every expert). Adds this layer's routing counts
// into stats; returns aux + z loss of the layer (0 if disabled). lora: the block's adapters (model/lora.h): its router
// targets add their branches to the router's products, its expert targets to each expert's fc1 / fc2
// (model/moe_experts.h); null: none. replay: recorded choices checked against the router's and, with force,
// routed by (ops/routing.h; its counts are added into stats); the backward then follows the forced choices.
double moe_block_forward(const ZayaConfig& c, const Precision& precision, const MoeWeights& w,
                         const float* balancing_bias_N, MoeActs& a, MoeScratch& s, const BatchShape& shape,
                         const float* x_TD, const float* r_prev_TR, float* out_TD, const MoeLossOptions& loss,
                         RoutingStats& stats, Comm* ep, const BlockLora* lora = nullptr,
                         const RoutingReplay* replay = nullptr);

// Adds into dx_TD and g. Consumes s.eda_carry_TR (gradient of r from the next MoE
// layer; zero it before the last layer) and leaves there the gradient for the previous one.
// aux_grad_scale multiplies the gradient of this layer's aux and z losses.
// lora: the forward's; adds into its adapters' gradients (lora->grads).
void moe_block_backward(const ZayaConfig& c, const Precision& precision, const MoeWeights& w, const MoeWeights& g,
                        const MoeActs& a, MoeScratch& s, const BatchShape& shape, const float* x_TD,
                        const float* r_prev_TR, const float* dout_TD, float* dx_TD, const MoeLossOptions& loss,
                        float aux_grad_scale, Comm* ep, const BlockLora* lora = nullptr);

}  // namespace zaya
