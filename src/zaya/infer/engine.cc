#include "zaya/infer/engine.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/ops/activations.h"
#include "zaya/ops/cca_conv.h"
#include "zaya/ops/cca_mix.h"
#include "zaya/ops/qk_norm.h"
#include "zaya/ops/residual_scale.h"
#include "zaya/ops/rmsnorm.h"
#include "zaya/ops/router.h"
#include "zaya/ops/routing.h"
#include "zaya/ops/serial_if.h"

namespace zaya {
namespace {

void add_bias(float* y, int64_t ldy, int64_t rows, int64_t n, const float* b) {
  for (int64_t t = 0; t < rows; ++t)
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[t * ldy + i] += b[i];
}

int64_t max_of(std::initializer_list<int64_t> v) { return std::max(v); }

// The element-wise ops open a parallel region per call; a decode step's few
// thousand floats are not worth one (ops/serial_if.h): small steps run them on
// this thread.
constexpr int64_t kSerialElements = 32768;

// The router's products through the runner, on the layer's bf16 or f32 matrices.
class RunnerRouterProducts final : public RouterProducts<float> {
 public:
  RunnerRouterProducts(LinearRunner& runner, const InferMoe& w) : runner_(runner), w_(w) {}
  void apply(RouterMatrix m, float* y_TO, const float* x_TI, int64_t tokens, int64_t in, int64_t out) override {
    const WeightMatrix& w_OI = m == RouterMatrix::kDown   ? w_.down
                               : m == RouterMatrix::kMlp0 ? w_.mlp0
                               : m == RouterMatrix::kMlp2 ? w_.mlp2
                                                          : w_.mlp4;
    runner_.run(y_TO, out, x_TI, in, tokens, w_OI);
  }

 private:
  LinearRunner& runner_;
  const InferMoe& w_;
};

}  // namespace

void EngineOptions::validate(const ZayaConfig& c) const {
  ZAYA_CHECK(max_sequences >= 1 && max_sequences <= 65536, "batch size {} is invalid; allowed: 1..65536",
             max_sequences);
  ZAYA_CHECK(max_context >= 0 && max_context <= c.max_position,
             "context length {} is invalid; allowed: 1..{} (max_position_embeddings)", max_context, c.max_position);
  ZAYA_CHECK(max_step_tokens >= 1 && max_step_tokens <= (1 << 20), "tokens per step {} is invalid; allowed: 1..1048576",
             max_step_tokens);
}

InferenceEngine::InferenceEngine(const InferModel& model, const EngineOptions& options)
    : model_(model),
      config_(model.config()),
      options_(options),
      slots_(options.max_sequences),
      max_context_(options.max_context > 0 ? options.max_context : model.config().max_position),
      kw_(model.config().kv_width()),
      cc_(model.config().conv_channels()),
      pw_(model.config().q_width() + 2 * model.config().kv_width()),
      linear_(max_of({model.config().hidden, model.config().q_width(), model.config().expert_ffn,
                      2 * model.config().head_dim, model.config().router_hidden}),
              max_of({model.config().vocab_size, 2 * model.config().expert_ffn, model.config().hidden,
                      model.config().router_hidden, model.config().router_slots(), model.config().conv_channels(),
                      model.config().q_width()}),
              options.bf16_activations) {
  options_.validate(config_);
  const ZayaConfig& c = config_;
  rope_.build(max_context_, c.rotary_dim(), c.rope_theta);
  const int64_t B = c.num_blocks;
  // The KV cache is left untouched (and so unallocated by the OS) until used.
  k_cache_ = aligned_alloc_array<float>(size_t(B * slots_ * max_context_ * kw_));
  v_cache_ = aligned_alloc_array<float>(size_t(B * slots_ * max_context_ * kw_));
  conv_state_ = aligned_alloc_array<float>(size_t(B * slots_ * 2 * cc_));
  vprev_ = aligned_alloc_array<float>(size_t(B * slots_ * (kw_ / 2)));
  std::memset(conv_state_.get(), 0, sizeof(float) * B * slots_ * 2 * cc_);
  std::memset(vprev_.get(), 0, sizeof(float) * B * slots_ * (kw_ / 2));
  lengths_.assign(slots_, 0);

  const int64_t T = options_.max_step_tokens, D = c.hidden, Q = c.q_width(), K = kw_, C = cc_;
  const int64_t R = c.router_hidden, N = c.router_slots(), F = c.expert_ffn, TJ = T * c.top_k;
  const int64_t chunks = std::min(T, slots_);
  const int threads = omp_get_max_threads();
  threads_ = threads;
  attn_scratch_per_thread_ = cached_attention_scratch_floats(c.q_heads / c.kv_heads, max_context_);
  auto carve = [&](Arena& a) {
    h_TD_ = a.carve(T * D);
    res_a_TD_ = a.carve(T * D);
    res_b_TD_ = a.carve(T * D);
    x_TD_ = a.carve(T * D);
    rstd_T_ = a.carve(T);
    qkv_TP_ = a.carve(T * pw_);
    a_ext_ = a.carve((T + chunks) * C);
    xg_T2d_ = a.carve(T * 2 * C);
    c_TC_ = a.carve(T * C);
    q_TQ_ = a.carve(T * Q);
    k_TK_ = a.carve(T * K);
    v_TK_ = a.carve(T * K);
    inv_q_ = a.carve(T * c.q_heads);
    inv_k_ = a.carve(T * c.kv_heads);
    o_TQ_ = a.carve(T * Q);
    attn_scratch_ = a.carve(threads * attn_scratch_per_thread_);
    r_a_TR_ = a.carve(T * R);
    r_b_TR_ = a.carve(T * R);
    rn_TR_ = a.carve(T * R);
    u_TR_ = a.carve(T * R);
    g_TR_ = a.carve(T * R);
    logits_TN_ = a.carve(T * N);
    probs_TN_ = a.carve(T * N);
    gate_TJ_ = a.carve(TJ);
    xp_MD_ = a.carve(TJ * D);
    h_M2F_ = a.carve(TJ * 2 * F);
    act_MF_ = a.carve(TJ * F);
    y_MD_ = a.carve(TJ * D);
    hid_TD_ = a.carve(T * D);
  };
  Arena measure = Arena::measuring();
  carve(measure);
  ws_.reset(measure.used());
  carve(ws_);
  choice_TJ_.assign(TJ, kNoExpert);
  plan_.reserve(c.experts, T, c.top_k);
  row_pos_.resize(T);
  row_chunk_.resize(T);
  a_chunk_.resize(T + chunks);
}

int64_t InferenceEngine::state_bytes_per_slot() const {
  return int64_t(sizeof(float)) * config_.num_blocks * (2 * max_context_ * kw_ + 2 * cc_ + kw_ / 2);
}

int64_t InferenceEngine::workspace_bytes() const { return int64_t(sizeof(float)) * int64_t(ws_.capacity()); }

int64_t InferenceEngine::length(int32_t slot) const {
  ZAYA_CHECK(slot >= 0 && slot < slots_, "sequence slot {} is outside 0..{}", slot, slots_ - 1);
  return lengths_[slot];
}

void InferenceEngine::reset(int32_t slot) {
  ZAYA_CHECK(slot >= 0 && slot < slots_, "sequence slot {} is outside 0..{}", slot, slots_ - 1);
  lengths_[slot] = 0;
  for (int64_t b = 0; b < config_.num_blocks; ++b) {
    std::memset(conv_state(b, slot), 0, sizeof(float) * 2 * cc_);
    std::memset(vprev_state(b, slot), 0, sizeof(float) * (kw_ / 2));
  }
}

void InferenceEngine::copy(int32_t src, int32_t dst) {
  ZAYA_CHECK(src >= 0 && src < slots_ && dst >= 0 && dst < slots_, "sequence slots {} and {} must be in 0..{}", src,
             dst, slots_ - 1);
  if (src == dst) return;
  const int64_t n = lengths_[src];
  for (int64_t b = 0; b < config_.num_blocks; ++b) {
    for (int64_t j = 0; j < config_.kv_heads; ++j) {
      const int64_t off = j * max_context_ * config_.head_dim;
      std::memcpy(kcache(b, dst) + off, kcache(b, src) + off, sizeof(float) * n * config_.head_dim);
      std::memcpy(vcache(b, dst) + off, vcache(b, src) + off, sizeof(float) * n * config_.head_dim);
    }
    std::memcpy(conv_state(b, dst), conv_state(b, src), sizeof(float) * 2 * cc_);
    std::memcpy(vprev_state(b, dst), vprev_state(b, src), sizeof(float) * (kw_ / 2));
  }
  lengths_[dst] = n;
}

void InferenceEngine::fill_synthetic(int32_t slot, int64_t length, uint64_t seed) {
  ZAYA_CHECK(slot >= 0 && slot < slots_, "sequence slot {} is outside 0..{}", slot, slots_ - 1);
  ZAYA_CHECK(length >= 0 && length <= max_context_, "synthetic length {} exceeds the context {}", length, max_context_);
  const float scale = 1.0f / std::sqrt(float(config_.head_dim));
  for (int64_t b = 0; b < config_.num_blocks; ++b) {
    float* k = kcache(b, slot);
    float* v = vcache(b, slot);
    const int64_t d = config_.head_dim;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t j = 0; j < config_.kv_heads; ++j)
      for (int64_t t = 0; t < length; ++t)
        for (int64_t i = 0; i < d; ++i) {
          // A cheap deterministic hash in [-1, 1): realistic magnitudes, no page left untouched.
          const uint64_t hsh =
              (uint64_t(t) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(j * d + i + 1) * 0xC2B2AE3D27D4EB4Full) ^ seed;
          const float u = float((hsh >> 40) & 0xFFFF) / 32768.0f - 1.0f;
          k[(j * max_context_ + t) * d + i] = u * scale * 4;
          v[(j * max_context_ + t) * d + i] = u;
        }
  }
  lengths_[slot] = length;
}

void InferenceEngine::step(std::span<const StepChunk> chunks) {
  const ZayaConfig& c = config_;
  const InferWeights& w = model_.weights();
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
    ZAYA_CHECK(lengths_[ch.slot] + ch.count <= max_context_,
               "sequence in slot {} would grow to {} tokens, beyond the context length {}", ch.slot,
               lengths_[ch.slot] + ch.count, max_context_);
    for (int64_t i = 0; i < ch.count; ++i)
      ZAYA_CHECK(ch.tokens[i] >= 0 && ch.tokens[i] < V,
                 "token id {} (chunk {}, position {}) is outside the vocabulary 0..{}", ch.tokens[i], ci, i, V - 1);
    T += ch.count;
  }
  ZAYA_CHECK(T <= options_.max_step_tokens, "a step of {} tokens exceeds the step capacity {}", T,
             options_.max_step_tokens);

  // Row bookkeeping.
  chunk_row0_.clear();
  chunk_past_.clear();
  logit_rows_.clear();
  logit_chunk_.clear();
  logit_pos_.clear();
  int64_t r = 0;
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const StepChunk& ch = chunks[ci];
    const int64_t past = lengths_[ch.slot];
    chunk_row0_.push_back(r);
    chunk_past_.push_back(past);
    for (int64_t i = 0; i < ch.count; ++i) {
      row_pos_[r + i] = int32_t(past + i);
      row_chunk_[r + i] = int32_t(ci);
      a_chunk_[r + int64_t(ci) + i] = int32_t(ci);
      const bool want = ch.logits == LogitsWanted::kAll || (ch.logits == LogitsWanted::kLast && i == ch.count - 1);
      if (want) {
        logit_rows_.push_back(r + i);
        logit_chunk_.push_back(int32_t(ci));
        logit_pos_.push_back(past + i);
      }
    }
    a_chunk_[r + int64_t(ci) + ch.count] = int32_t(ci);
    r += ch.count;
  }
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
#pragma omp parallel for schedule(static) if (T * D > 65536)
    for (int64_t t = 0; t < T; ++t) {
      float* dst = h_TD_ + t * D;
      if (w.embed.type == WeightType::kBF16) {
        const uint16_t* src = static_cast<const uint16_t*>(w.embed.data) + int64_t(ids[t]) * D;
        for (int64_t i = 0; i < D; ++i) dst[i] = bf16_to_float(src[i]);
      } else {
        std::memcpy(dst, static_cast<const float*>(w.embed.data) + int64_t(ids[t]) * D, sizeof(float) * D);
      }
    }
  }

  float* res_cur = res_a_TD_;
  float* res_prev = nullptr;
  float* r_cur = r_a_TR_;
  const float* r_prev = nullptr;
  for (int64_t n = 0; n < L2; ++n) {
    const int64_t b = n / 2;
    const MergeVectors& m = n % 2 == 0 ? w.attn[b].merge : w.moe[b].merge;
    const float* norm = n % 2 == 0 ? w.attn[b].input_norm_D : w.moe[b].input_norm_D;
    {
      SerialIf serial(T * D <= kSerialElements);
      residual_scale_forward<float>(res_cur, h_TD_, m.hs_scale_D, m.hs_bias_D, res_prev, m.res_scale_D, m.res_bias_D, T,
                                    D);
      rmsnorm_forward<float>(x_TD_, rstd_T_, res_cur, norm, T, D, float(c.norm_eps));
    }
    if (n % 2 == 0) {
      attention_layer(b, T, chunks);
    } else {
      moe_layer(b, T, c.use_eda ? r_prev : nullptr, r_cur);
      r_prev = r_cur;
      r_cur = r_cur == r_a_TR_ ? r_b_TR_ : r_a_TR_;
    }
    res_prev = res_cur;
    res_cur = res_cur == res_a_TD_ ? res_b_TD_ : res_a_TD_;
  }
  const MergeVectors& fm = w.final_merge;
  SerialIf serial(T * D <= kSerialElements);
  residual_scale_forward<float>(res_cur, h_TD_, fm.hs_scale_D, fm.hs_bias_D, res_prev, fm.res_scale_D, fm.res_bias_D, T,
                                D);
  // Only the rows that want logits need the final norm.
  const int64_t L = int64_t(logit_rows_.size());
  for (int64_t i = 0; i < L; ++i) std::memcpy(hid_TD_ + i * D, res_cur + logit_rows_[i] * D, sizeof(float) * D);
  rmsnorm_forward<float>(hid_TD_, rstd_T_, hid_TD_, w.final_norm_D, L, D, float(c.norm_eps));
  for (const StepChunk& ch : chunks) lengths_[ch.slot] += ch.count;
}

void InferenceEngine::attention_layer(int64_t b, int64_t T, std::span<const StepChunk> chunks) {
  ZAYA_PROFILE_SCOPE("infer.attention");
  const ZayaConfig& c = config_;
  const InferAttention& w = model_.weights().attn[b];
  const int64_t D = c.hidden, Q = c.q_width(), K = kw_, C = cc_, d = c.head_dim, G = C / d, half = K / 2;
  const int64_t nc = int64_t(chunks.size());
  // Fused projection: q | k | v_cur | v_prev.
  const LinearRunner::Part parts[4] = {{&w.q, 0}, {&w.k, Q}, {&w.v_cur, Q + K}, {&w.v_prev, Q + K + half}};
  linear_.run_parts(qkv_TP_, pw_, x_TD_, D, T, parts);

  // conv A (depthwise, kernel 2) over [state(2 rows), chunk rows]: a_ext row k of
  // chunk ci = bA + wA0 * raw(k) + wA1 * raw(k+1), k = 0..S; row 0 is the older
  // position's output (a_old of the first token), from the state alone.
  const float* wA = w.conv_a_w_C2;
  const float* bA = w.conv_a_b_C;
  const int64_t arows = T + nc;
#pragma omp parallel for schedule(static) if (arows * C > 65536)
  for (int64_t ar = 0; ar < arows; ++ar) {
    const int64_t ci = a_chunk_[ar];
    const int64_t r0 = chunk_row0_[ci], k = ar - r0 - ci;
    const float* st = conv_state(b, chunks[ci].slot);
    auto raw = [&](int64_t j) -> const float* { return j < 2 ? st + j * C : qkv_TP_ + (r0 + j - 2) * pw_; };
    cca_conv_a_row(a_ext_ + ar * C, raw(k), raw(k + 1), wA, bA, C);
  }
  // New conv state: the raw vectors of the chunk's last two positions.
  for (int64_t ci = 0; ci < nc; ++ci) {
    const int64_t r0 = chunk_row0_[ci], S = chunks[ci].count;
    float* st = conv_state(b, chunks[ci].slot);
    if (S == 1) {
      std::memcpy(st, st + C, sizeof(float) * C);
    } else {
      std::memcpy(st, qkv_TP_ + (r0 + S - 2) * pw_, sizeof(float) * C);
    }
    std::memcpy(st + C, qkv_TP_ + (r0 + S - 1) * pw_, sizeof(float) * C);
  }
  // conv B (grouped): group g of row t reads (a_old[g], a_new[g]) = a_ext rows
  // t + ci and t + ci + 1; inputs gathered as xg[g][t] = [a_old_g, a_new_g].
  const int64_t d2 = 2 * d;
#pragma omp parallel for schedule(static) if (T * C > 65536)
  for (int64_t t = 0; t < T; ++t) {
    const int64_t ar = t + row_chunk_[t];
    const float* a_old = a_ext_ + ar * C;
    const float* a_new = a_old + C;
    for (int64_t g = 0; g < G; ++g) {
      float* dst = xg_T2d_ + (g * T + t) * d2;
      std::memcpy(dst, a_old + g * d, sizeof(float) * d);
      std::memcpy(dst + d, a_new + g * d, sizeof(float) * d);
    }
  }
  if (T <= kMatvecMaxTokens) {
    // Decode: the groups' small products in one parallel region, if worth one.
#pragma omp parallel for schedule(static) if (T * C * d2 >= kDecodeParallelMinMacs)
    for (int64_t g = 0; g < G; ++g) {
      const WeightMatrix wg = w.conv_b.row_slice(g * d, (g + 1) * d);
      matvec_rows(wg.type, wg.data, d2, 0, d, xg_T2d_ + g * T * d2, d2, T, c_TC_ + g * d, C, false);
    }
  } else {
    for (int64_t g = 0; g < G; ++g)
      linear_.run(c_TC_ + g * d, C, xg_T2d_ + g * T * d2, d2, T, w.conv_b.row_slice(g * d, (g + 1) * d));
  }
  add_bias(c_TC_, C, T, C, w.conv_b_b_C);

  {
    SerialIf serial(T * pw_ <= kSerialElements);
    // Q, K with the mean terms of the unconvolved projections; values with the delayed stream.
    cca_mean_terms_forward<float>(q_TQ_, k_TK_, c_TC_, qkv_TP_, CcaMixShape{1, T, c.q_heads, c.kv_heads, d, pw_});
    for (int64_t ci = 0; ci < nc; ++ci) {
      const int64_t r0 = chunk_row0_[ci], S = chunks[ci].count;
      float* vp = vprev_state(b, chunks[ci].slot);
      for (int64_t i = 0; i < S; ++i) {
        const float* prev = i == 0 ? vp : qkv_TP_ + (r0 + i - 1) * pw_ + Q + K + half;
        cca_value_row(v_TK_ + (r0 + i) * K, qkv_TP_ + (r0 + i) * pw_ + Q + K, prev, half);
      }
      std::memcpy(vp, qkv_TP_ + (r0 + S - 1) * pw_ + Q + K + half, sizeof(float) * half);
    }
    l2norm_heads_forward<float>(q_TQ_, inv_q_, q_TQ_, nullptr, T, c.q_heads, d);
    l2norm_heads_forward<float>(k_TK_, inv_k_, k_TK_, w.temp_Hk, T, c.kv_heads, d);
    rope_apply<float>(q_TQ_, row_pos_.data(), T, c.q_heads, d, rope_, false);
    rope_apply<float>(k_TK_, row_pos_.data(), T, c.kv_heads, d, rope_, false);
  }
  // Append to the caches, then attend.
  for (int64_t ci = 0; ci < nc; ++ci) {
    const int64_t r0 = chunk_row0_[ci], S = chunks[ci].count, past = chunk_past_[ci];
    float* kc = kcache(b, chunks[ci].slot);
    float* vc = vcache(b, chunks[ci].slot);
    for (int64_t j = 0; j < c.kv_heads; ++j)
      for (int64_t i = 0; i < S; ++i) {
        const int64_t at = (j * max_context_ + past + i) * d;
        std::memcpy(kc + at, k_TK_ + (r0 + i) * K + j * d, sizeof(float) * d);
        std::memcpy(vc + at, v_TK_ + (r0 + i) * K + j * d, sizeof(float) * d);
      }
  }
  attend(b, chunks);
  linear_.run(h_TD_, D, o_TQ_, Q, T, w.o);
}

void InferenceEngine::attend(int64_t b, std::span<const StepChunk> chunks) {
  const ZayaConfig& c = config_;
  std::vector<CachedAttentionChunk>& work = attn_work_;
  work.clear();
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const int64_t r0 = chunk_row0_[ci];
    work.push_back({q_TQ_ + r0 * c.q_width(), o_TQ_ + r0 * c.q_width(), kcache(b, chunks[ci].slot),
                    vcache(b, chunks[ci].slot), max_context_ * c.head_dim, chunk_past_[ci], chunks[ci].count});
    stats_.kv_bytes += int64_t(sizeof(float)) * 2 * kw_ * chunks[ci].count * (chunk_past_[ci] + chunks[ci].count);
  }
  // Short decode attention (a few hundred KB of cache) is not worth a parallel
  // region (see kDecodeParallelMinMacs): one thread below kDecodeParallelMinMacs multiply-adds.
  int64_t macs = 0;
  for (size_t ci = 0; ci < chunks.size(); ++ci)
    macs += 2 * c.q_heads * c.head_dim * chunks[ci].count * (chunk_past_[ci] + chunks[ci].count);
  cached_attention(work, CachedAttentionShape{c.q_heads, c.kv_heads, c.head_dim}, attn_scratch_,
                   attn_scratch_per_thread_, macs < kDecodeParallelMinMacs ? 1 : threads_);
}

void InferenceEngine::moe_layer(int64_t b, int64_t T, const float* r_prev, float* r_out) {
  ZAYA_PROFILE_SCOPE("infer.moe");
  const ZayaConfig& c = config_;
  const InferMoe& w = model_.weights().moe[b];
  const int64_t D = c.hidden, R = c.router_hidden, N = c.router_slots(), F = c.expert_ffn, J = c.top_k;
  // Router (spec §4); u and g serve both MLP layers.
  const bool small = T * D <= kSerialElements;
  // The matrices go through the runner; the op reads only the vectors.
  const RouterWeights<float> rw{.down_b_R = w.down_b_R,
                                .states_scale_R = w.states_scale_R,
                                .norm_R = w.eda_norm_R,
                                .mlp0_b_R = w.mlp0_b_R,
                                .mlp2_b_R = w.mlp2_b_R};
  RunnerRouterProducts products(linear_, w);
  RouterActs<float> ra{.r_TR = r_out,
                       .rstd_T = rstd_T_,
                       .rn_TR = rn_TR_,
                       .u1_TR = u_TR_,
                       .g1_TR = g_TR_,
                       .u2_TR = u_TR_,
                       .g2_TR = g_TR_,
                       .logits_TN = logits_TN_,
                       .probs_TN = probs_TN_,
                       .gate_TJ = gate_TJ_,
                       .choice_TJ = choice_TJ_.data()};
  router_forward<float>(rw, products, RouterShape{T, D, R, N, J, c.skip_slot(), c.router_norm_eps}, x_TD_, r_prev,
                        w.balancing_bias_N, ra, {}, small);
  {
    SerialIf serial(small);
    // Experts: tokens grouped by expert, one product pair per expert used.
    build_expert_plan(plan_, choice_TJ_.data(), T, J);
    gather_rows<float>(xp_MD_, x_TD_, plan_, D);
  }
  for (int64_t i = 0; i < T * J; ++i)
    if (choice_TJ_[i] == c.skip_slot()) ++stats_.skip_choices;
  for (int64_t e = 0; e < c.experts; ++e) {
    const int64_t r0 = plan_.offsets[e], n = plan_.count(e);
    if (n == 0) continue;
    ++stats_.expert_loads;
    linear_.run(h_M2F_ + r0 * 2 * F, 2 * F, xp_MD_ + r0 * D, D, n, w.fc1[e]);
  }
  swiglu_forward<float>(act_MF_, h_M2F_, plan_.rows, F);
  for (int64_t e = 0; e < c.experts; ++e) {
    const int64_t r0 = plan_.offsets[e], n = plan_.count(e);
    if (n == 0) continue;
    linear_.run(y_MD_ + r0 * D, D, act_MF_ + r0 * F, F, n, w.fc2[e]);
  }
  SerialIf serial(small);
  // Legacy: a skip token's output is p_skip * x; native checkpoints give it 0 (spec §8.1).
  combine_forward<float>(h_TD_, y_MD_, x_TD_, gate_TJ_, choice_TJ_.data(), plan_, T, J, D,
                         model_.skip_outputs_zero() ? -1 : c.skip_slot());
}

void InferenceEngine::logits(int64_t r0, int64_t r1, float* out_TV) {
  ZAYA_CHECK(r0 >= 0 && r0 <= r1 && r1 <= logit_rows(), "logit rows [{}, {}) are outside the step's {} rows", r0, r1,
             logit_rows());
  ZAYA_PROFILE_SCOPE("infer.lm_head");
  const int64_t D = config_.hidden;
  linear_.run(out_TV, config_.vocab_size, hid_TD_ + r0 * D, D, r1 - r0, model_.weights().embed);
}

}  // namespace zaya
