#include "zaya/model/model.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/core/zero_fill.h"
#include "zaya/model/conv_taps.h"
#include "zaya/ops/attention_bf16.h"
#include "zaya/ops/bf16_linear.h"
#include "zaya/ops/cca_conv_bf16.h"
#include "zaya/ops/cross_entropy.h"
#include "zaya/ops/lora_linear.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/matmul_bf16.h"
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
// null: frozen).
void head_backward(float* dx_TD, float* dw_VD, float* logits_TV, const float* lse_T, const int32_t* targets_T,
                   const float* x_TD, const float* head_VD, int64_t rows, int64_t D, int64_t V, int64_t real_vocab,
                   float xent_scale) {
  const Bf16Weights* bf16 = current_bf16_weights();
  if (const uint16_t* head_bf16 = bf16 != nullptr ? bf16->copy_of(head_VD) : nullptr) {
    uint16_t* dlogits = bf16_dy_scratch(rows, V);
    cross_entropy_backward_bf16(dlogits, logits_TV, lse_T, targets_T, rows, V, real_vocab, xent_scale);
    linear_backward_bf16_rounded(dx_TD, dw_VD, dlogits, x_TD, head_bf16, rows, D, V);
  } else {
    cross_entropy_backward<float>(logits_TV, logits_TV, lse_T, targets_T, rows, V, real_vocab, xent_scale);
    linear_backward<float>(dx_TD, dw_VD, logits_TV, x_TD, head_VD, rows, D, V);
  }
}

}  // namespace

ZayaModel::ZayaModel(const ZayaConfig& config, ExpertRange experts, ParamStorage storage)
    : config_(config), params_(config, true, experts), buffers_(config, false) {
  config_.validate("model config");
  if (storage == ParamStorage::kFrozenBf16) {
    frozen_ = std::make_unique<FrozenF32Space>(params_);
    const int64_t n = params_.total_floats();
    bf16_arena_ = aligned_alloc_array<uint16_t>(size_t(n));
    bf16_ = {frozen_->data(), n, bf16_arena_.get()};
  } else {
    param_arena_.reset(params_.total_floats());
  }
  buffer_arena_.reset(std::max<int64_t>(buffers_.total_floats(), 1));
  weights_ = bind_weights(config_, params_, param_data());
  biases_ = bind_balancing_biases(config_, buffers_, buffer_arena_.data());
  init_buffers(config_, buffers_, buffer_arena_.data());
}

void ZayaModel::init(uint64_t seed) {
  if (!frozen_) {
    init_params(params_, param_arena_.data(), config_, seed);
  } else {
    std::vector<float> values;
    for (const ParamEntry& e : params_.entries()) {
      values.resize(size_t(e.numel));
      init_param(e, values.data(), config_, seed);
      set_param(e, values.data());
    }
  }
  init_buffers(config_, buffers_, buffer_arena_.data());
}

void ZayaModel::set_param(const ParamEntry& e, const float* values) {
  const bool bf16_only = frozen_ && bf16_only_role(e.role);
  if (!bf16_only) std::memcpy(param_data() + e.offset, values, sizeof(float) * size_t(e.numel));
  if (frozen_) convert_to_bf16(bf16_arena_.get() + e.offset, values, e.numel);
}

void ZayaModel::set_param_bf16(const ParamEntry& e, const uint16_t* bits) {
  if (frozen_) std::memcpy(bf16_arena_.get() + e.offset, bits, sizeof(uint16_t) * size_t(e.numel));
  if (frozen_ && bf16_only_role(e.role)) return;
  float* dst = param_data() + e.offset;
  for (int64_t i = 0; i < e.numel; ++i) dst[i] = bf16_to_float(bits[i]);
}

void ZayaModel::read_param(const ParamEntry& e, float* out) const {
  if (!(frozen_ && bf16_only_role(e.role))) {
    std::memcpy(out, param_data() + e.offset, sizeof(float) * size_t(e.numel));
    return;
  }
  const uint16_t* bits = bf16_arena_.get() + e.offset;
  for (int64_t i = 0; i < e.numel; ++i) out[i] = bf16_to_float(bits[i]);
}

int64_t ZayaModel::f32_param_bytes() const {
  return frozen_ ? frozen_->backed_bytes() : int64_t(sizeof(float)) * params_.total_floats();
}

int64_t ZayaModel::bf16_param_bytes() const {
  return bf16_arena_ ? int64_t(sizeof(uint16_t)) * params_.total_floats() : 0;
}

void ZayaModel::enable_bf16_gemms() {
  const int64_t n = params_.total_floats();
  if (!bf16_arena_) bf16_arena_ = aligned_alloc_array<uint16_t>(size_t(n));
  bf16_ = {param_data(), n, bf16_arena_.get()};
  refresh_bf16_weights();
}

void ZayaModel::refresh_bf16_weights() {
  if (!bf16_arena_) return;
  if (!frozen_) {
    convert_to_bf16(bf16_arena_.get(), param_arena_.data(), bf16_.count);
    return;
  }
  // A frozen bf16 base: the bf16-only tensors have no float32 to copy from.
  for (const ParamEntry& e : params_.entries())
    if (!bf16_only_role(e.role)) convert_to_bf16(bf16_arena_.get() + e.offset, param_data() + e.offset, e.numel);
}

Bf16KeptInputs bf16_kept_inputs(const LoraConfig* lora) {
  Bf16KeptInputs kept;
  kept.attention = lora == nullptr || !lora->has_qkv_targets();
  kept.experts = lora == nullptr || !lora->has_expert_targets();
  return kept;
}

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

void ModelWorkspace::reserve_bf16_gemms() const {
  reserve_bf16_linear_scratch(bf16_a_, bf16_b_, bf16_width_);
  reserve_attention_bf16_scratch(bf16_attention_);
  reserve_cca_conv_bf16_scratch(bf16_conv_);
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

void ModelWorkspace::recompute_half_layer(const ZayaModel& model, int64_t k, const MoeLossOptions& loss) {
  const bool attention = k % 2 == 0;
  const bool full = recompute_ == Recompute::kFull;
  if (!full && !(attention ? recomputes_attention(recompute_) : recomputes_moe(recompute_))) return;
  ZAYA_PROFILE_SCOPE("model.recompute");
  const ZayaConfig& c = model.config();
  const ModelWeights& w = model.weights();
  const int64_t T = shape_.tokens(), D = c.hidden, l = k / 2;
  // The same calls on the same inputs as model_forward: the same bits.
  if (full) rmsnorm_forward<float>(x_TD_[k], rstd_T_[k], res_TD_[k], input_norm(w, k), T, D, float(c.norm_eps));
  if (attention) {
    // LoRA: the forward's adapters and dropout stream again (lora_[l] is untouched since).
    attention_block_forward(c, l, w.attn[l], attn_acts(l), attn_scratch_, shape_, x_TD_[k], out_TD_[k],
                            model.lora() != nullptr ? &lora_[size_t(l)] : nullptr);
    return;
  }
  // Routing statistics and losses were counted by the forward pass; the
  // balancing biases only change at the optimizer update, so the routing
  // (and under expert parallelism the exchange) is the forward's again.
  recompute_stats_.reset(c.router_slots());
  const float* r_prev = (c.use_eda && l > 0) ? moe_router_state(l - 1) : nullptr;
  moe_block_forward(c, w.moe[l], model.balancing_biases()[l], moe_acts(l), moe_scratch_, shape_, x_TD_[k], r_prev,
                    out_TD_[k], loss, recompute_stats_, ep_, model.lora() != nullptr ? &lora_[size_t(l)] : nullptr);
}

LossParts model_forward(const ZayaModel& model, ModelWorkspace& ws, const int32_t* ids, const int32_t* targets,
                        int64_t B, int64_t S, const MoeLossOptions& loss, const int32_t* doc_pos,
                        const HeadGradient* head) {
  const ZayaConfig& c = model.config();
  const ModelWeights& w = model.weights();
  ZAYA_CHECK(B >= 1 && B <= ws.max_batch_ && S >= 1 && S <= ws.max_seq_,
             "batch {} x sequence {} does not fit the workspace ({} x {})", B, S, ws.max_batch_, ws.max_seq_);
  const int64_t D = c.hidden, V = c.vocab_size, L2 = c.half_layers();
  const Bf16GemmScope precision(model.bf16_weights());
  ZAYA_CHECK(!ws.kept_.any() || model.bf16_weights() != nullptr,
             "internal error: a workspace keeping bf16 activations needs a model with bf16 GEMMs");
  ZAYA_CHECK(ws.loss_chunk_ == 0 || targets != nullptr,
             "internal error: a workspace with a loss chunk keeps no logits, so its forward needs targets");
  ZAYA_CHECK(head == nullptr || (ws.loss_chunk_ > 0 && ws.training_),
             "internal error: only a training workspace with a loss chunk forms the head's gradient in the forward");
  ws.head_grad_done_ = false;
  // This rank's rows: whole sequences, or its chunks of each (context parallelism).
  const ContextParallel* cp = nullptr;
  int64_t L = S;
  if (ws.cp_comm_ != nullptr) {
    ws.cp_ = make_context_parallel(*ws.cp_comm_, S, conv_halo_rows(c));
    cp = &ws.cp_;
    L = cp->local_seq();
    cp_local_positions(*cp, ws.pos_T_.data());
    for (int64_t b = 1; b < B; ++b) std::copy_n(ws.pos_T_.data(), L, ws.pos_T_.data() + b * L);
    cp_take_local(*cp, ids, ws.ids_T_.data(), B);
    if (targets != nullptr) cp_take_local(*cp, targets, ws.targets_T_.data(), B);
    if (doc_pos != nullptr) cp_take_local(*cp, doc_pos, ws.doc_pos_T_.data(), B);
  } else {
    for (int64_t t = 0; t < B * S; ++t) ws.pos_T_[t] = int32_t(t % S);
    std::copy_n(ids, B * S, ws.ids_T_.data());
    if (targets != nullptr) std::copy_n(targets, B * S, ws.targets_T_.data());
    if (doc_pos != nullptr) std::copy_n(doc_pos, B * S, ws.doc_pos_T_.data());
  }
  for (int64_t t = 0; doc_pos != nullptr && t < B * S; ++t)
    ZAYA_CHECK(doc_pos[t] == 0 || (t % S > 0 && doc_pos[t] == doc_pos[t - 1] + 1),
               "document position {} at position {} of sequence {} neither starts a document (0) nor continues the "
               "previous token's ({})",
               doc_pos[t], t % S, t / S, t % S > 0 ? doc_pos[t - 1] : -1);
  const int64_t T = B * L;
  if (targets == nullptr) std::fill_n(ws.targets_T_.data(), T, -1);
  for (int64_t t = 0; t < T; ++t) {
    ZAYA_CHECK(ws.ids_T_[t] >= 0 && ws.ids_T_[t] < V, "token id {} at position {} is outside the vocabulary (0..{})",
               ws.ids_T_[t], ws.pos_T_[t], V - 1);
    ZAYA_CHECK(ws.targets_T_[t] < c.real_vocab_size, "target id {} at position {} is outside the vocabulary",
               ws.targets_T_[t], ws.pos_T_[t]);
  }
  ws.shape_ = {B,
               L,
               ws.pos_T_.data(),
               &ws.rope_,
               c.has_sliding() ? &ws.sliding_rope_ : nullptr,
               cp,
               doc_pos != nullptr ? ws.doc_pos_T_.data() : nullptr};
  // Embedding (no scaling, spec §5).
  gather_embedding(ws.embed_out_TD_, model, ws.ids_T_.data(), T, D);

  // LoRA: each block's adapters, this pass's dropout mask.
  const LoraAdapters* lora = model.lora();
  if (lora != nullptr) {
    const LoraConfig& lc = lora->config();
    ZAYA_CHECK(ws.lora_rank_ == lc.rank && ws.lora_targets_ == lc.targets,
               "internal error: the workspace has no LoRA buffers for rank {} and these targets", lc.rank);
    for (int64_t b = 0; b < c.num_blocks; ++b) {
      BlockLora& al = ws.lora_[size_t(b)];
      al.weights = &lora->views()[size_t(b)];
      al.grads = nullptr;
      al.rank = lc.rank;
      al.scale = lc.scale();
      al.dropout = ws.lora_dropout_ ? lc.dropout : 0.0;
      al.seed = ws.lora_seed_;
      al.stream = ws.lora_pass_ * uint64_t(c.num_blocks) + uint64_t(b);
    }
  }
  LossParts parts;
  const float* h = ws.embed_out_TD_;
  const float* res_prev = nullptr;
  const float* r_prev = nullptr;
  for (int64_t n = 0; n < L2; ++n) {
    const ResidualScaleWeights& m = merge_weights(w, n, L2);
    residual_scale_forward<float>(ws.res_TD_[n], h, m.hs_scale_D, m.hs_bias_D, res_prev, m.res_scale_D, m.res_bias_D, T,
                                  D);
    rmsnorm_forward<float>(ws.x_TD_[n], ws.rstd_T_[n], ws.res_TD_[n], input_norm(w, n), T, D, float(c.norm_eps));
    if (n % 2 == 0) {
      attention_block_forward(c, n / 2, w.attn[n / 2], ws.attn_acts(n / 2), ws.attn_scratch_, ws.shape_, ws.x_TD_[n],
                              ws.out_TD_[n], lora != nullptr ? &ws.lora_[size_t(n / 2)] : nullptr);
    } else {
      const int64_t l = n / 2;
      parts.router_loss += moe_block_forward(c, w.moe[l], model.balancing_biases()[l], ws.moe_acts(l), ws.moe_scratch_,
                                             ws.shape_, ws.x_TD_[n], c.use_eda ? r_prev : nullptr, ws.out_TD_[n], loss,
                                             ws.routing_[l], ws.ep_, lora != nullptr ? &ws.lora_[size_t(l)] : nullptr);
      r_prev = ws.moe_router_state(l);
    }
    h = ws.out_TD_[n];
    res_prev = ws.res_TD_[n];
  }
  residual_scale_forward<float>(ws.res_TD_[L2], h, w.final_merge.hs_scale_D, w.final_merge.hs_bias_D, res_prev,
                                w.final_merge.res_scale_D, w.final_merge.res_bias_D, T, D);
  rmsnorm_forward<float>(ws.x_TD_[L2], ws.rstd_T_[L2], ws.res_TD_[L2], w.final_norm_D, T, D, float(c.norm_eps));
  // LM head (the embedding when tied): logits = out head^T (float32 results; bf16 operands under mixed precision).
  ZAYA_PROFILE_SCOPE("lm_head.fwd");
  const float* x_head = ws.x_TD_[L2];
  if (ws.loss_chunk_ == 0) {
    linear_forward<float>(ws.logits_TV_, x_head, w.lm_head_VD, T, D, V);
    if (targets != nullptr)
      cross_entropy_forward<float>(ws.loss_T_, ws.lse_T_, ws.logits_TV_, ws.targets_T_.data(), T, V, c.real_vocab_size);
  } else {
    // A chunk of rows at a time, each chunk's head backward while its logits exist.
    if (head != nullptr) zero_fill(ws.dx_TD_, T * D);
    for (int64_t t0 = 0; t0 < T; t0 += ws.loss_chunk_) {
      const int64_t n = std::min(ws.loss_chunk_, T - t0);
      const int32_t* chunk_targets = ws.targets_T_.data() + t0;
      linear_forward<float>(ws.logits_TV_, x_head + t0 * D, w.lm_head_VD, n, D, V);
      cross_entropy_forward<float>(ws.loss_T_ + t0, ws.lse_T_ + t0, ws.logits_TV_, chunk_targets, n, V,
                                   c.real_vocab_size);
      if (head != nullptr)
        head_backward(ws.dx_TD_ + t0 * D, head->dw_VD, ws.logits_TV_, ws.lse_T_ + t0, chunk_targets, x_head + t0 * D,
                      w.lm_head_VD, n, D, V, c.real_vocab_size, head->xent_scale);
    }
    if (head != nullptr) {
      ws.head_grad_done_ = true;
      ws.head_grad_dw_ = head->dw_VD;
      ws.head_grad_scale_ = head->xent_scale;
    }
  }
  if (targets != nullptr) {
    for (int64_t t = 0; t < T; ++t)
      if (ws.targets_T_[t] >= 0) {
        parts.xent_sum += ws.loss_T_[t];
        ++parts.xent_tokens;
      }
  }
  return parts;
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
  const Bf16GemmScope precision(model.bf16_weights());
  float* dres = ws.dres_a_TD_;
  float* dres_prev = ws.dres_b_TD_;
  {
    // Cross-entropy and the head (its gradient into the embedding's when tied); float32 dlogits overwrite the logits.
    // With a loss chunk the forward formed them (its dx is in dx_TD_).
    ZAYA_PROFILE_SCOPE("lm_head.bwd");
    if (ws.loss_chunk_ == 0) {
      zero_fill(ws.dx_TD_, T * D);
      head_backward(ws.dx_TD_, g.lm_head_VD, ws.logits_TV_, ws.lse_T_, ws.targets_T_.data(), ws.x_TD_[L2], w.lm_head_VD,
                    T, D, V, c.real_vocab_size, xent_scale);
    } else {
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
    ws.recompute_half_layer(model, k, loss);
    const ResidualScaleWeights& m = merge_weights(w, n, L2);
    const ResidualScaleWeights& gm = merge_weights(g, n, L2);
    residual_scale_backward<float>(ws.dh_TD_, gm.hs_scale_D, gm.hs_bias_D, dres_prev, gm.res_scale_D, gm.res_bias_D,
                                   dres, ws.out_TD_[n - 1], m.hs_scale_D, m.hs_bias_D, ws.res_TD_[n - 1], m.res_scale_D,
                                   m.res_bias_D, T, D);
    zero_fill(ws.dx_TD_, T * D);
    if (k % 2 == 0) {
      attention_block_backward(c, k / 2, w.attn[k / 2], g.attn[k / 2], ws.attn_acts(k / 2), ws.attn_scratch_, shape,
                               ws.x_TD_[k], ws.dh_TD_, ws.dx_TD_, lora ? &ws.lora_[size_t(k / 2)] : nullptr);
    } else {
      const int64_t l = k / 2;
      const float* r_prev = (c.use_eda && l > 0) ? ws.moe_router_state(l - 1) : nullptr;
      moe_block_backward(c, w.moe[l], g.moe[l], ws.moe_acts(l), ws.moe_scratch_, shape, ws.x_TD_[k], r_prev, ws.dh_TD_,
                         ws.dx_TD_, loss, router_scale, ws.ep_, lora ? &ws.lora_[size_t(l)] : nullptr);
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
