#include "zaya/model/weights.h"

#include "zaya/core/error.h"

namespace zaya {

ModelWeights bind_weights(const ZayaConfig& c, const ParamTable& t, float* base) {
  auto at = [&](const std::string& name) { return base + t.at(name).offset; };
  auto maybe = [&](const std::string& name) -> float* {
    const ParamEntry* e = t.find(name);
    return e ? base + e->offset : nullptr;
  };
  auto merge_of = [&](const std::string& p) {
    ResidualScaleWeights m;
    m.hs_scale_D = at(p + "res_scale.hidden_states_scale");
    m.hs_bias_D = at(p + "res_scale.hidden_states_bias");
    m.res_scale_D = maybe(p + "res_scale.residual_scale");
    m.res_bias_D = maybe(p + "res_scale.residual_bias");
    return m;
  };
  ModelWeights w;
  w.embed_VD = at("model.embed_tokens.weight");
  w.final_norm_D = at("model.final_norm.weight");
  w.final_merge = merge_of("model.");
  for (int n = 0; n < c.half_layers(); ++n) {
    const std::string p = layer_prefix(n);
    if (n % 2 == 0) {
      AttentionWeights a;
      a.input_norm_D = at(p + "input_norm.weight");
      a.merge = merge_of(p);
      a.qkv_PD = at(p + "self_attn.qkv.linear_q.weight");
      // The fused GEMM relies on q, k, v1, v2 being adjacent in the arena.
      ZAYA_ASSERT(at(p + "self_attn.qkv.val_proj2.weight") ==
                  a.qkv_PD + (c.q_width() + c.kv_width() + c.value_stream_width()) * c.hidden);
      a.conv_a_w_C12 = at(p + "self_attn.qkv.conv_qk.0.weight");
      a.conv_a_b_C = at(p + "self_attn.qkv.conv_qk.0.bias");
      a.conv_b_w_CdK = at(p + "self_attn.qkv.conv_qk.1.weight");
      a.conv_b_b_C = at(p + "self_attn.qkv.conv_qk.1.bias");
      a.temp_Hk = at(p + "self_attn.qkv.temp");
      a.o_DQ = at(p + "self_attn.o_proj.weight");
      w.attn.push_back(a);
    } else {
      const std::string r = p + "zaya_block.router.";
      const std::string x = p + "zaya_block.experts.local_experts.";
      MoeWeights m;
      m.input_norm_D = at(p + "input_norm.weight");
      m.merge = merge_of(p);
      m.down_RD = at(r + "down_proj.weight");
      m.down_b_R = at(r + "down_proj.bias");
      m.states_scale_R = maybe(r + "router_states_scale");
      m.eda_norm_R = at(r + "rmsnorm_eda.weight");
      m.mlp0_RR = at(r + "router_mlp.0.weight");
      m.mlp0_b_R = at(r + "router_mlp.0.bias");
      m.mlp2_RR = at(r + "router_mlp.2.weight");
      m.mlp2_b_R = at(r + "router_mlp.2.bias");
      m.mlp4_NR = at(r + "router_mlp.4.weight");
      const int64_t e0 = t.experts().first, ne = t.experts().count;
      m.expert_first = e0;
      m.expert_count = ne;
      m.fc1_E2FD = at(x + std::to_string(e0) + ".linear_fc1.weight");
      m.fc2_EDF = at(x + std::to_string(e0) + ".linear_fc2.weight");
      ZAYA_ASSERT(at(x + std::to_string(e0 + ne - 1) + ".linear_fc1.weight") ==
                  m.fc1_E2FD + (ne - 1) * 2 * c.expert_ffn * c.hidden);
      w.moe.push_back(m);
    }
  }
  return w;
}

std::vector<float*> bind_balancing_biases(const ZayaConfig& c, const ParamTable& buffers, float* base) {
  std::vector<float*> out;
  for (int n = 1; n < c.half_layers(); n += 2)
    out.push_back(base + buffers.at(layer_prefix(n) + "zaya_block.router.balancing_biases").offset);
  return out;
}

void init_buffers(const ZayaConfig& c, const ParamTable& buffers, float* base) {
  for (const ParamEntry& e : buffers.entries())
    for (int64_t i = 0; i < e.numel; ++i) base[e.offset + i] = 0.0f;
  if (c.use_skip)
    for (float* b : bind_balancing_biases(c, buffers, base)) b[c.skip_slot()] = -1.0f;
}

}  // namespace zaya
