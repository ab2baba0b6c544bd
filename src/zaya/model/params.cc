#include "zaya/model/params.h"

#include <cmath>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"

namespace zaya {

namespace {

// FNV-1a of the tensor name (stable across builds and platforms).
uint64_t name_stream(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

std::string layer_prefix(int half_layer) { return "model.layers." + std::to_string(half_layer) + "."; }

void ParamTable::add(std::string name, std::vector<int64_t> shape, ParamKind kind, InitKind init, float std,
                     int half_layer, int expert) {
  ParamEntry e;
  e.name = std::move(name);
  e.shape = std::move(shape);
  e.numel = 1;
  for (int64_t s : e.shape) e.numel *= s;
  e.offset = total_;  // packed: q/k/v rows and stacked experts stay contiguous for fused GEMMs
  e.kind = kind;
  e.init = init;
  e.init_std = std;
  e.half_layer = half_layer;
  e.expert = expert;
  e.weight_decay = kind == ParamKind::kMatrix || kind == ParamKind::kEmbedding;
  e.muon = kind == ParamKind::kMatrix;
  total_ += e.numel;
  index_[e.name] = entries_.size();
  entries_.push_back(std::move(e));
}

ParamTable::ParamTable(const ZayaConfig& c, bool trainable, ExpertRange experts) : experts_(experts) {
  if (experts_.count < 0) experts_ = {0, c.experts};
  ZAYA_CHECK(experts_.first >= 0 && experts_.count >= 1 && experts_.first + experts_.count <= c.experts,
             "expert range {}..{} does not fit {} experts", experts_.first, experts_.first + experts_.count - 1,
             c.experts);
  const int64_t D = c.hidden, R = c.router_hidden, N = c.router_slots(), F = c.expert_ffn, E = c.experts;
  const int64_t C = c.conv_channels(), d = c.head_dim;
  const float std = 0.02f;
  // GPT-2 / spec §10: output projections scaled by 1/sqrt(2 * layers).
  const float out_std = std / std::sqrt(2.0f * float(c.num_blocks));
  const auto V = ParamKind::kVector;
  auto residual_scaling = [&](const std::string& p, int n, bool with_residual) {
    add(p + "res_scale.hidden_states_scale", {D}, V, InitKind::kOnes, 0, n);
    add(p + "res_scale.hidden_states_bias", {D}, V, InitKind::kZeros, 0, n);
    if (with_residual) {
      add(p + "res_scale.residual_scale", {D}, V, InitKind::kOnes, 0, n);
      add(p + "res_scale.residual_bias", {D}, V, InitKind::kZeros, 0, n);
    }
  };
  if (!trainable) {
    for (int n = 1; n < c.half_layers(); n += 2)
      add(layer_prefix(n) + "zaya_block.router.balancing_biases", {N}, V, InitKind::kZeros, 0, n);
    return;
  }
  add("model.embed_tokens.weight", {c.vocab_size, D}, ParamKind::kEmbedding, InitKind::kNormal, std, -1);
  for (int n = 0; n < c.half_layers(); ++n) {
    const std::string p = layer_prefix(n);
    add(p + "input_norm.weight", {D}, V, InitKind::kOnes, 0, n);
    residual_scaling(p, n, n > 0);
    if (n % 2 == 0) {
      const std::string a = p + "self_attn.";
      add(a + "qkv.linear_q.weight", {c.q_width(), D}, ParamKind::kMatrix, InitKind::kNormal, std, n);
      add(a + "qkv.linear_k.weight", {c.kv_width(), D}, ParamKind::kMatrix, InitKind::kNormal, std, n);
      add(a + "qkv.val_proj1.weight", {c.value_stream_width(), D}, ParamKind::kMatrix, InitKind::kNormal, std, n);
      add(a + "qkv.val_proj2.weight", {c.value_stream_width(), D}, ParamKind::kMatrix, InitKind::kNormal, std, n);
      add(a + "qkv.conv_qk.0.weight", {C, 1, 2}, ParamKind::kConv, InitKind::kConvDepthwise, std, n);
      add(a + "qkv.conv_qk.0.bias", {C}, V, InitKind::kZeros, 0, n);
      add(a + "qkv.conv_qk.1.weight", {C, d, 2}, ParamKind::kConv, InitKind::kConvGrouped, std / std::sqrt(float(d)),
          n);
      add(a + "qkv.conv_qk.1.bias", {C}, V, InitKind::kZeros, 0, n);
      add(a + "qkv.temp", {c.kv_heads}, V, InitKind::kOnes, 0, n);
      add(a + "o_proj.weight", {D, c.q_width()}, ParamKind::kMatrix, InitKind::kNormal, out_std, n);
    } else {
      const std::string r = p + "zaya_block.router.";
      add(r + "down_proj.weight", {R, D}, ParamKind::kMatrix, InitKind::kNormal, std, n);
      add(r + "down_proj.bias", {R}, V, InitKind::kZeros, 0, n);
      if (c.use_eda && n > 1) add(r + "router_states_scale", {R}, V, InitKind::kOnes, 0, n);
      add(r + "rmsnorm_eda.weight", {R}, V, InitKind::kOnes, 0, n);
      add(r + "router_mlp.0.weight", {R, R}, ParamKind::kMatrix, InitKind::kNormal, std, n);
      add(r + "router_mlp.0.bias", {R}, V, InitKind::kZeros, 0, n);
      add(r + "router_mlp.2.weight", {R, R}, ParamKind::kMatrix, InitKind::kNormal, std, n);
      add(r + "router_mlp.2.bias", {R}, V, InitKind::kZeros, 0, n);
      add(r + "router_mlp.4.weight", {N, R}, ParamKind::kMatrix, InitKind::kNormal, std, n);
    }
  }
  add("model.final_norm.weight", {D}, V, InitKind::kOnes, 0, -1);
  add("model.res_scale.hidden_states_scale", {D}, V, InitKind::kOnes, 0, -1);
  add("model.res_scale.hidden_states_bias", {D}, V, InitKind::kZeros, 0, -1);
  add("model.res_scale.residual_scale", {D}, V, InitKind::kOnes, 0, -1);
  add("model.res_scale.residual_bias", {D}, V, InitKind::kZeros, 0, -1);
  dense_ = total_;
  // Expert region: per MoE layer, this rank's experts' fc1 stacked [count, 2F, D], then fc2 [count, D, F].
  const int e0 = int(experts_.first), e1 = int(experts_.first + experts_.count);
  for (int n = 1; n < c.half_layers(); n += 2) {
    const std::string x = layer_prefix(n) + "zaya_block.experts.local_experts.";
    for (int e = e0; e < e1; ++e)
      add(x + std::to_string(e) + ".linear_fc1.weight", {2 * F, D}, ParamKind::kMatrix, InitKind::kNormal, std, n, e);
    for (int e = e0; e < e1; ++e)
      add(x + std::to_string(e) + ".linear_fc2.weight", {D, F}, ParamKind::kMatrix, InitKind::kNormal, out_std, n, e);
  }
  (void)E;
}

const ParamEntry* ParamTable::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const ParamEntry& ParamTable::at(const std::string& name) const {
  const ParamEntry* e = find(name);
  if (e == nullptr) fail("internal error: no parameter named '{}'", name);
  return *e;
}

void init_params(const ParamTable& table, float* base, const ZayaConfig& c, uint64_t seed) {
  for (const ParamEntry& e : table.entries()) {
    float* p = base + e.offset;
    // One Philox stream per tensor, from its name: a tensor's values depend on
    // neither the other tensors nor which experts this rank holds.
    const uint64_t stream = name_stream(e.name);
    switch (e.init) {
      case InitKind::kNormal: fill_normal(p, e.numel, 0.0f, e.init_std, seed, stream); break;
      case InitKind::kOnes:
        for (int64_t i = 0; i < e.numel; ++i) p[i] = 1.0f;
        break;
      case InitKind::kZeros:
        for (int64_t i = 0; i < e.numel; ++i) p[i] = 0.0f;
        break;
      case InitKind::kConvDepthwise:  // [C, 1, 2]: out[t] ~ in[t] (tap 1 is the newer step)
        fill_normal(p, e.numel, 0.0f, e.init_std, seed, stream);
        for (int64_t ch = 0; ch < e.shape[0]; ++ch) p[ch * 2 + 1] += 1.0f;
        break;
      case InitKind::kConvGrouped: {  // [C, d, 2]: identity within the group on tap 1
        fill_normal(p, e.numel, 0.0f, e.init_std, seed, stream);
        const int64_t d = c.head_dim;
        for (int64_t o = 0; o < e.shape[0]; ++o) p[(o * d + o % d) * 2 + 1] += 1.0f;
        break;
      }
    }
  }
}

ParamCounts count_parameters(const ZayaConfig& c) {
  ParamTable table(c, true);
  ParamCounts counts;
  for (const ParamEntry& e : table.entries()) {
    counts.total += e.numel;
    if (e.kind == ParamKind::kEmbedding) counts.embedding += e.numel;
    if (e.expert < 0 || e.expert < c.top_k) counts.active += e.numel;  // top_k experts' worth per layer
  }
  return counts;
}

}  // namespace zaya
