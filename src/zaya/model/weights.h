#pragma once
// Typed views of one arena laid out by ParamTable: the parameters, their
// gradients and optimizer moments all bind the same way from different bases.
// Names carry shapes: D hidden, Q = Hq*d, K = Hk*d, C = Q + K conv channels,
// P = Q + K + 2 * (K/2) fused q/k/v rows, R router width, N router slots,
// E experts, F expert width.
//
// Frozen tensors (LoRA, model/lora.h): in a set of gradient views a null
// pointer means "frozen, no gradient". model_backward and every op it calls
// (ops/matmul.h linear_backward, ops/reduce.h, rmsnorm, residual_scale,
// qk_norm, router, the experts, the head and the embedding) then skip that
// tensor's weight-gradient work and form only the input gradients the rest of
// the pass needs. bind_weights(config, table, nullptr) gives such views for
// every tensor at once: a backward without any base-weight gradient.

#include <vector>

#include "zaya/model/config.h"
#include "zaya/model/params.h"

namespace zaya {

// All null without scale_residual_merge (the merge is then a plain sum).
struct ResidualScaleWeights {
  float* hs_scale_D = nullptr;
  float* hs_bias_D = nullptr;
  float* res_scale_D = nullptr;  // null for half-layer 0
  float* res_bias_D = nullptr;
};

struct AttentionWeights {
  float* input_norm_D = nullptr;
  ResidualScaleWeights merge;
  float* qkv_PD = nullptr;  // rows: linear_q (Q), linear_k (K), val_proj1 (K/2), val_proj2 (K/2)
  float* conv_a_w_C12 = nullptr;
  float* conv_a_b_C = nullptr;
  float* conv_b_w_Cd2 = nullptr;
  float* conv_b_b_C = nullptr;
  float* temp_Hk = nullptr;
  float* o_DQ = nullptr;
};

struct MoeWeights {
  float* input_norm_D = nullptr;
  ResidualScaleWeights merge;
  float* down_RD = nullptr;
  float* down_b_R = nullptr;
  float* states_scale_R = nullptr;  // EDA scale; null on the first MoE half-layer or without EDA
  float* eda_norm_R = nullptr;
  float* mlp0_RR = nullptr;
  float* mlp0_b_R = nullptr;
  float* mlp2_RR = nullptr;
  float* mlp2_b_R = nullptr;
  float* mlp4_NR = nullptr;
  float* fc1_E2FD = nullptr;  // this rank's experts' linear_fc1 stacked: [E_local, 2F, D] (gate rows, then up)
  float* fc2_EDF = nullptr;   // this rank's experts' linear_fc2 stacked: [E_local, D, F]
  int64_t expert_first = 0;   // global index of the first local expert
  int64_t expert_count = 0;   // E_local
};

struct ModelWeights {
  float* embed_VD = nullptr;
  float* lm_head_VD = nullptr;  // embed_VD when tied, else lm_head.weight
  float* final_norm_D = nullptr;
  ResidualScaleWeights final_merge;
  std::vector<AttentionWeights> attn;  // one per block (half-layer 2b)
  std::vector<MoeWeights> moe;         // one per block (half-layer 2b+1)
};

// Binds views into `base`, an arena laid out by `table` (ParamTable(config, true));
// a null base gives all-null views (every tensor frozen) with the same structure.
ModelWeights bind_weights(const ZayaConfig& config, const ParamTable& table, float* base);

// Balancing biases per MoE half-layer, [N] each, from the buffer table (ParamTable(config, false)).
std::vector<float*> bind_balancing_biases(const ZayaConfig& config, const ParamTable& buffers, float* base);

// Initial buffers: zeros, except -1 on the skip slot (spec §4).
void init_buffers(const ZayaConfig& config, const ParamTable& buffers, float* base);

}  // namespace zaya
