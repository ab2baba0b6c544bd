#include "zaya/model/tensor_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <optional>

#include "zaya/core/error.h"

namespace zaya {
namespace {

using R = TensorRole;
using S = TensorScope;
using K = ParamKind;
using I = InitKind;
using X = InitScale;

// clang-format off
constexpr TensorDecl kDecls[] = {
  // role                  scope         legacy                                   native                                     gguf                     kind        init                 scale     buffer  lora (PEFT target)
  {R::kEmbedding,          S::kGlobal,   "model.embed_tokens.weight",             "model.embed_tokens.weight",               "token_embd.weight",     K::kEmbedding, I::kNormal,       X::kBase,    false, nullptr},
  {R::kFinalNorm,          S::kGlobal,   "model.final_norm.weight",               "model.norm.weight",                       "output_norm.weight",    K::kVector, I::kOnes,            X::kNone,    false, nullptr},
  {R::kLmHead,             S::kGlobal,   "lm_head.weight",                        "lm_head.weight",                          "output.weight",         K::kEmbedding, I::kNormal,       X::kBase,    false, nullptr},
  {R::kMergeHiddenScale,   S::kMerge,    "hidden_states_scale",                   "hidden_states_scale",                     "hs.weight",             K::kVector, I::kOnes,            X::kNone,    false, nullptr},
  {R::kMergeHiddenBias,    S::kMerge,    "hidden_states_bias",                    "hidden_states_bias",                      "hs.bias",               K::kVector, I::kZeros,           X::kNone,    false, nullptr},
  {R::kMergeResidualScale, S::kMerge,    "residual_scale",                        "residual_scale",                          "res.weight",            K::kVector, I::kOnes,            X::kNone,    false, nullptr},
  {R::kMergeResidualBias,  S::kMerge,    "residual_bias",                         "residual_bias",                           "res.bias",              K::kVector, I::kZeros,           X::kNone,    false, nullptr},
  {R::kAttnNorm,           S::kAttention, "input_norm.weight",                    "input_layernorm.weight",                  "attn_norm.weight",      K::kVector, I::kOnes,            X::kNone,    false, nullptr},
  {R::kAttnQ,              S::kAttention, "self_attn.qkv.linear_q.weight",        "self_attn.qkv_proj.q_proj.weight",        "attn_q.weight",         K::kMatrix, I::kNormal,          X::kBase,    false, "q_proj"},
  {R::kAttnK,              S::kAttention, "self_attn.qkv.linear_k.weight",        "self_attn.qkv_proj.k_proj.weight",        "attn_k.weight",         K::kMatrix, I::kNormal,          X::kBase,    false, "k_proj"},
  {R::kAttnVCurrent,       S::kAttention, "self_attn.qkv.val_proj1.weight",       "self_attn.qkv_proj.v_proj_current.weight", "attn_v_cur.weight",    K::kMatrix, I::kNormal,          X::kBase,    false, "v_proj_current"},
  {R::kAttnVDelayed,       S::kAttention, "self_attn.qkv.val_proj2.weight",       "self_attn.qkv_proj.v_proj_delayed.weight", "attn_v_prev.weight",   K::kMatrix, I::kNormal,          X::kBase,    false, "v_proj_delayed"},
  {R::kConvDepthwise,      S::kAttention, "self_attn.qkv.conv_qk.0.weight",       "self_attn.qkv_proj.conv_qk_depthwise.weight", "attn_conv_dw.weight", K::kConv, I::kConvDepthwise,   X::kBase,    false, nullptr},
  {R::kConvDepthwiseBias,  S::kAttention, "self_attn.qkv.conv_qk.0.bias",         "self_attn.qkv_proj.conv_qk_depthwise.bias", "attn_conv_dw.bias",  K::kVector, I::kZeros,           X::kNone,    false, nullptr},
  {R::kConvGrouped,        S::kAttention, "self_attn.qkv.conv_qk.1.weight",       "self_attn.qkv_proj.conv_qk_grouped.weight", "attn_conv_grp.weight", K::kConv,  I::kConvGrouped,     X::kGrouped, false, nullptr},
  {R::kConvGroupedBias,    S::kAttention, "self_attn.qkv.conv_qk.1.bias",         "self_attn.qkv_proj.conv_qk_grouped.bias", "attn_conv_grp.bias",   K::kVector, I::kZeros,           X::kNone,    false, nullptr},
  {R::kKeyTemperature,     S::kAttention, "self_attn.qkv.temp",                   "self_attn.qk_norm.temp",                  "attn_temp.weight",      K::kVector, I::kOnes,            X::kNone,    false, nullptr},
  {R::kAttnOut,            S::kAttention, "self_attn.o_proj.weight",              "self_attn.o_proj.weight",                 "attn_output.weight",    K::kMatrix, I::kNormal,          X::kOutput,  false, "o_proj"},
  {R::kMoeNorm,            S::kMoe,      "input_norm.weight",                     "post_attention_layernorm.weight",         "ffn_norm.weight",       K::kVector, I::kOnes,            X::kNone,    false, nullptr},
  {R::kRouterDown,         S::kMoe,      "zaya_block.router.down_proj.weight",    "mlp.gate.down_proj.weight",               "ffn_router_down.weight", K::kMatrix, I::kNormal,         X::kBase,    false, "mlp.gate.down_proj"},
  {R::kRouterDownBias,     S::kMoe,      "zaya_block.router.down_proj.bias",      "mlp.gate.down_proj.bias",                 "ffn_router_down.bias",  K::kVector, I::kZeros,           X::kNone,    false, nullptr},
  {R::kRouterStateScale,   S::kMoe,      "zaya_block.router.router_states_scale", "mlp.gate.router_states_scale",            "ffn_router_eda.weight", K::kVector, I::kOnes,            X::kNone,    false, nullptr},
  {R::kRouterNorm,         S::kMoe,      "zaya_block.router.rmsnorm_eda.weight",  "mlp.gate.router_mlp.norm.weight",         "ffn_router_norm.weight", K::kVector, I::kOnes,           X::kNone,    false, nullptr},
  {R::kRouterFc1,          S::kMoe,      "zaya_block.router.router_mlp.0.weight", "mlp.gate.router_mlp.fc1.weight",          "ffn_router_fc1.weight", K::kMatrix, I::kNormal,          X::kBase,    false, "mlp.gate.router_mlp.fc1"},
  {R::kRouterFc1Bias,      S::kMoe,      "zaya_block.router.router_mlp.0.bias",   "mlp.gate.router_mlp.fc1.bias",            "ffn_router_fc1.bias",   K::kVector, I::kZeros,           X::kNone,    false, nullptr},
  {R::kRouterFc2,          S::kMoe,      "zaya_block.router.router_mlp.2.weight", "mlp.gate.router_mlp.fc2.weight",          "ffn_router_fc2.weight", K::kMatrix, I::kNormal,          X::kBase,    false, "mlp.gate.router_mlp.fc2"},
  {R::kRouterFc2Bias,      S::kMoe,      "zaya_block.router.router_mlp.2.bias",   "mlp.gate.router_mlp.fc2.bias",            "ffn_router_fc2.bias",   K::kVector, I::kZeros,           X::kNone,    false, nullptr},
  {R::kRouterOut,          S::kMoe,      "zaya_block.router.router_mlp.4.weight", "mlp.gate.router_mlp.out_proj.weight",     "ffn_router_out.weight", K::kMatrix, I::kNormal,          X::kBase,    false, "mlp.gate.router_mlp.out_proj"},
  {R::kBalancingBias,      S::kMoe,      "zaya_block.router.balancing_biases",    "mlp.gate.balancing_biases",               "exp_probs_b.bias",      K::kVector, I::kZeros,           X::kNone,    true, nullptr},
  {R::kExpertFc1,          S::kExpert,   "linear_fc1.weight",                     "mlp.experts.gate_up_proj",                "ffn_{}_exps.weight",    K::kMatrix, I::kNormal,          X::kBase,    false, "mlp.experts.gate_up_proj"},
  {R::kExpertFc2,          S::kExpert,   "linear_fc2.weight",                     "mlp.experts.down_proj",                   "ffn_down_exps.weight",  K::kMatrix, I::kNormal,          X::kOutput,  false, "mlp.experts.down_proj"},
};
// clang-format on

// The LoRA column's rows, in table order.
constexpr auto kLoraRowCount =
    size_t(std::ranges::count_if(kDecls, [](const TensorDecl& d) { return d.lora != nullptr; }));
constexpr std::array<TensorRole, kLoraRowCount> kLoraRoles = [] {
  std::array<TensorRole, kLoraRowCount> roles{};
  size_t k = 0;
  for (const TensorDecl& d : kDecls)
    if (d.lora != nullptr) roles[k++] = d.role;
  return roles;
}();

constexpr const char* kExpertsLegacyPrefix = "zaya_block.experts.local_experts.";

}  // namespace

std::span<const TensorDecl> tensor_decls() { return kDecls; }

std::span<const TensorRole> lora_target_roles() { return kLoraRoles; }

const TensorDecl& tensor_decl(TensorRole role) {
  for (const TensorDecl& d : kDecls)
    if (d.role == role) return d;
  fail("internal error: tensor role {} has no declaration", int(role));
}

std::string layer_prefix(int half_layer) { return "model.layers." + std::to_string(half_layer) + "."; }

bool tensor_present(TensorRole role, int n, const ZayaConfig& c) {
  switch (role) {
    case R::kMergeHiddenScale:
    case R::kMergeHiddenBias: return c.scale_residual_merge;  // without it every merge is a plain sum (spec §11)
    case R::kMergeResidualScale:
    case R::kMergeResidualBias:
      return c.scale_residual_merge && n != 0;  // merge point 0 takes the embedding alone (spec §5)
    case R::kLmHead: return !c.tie_word_embeddings;
    case R::kRouterStateScale: return c.use_eda && n > 1;  // no EDA into the first MoE half-layer (spec §4)
    default: return true;
  }
}

namespace {

TensorDims dims(std::initializer_list<int64_t> d) {
  TensorDims t;
  for (int64_t x : d) t.dims[size_t(t.rank++)] = x;
  return t;
}

}  // namespace

TensorDims tensor_dims(TensorRole role, const ZayaConfig& c) {
  const int64_t D = c.hidden, R = c.router_hidden, N = c.router_slots(), F = c.expert_ffn;
  const int64_t Q = c.q_width(), Kw = c.kv_width(), C = c.conv_channels(), d = c.head_dim;
  switch (role) {
    case R::kEmbedding:
    case R::kLmHead: return dims({c.vocab_size, D});
    case R::kFinalNorm:
    case R::kMergeHiddenScale:
    case R::kMergeHiddenBias:
    case R::kMergeResidualScale:
    case R::kMergeResidualBias:
    case R::kAttnNorm:
    case R::kMoeNorm: return dims({D});
    case R::kAttnQ: return dims({Q, D});
    case R::kAttnK: return dims({Kw, D});
    case R::kAttnVCurrent:
    case R::kAttnVDelayed: return dims({c.value_stream_width(), D});
    case R::kConvDepthwise: return dims({C, 1, c.conv_kernel0});
    case R::kConvDepthwiseBias:
    case R::kConvGroupedBias: return dims({C});
    case R::kConvGrouped: return dims({C, d, c.conv_kernel1});
    case R::kKeyTemperature: return dims({c.kv_heads});
    case R::kAttnOut: return dims({D, Q});
    case R::kRouterDown: return dims({R, D});
    case R::kRouterDownBias:
    case R::kRouterStateScale:
    case R::kRouterNorm:
    case R::kRouterFc1Bias:
    case R::kRouterFc2Bias: return dims({R});
    case R::kRouterFc1:
    case R::kRouterFc2: return dims({R, R});
    case R::kRouterOut: return dims({N, R});
    case R::kBalancingBias: return dims({N});
    case R::kExpertFc1: return dims({2 * F, D});
    case R::kExpertFc2: return dims({D, F});
  }
  fail("internal error: tensor role {} has no shape", int(role));
}

std::vector<int64_t> tensor_shape(TensorRole role, const ZayaConfig& c) {
  const TensorDims t = tensor_dims(role, c);
  return {t.dims.begin(), t.dims.begin() + t.rank};
}

float tensor_init_std(TensorRole role, const ZayaConfig& c) {
  const float base = 0.02f;
  switch (tensor_decl(role).scale) {
    case X::kNone: return 0.0f;
    case X::kBase: return base;
    case X::kOutput: return base / std::sqrt(2.0f * float(c.num_blocks));
    case X::kGrouped: return base / std::sqrt(float(c.head_dim));
  }
  return 0.0f;
}

std::string legacy_tensor_name(TensorRole role, int n, int expert) {
  const TensorDecl& d = tensor_decl(role);
  switch (d.scope) {
    case S::kGlobal: return d.legacy;
    case S::kMerge: return (n < 0 ? std::string("model.") : layer_prefix(n)) + "res_scale." + d.legacy;
    case S::kAttention:
    case S::kMoe: return layer_prefix(n) + d.legacy;
    case S::kExpert: return layer_prefix(n) + kExpertsLegacyPrefix + std::to_string(expert) + "." + d.legacy;
  }
  return d.legacy;
}

NativeTensorRef native_tensor_ref(TensorRole role, int n, int expert, const ZayaConfig& c) {
  const TensorDecl& d = tensor_decl(role);
  const std::string layer = fmt::format("model.layers.{}.", n / 2);  // native layer i = half-layers 2i, 2i+1
  switch (d.scope) {
    case S::kGlobal: return {d.native};
    case S::kMerge:
      // The merge at the input of half-layer n closes the previous half-layer (spec §6.3).
      if (n == 0) return {std::string("model.input_") + d.native};
      if (n < 0) return {fmt::format("model.layers.{}.post_mlp_residual_scale.{}", c.num_blocks - 1, d.native)};
      if (n % 2 == 1) return {layer + "post_attention_residual_scale." + d.native};
      return {fmt::format("model.layers.{}.post_mlp_residual_scale.{}", n / 2 - 1, d.native)};
    case S::kAttention:
    case S::kMoe: return {layer + d.native};
    case S::kExpert: return {layer + d.native, expert};
  }
  return {d.native};
}

NativeTensorRef native_tensor_for(const std::string& legacy_name, const ZayaConfig& c) {
  // A tool's lookup, not a hot path: walk every tensor of the config.
  std::optional<NativeTensorRef> found;
  auto check = [&](TensorRole role, int n, int e = -1) {
    if (!found && tensor_present(role, n, c) && legacy_tensor_name(role, n, e) == legacy_name)
      found = native_tensor_ref(role, n, e, c);
  };
  for (const TensorDecl& d : kDecls) {
    if (d.scope == S::kGlobal || d.scope == S::kMerge) check(d.role, -1);
    for (int n = 0; n < c.half_layers(); ++n) {
      if (d.scope == S::kMerge) check(d.role, n);
      if ((d.scope == S::kAttention && n % 2 == 0) || (d.scope == S::kMoe && n % 2 == 1)) check(d.role, n);
      if (d.scope == S::kExpert && n % 2 == 1)
        for (int e = 0; e < c.experts; ++e) check(d.role, n, e);
    }
  }
  if (!found) fail("no tensor '{}' in the ZAYA1 layout of this config", legacy_name);
  return *found;
}

std::string gguf_tensor_name(TensorRole role, int n, int part) {
  const TensorDecl& d = tensor_decl(role);
  const std::string blk = fmt::format("blk.{}.", n / 2);
  switch (d.scope) {
    case S::kGlobal: return d.gguf;
    case S::kMerge:
      if (n < 0) return std::string("output_merge_") + d.gguf;
      return blk + (n % 2 == 0 ? "attn_merge_" : "ffn_merge_") + d.gguf;
    case S::kAttention:
    case S::kMoe: return blk + d.gguf;
    case S::kExpert:
      if (role == R::kExpertFc1) return blk + fmt::format(fmt::runtime(d.gguf), part == 0 ? "gate" : "up");
      return blk + d.gguf;
  }
  return d.gguf;
}

}  // namespace zaya
