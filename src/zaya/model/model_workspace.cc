// ModelWorkspace (model/model.h): everything sized by the batch, laid out
// once; LoRA buffers; the bf16 context of its passes.
#include <omp.h>

#include <algorithm>

#include "zaya/core/error.h"
#include "zaya/model/conv_taps.h"
#include "zaya/model/model.h"
#include "zaya/ops/attention_bf16.h"
#include "zaya/ops/bf16_linear.h"
#include "zaya/ops/cca_conv_bf16.h"
#include "zaya/ops/lora_linear.h"

namespace zaya {

ModelWorkspace::ModelWorkspace(const ZayaConfig& c, int64_t B, int64_t S_full, bool training, Comm* ep, Comm* cp,
                               Recompute recompute, Bf16KeptInputs kept, int64_t loss_chunk)
    : max_batch_(B),
      max_seq_(S_full),
      training_(training),
      recompute_(recompute),
      kept_(kept),
      loss_chunk_(loss_chunk),
      ep_(ep) {
  const int64_t ep_ranks = ep != nullptr ? ep->size() : 1;
  ZAYA_CHECK(c.experts % ep_ranks == 0, "{} experts cannot be split evenly over {} expert-parallel ranks", c.experts,
             ep_ranks);
  ZAYA_CHECK(B >= 1 && S_full >= 1, "batch ({}) and sequence length ({}) must be >= 1", B, S_full);
  ZAYA_CHECK(loss_chunk >= 0, "the loss chunk ({} rows) must be >= 0 (0: all rows at once)", loss_chunk);
  ZAYA_CHECK(S_full <= c.max_position, "sequence length {} exceeds max_position_embeddings {}", S_full, c.max_position);
  int cp_ranks = 0;  // 0: whole sequences, no context-parallel exchanges
  if (cp != nullptr) {
    cp_comm_ = cp;
    cp_ = make_context_parallel(*cp, S_full, conv_halo_rows(c));  // validates the sequence length
    cp_ranks = cp->size();
  }
  const int64_t S = S_full / std::max(cp_ranks, 1);  // rows per sequence on this rank
  const int64_t T = B * S, D = c.hidden, L2 = c.half_layers(), V = c.vocab_size;
  // Rows of logits that exist at once: all, or one chunk of them.
  const int64_t head_rows = loss_chunk > 0 ? std::min(loss_chunk, T) : T;
  rope_.build(S_full, c.rotary_dim(), c.rope_theta, c.rope_precision);
  if (c.has_sliding()) sliding_rope_.build(S_full, c.rotary_dim(), c.sliding_rope_theta, c.rope_precision);
  pos_T_.resize(T);
  doc_pos_T_.resize(T);
  targets_T_.assign(T, -1);
  ids_T_.assign(T, 0);
  const int threads = omp_get_max_threads();
  // Activations kept for backward, then scratch (the forward needs the
  // attention part too). Each layout is carved twice: measured, then for real.
  // A recomputed block kind keeps one set of activations for all its layers;
  // with full recomputation the normed inputs, block outputs and the
  // embedding output are one buffer each too, and only the residual stream
  // (each half-layer's input) stays per layer.
  const bool full = recompute == Recompute::kFull;
  const int64_t attn_sets = recomputes_attention(recompute) ? 1 : c.num_blocks;
  const int64_t moe_sets = recomputes_moe(recompute) ? 1 : c.num_blocks;
  // Inputs kept in bf16 save memory only when each layer keeps its own: they
  // need one float32 set for the forward. The attention blocks' normed inputs
  // then share one float32 buffer (a recomputed attention block reads its
  // input in float32 again).
  const bool keep_expert_bf16 = kept.experts && !recomputes_moe(recompute);
  const bool keep_attention_bf16 = kept.attention && !recomputes_attention(recompute);
  auto carve_acts = [&](Arena& a) {
    res_TD_.clear();
    x_TD_.clear();
    rstd_T_.clear();
    out_TD_.clear();
    float* x_shared = full || keep_attention_bf16 ? a.carve(T * D) : nullptr;
    float* rstd_shared = full ? a.carve(T) : nullptr;
    float* out_shared = full ? a.carve(T * D) : nullptr;
    embed_out_TD_ = full ? out_shared : a.carve(T * D);
    for (int64_t n = 0; n <= L2; ++n) {
      res_TD_.push_back(a.carve(T * D));
      const bool shared_input = full || (keep_attention_bf16 && n % 2 == 0 && n < L2);
      x_TD_.push_back(shared_input ? x_shared : a.carve(T * D));
      rstd_T_.push_back(full ? rstd_shared : a.carve(T));
      if (n < L2) out_TD_.push_back(full ? out_shared : a.carve(T * D));
    }
    attn_.assign(size_t(attn_sets), AttentionActs{});
    for (AttentionActs& acts : attn_) carve_attention_acts(acts, c, B, S, a, cp_ranks, keep_attention_bf16);
    moe_.clear();
    moe_.resize(size_t(moe_sets));
    for (MoeActs& acts : moe_) carve_moe_acts(acts, c, B, S, ep_ranks, keep_expert_bf16, a);
    moe_r_TR_.clear();
    if (moe_sets == 1 && c.use_eda)
      for (int64_t l = 0; l < c.num_blocks; ++l) moe_r_TR_.push_back(a.carve(T * c.router_hidden));
    if (loss_chunk == 0) logits_TV_ = a.carve(T * V);  // a loss chunk's logits are scratch (below)
    loss_T_ = a.carve(T);
    lse_T_ = a.carve(T);
  };
  auto carve_scratch = [&](Arena& a) {
    if (loss_chunk > 0) logits_TV_ = a.carve(head_rows * V);
    carve_attention_scratch(attn_scratch_, c, B, S, threads, a, cp_ranks);
    carve_moe_scratch(moe_scratch_, c, B, S, ep_ranks, keep_expert_bf16, a);
    if (training) {
      dres_a_TD_ = a.carve(T * D);
      dres_b_TD_ = a.carve(T * D);
      dh_TD_ = a.carve(T * D);
      dx_TD_ = a.carve(T * D);
    }
  };
  Arena measure = Arena::measuring();
  carve_acts(measure);
  acts_.reset(measure.used());
  carve_acts(acts_);
  measure = Arena::measuring();
  carve_scratch(measure);
  scratch_.reset(measure.used());
  carve_scratch(scratch_);
  routing_.resize(c.num_blocks);
  for (auto& r : routing_) r.reset(c.router_slots());
  recompute_stats_.reset(c.router_slots());
  // The bf16 operands: x or dy (a) and x in backward (b), by token rows (T) or routed rows (X).
  const int64_t X = expert_row_capacity(c, T, ep_ranks), F = c.expert_ffn, P = c.q_width() + 2 * c.kv_width();
  const int64_t Tp = bf16_padded_rows(T);
  const int64_t Xp = bf16_padded_rows(X);
  const int64_t Hp = bf16_padded_rows(head_rows);  // the LM head's dlogits
  const int64_t token_width = std::max({P, D, c.q_width(), c.router_hidden, c.router_slots()});
  bf16_a_ = std::max({Tp * token_width, Hp * V, Xp * std::max(2 * F, D)});
  bf16_b_ = std::max(Tp * std::max({D, c.q_width(), c.router_hidden}), Xp * std::max(D, F));
  bf16_width_ = std::max({token_width, V, 2 * F});
  // The bf16 attention core's scratch: every sequence's rows on this rank against all keys.
  bf16_attention_ = AttentionShape{B, S, c.q_heads, c.kv_heads, c.head_dim, S * std::max(cp_ranks, 1)};
  // Conv B runs over whole sequences, or under context parallelism over each rank's 2B chunks of S / 2 rows.
  bf16_conv_ = cp_ranks > 0 ? CcaConvShape{2 * B, S / 2, c.conv_channels(), c.head_dim}
                            : CcaConvShape{B, S, c.conv_channels(), c.head_dim};
  bf16_conv_.taps_b = c.conv_kernel1;
}

void ModelWorkspace::reserve_bf16_gemms() {
  reserve_bf16_linear_scratch(bf16_, bf16_a_, bf16_b_, bf16_width_);
  reserve_attention_bf16_scratch(bf16_, bf16_attention_);
  CcaConvShape conv = bf16_conv_;
  conv.bf16 = &bf16_;
  reserve_cca_conv_bf16_scratch(conv);
}

Precision ModelWorkspace::precision_for(const ZayaModel& model) {
  bf16_.set_weights(model.bf16_weights());
  quant_.set_weights(model.quant_weights());
  return {model.bf16_weights() != nullptr ? &bf16_ : nullptr, model.quant_weights() != nullptr ? &quant_ : nullptr};
}

void ModelWorkspace::enable_lora(const ZayaConfig& c, const LoraConfig& lora) {
  const int64_t rank = lora.rank;
  ZAYA_CHECK(rank >= 1, "LoRA rank {} must be >= 1", rank);
  if (lora_rank_ == rank && lora_targets_ == lora.targets) return;
  ZAYA_CHECK(!(kept_.experts && lora.has_expert_targets()) && !(kept_.attention && lora.has_qkv_targets()),
             "internal error: these LoRA targets read inputs this workspace keeps in bf16 only");
  const int64_t T = max_batch_ * max_seq_ / std::max(cp_size(), 1);
  // Rows an expert target's branch may see: every routed row this rank's experts receive.
  const int64_t X = expert_row_capacity(c, T, ep_ != nullptr ? ep_->size() : 1);
  // Scratch for the widest adapter input with dropout (attention and router targets), and the routed rows.
  int64_t scratch = 0;
  for (LoraTarget t : lora.targets) {
    LoraShape s;
    s.tokens = lora_is_expert(t) ? X : T;
    s.in = lora_slot(c, t).in;
    s.rank = rank;
    s.dropout = lora_is_expert(t) ? 0.0 : 0.5;
    scratch = std::max(scratch, lora_backward_scratch_floats(s));
  }
  int64_t per_block = 0;
  for (LoraTarget t : lora.targets) per_block += int64_t(align_floats(size_t((lora_is_expert(t) ? X : T) * rank)));
  lora_arena_.reset(size_t(c.num_blocks * per_block + int64_t(align_floats(size_t(scratch)))));
  lora_.assign(size_t(c.num_blocks), BlockLora{});
  float* scratch_base = lora_arena_.carve(size_t(scratch));
  for (auto& l : lora_) {
    for (LoraTarget t : lora.targets) l.h[size_t(t)] = lora_arena_.carve(size_t((lora_is_expert(t) ? X : T) * rank));
    l.scratch = scratch_base;
  }
  lora_rank_ = rank;
  lora_targets_ = lora.targets;
}

void ModelWorkspace::set_lora_dropout(bool on, uint64_t seed, uint64_t pass) {
  lora_dropout_ = on;
  lora_seed_ = seed;
  lora_pass_ = pass;
}

void ModelWorkspace::set_routing_record(const int32_t* choices_LTJ, bool force) {
  ZAYA_CHECK(choices_LTJ == nullptr || cp_size() == 1,
             "internal error: routing replay needs whole sequences on each rank (context parallelism {})", cp_size());
  routing_record_ = choices_LTJ;
  routing_force_ = force;
}

void ModelWorkspace::reset_routing() {
  for (auto& r : routing_) r.reset(int64_t(r.choices_N.size()));
  moe_scratch_.experts.exchange_seconds = 0;
}

float* ModelWorkspace::logits() {
  ZAYA_CHECK(loss_chunk_ == 0, "internal error: a workspace with a loss chunk ({} rows) keeps no logits of every row",
             loss_chunk_);
  return logits_TV_;
}

int64_t ModelWorkspace::bytes() const { return int64_t(sizeof(float)) * (acts_.capacity() + scratch_.capacity()); }

int64_t ModelWorkspace::activation_bytes() const { return int64_t(sizeof(float)) * int64_t(acts_.capacity()); }

MoeActs& ModelWorkspace::moe_acts(int64_t l) {
  MoeActs& a = moe_[moe_.size() == 1 ? 0 : size_t(l)];
  if (!moe_r_TR_.empty()) a.router.r_TR = moe_r_TR_[size_t(l)];
  return a;
}

const float* ModelWorkspace::moe_router_state(int64_t l) const {
  return moe_r_TR_.empty() ? moe_[moe_.size() == 1 ? 0 : size_t(l)].router.r_TR : moe_r_TR_[size_t(l)];
}

}  // namespace zaya
