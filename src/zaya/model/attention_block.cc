#include "zaya/model/attention_block.h"

#include <algorithm>

#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/core/zero_fill.h"
#include "zaya/model/context_parallel.h"
#include "zaya/model/conv_taps.h"
#include "zaya/model/lora_branch.h"

#include "zaya/ops/attention.h"
#include "zaya/ops/attention_bf16.h"
#include "zaya/ops/bf16_linear.h"
#include "zaya/ops/cca_conv.h"
#include "zaya/ops/cca_mix.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/qk_norm.h"
#include "zaya/ops/rope.h"

namespace zaya {
namespace {

// Fused projection width P: q (Q) | k (K) | v_cur (K/2) | v_prev (K/2).
int64_t fused_width(const ZayaConfig& c) { return c.q_width() + 2 * c.kv_width(); }

// The convolutions' taps (cca_time0 / cca_time1); under cp the halo has
// conv_halo_rows(c) rows per piece (the last history() of them used).
CcaConvShape conv_shape(const ZayaConfig& c, const Precision& precision, const BatchShape& b) {
  CcaConvShape s{b.batch, b.seq, c.conv_channels(), c.head_dim, fused_width(c)};
  s.taps_a = c.conv_kernel0;
  s.taps_b = c.conv_kernel1;
  s.hist_rows = conv_halo_rows(c);
  s.doc_pos = b.doc_pos_T;
  s.bf16 = precision.bf16;  // mixed precision: conv B's products in bf16
  return s;
}
CcaMixShape mix_shape(const ZayaConfig& c, const BatchShape& b) {
  CcaMixShape s{b.batch, b.seq, c.q_heads, c.kv_heads, c.head_dim, fused_width(c), conv_halo_rows(c)};
  s.doc_pos = b.doc_pos_T;
  return s;
}
AttentionShape attn_shape(const ZayaConfig& c, int64_t block, const BatchShape& b) {
  AttentionShape s{b.batch, b.seq, c.q_heads, c.kv_heads, c.head_dim};
  s.window = c.window_of(block);
  s.doc_pos = b.doc_pos_T;
  return s;
}

// The block's RoPE table: sliding blocks have their own base (spec §12).
const RopeTable& rope_of(const ZayaConfig& c, int64_t block, const BatchShape& b) {
  const RopeTable* t = c.is_sliding(block) ? b.sliding_rope : b.rope;
  ZAYA_ASSERT(t != nullptr);
  return *t;
}

// The sequences the convolutions and the value shift run over: whole
// sequences, or under context parallelism each of this rank's 2B chunks (with
// the halo as their history).
BatchShape conv_pieces(const BatchShape& b) {
  if (b.cp == nullptr) return b;
  BatchShape p = b;
  p.batch = b.batch * 2;
  p.seq = b.cp->chunk;
  return p;
}

// Rows of convA's output: S + k1 - 1 per convolved sequence (two chunks per sequence under cp).
int64_t conv_a_rows(const ZayaConfig& c, int64_t B, int64_t S, int cp) {
  const int64_t extra = c.conv_kernel1 - 1;
  return cp > 0 ? B * (S + 2 * extra) : B * (S + extra);
}

}  // namespace

void carve_attention_acts(AttentionActs& a, const ZayaConfig& c, int64_t B, int64_t S, Arena& arena, int cp,
                          bool keep_input_bf16) {
  const int64_t T = B * S, Q = c.q_width(), K = c.kv_width();
  a.x_bf16_TD = keep_input_bf16 ? arena.carve_bf16(bf16_padded_rows(T) * c.hidden) : nullptr;
  a.qkv_TP = arena.carve(T * fused_width(c));
  a.conv_a_BUC = arena.carve(conv_a_rows(c, B, S, cp) * c.conv_channels());
  a.q_pre_TQ = arena.carve(T * Q);
  a.k_pre_TK = arena.carve(T * K);
  a.q_inv_TH = arena.carve(T * c.q_heads);
  a.k_inv_TH = arena.carve(T * c.kv_heads);
  a.q_TQ = arena.carve(T * Q);
  a.k_TK = arena.carve(T * K);
  a.v_TK = arena.carve(T * K);
  a.lse_BHS = arena.carve(B * c.q_heads * S);
  a.o_TQ = arena.carve(T * Q);
  if (cp > 0) a.hist_2B2P = arena.carve(2 * B * conv_halo_rows(c) * fused_width(c));
}

void carve_attention_scratch(AttentionScratch& s, const ZayaConfig& c, int64_t B, int64_t S, int threads, Arena& arena,
                             int cp) {
  const int64_t T = B * S, Q = c.q_width(), K = c.kv_width(), C = c.conv_channels(), P = fused_width(c);
  CcaConvShape cs{B, S, C, c.head_dim, 0};
  cs.taps_b = c.conv_kernel1;  // the scratch holds conv B's repacked taps
  AttentionShape as{B, S, c.q_heads, c.kv_heads, c.head_dim, S * std::max(cp, 1)};
  s.c_TC = arena.carve(T * C);
  s.conv = arena.carve(2 * cca_conv_scratch_floats(cs));
  s.attn = arena.carve(attention_scratch_floats(as, threads));
  s.dO_TQ = arena.carve(T * Q);
  s.dq_TQ = arena.carve(T * Q);
  s.dk_TK = arena.carve(T * K);
  s.dv_TK = arena.carve(T * K);
  s.dq_pre_TQ = arena.carve(T * Q);
  s.dk_pre_TK = arena.carve(T * K);
  s.dc_TC = arena.carve(T * C);
  s.dqkv_TP = arena.carve(T * fused_width(c));
  s.da_BUC = arena.carve(conv_a_rows(c, B, S, cp) * C);
  s.conv_sink = arena.carve(C * (c.conv_kernel0 + 2 + c.head_dim * c.conv_kernel1));
  if (cp > 0) {
    const int64_t full = B * S * cp * K;
    s.k_full_BSK = arena.carve(full);
    s.v_full_BSK = arena.carve(full);
    s.dk_full_BSK = arena.carve(full);
    s.dv_full_BSK = arena.carve(full);
    s.stage = arena.carve(2 * full);
    const int64_t h = conv_halo_rows(c);
    s.halo_send = arena.carve(2 * B * h * P);
    s.halo_recv = arena.carve(2 * B * h * P);
    s.dhist_2B2P = arena.carve(2 * B * h * P);
  }
}

void attention_block_forward(const ZayaConfig& c, const Precision& precision, int64_t block, const AttentionWeights& w,
                             AttentionActs& a, AttentionScratch& s, const BatchShape& b, const float* x_TD,
                             float* out_TD, const BlockLora* lora) {
  const int64_t T = b.tokens(), D = c.hidden, P = fused_width(c);
  const RopeTable& rope = rope_of(c, block, b);
  {
    ZAYA_PROFILE_SCOPE("attn.fwd.qkv_proj");
    if (a.x_bf16_TD != nullptr) {
      for (LoraTarget t : kLoraQkvTargets)
        ZAYA_CHECK(lora == nullptr || !lora->has(t),
                   "internal error: a q/k/v adapter reads the attention input in float32");
      linear_forward_bf16_keep(*precision.bf16, a.qkv_TP, x_TD, a.x_bf16_TD, precision.bf16->required_copy_of(w.qkv_PD),
                               T, D, P, false);
    } else {
      linear_forward<float>(precision, a.qkv_TP, x_TD, w.qkv_PD, T, D, P);
    }
    // q, k and the value streams are rows of the fused product: each adapter adds into its columns.
    for (LoraTarget t : kLoraQkvTargets)
      lora_branch_forward(a.qkv_TP, x_TD, lora_branch(c, lora, t, T, P, LoraPass::kForward));
  }
  ZAYA_PROFILE_SCOPE("attn.fwd.conv_norm_rope_attention_oproj");
  const ContextParallel* cp = b.cp;
  const float* hist = nullptr;
  if (cp != nullptr) {
    ZAYA_PROFILE_SCOPE("attn.fwd.cp_halo");
    cp_halo_forward(*cp, a.qkv_TP, b.batch, P, a.hist_2B2P, s.halo_send, s.halo_recv);
    hist = a.hist_2B2P;
  }
  const BatchShape pieces = conv_pieces(b);
  cca_conv_forward<float>(s.c_TC, a.conv_a_BUC, a.qkv_TP, w.conv_a_w_C12, w.conv_a_b_C, w.conv_b_w_Cd2, w.conv_b_b_C,
                          conv_shape(c, precision, pieces), s.conv, hist);
  cca_mean_terms_forward<float>(a.q_pre_TQ, a.k_pre_TK, s.c_TC, a.qkv_TP, mix_shape(c, b));
  cca_values_forward<float>(a.v_TK, a.qkv_TP, mix_shape(c, pieces), hist);
  // Under context parallelism V, then K, travel while the queries are normalised and rotated.
  const int64_t K = c.kv_width();
  Request gather_v, gather_k;
  if (cp != nullptr) gather_v = cp_gather_begin(*cp, a.v_TK, b.batch, K, s.stage + b.batch * cp->full_seq() * K);
  l2norm_heads_forward<float>(a.k_TK, a.k_inv_TH, a.k_pre_TK, w.temp_Hk, T, c.kv_heads, c.head_dim);
  rope_apply<float>(a.k_TK, b.rope_pos_T(), T, c.kv_heads, c.head_dim, rope, false);
  if (cp != nullptr) gather_k = cp_gather_begin(*cp, a.k_TK, b.batch, K, s.stage);
  l2norm_heads_forward<float>(a.q_TQ, a.q_inv_TH, a.q_pre_TQ, nullptr, T, c.q_heads, c.head_dim);
  rope_apply<float>(a.q_TQ, b.rope_pos_T(), T, c.q_heads, c.head_dim, rope, false);
  AttentionShape as = attn_shape(c, block, b);
  const float* k = a.k_TK;
  const float* v = a.v_TK;
  if (cp != nullptr) {
    ZAYA_PROFILE_SCOPE("attn.fwd.cp_gather_kv");
    cp_gather_end(*cp, gather_k, s.stage, s.k_full_BSK, b.batch, K);
    cp_gather_end(*cp, gather_v, s.stage + b.batch * cp->full_seq() * K, s.v_full_BSK, b.batch, K);
    as.kv_seq = cp->full_seq();
    as.q_pos = b.pos_T;  // the same local positions in every sequence
    k = s.k_full_BSK;
    v = s.v_full_BSK;
  }
  if (precision.bf16_gemms() && attention_bf16_supports(as)) {
    attention_forward_bf16(*precision.bf16, a.o_TQ, a.lse_BHS, a.q_TQ, k, v, as);
  } else {
    attention_forward<float>(a.o_TQ, a.lse_BHS, a.q_TQ, k, v, as, s.attn);
  }
  adapted_linear_forward(precision, out_TD, a.o_TQ, w.o_DQ, T, c.q_width(), D,
                         lora_branch(c, lora, LoraTarget::kO, T, D, LoraPass::kForward));
}

void attention_block_backward(const ZayaConfig& c, const Precision& precision, int64_t block, const AttentionWeights& w,
                              const AttentionWeights& g, const AttentionActs& a, AttentionScratch& s,
                              const BatchShape& b, const float* x_TD, const float* dout_TD, float* dx_TD,
                              const BlockLora* lora) {
  const int64_t T = b.tokens(), D = c.hidden, P = fused_width(c), Q = c.q_width(), K = c.kv_width();
  const RopeTable& rope = rope_of(c, block, b);
  ZAYA_PROFILE_SCOPE("attn.bwd");
  // out = O Wo^T
  zero_fill(s.dO_TQ, T * Q);
  adapted_linear_backward(precision, s.dO_TQ, g.o_DQ, dout_TD, a.o_TQ, w.o_DQ, T, Q, D,
                          lora_branch(c, lora, LoraTarget::kO, T, D, LoraPass::kBackward));
  // attention
  zero_fill(s.dq_TQ, T * Q);
  zero_fill(s.dk_TK, T * K);
  zero_fill(s.dv_TK, T * K);
  const ContextParallel* cp = b.cp;
  const bool bf16 = precision.bf16_gemms();
  if (cp == nullptr) {
    const AttentionShape as = attn_shape(c, block, b);
    if (bf16 && attention_bf16_supports(as)) {
      attention_backward_bf16(*precision.bf16, s.dq_TQ, s.dk_TK, s.dv_TK, s.dO_TQ, a.q_TQ, a.k_TK, a.v_TK, a.o_TQ,
                              a.lse_BHS, as);
    } else {
      attention_backward<float>(s.dq_TQ, s.dk_TK, s.dv_TK, s.dO_TQ, a.q_TQ, a.k_TK, a.v_TK, a.o_TQ, a.lse_BHS, as,
                                s.attn);
    }
  } else {
    // Gather K and V again (not kept: memory per rank stays O(S / cp) per layer),
    // then return each rank's share of their gradients.
    ZAYA_PROFILE_SCOPE("attn.bwd.cp_attention");
    const int64_t full = b.batch * cp->full_seq() * K;
    Request gk = cp_gather_begin(*cp, a.k_TK, b.batch, K, s.stage);
    Request gv = cp_gather_begin(*cp, a.v_TK, b.batch, K, s.stage + full);
    cp_gather_end(*cp, gk, s.stage, s.k_full_BSK, b.batch, K);
    cp_gather_end(*cp, gv, s.stage + full, s.v_full_BSK, b.batch, K);
    AttentionShape as = attn_shape(c, block, b);
    as.kv_seq = cp->full_seq();
    as.q_pos = b.pos_T;
    zero_fill(s.dk_full_BSK, full);
    zero_fill(s.dv_full_BSK, full);
    if (bf16 && attention_bf16_supports(as)) {
      attention_backward_bf16(*precision.bf16, s.dq_TQ, s.dk_full_BSK, s.dv_full_BSK, s.dO_TQ, a.q_TQ, s.k_full_BSK,
                              s.v_full_BSK, a.o_TQ, a.lse_BHS, as);
    } else {
      attention_backward<float>(s.dq_TQ, s.dk_full_BSK, s.dv_full_BSK, s.dO_TQ, a.q_TQ, s.k_full_BSK, s.v_full_BSK,
                                a.o_TQ, a.lse_BHS, as, s.attn);
    }
    cp_reduce_scatter(*cp, s.dk_full_BSK, s.dk_TK, b.batch, K, s.stage);
    cp_reduce_scatter(*cp, s.dv_full_BSK, s.dv_TK, b.batch, K, s.stage);
  }
  // RoPE is a rotation: its backward is the inverse rotation.
  rope_apply<float>(s.dq_TQ, b.rope_pos_T(), T, c.q_heads, c.head_dim, rope, true);
  rope_apply<float>(s.dk_TK, b.rope_pos_T(), T, c.kv_heads, c.head_dim, rope, true);
  // QK norm
  zero_fill(s.dq_pre_TQ, T * Q);
  zero_fill(s.dk_pre_TK, T * K);
  l2norm_heads_backward<float>(s.dq_pre_TQ, nullptr, s.dq_TQ, a.q_pre_TQ, a.q_inv_TH, nullptr, T, c.q_heads,
                               c.head_dim);
  l2norm_heads_backward<float>(s.dk_pre_TK, g.temp_Hk, s.dk_TK, a.k_pre_TK, a.k_inv_TH, w.temp_Hk, T, c.kv_heads,
                               c.head_dim);
  // mean terms, values, convolutions -> gradient of the fused projection
  zero_fill(s.dqkv_TP, T * P);
  cca_mean_terms_backward<float>(s.dc_TC, s.dqkv_TP, s.dq_pre_TQ, s.dk_pre_TK, mix_shape(c, b));
  const BatchShape pieces = conv_pieces(b);
  float* dhist = nullptr;
  if (cp != nullptr) {
    dhist = s.dhist_2B2P;
    zero_fill(dhist, 2 * b.batch * conv_halo_rows(c) * P);
  }
  cca_values_backward<float>(s.dqkv_TP, s.dv_TK, mix_shape(c, pieces), dhist);
  // Frozen taps (null views, all four together): their gradients go to the sink.
  const int64_t C = c.conv_channels();
  const bool frozen_conv = g.conv_a_w_C12 == nullptr;
  ZAYA_ASSERT(frozen_conv == (g.conv_a_b_C == nullptr) && frozen_conv == (g.conv_b_w_Cd2 == nullptr) &&
              frozen_conv == (g.conv_b_b_C == nullptr));
  float* sink_wa = s.conv_sink;
  float* sink_ba = sink_wa + C * c.conv_kernel0;
  float* sink_wb = sink_ba + C;
  float* sink_bb = sink_wb + C * c.head_dim * c.conv_kernel1;
  cca_conv_backward<float>(s.dqkv_TP, frozen_conv ? sink_wa : g.conv_a_w_C12, frozen_conv ? sink_ba : g.conv_a_b_C,
                           frozen_conv ? sink_wb : g.conv_b_w_Cd2, frozen_conv ? sink_bb : g.conv_b_b_C, s.dc_TC,
                           a.qkv_TP, a.conv_a_BUC, w.conv_a_w_C12, w.conv_a_b_C, w.conv_b_w_Cd2,
                           conv_shape(c, precision, pieces), s.da_BUC, s.conv, cp != nullptr ? a.hist_2B2P : nullptr,
                           dhist);
  if (cp != nullptr) {
    ZAYA_PROFILE_SCOPE("attn.bwd.cp_halo");
    cp_halo_backward(*cp, dhist, s.dqkv_TP, b.batch, P, s.halo_send, s.halo_recv);
  }
  if (a.x_bf16_TD != nullptr) {
    linear_backward_bf16_kept(*precision.bf16, dx_TD, g.qkv_PD, s.dqkv_TP, a.x_bf16_TD,
                              precision.bf16->required_copy_of(w.qkv_PD), T, D, P);
  } else {
    linear_backward<float>(precision, dx_TD, g.qkv_PD, s.dqkv_TP, x_TD, w.qkv_PD, T, D, P);
  }
  for (LoraTarget t : kLoraQkvTargets)
    lora_branch_backward(dx_TD, s.dqkv_TP, x_TD, lora_branch(c, lora, t, T, P, LoraPass::kBackward));
}

}  // namespace zaya
