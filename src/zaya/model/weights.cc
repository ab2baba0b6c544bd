#include "zaya/model/weights.h"

#include "zaya/core/error.h"

namespace zaya {
namespace {

// The residual merge at merge point n (-1: the final merge).
ResidualScaleWeights& merge_at(ModelWeights& w, int n) {
  if (n < 0) return w.final_merge;
  return n % 2 == 0 ? w.attn[n / 2].merge : w.moe[n / 2].merge;
}

}  // namespace

ModelWeights bind_weights(const ZayaConfig& c, const ParamTable& t, float* base) {
  ModelWeights w;
  w.attn.resize(size_t(c.num_blocks));
  w.moe.resize(size_t(c.num_blocks));
  for (MoeWeights& m : w.moe) {
    m.expert_first = t.experts().first;
    m.expert_count = t.experts().count;
  }
  for (const ParamEntry& e : t.entries()) {
    float* p = base != nullptr ? base + e.offset : nullptr;
    const int b = e.half_layer / 2;
    switch (e.role) {
      case TensorRole::kEmbedding: w.embed_VD = p; break;
      case TensorRole::kFinalNorm: w.final_norm_D = p; break;
      case TensorRole::kLmHead: w.lm_head_VD = p; break;
      case TensorRole::kMergeHiddenScale: merge_at(w, e.half_layer).hs_scale_D = p; break;
      case TensorRole::kMergeHiddenBias: merge_at(w, e.half_layer).hs_bias_D = p; break;
      case TensorRole::kMergeResidualScale: merge_at(w, e.half_layer).res_scale_D = p; break;
      case TensorRole::kMergeResidualBias: merge_at(w, e.half_layer).res_bias_D = p; break;
      case TensorRole::kAttnNorm: w.attn[b].input_norm_D = p; break;
      case TensorRole::kAttnQ: w.attn[b].qkv_PD = p; break;
      case TensorRole::kAttnK:
      case TensorRole::kAttnVCurrent: break;  // rows of qkv_PD (checked below)
      case TensorRole::kAttnVDelayed:
        // The fused GEMM relies on q, k, v1, v2 being adjacent in the arena.
        ZAYA_ASSERT(base == nullptr ||
                    p == w.attn[b].qkv_PD + (c.q_width() + c.kv_width() + c.value_stream_width()) * c.hidden);
        break;
      case TensorRole::kConvDepthwise: w.attn[b].conv_a_w_C12 = p; break;
      case TensorRole::kConvDepthwiseBias: w.attn[b].conv_a_b_C = p; break;
      case TensorRole::kConvGrouped: w.attn[b].conv_b_w_Cd2 = p; break;
      case TensorRole::kConvGroupedBias: w.attn[b].conv_b_b_C = p; break;
      case TensorRole::kKeyTemperature: w.attn[b].temp_Hk = p; break;
      case TensorRole::kAttnOut: w.attn[b].o_DQ = p; break;
      case TensorRole::kMoeNorm: w.moe[b].input_norm_D = p; break;
      case TensorRole::kRouterDown: w.moe[b].down_RD = p; break;
      case TensorRole::kRouterDownBias: w.moe[b].down_b_R = p; break;
      case TensorRole::kRouterStateScale: w.moe[b].states_scale_R = p; break;
      case TensorRole::kRouterNorm: w.moe[b].eda_norm_R = p; break;
      case TensorRole::kRouterFc1: w.moe[b].mlp0_RR = p; break;
      case TensorRole::kRouterFc1Bias: w.moe[b].mlp0_b_R = p; break;
      case TensorRole::kRouterFc2: w.moe[b].mlp2_RR = p; break;
      case TensorRole::kRouterFc2Bias: w.moe[b].mlp2_b_R = p; break;
      case TensorRole::kRouterOut: w.moe[b].mlp4_NR = p; break;
      case TensorRole::kBalancingBias: fail("internal error: a buffer in the parameter table");
      case TensorRole::kExpertFc1:
      case TensorRole::kExpertFc2: {
        // This rank's experts of the layer are stacked: [E_local, 2F, D] and [E_local, D, F].
        MoeWeights& m = w.moe[b];
        const bool fc1 = e.role == TensorRole::kExpertFc1;
        float*& first = fc1 ? m.fc1_E2FD : m.fc2_EDF;
        if (e.expert == m.expert_first) first = p;
        if (base == nullptr) break;
        ZAYA_ASSERT(first != nullptr && p == first + (e.expert - m.expert_first) * e.numel);
        break;
      }
    }
  }
  if (c.tie_word_embeddings) w.lm_head_VD = w.embed_VD;  // one tensor, so its gradient sums both uses
  return w;
}

std::vector<float*> bind_balancing_biases(const ZayaConfig& c, const ParamTable& buffers, float* base) {
  std::vector<float*> out(size_t(c.num_blocks), nullptr);
  for (const ParamEntry& e : buffers.entries())
    if (e.role == TensorRole::kBalancingBias) out[size_t(e.half_layer / 2)] = base + e.offset;
  return out;
}

void init_buffers(const ZayaConfig& c, const ParamTable& buffers, float* base) {
  for (const ParamEntry& e : buffers.entries())
    for (int64_t i = 0; i < e.numel; ++i) base[e.offset + i] = 0.0f;
  if (c.use_skip)
    for (float* b : bind_balancing_biases(c, buffers, base)) b[c.skip_slot()] = -1.0f;
}

}  // namespace zaya
