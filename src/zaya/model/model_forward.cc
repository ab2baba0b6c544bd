// The model's passes (model/model.h): model_forward reads as the layer loop
// of spec §5, its steps (staging this rank's rows, binding LoRA, one
// half-layer's block, the LM head) are ModelWorkspace's private members
// below; model_backward walks the same loop back.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/core/zero_fill.h"
#include "zaya/model/conv_taps.h"
#include "zaya/model/model.h"
#include "zaya/ops/bf16_linear.h"
#include "zaya/ops/cross_entropy.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/residual_scale.h"
#include "zaya/ops/rmsnorm.h"

namespace zaya {
namespace {

// The rows of the embedding; from its bf16 copy when the model holds it only
// in bf16 (a frozen bf16 base), widened exactly.
void gather_embedding(float* out_TD, const ZayaModel& model, const int32_t* ids, int64_t T, int64_t D) {
  const float* embed_VD = model.weights().embed_VD;
  const uint16_t* bf16 =
      model.storage() == ParamStorage::kFrozenBf16 ? model.bf16_weights()->copy_of(embed_VD) : nullptr;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < T; ++t) {
    float* out = out_TD + t * D;
    if (bf16 == nullptr) {
      std::memcpy(out, embed_VD + int64_t(ids[t]) * D, sizeof(float) * D);
      continue;
    }
    const uint16_t* row = bf16 + int64_t(ids[t]) * D;
    for (int64_t i = 0; i < D; ++i) out[i] = bf16_to_float(row[i]);
  }
}

const ResidualScaleWeights& merge_weights(const ModelWeights& w, int64_t n, int64_t half_layers) {
  if (n == half_layers) return w.final_merge;
  return n % 2 == 0 ? w.attn[n / 2].merge : w.moe[n / 2].merge;
}
float* input_norm(const ModelWeights& w, int64_t n) {
  return n % 2 == 0 ? w.attn[n / 2].input_norm_D : w.moe[n / 2].input_norm_D;
}

// The LM head's backward for `rows` rows (spec §7): the gradient of
// xent_scale * their cross-entropy with respect to their logits (float32
// dlogits overwrite the logits; under bf16 GEMMs they are written in bf16
// directly), then dx_TD += dlogits head and dw_VD += dlogits^T x_TD (dw_VD
// null: frozen). weight_T: per-row weights of the loss (null: 1).
void head_backward(const Precision& precision, float* dx_TD, float* dw_VD, float* logits_TV, const float* lse_T,
                   const int32_t* targets_T, const float* x_TD, const float* head_VD, int64_t rows, int64_t D,
                   int64_t V, int64_t real_vocab, float xent_scale, const float* weight_T = nullptr) {
  if (const uint16_t* head_bf16 = precision.bf16_gemms() ? precision.bf16->copy_of(head_VD) : nullptr) {
    uint16_t* dlogits = bf16_dy_scratch(*precision.bf16, rows, V);
    cross_entropy_backward_bf16(dlogits, logits_TV, lse_T, targets_T, rows, V, real_vocab, xent_scale, weight_T);
    linear_backward_bf16_rounded(*precision.bf16, dx_TD, dw_VD, dlogits, x_TD, head_bf16, rows, D, V);
  } else {
    cross_entropy_backward<float>(logits_TV, logits_TV, lse_T, targets_T, rows, V, real_vocab, xent_scale, weight_T);
    linear_backward<float>(dx_TD, dw_VD, logits_TV, x_TD, head_VD, rows, D, V);
  }
}

}  // namespace

LossParts model_forward(const ZayaModel& model, ModelWorkspace& ws, const int32_t* ids, const int32_t* targets,
                        int64_t B, int64_t S, const MoeLossOptions& loss, const int32_t* doc_pos,
                        const HeadGradient* head) {
  const ZayaConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const Precision precision = ws.precision_for(model);
  ws.check_pass(model, B, S, targets != nullptr, head);
  ws.stage_batch(c, ids, targets, doc_pos, B, S);
  ws.bind_lora_pass(model);
  const int64_t T = ws.rows(), D = c.hidden, L2 = c.half_layers();
  const float eps = float(c.norm_eps);

  // h = embed[ids] (no scaling, spec §5); then per half-layer: res = merge(h, res), x = norm(res), h = block(x).
  gather_embedding(ws.embed_out_TD_, model, ws.ids_T_.data(), T, D);
  LossParts parts;
  const float* h = ws.embed_out_TD_;
  const float* res = nullptr;
  for (int64_t n = 0; n < L2; ++n) {
    const ResidualScaleWeights& m = merge_weights(w, n, L2);
    residual_scale_forward<float>(ws.res_TD_[n], h, m.hs_scale_D, m.hs_bias_D, res, m.res_scale_D, m.res_bias_D, T, D);
    rmsnorm_forward<float>(ws.x_TD_[n], ws.rstd_T_[n], ws.res_TD_[n], input_norm(w, n), T, D, eps);
    parts.router_loss += ws.block_forward(model, precision, n, loss, ws.routing_[size_t(n / 2)]);
    h = ws.out_TD_[n];
    res = ws.res_TD_[n];
  }
  // The final merge and norm, then logits = x head^T and the cross-entropy (spec §5, §7).
  const ResidualScaleWeights& m = w.final_merge;
  residual_scale_forward<float>(ws.res_TD_[L2], h, m.hs_scale_D, m.hs_bias_D, res, m.res_scale_D, m.res_bias_D, T, D);
  rmsnorm_forward<float>(ws.x_TD_[L2], ws.rstd_T_[L2], ws.res_TD_[L2], w.final_norm_D, T, D, eps);
  ws.lm_head_forward(model, precision, targets != nullptr, head, parts);
  return parts;
}

void ModelWorkspace::check_pass(const ZayaModel& model, int64_t B, int64_t S, bool has_targets,
                                const HeadGradient* head) const {
  ZAYA_CHECK(B >= 1 && B <= max_batch_ && S >= 1 && S <= max_seq_,
             "batch {} x sequence {} does not fit the workspace ({} x {})", B, S, max_batch_, max_seq_);
  ZAYA_CHECK(!kept_.any() || model.bf16_weights() != nullptr,
             "internal error: a workspace keeping bf16 activations needs a model with bf16 GEMMs");
  ZAYA_CHECK(loss_chunk_ == 0 || has_targets,
             "internal error: a workspace with a loss chunk keeps no logits, so its forward needs targets");
  ZAYA_CHECK(head == nullptr || (loss_chunk_ > 0 && training_),
             "internal error: only a training workspace with a loss chunk forms the head's gradient in the forward");
}

void ModelWorkspace::stage_batch(const ZayaConfig& c, const int32_t* ids, const int32_t* targets,
                                 const int32_t* doc_pos, int64_t B, int64_t S) {
  const int64_t V = c.vocab_size;
  head_grad_done_ = false;
  // This rank's rows: whole sequences, or its chunks of each (context parallelism).
  const ContextParallel* cp = nullptr;
  int64_t L = S;
  if (cp_comm_ != nullptr) {
    cp_ = make_context_parallel(*cp_comm_, S, conv_halo_rows(c));
    cp = &cp_;
    L = cp->local_seq();
    cp_local_positions(*cp, pos_T_.data());
    for (int64_t b = 1; b < B; ++b) std::copy_n(pos_T_.data(), L, pos_T_.data() + b * L);
    cp_take_local(*cp, ids, ids_T_.data(), B);
    if (targets != nullptr) cp_take_local(*cp, targets, targets_T_.data(), B);
    if (doc_pos != nullptr) cp_take_local(*cp, doc_pos, doc_pos_T_.data(), B);
  } else {
    for (int64_t t = 0; t < B * S; ++t) pos_T_[t] = int32_t(t % S);
    std::copy_n(ids, B * S, ids_T_.data());
    if (targets != nullptr) std::copy_n(targets, B * S, targets_T_.data());
    if (doc_pos != nullptr) std::copy_n(doc_pos, B * S, doc_pos_T_.data());
  }
  for (int64_t t = 0; doc_pos != nullptr && t < B * S; ++t)
    ZAYA_CHECK(doc_pos[t] == 0 || (t % S > 0 && doc_pos[t] == doc_pos[t - 1] + 1),
               "document position {} at position {} of sequence {} neither starts a document (0) nor continues the "
               "previous token's ({})",
               doc_pos[t], t % S, t / S, t % S > 0 ? doc_pos[t - 1] : -1);
  const int64_t T = B * L;
  if (targets == nullptr) std::fill_n(targets_T_.data(), T, -1);
  for (int64_t t = 0; t < T; ++t) {
    ZAYA_CHECK(ids_T_[t] >= 0 && ids_T_[t] < V, "token id {} at position {} is outside the vocabulary (0..{})",
               ids_T_[t], pos_T_[t], V - 1);
    ZAYA_CHECK(targets_T_[t] < c.real_vocab_size, "target id {} at position {} is outside the vocabulary",
               targets_T_[t], pos_T_[t]);
  }
  shape_ = {B,
            L,
            pos_T_.data(),
            &rope_,
            c.has_sliding() ? &sliding_rope_ : nullptr,
            cp,
            doc_pos != nullptr ? doc_pos_T_.data() : nullptr};
}

void ModelWorkspace::bind_lora_pass(const ZayaModel& model) {
  const ZayaConfig& c = model.config();
  // LoRA: each block's adapters, this pass's dropout mask.
  const LoraAdapters* lora = model.lora();
  if (lora != nullptr) {
    const LoraConfig& lc = lora->config();
    ZAYA_CHECK(lora_rank_ == lc.rank && lora_targets_ == lc.targets,
               "internal error: the workspace has no LoRA buffers for rank {} and these targets", lc.rank);
    for (int64_t b = 0; b < c.num_blocks; ++b) {
      BlockLora& al = lora_[size_t(b)];
      al.weights = &lora->views()[size_t(b)];
      al.grads = nullptr;
      al.rank = lc.rank;
      al.scale = lc.scale();
      al.dropout = lora_dropout_ ? lc.dropout : 0.0;
      al.seed = lora_seed_;
      al.stream = lora_pass_ * uint64_t(c.num_blocks) + uint64_t(b);
    }
  }
}

double ModelWorkspace::block_forward(const ZayaModel& model, const Precision& precision, int64_t n,
                                     const MoeLossOptions& loss, RoutingStats& stats) {
  const ZayaConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const int64_t l = n / 2;
  const BlockLora* lora = model.lora() != nullptr ? &lora_[size_t(l)] : nullptr;
  if (n % 2 == 0) {
    attention_block_forward(c, precision, l, w.attn[l], attn_acts(l), attn_scratch_, shape_, x_TD_[n], out_TD_[n],
                            lora);
    return 0;
  }
  // EDA: the previous MoE layer's router state (spec §4).
  const float* r_prev = (c.use_eda && l > 0) ? moe_router_state(l - 1) : nullptr;
  const RoutingReplay replay{
      .recorded_TJ = routing_record_ != nullptr ? routing_record_ + l * shape_.tokens() * c.top_k : nullptr,
      .force = routing_force_};
  return moe_block_forward(c, precision, w.moe[l], model.balancing_biases()[l], moe_acts(l), moe_scratch_, shape_,
                           x_TD_[n], r_prev, out_TD_[n], loss, stats, ep_, lora,
                           routing_record_ != nullptr ? &replay : nullptr);
}

void ModelWorkspace::lm_head_forward(const ZayaModel& model, const Precision& precision, bool has_targets,
                                     const HeadGradient* head, LossParts& parts) {
  const ZayaConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const int64_t T = shape_.tokens(), D = c.hidden, V = c.vocab_size, L2 = c.half_layers();
  // logits = x head^T (the embedding when tied): float32 results, bf16 operands under mixed precision.
  ZAYA_PROFILE_SCOPE("lm_head.fwd");
  const float* x_head = x_TD_[L2];
  if (loss_chunk_ == 0) {
    linear_forward<float>(precision, logits_TV_, x_head, w.lm_head_VD, T, D, V);
    if (has_targets)
      cross_entropy_forward<float>(loss_T_, lse_T_, logits_TV_, targets_T_.data(), T, V, c.real_vocab_size);
  } else {
    // A chunk of rows at a time, each chunk's head backward while its logits exist.
    if (head != nullptr) zero_fill(dx_TD_, T * D);
    for (int64_t t0 = 0; t0 < T; t0 += loss_chunk_) {
      const int64_t n = std::min(loss_chunk_, T - t0);
      const int32_t* chunk_targets = targets_T_.data() + t0;
      linear_forward<float>(precision, logits_TV_, x_head + t0 * D, w.lm_head_VD, n, D, V);
      cross_entropy_forward<float>(loss_T_ + t0, lse_T_ + t0, logits_TV_, chunk_targets, n, V, c.real_vocab_size);
      if (head != nullptr)
        head_backward(precision, dx_TD_ + t0 * D, head->dw_VD, logits_TV_, lse_T_ + t0, chunk_targets, x_head + t0 * D,
                      w.lm_head_VD, n, D, V, c.real_vocab_size, head->xent_scale);
    }
    if (head != nullptr) {
      head_grad_done_ = true;
      head_grad_dw_ = head->dw_VD;
      head_grad_scale_ = head->xent_scale;
    }
  }
  if (has_targets) {
    for (int64_t t = 0; t < T; ++t)
      if (targets_T_[t] >= 0) {
        parts.xent_sum += loss_T_[t];
        ++parts.xent_tokens;
      }
  }
}

void ModelWorkspace::recompute_half_layer(const ZayaModel& model, const Precision& precision, int64_t k,
                                          const MoeLossOptions& loss) {
  const bool attention = k % 2 == 0;
  const bool full = recompute_ == Recompute::kFull;
  if (!full && !(attention ? recomputes_attention(recompute_) : recomputes_moe(recompute_))) return;
  ZAYA_PROFILE_SCOPE("model.recompute");
  const ZayaConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const int64_t T = shape_.tokens(), D = c.hidden;
  // The same calls on the same inputs as model_forward: the same bits.
  if (full) rmsnorm_forward<float>(x_TD_[k], rstd_T_[k], res_TD_[k], input_norm(w, k), T, D, float(c.norm_eps));
  // LoRA: the forward's adapters and dropout stream again (lora_ is untouched since). Routing statistics and
  // losses were counted by the forward pass (these go to a discarded set); the balancing biases only change at the
  // optimizer update, so the routing (and under expert parallelism the exchange) is the forward's again.
  recompute_stats_.reset(c.router_slots());
  block_forward(model, precision, k, loss, recompute_stats_);
}

void model_backward(const ZayaModel& model, ModelWorkspace& ws, const ModelWeights& g, float xent_scale,
                    float router_scale, const MoeLossOptions& loss, const std::function<void(int)>* layer_done,
                    const LoraViews* lora_grads) {
  ZAYA_CHECK(ws.training_, "model_backward needs a workspace created for training");
  const bool lora = model.lora() != nullptr;
  ZAYA_CHECK(!lora || lora_grads != nullptr, "internal error: a model with LoRA adapters needs their gradients");
  if (lora) {
    for (size_t b = 0; b < ws.lora_.size(); ++b) ws.lora_[b].grads = &(*lora_grads)[b];
  }
  const ZayaConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const BatchShape& shape = ws.shape_;
  const int64_t T = shape.tokens(), D = c.hidden, V = c.vocab_size, L2 = c.half_layers();
  const Precision precision = ws.precision_for(model);
  float* dres = ws.dres_a_TD_;
  float* dres_prev = ws.dres_b_TD_;
  {
    // Cross-entropy and the head (its gradient into the embedding's when tied); float32 dlogits overwrite the logits.
    // With a loss chunk the forward formed them (its dx is in dx_TD_).
    ZAYA_PROFILE_SCOPE("lm_head.bwd");
    if (ws.loss_chunk_ == 0) {
      zero_fill(ws.dx_TD_, T * D);
      head_backward(precision, ws.dx_TD_, g.lm_head_VD, ws.logits_TV_, ws.lse_T_, ws.targets_T_.data(), ws.x_TD_[L2],
                    w.lm_head_VD, T, D, V, c.real_vocab_size, xent_scale, ws.token_weights_);
    } else {
      ZAYA_CHECK(ws.token_weights_ == nullptr, "internal error: per-token loss weights need train.loss_chunk = 0");
      ZAYA_CHECK(ws.head_grad_done_ && ws.head_grad_dw_ == g.lm_head_VD && ws.head_grad_scale_ == xent_scale,
                 "internal error: with a loss chunk, model_forward forms the head's gradient: it needs this "
                 "backward's HeadGradient (the same gradient arena and xent_scale)");
    }
    ws.head_grad_done_ = false;
    zero_fill(dres, T * D);
    rmsnorm_backward<float>(dres, g.final_norm_D, ws.dx_TD_, ws.res_TD_[L2], w.final_norm_D, ws.rstd_T_[L2], T, D);
  }
  zero_fill(ws.moe_scratch_.eda_carry_TR, T * c.router_hidden);
  // Walk back through the merges: merge n built res[n] from out[n-1] and res[n-1].
  for (int64_t n = L2; n >= 1; --n) {
    const int64_t k = n - 1;  // the block whose output we now differentiate
    // Recomputed blocks first run their forward again (full: with their norm, giving out[k] and x[k]).
    ws.recompute_half_layer(model, precision, k, loss);
    const ResidualScaleWeights& m = merge_weights(w, n, L2);
    const ResidualScaleWeights& gm = merge_weights(g, n, L2);
    residual_scale_backward<float>(ws.dh_TD_, gm.hs_scale_D, gm.hs_bias_D, dres_prev, gm.res_scale_D, gm.res_bias_D,
                                   dres, ws.out_TD_[n - 1], m.hs_scale_D, m.hs_bias_D, ws.res_TD_[n - 1], m.res_scale_D,
                                   m.res_bias_D, T, D);
    zero_fill(ws.dx_TD_, T * D);
    if (k % 2 == 0) {
      attention_block_backward(c, precision, k / 2, w.attn[k / 2], g.attn[k / 2], ws.attn_acts(k / 2), ws.attn_scratch_,
                               shape, ws.x_TD_[k], ws.dh_TD_, ws.dx_TD_, lora ? &ws.lora_[size_t(k / 2)] : nullptr);
    } else {
      const int64_t l = k / 2;
      const float* r_prev = (c.use_eda && l > 0) ? ws.moe_router_state(l - 1) : nullptr;
      moe_block_backward(c, precision, w.moe[l], g.moe[l], ws.moe_acts(l), ws.moe_scratch_, shape, ws.x_TD_[k], r_prev,
                         ws.dh_TD_, ws.dx_TD_, loss, router_scale, ws.ep_, lora ? &ws.lora_[size_t(l)] : nullptr);
    }
    rmsnorm_backward<float>(dres_prev, input_norm(g, k), ws.dx_TD_, ws.res_TD_[k], input_norm(w, k), ws.rstd_T_[k], T,
                            D);
    std::swap(dres, dres_prev);
    // Half-layer n's merge was differentiated now, its norm and block one iteration ago.
    if (layer_done != nullptr && n < L2) (*layer_done)(int(n));
  }
  // Merge 0: res[0] = (embed + hb) * hs; under full recomputation the embedding output shares the block outputs'
  // buffer.
  if (ws.recompute_ == Recompute::kFull) gather_embedding(ws.embed_out_TD_, model, ws.ids_T_.data(), T, D);
  const ResidualScaleWeights& m0 = merge_weights(w, 0, L2);
  const ResidualScaleWeights& g0 = merge_weights(g, 0, L2);
  residual_scale_backward<float>(ws.dh_TD_, g0.hs_scale_D, g0.hs_bias_D, nullptr, nullptr, nullptr, dres,
                                 ws.embed_out_TD_, m0.hs_scale_D, m0.hs_bias_D, nullptr, nullptr, nullptr, T, D);
  if (layer_done != nullptr) (*layer_done)(0);
  // Embedding rows: columns split across threads, tokens in order (reproducible). Frozen: none.
  if (g.embed_VD == nullptr) return;
  const int32_t* ids = ws.ids_T_.data();
  float* dh = ws.dh_TD_;
#pragma omp parallel
  {
    const int nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t d0 = D * id / nt, d1 = D * (id + 1) / nt;
    for (int64_t t = 0; t < T; ++t) {
      float* row = g.embed_VD + int64_t(ids[t]) * D;
      for (int64_t i = d0; i < d1; ++i) row[i] += dh[t * D + i];
    }
  }
}

double model_forward_flops(const ZayaConfig& c, int64_t B, int64_t S, double routed_rows) {
  const double T = double(B * S), D = double(c.hidden), Q = double(c.q_width()), K = double(c.kv_width());
  const double C = double(c.conv_channels()), d = double(c.head_dim), R = double(c.router_hidden);
  const double N = double(c.router_slots()), F = double(c.expert_ffn), V = double(c.vocab_size);
  // The grouped convolution is k1 (cca_time1) d x d products per head group; the depthwise one is not counted.
  const double per_token_attn = 2 * D * (Q + 2 * K) + 2 * Q * D + 2 * double(c.conv_kernel1) * C * d;
  const double per_token_router = 2 * (D * R + 2 * R * R + R * N);
  const double blocks = double(c.num_blocks);
  // Scores and the weighted sum: 4 Q FLOPs per visible key. A sequence's rows
  // see S (S + 1) / 2 keys causally, fewer in a window W < S (spec §12).
  double keys = 0;
  for (int64_t b = 0; b < c.num_blocks; ++b) {
    const int64_t W = c.window_of(b);
    keys += (W == 0 || W >= S) ? double(S) * double(S + 1) / 2 : double(W) * double(W + 1) / 2 + double(S - W) * W;
  }
  return blocks * T * (per_token_attn + per_token_router) + double(B) * 4 * Q * keys + routed_rows * 6 * D * F +
         T * 2 * D * V;
}

}  // namespace zaya
