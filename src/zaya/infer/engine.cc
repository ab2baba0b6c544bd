#include "zaya/infer/engine.h"

#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/model/conv_taps.h"
#include "zaya/ops/parallel_for.h"
#include "zaya/ops/residual_scale.h"
#include "zaya/ops/rmsnorm.h"
#include "zaya/ops/routing.h"
#include "zaya/ops/serial_if.h"

namespace zaya {
namespace {

int64_t max_of(std::initializer_list<int64_t> v) { return std::max(v); }

KvPoolShape pool_shape(const InferModel& model, const EngineOptions& o, int64_t max_context) {
  const ZayaConfig& c = model.config();
  o.validate(c);
  KvPoolShape s;
  for (int64_t b = 0; b < c.num_blocks; ++b) s.block_windows.push_back(c.window_of(b));
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.page_tokens = o.page_tokens;
  s.elem_bytes = kv_cache_bf16(model.matrix_types(), o.bf16_activations) ? 2 : 4;
  s.slots = o.max_sequences;
  s.max_context = max_context;
  s.pool_bytes = o.kv_pool_bytes;
  return s;
}

}  // namespace

void EngineOptions::validate(const ZayaConfig& c) const {
  ZAYA_CHECK(max_sequences >= 1 && max_sequences <= 65536, "batch size {} is invalid; allowed: 1..65536",
             max_sequences);
  ZAYA_CHECK(max_context >= 0 && max_context <= c.max_position,
             "context length {} is invalid; allowed: 1..{} (max_position_embeddings)", max_context, c.max_position);
  ZAYA_CHECK(max_step_tokens >= 1 && max_step_tokens <= (1 << 20), "tokens per step {} is invalid; allowed: 1..1048576",
             max_step_tokens);
  ZAYA_CHECK(page_tokens >= 1 && page_tokens <= (1 << 20), "KV page of {} tokens is invalid; allowed: 1..1048576",
             page_tokens);
  ZAYA_CHECK(kv_pool_bytes >= 0, "KV pool of {} bytes is invalid; allowed: >= 0 (0: every slot at full context)",
             kv_pool_bytes);
}

InferenceEngine::InferenceEngine(const InferModel& model, const EngineOptions& options)
    : model_(&model),
      config_(model.config()),
      options_(options),
      slots_(options.max_sequences),
      max_context_(options.max_context > 0 ? options.max_context : model.config().max_position),
      kw_(model.config().kv_width()),
      cc_(model.config().conv_channels()),
      pw_(model.config().q_width() + 2 * model.config().kv_width()),
      linear_(max_of({model.config().hidden, model.config().q_width(), model.config().expert_ffn,
                      model.config().conv_kernel1 * model.config().head_dim, model.config().router_hidden}),
              max_of({model.config().vocab_size, 2 * model.config().expert_ffn, model.config().hidden,
                      model.config().router_hidden, model.config().router_slots(), model.config().conv_channels(),
                      model.config().q_width()}),
              options.bf16_activations),
      pool_(pool_shape(model, options, max_context_)),
      state_(model.config(), options.max_sequences) {
  const ZayaConfig& c = config_;
  rope_.build(max_context_, c.rotary_dim(), c.rope_theta, c.rope_precision);
  if (c.has_sliding()) rope_sliding_.build(max_context_, c.rotary_dim(), c.sliding_rope_theta, c.rope_precision);
  const int64_t B = c.num_blocks;
  int64_t scratch_floats = 0;
  for (int64_t b = 0; b < B; ++b)
    scratch_floats = std::max(scratch_floats, cached_attention_scratch_floats(c.q_heads / c.kv_heads, max_context_,
                                                                              c.window_of(b), c.head_dim));
  const int64_t T = options_.max_step_tokens, D = c.hidden, Q = c.q_width(), K = kw_, C = cc_;
  const int64_t R = c.router_hidden, N = c.router_slots(), F = c.expert_ffn, TJ = T * c.top_k;
  const int64_t chunks = std::min(T, slots_);
  const int threads = omp_get_max_threads();
  threads_ = threads;
  attn_scratch_per_thread_ = scratch_floats;
  auto carve = [&](Arena& a) {
    buf_.h_TD = a.carve(T * D);
    buf_.res_a_TD = a.carve(T * D);
    buf_.res_b_TD = a.carve(T * D);
    buf_.x_TD = a.carve(T * D);
    buf_.rstd_T = a.carve(T);
    buf_.qkv_TP = a.carve(T * pw_);
    buf_.a_ext = a.carve((T + chunks * (c.conv_kernel1 - 1)) * C);
    buf_.xg_T2d = a.carve(T * c.conv_kernel1 * C);
    buf_.c_TC = a.carve(T * C);
    buf_.q_TQ = a.carve(T * Q);
    buf_.k_TK = a.carve(T * K);
    buf_.v_TK = a.carve(T * K);
    buf_.inv_q = a.carve(T * c.q_heads);
    buf_.inv_k = a.carve(T * c.kv_heads);
    buf_.o_TQ = a.carve(T * Q);
    buf_.attn_scratch = a.carve(threads * attn_scratch_per_thread_);
    buf_.r_a_TR = a.carve(T * R);
    buf_.r_b_TR = a.carve(T * R);
    buf_.rn_TR = a.carve(T * R);
    buf_.u_TR = a.carve(T * R);
    buf_.g_TR = a.carve(T * R);
    buf_.logits_TN = a.carve(T * N);
    buf_.probs_TN = a.carve(T * N);
    buf_.gate_TJ = a.carve(TJ);
    buf_.xp_MD = a.carve(TJ * D);
    buf_.h_M2F = a.carve(TJ * 2 * F);
    buf_.act_MF = a.carve(TJ * F);
    buf_.y_MD = a.carve(TJ * D);
    buf_.hid_TD = a.carve(T * D);
  };
  Arena measure = Arena::measuring();
  carve(measure);
  ws_.reset(measure.used());
  carve(ws_);
  choice_TJ_.assign(B * TJ, kNoExpert);  // every block's choices of the step (step_choices)
  plan_.reserve(c.experts, T, c.top_k);
  rows_.row_pos.resize(T);
  rows_.row_chunk.resize(T);
  rows_.a_chunk.resize(T + chunks * (c.conv_kernel1 - 1));
}

void InferenceEngine::store_kv(char* page, int64_t at, const float* src, int64_t n) {
  if (pool_.elem_bytes() == 4) {
    std::memcpy(page + at * 4, src, sizeof(float) * n);
    return;
  }
  uint16_t* dst = reinterpret_cast<uint16_t*>(page) + at;
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

int64_t InferenceEngine::small_state_bytes() const { return state_.bytes_per_slot(); }

int64_t InferenceEngine::state_bytes_per_slot() const {
  const std::vector<int64_t> pages = max_pages(max_context_);
  int64_t bytes = small_state_bytes();
  for (int64_t k = 0; k < pool_.kinds(); ++k) bytes += pages[k] * page_bytes(k);
  return bytes;
}

int64_t InferenceEngine::workspace_bytes() const { return int64_t(sizeof(float)) * int64_t(ws_.capacity()); }

std::vector<int64_t> InferenceEngine::pages_held(int32_t slot) const {
  ZAYA_CHECK(slot >= 0 && slot < slots_, "sequence slot {} is outside 0..{}", slot, slots_ - 1);
  return pool_.held(slot);
}

std::vector<int64_t> InferenceEngine::pages_needed(std::span<const StepChunk> chunks) const {
  std::vector<int64_t> out(pool_.kinds(), 0);
  for (const StepChunk& ch : chunks) pool_.add_needed(ch.slot, state_.length(ch.slot), ch.count, out, ch.speculative);
  return out;
}

int64_t InferenceEngine::length(int32_t slot) const {
  ZAYA_CHECK(slot >= 0 && slot < slots_, "sequence slot {} is outside 0..{}", slot, slots_ - 1);
  return state_.length(slot);
}

bool InferenceEngine::can_rebind(const InferModel& model) const {
  return model_differences(config_, model.config()).empty() &&
         kv_cache_bf16(model.matrix_types(), options_.bf16_activations) == kv_bf16();
}

void InferenceEngine::rebind(const InferModel& model) {
  const std::vector<std::string> differ = model_differences(config_, model.config());
  ZAYA_CHECK(differ.empty(), "internal error: an engine rebound to another architecture ({})", fmt::join(differ, ", "));
  ZAYA_CHECK(can_rebind(model), "internal error: an engine rebound to weights whose KV cache type differs");
  for (int32_t s = 0; s < slots_; ++s)
    ZAYA_CHECK(state_.length(s) == 0, "internal error: an engine rebound while sequence slot {} holds tokens", s);
  for (int64_t k = 0; k < pool_.kinds(); ++k)
    ZAYA_CHECK(pool_.free_pages(k) == pool_.pages(k), "internal error: an engine rebound while KV pages are in use");
  model_ = &model;
  config_ = model.config();
}

void InferenceEngine::reset(int32_t slot) {
  ZAYA_CHECK(slot >= 0 && slot < slots_, "sequence slot {} is outside 0..{}", slot, slots_ - 1);
  state_.reset(slot);
  pool_.clear(slot);
}

void InferenceEngine::copy(int32_t src, int32_t dst) {
  ZAYA_CHECK(src >= 0 && src < slots_ && dst >= 0 && dst < slots_, "sequence slots {} and {} must be in 0..{}", src,
             dst, slots_ - 1);
  if (src == dst) return;
  ZAYA_CHECK(!state_.drafting(src), "sequence slot {} holds an unsettled speculative chunk (keep_draft)", src);
  reset(dst);
  pool_.copy(src, dst, state_.length(src));
  state_.copy(src, dst);
}

InferenceEngine::Snapshot InferenceEngine::share(int32_t slot) {
  ZAYA_CHECK(slot >= 0 && slot < slots_, "sequence slot {} is outside 0..{}", slot, slots_ - 1);
  const int64_t n = state_.length(slot);
  ZAYA_CHECK(!state_.drafting(slot), "sequence slot {} holds an unsettled speculative chunk (keep_draft)", slot);
  ZAYA_CHECK(n > 0 && n % options_.page_tokens == 0,
             "a snapshot needs a length that is a positive multiple of the page ({} tokens); the sequence has {}",
             options_.page_tokens, n);
  Snapshot s;
  s.length = n;
  s.pages = pool_.share(slot);
  s.small = state_.save(slot);
  return s;
}

void InferenceEngine::start_from(const Snapshot& s, int32_t slot) {
  ZAYA_CHECK(s.length > 0 && s.length <= max_context_ && int64_t(s.pages.size()) == pool_.kinds() &&
                 int64_t(s.small.size()) == state_.floats_per_slot(),
             "the snapshot of {} tokens is not one of this engine's", s.length);
  reset(slot);
  pool_.adopt(s.pages, slot);
  state_.restore(s.small, s.length, slot);
}

void InferenceEngine::release(Snapshot& s) {
  pool_.release(s.pages);
  s = Snapshot{};
}

void InferenceEngine::fill_synthetic(int32_t slot, int64_t length, uint64_t seed) {
  ZAYA_CHECK(slot >= 0 && slot < slots_, "sequence slot {} is outside 0..{}", slot, slots_ - 1);
  ZAYA_CHECK(length >= 0 && length <= max_context_, "synthetic length {} exceeds the context {}", length, max_context_);
  reset(slot);
  const int64_t P = options_.page_tokens, d = config_.head_dim;
  std::vector<int64_t> need(pool_.kinds(), 0);
  pool_.add_needed(slot, 0, length, need);
  for (int64_t k = 0; k < pool_.kinds(); ++k)
    ZAYA_CHECK(need[k] <= free_pages(k), "the KV pool is full: {} synthetic tokens need {} pages, {} are free", length,
               need[k], free_pages(k));
  pool_.map_written(slot, 0, length);
  const float scale = 1.0f / std::sqrt(float(d));
  for (int64_t b = 0; b < config_.num_blocks; ++b) {
    int64_t t0 = 0, hi = 0;
    pool_.written(pool_.kind_of(b), 0, length, t0, hi);
    const std::vector<int32_t>& table = pool_.table(slot, pool_.kind_of(b));
#pragma omp parallel
    {
      std::vector<float> k(static_cast<size_t>(d)), v(static_cast<size_t>(d));  // one row, as floats
#pragma omp for collapse(2) schedule(static)
      for (int64_t j = 0; j < config_.kv_heads; ++j)
        for (int64_t t = t0; t < length; ++t) {
          for (int64_t i = 0; i < d; ++i) {
            // A cheap deterministic hash in [-1, 1): realistic magnitudes, no page left untouched.
            const uint64_t hsh =
                (uint64_t(t) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(j * d + i + 1) * 0xC2B2AE3D27D4EB4Full) ^ seed;
            const float u = float((hsh >> 40) & 0xFFFF) / 32768.0f - 1.0f;
            k[size_t(i)] = u * scale * 4;
            v[size_t(i)] = u;
          }
          store_kv(pool_.kpage(b, table[t / P]), (j * P + t % P) * d, k.data(), d);
          store_kv(pool_.vpage(b, table[t / P]), (j * P + t % P) * d, v.data(), d);
        }
    }
  }
  state_.set_length(slot, length);
}

void InferenceEngine::step(std::span<const StepChunk> chunks) {
  const ZayaConfig& c = config_;
  const InferWeights& w = model_->weights();
  const int64_t D = c.hidden, V = c.vocab_size, L2 = c.half_layers();
  ZAYA_CHECK(!chunks.empty(), "a step needs at least one chunk of tokens");
  ZAYA_CHECK(int64_t(chunks.size()) <= std::min(slots_, options_.max_step_tokens),
             "{} chunks in one step; at most {} fit", chunks.size(), std::min(slots_, options_.max_step_tokens));
  // Validate everything before any state changes.
  int64_t T = 0;
  std::vector<char>& seen = seen_;
  seen.assign(slots_, 0);
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const StepChunk& ch = chunks[ci];
    ZAYA_CHECK(ch.slot >= 0 && ch.slot < slots_, "chunk {}: sequence slot {} is outside 0..{}", ci, ch.slot,
               slots_ - 1);
    ZAYA_CHECK(!seen[ch.slot], "chunk {}: sequence slot {} appears twice in one step", ci, ch.slot);
    seen[ch.slot] = 1;
    ZAYA_CHECK(ch.count >= 1 && ch.tokens != nullptr, "chunk {} has no tokens", ci);
    ZAYA_CHECK(!state_.drafting(ch.slot),
               "chunk {}: sequence slot {} holds an unsettled speculative chunk; keep_draft() it first", ci, ch.slot);
    // A speculative chunk writes all its positions: on a sliding block they must fit the window's pages.
    for (int64_t k = 0; ch.speculative && k < pool_.kinds(); ++k)
      ZAYA_CHECK(pool_.window(k) == 0 || ch.count < pool_.window(k),
                 "chunk {}: a speculative chunk of {} tokens exceeds the sliding window {} less one", ci, ch.count,
                 pool_.window(k));
    ZAYA_CHECK(state_.length(ch.slot) + ch.count <= max_context_,
               "sequence in slot {} would grow to {} tokens, beyond the context length {}", ch.slot,
               state_.length(ch.slot) + ch.count, max_context_);
    for (int64_t i = 0; i < ch.count; ++i)
      ZAYA_CHECK(ch.tokens[i] >= 0 && ch.tokens[i] < V,
                 "token id {} (chunk {}, position {}) is outside the vocabulary 0..{}", ch.tokens[i], ci, i, V - 1);
    if (ch.lora != nullptr) {
      const std::string why = lora_mismatch(c, *ch.lora);
      ZAYA_CHECK(why.empty(), "chunk {}: its LoRA adapter does not fit the model: {}", ci, why);
    }
    T += ch.count;
  }
  ZAYA_CHECK(T <= options_.max_step_tokens, "a step of {} tokens exceeds the step capacity {}", T,
             options_.max_step_tokens);
  // Pages for the positions the step writes, taken before anything else changes.
  const std::vector<int64_t> need = pages_needed(chunks);
  for (int64_t k = 0; k < pool_.kinds(); ++k)
    ZAYA_CHECK(need[k] <= free_pages(k),
               "the KV pool is full: the step needs {} new pages of {} tokens and {} of {} are free "
               "(EngineOptions.kv_pool_bytes; zaya serve --kv-cache-mb)",
               need[k], options_.page_tokens, free_pages(k), pool_pages(k));
  // Speculative chunks beside single tokens only: the decode kernels for every row.
  bool rowwise = true, any_speculative = false;
  for (const StepChunk& ch : chunks) {
    pool_.map_written(ch.slot, state_.length(ch.slot), ch.count, ch.speculative);
    if (ch.speculative) state_.draft_begin(ch.slot, ch.count);
    rowwise = rowwise && (ch.speculative || ch.count == 1);
    any_speculative = any_speculative || ch.speculative;
  }
  linear_.set_matvec_max_tokens(rowwise && any_speculative ? options_.max_step_tokens : kMatvecMaxTokens);

  // Row bookkeeping.
  rows_.chunk_row0.clear();
  rows_.chunk_past.clear();
  rows_.logit_rows.clear();
  rows_.logit_chunk.clear();
  rows_.logit_pos.clear();
  int64_t r = 0;
  const int64_t a_extra = c.conv_kernel1 - 1;  // conv-A rows per chunk beyond its token count
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const StepChunk& ch = chunks[ci];
    const int64_t past = state_.length(ch.slot);
    rows_.chunk_row0.push_back(r);
    rows_.chunk_past.push_back(past);
    for (int64_t i = 0; i < ch.count + a_extra; ++i) rows_.a_chunk[r + int64_t(ci) * a_extra + i] = int32_t(ci);
    for (int64_t i = 0; i < ch.count; ++i) {
      rows_.row_pos[r + i] = int32_t(past + i);
      rows_.row_chunk[r + i] = int32_t(ci);
      const bool want = ch.logits == LogitsWanted::kAll || (ch.logits == LogitsWanted::kLast && i == ch.count - 1);
      if (want) {
        rows_.logit_rows.push_back(r + i);
        rows_.logit_chunk.push_back(int32_t(ci));
        rows_.logit_pos.push_back(past + i);
      }
    }
    r += ch.count;
  }
  lora_.plan(chunks, model_->lora(), std::span<const int32_t>(rows_.row_chunk.data(), size_t(T)));
  stats_ = {};
  stats_.tokens = T;

  // Embedding (no scaling, spec §5).
  {
    ZAYA_PROFILE_SCOPE("infer.embed");
    std::vector<int32_t>& ids = ids_;
    ids.resize(T);
    int64_t k = 0;
    for (const StepChunk& ch : chunks)
      for (int64_t i = 0; i < ch.count; ++i) ids[k++] = ch.tokens[i];
    SerialIf serial(T * D <= kSerialElements);  // as the norms below
    parallel_for(T, 2 * T * D, [&](int64_t t) {
      w.embed.row_f32(int64_t(ids[t]), buf_.h_TD + t * D);  // an int8 (tied, Q8_0) row is dequantized
    });
  }

  float* res_cur = buf_.res_a_TD;
  float* res_prev = nullptr;
  float* r_cur = buf_.r_a_TR;
  const float* r_prev = nullptr;
  for (int64_t n = 0; n < L2; ++n) {
    const int64_t b = n / 2;
    const MergeVectors& m = n % 2 == 0 ? w.attn[b].merge : w.moe[b].merge;
    const float* norm = n % 2 == 0 ? w.attn[b].input_norm_D : w.moe[b].input_norm_D;
    {
      SerialIf serial(T * D <= kSerialElements);
      residual_scale_forward<float>(res_cur, buf_.h_TD, m.hs_scale_D, m.hs_bias_D, res_prev, m.res_scale_D,
                                    m.res_bias_D, T, D);
      rmsnorm_forward<float>(buf_.x_TD, buf_.rstd_T, res_cur, norm, T, D, float(c.norm_eps));
    }
    if (n % 2 == 0) {
      attention_layer(b, T, chunks);
    } else {
      moe_layer(b, T, c.use_eda ? r_prev : nullptr, r_cur);
      r_prev = r_cur;
      r_cur = r_cur == buf_.r_a_TR ? buf_.r_b_TR : buf_.r_a_TR;
    }
    res_prev = res_cur;
    res_cur = res_cur == buf_.res_a_TD ? buf_.res_b_TD : buf_.res_a_TD;
  }
  const MergeVectors& fm = w.final_merge;
  SerialIf serial(T * D <= kSerialElements);
  residual_scale_forward<float>(res_cur, buf_.h_TD, fm.hs_scale_D, fm.hs_bias_D, res_prev, fm.res_scale_D,
                                fm.res_bias_D, T, D);
  // Only the rows that want logits need the final norm.
  const int64_t L = int64_t(rows_.logit_rows.size());
  for (int64_t i = 0; i < L; ++i)
    std::memcpy(buf_.hid_TD + i * D, res_cur + rows_.logit_rows[i] * D, sizeof(float) * D);
  rmsnorm_forward<float>(buf_.hid_TD, buf_.rstd_T, buf_.hid_TD, w.final_norm_D, L, D, float(c.norm_eps));
  for (const StepChunk& ch : chunks) {
    state_.set_length(ch.slot, state_.length(ch.slot) + ch.count);
    if (!ch.speculative) pool_.release_out_of_window(ch.slot, state_.length(ch.slot));  // else at keep_draft
  }
}

void InferenceEngine::keep_draft(int32_t slot, int64_t length) {
  ZAYA_CHECK(slot >= 0 && slot < slots_, "sequence slot {} is outside 0..{}", slot, slots_ - 1);
  ZAYA_CHECK(state_.drafting(slot), "sequence slot {} holds no speculative chunk to settle", slot);
  ZAYA_CHECK(length >= state_.draft_past(slot) && length <= state_.length(slot),
             "sequence slot {} can keep {}..{} tokens of its speculative chunk, not {}", slot, state_.draft_past(slot),
             state_.length(slot), length);
  state_.keep_draft(slot, length);
  pool_.truncate(slot, length);
  pool_.release_out_of_window(slot, length);
}

void InferenceEngine::logits(int64_t r0, int64_t r1, float* out_TV) {
  ZAYA_CHECK(r0 >= 0 && r0 <= r1 && r1 <= logit_rows(), "logit rows [{}, {}) are outside the step's {} rows", r0, r1,
             logit_rows());
  ZAYA_PROFILE_SCOPE("infer.lm_head");
  const int64_t D = config_.hidden;
  linear_.run(out_TV, config_.vocab_size, buf_.hid_TD + r0 * D, D, r1 - r0, model_->weights().lm_head);
}

}  // namespace zaya
