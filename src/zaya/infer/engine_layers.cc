// The two half-layers of a decode step (engine.h): CCA attention over each
// slot's caches and convolution state, and the MoE layer (router, experts).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "zaya/core/bf16.h"
#include "zaya/core/profiler.h"
#include "zaya/core/work_pool.h"
#include "zaya/infer/engine.h"
#include "zaya/model/conv_taps.h"
#include "zaya/model/moe_block.h"
#include "zaya/ops/activations.h"
#include "zaya/ops/cca_conv.h"
#include "zaya/ops/cca_mix.h"
#include "zaya/ops/parallel_for.h"
#include "zaya/ops/qk_norm.h"
#include "zaya/ops/rope.h"
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

// The router's products through the runner, on the layer's bf16 or f32
// matrices, each with the LoRA branches of the rows whose adapter targets it.
class RunnerRouterProducts final : public RouterProducts<float> {
 public:
  RunnerRouterProducts(LinearRunner& runner, const InferMoe& w, const StepLora& lora, int64_t block)
      : runner_(runner), w_(w), lora_(lora), block_(block) {}
  void apply(RouterMatrix m, float* y_TO, const float* x_TI, int64_t tokens, int64_t in, int64_t out) override {
    const WeightMatrix& w_OI = m == RouterMatrix::kDown   ? w_.down
                               : m == RouterMatrix::kMlp0 ? w_.mlp0
                               : m == RouterMatrix::kMlp2 ? w_.mlp2
                                                          : w_.mlp4;
    runner_.run(y_TO, out, x_TI, in, tokens, w_OI);
    const LoraTarget t = m == RouterMatrix::kDown   ? LoraTarget::kRouterDown
                         : m == RouterMatrix::kMlp0 ? LoraTarget::kRouterFc1
                         : m == RouterMatrix::kMlp2 ? LoraTarget::kRouterFc2
                                                    : LoraTarget::kRouterOut;
    if (lora_.any()) lora_.add(block_, t, y_TO, out, x_TI, in);
  }

 private:
  LinearRunner& runner_;
  const InferMoe& w_;
  const StepLora& lora_;
  const int64_t block_;
};

}  // namespace

void InferenceEngine::attention_layer(int64_t b, int64_t T, std::span<const StepChunk> chunks) {
  ZAYA_PROFILE_SCOPE("infer.attention");
  const ZayaConfig& c = config_;
  const InferAttention& w = model_->weights().attn[b];
  const int64_t D = c.hidden, Q = c.q_width(), K = kw_, C = cc_, d = c.head_dim, G = C / d, half = K / 2;
  const int64_t nc = int64_t(chunks.size());
  // Fused projection: q | k | v_cur | v_prev.
  const LinearRunner::Part parts[4] = {{&w.q, 0}, {&w.k, Q}, {&w.v_cur, Q + K}, {&w.v_prev, Q + K + half}};
  linear_.run_parts(buf_.qkv_TP, pw_, buf_.x_TD, D, T, parts);
  // Each row's adapter branches (step_lora.h), unmerged, after the base product of every row.
  if (lora_.any())
    for (LoraTarget t : kLoraQkvTargets) lora_.add(b, t, buf_.qkv_TP, pw_, buf_.x_TD, D);

  // conv A (depthwise, k0 taps) over [state (H rows), chunk rows], H = k0 + k1 - 2:
  // a_ext row k of chunk ci = bA + sum_j wA_j * raw(k + j), k = 0..S+k1-2; the
  // first k1 - 1 rows are older positions' outputs, from the state alone.
  const int64_t k0 = c.conv_kernel0, k1 = c.conv_kernel1, H = conv_history(c);
  const float* wA = w.conv_a_w_C2;
  const float* bA = w.conv_a_b_C;
  const int64_t arows = T + nc * (k1 - 1);
  {
    // A small step's loops stay on this thread (kSerialElements): a region here
    // would wake libgomp's team, which then spins on the CPUs the pool's helpers need.
    SerialIf serial(T * D <= kSerialElements);
    parallel_for(arows, arows * C * (k0 + 1), [&](int64_t ar) {
      const int64_t ci = rows_.a_chunk[ar];
      const int64_t r0 = rows_.chunk_row0[ci], k = ar - r0 - ci * (k1 - 1);
      const float* st = state_.conv(b, chunks[ci].slot);
      auto raw = [&](int64_t j) -> const float* { return j < H ? st + j * C : buf_.qkv_TP + (r0 + j - H) * pw_; };
      if (k0 == 2) {
        cca_conv_a_row(buf_.a_ext + ar * C, raw(k), raw(k + 1), wA, bA, C);
      } else {
        const float* rows[kCcaConvMaxTaps];
        for (int64_t j = 0; j < k0; ++j) rows[j] = raw(k + j);
        cca_conv_a_row_taps(buf_.a_ext + ar * C, rows, wA, bA, C, k0);
      }
    });
  }
  // New conv state: the raw vectors of the last H positions of [state, chunk]
  // (row i from row S + i: ascending i never reads a row already replaced).
  for (int64_t ci = 0; ci < nc; ++ci) {
    const int64_t r0 = rows_.chunk_row0[ci], S = chunks[ci].count;
    // A speculative chunk first records the state it starts from and each position's rows (keep_draft).
    if (chunks[ci].speculative) state_.draft_record(b, chunks[ci].slot, buf_.qkv_TP + r0 * pw_, pw_, Q + K + half);
    float* st = state_.conv(b, chunks[ci].slot);
    for (int64_t i = 0; i < H; ++i) {
      const int64_t j = S + i;
      std::memcpy(st + i * C, j < H ? st + j * C : buf_.qkv_TP + (r0 + j - H) * pw_, sizeof(float) * C);
    }
  }
  // conv B (grouped, k1 taps): group g of row t reads a_ext rows t + ci (k1 - 1) + m,
  // m = 0..k1-1 (oldest first); inputs gathered as xg[g][t] = [a_0 g, .., a_{k1-1} g].
  const int64_t d2 = k1 * d;
  {
    SerialIf serial(T * D <= kSerialElements);
    parallel_for(T, 2 * T * C, [&](int64_t t) {
      const float* a0 = buf_.a_ext + (t + rows_.row_chunk[t] * (k1 - 1)) * C;
      for (int64_t g = 0; g < G; ++g) {
        float* dst = buf_.xg_T2d + (g * T + t) * d2;
        for (int64_t m = 0; m < k1; ++m) std::memcpy(dst + m * d, a0 + m * C + g * d, sizeof(float) * d);
      }
    });
  }
  if (T <= linear_.matvec_max_tokens()) {
    // Decode: the groups' small products in one parallel loop, if worth one.
    pool_for(G, T * C * d2 >= kDecodeParallelMinMacs ? omp_get_max_threads() : 1, [&](int64_t g, int) {
      const WeightMatrix wg = w.conv_b.row_slice(g * d, (g + 1) * d);
      matvec_rows(wg.type, wg.data, d2, 0, d, buf_.xg_T2d + g * T * d2, d2, T, buf_.c_TC + g * d, C, false);
    });
  } else {
    for (int64_t g = 0; g < G; ++g)
      linear_.run(buf_.c_TC + g * d, C, buf_.xg_T2d + g * T * d2, d2, T, w.conv_b.row_slice(g * d, (g + 1) * d));
  }
  add_bias(buf_.c_TC, C, T, C, w.conv_b_b_C);

  {
    SerialIf serial(T * pw_ <= kSerialElements);
    // Q, K with the mean terms of the unconvolved projections; values with the delayed stream.
    cca_mean_terms_forward<float>(buf_.q_TQ, buf_.k_TK, buf_.c_TC, buf_.qkv_TP,
                                  CcaMixShape{1, T, c.q_heads, c.kv_heads, d, pw_});
    for (int64_t ci = 0; ci < nc; ++ci) {
      const int64_t r0 = rows_.chunk_row0[ci], S = chunks[ci].count;
      float* vp = state_.vprev(b, chunks[ci].slot);
      for (int64_t i = 0; i < S; ++i) {
        const float* prev = i == 0 ? vp : buf_.qkv_TP + (r0 + i - 1) * pw_ + Q + K + half;
        cca_value_row(buf_.v_TK + (r0 + i) * K, buf_.qkv_TP + (r0 + i) * pw_ + Q + K, prev, half);
      }
      std::memcpy(vp, buf_.qkv_TP + (r0 + S - 1) * pw_ + Q + K + half, sizeof(float) * half);
    }
    l2norm_heads_forward<float>(buf_.q_TQ, buf_.inv_q, buf_.q_TQ, nullptr, T, c.q_heads, d);
    l2norm_heads_forward<float>(buf_.k_TK, buf_.inv_k, buf_.k_TK, w.temp_Hk, T, c.kv_heads, d);
    // Each block's own RoPE base, at absolute positions (spec §12).
    const RopeTable& rope = c.is_sliding(b) ? rope_sliding_ : rope_;
    rope_apply<float>(buf_.q_TQ, rows_.row_pos.data(), T, c.q_heads, d, rope, false);
    rope_apply<float>(buf_.k_TK, rows_.row_pos.data(), T, c.kv_heads, d, rope, false);
    // A bf16 cache: every reader (this step's sliding keys, the prefill GEMMs,
    // later decode steps through the pages) sees the same bf16 values.
    if (kv_bf16()) {
      round_to_bf16(buf_.k_TK, T * K);
      round_to_bf16(buf_.v_TK, T * K);
    }
  }
  // A full block appends to its cache, then attends over it; a sliding block
  // attends over its ring and the step's own keys, then keeps the newest in the ring.
  const bool sliding = c.is_sliding(b);
  if (!sliding) append_to_cache(b, chunks);
  attend(b, chunks);
  if (sliding) append_to_cache(b, chunks);
  linear_.run(buf_.h_TD, D, buf_.o_TQ, Q, T, w.o);
  if (lora_.any()) lora_.add(b, LoraTarget::kO, buf_.h_TD, D, buf_.o_TQ, Q);
}

void InferenceEngine::append_to_cache(int64_t b, std::span<const StepChunk> chunks) {
  const int64_t K = kw_, d = config_.head_dim, P = options_.page_tokens, kind = pool_.kind_of(b);
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const int64_t r0 = rows_.chunk_row0[ci], past = rows_.chunk_past[ci];
    // Every new position on a full block; a sliding block only the last W - 1 (later queries see no earlier one).
    int64_t lo = 0, hi = 0;
    pool_.written(kind, past, chunks[ci].count, lo, hi, chunks[ci].speculative);
    const std::vector<int32_t>& table = pool_.table(chunks[ci].slot, kind);
    for (int64_t t = lo; t < hi; ++t) {
      char* kc = pool_.kpage(b, table[t / P]);
      char* vc = pool_.vpage(b, table[t / P]);
      const int64_t row = r0 + t - past;
      for (int64_t j = 0; j < config_.kv_heads; ++j) {
        const int64_t at = (j * P + t % P) * d;
        store_kv(kc, at, buf_.k_TK + row * K + j * d, d);
        store_kv(vc, at, buf_.v_TK + row * K + j * d, d);
      }
    }
  }
}

void InferenceEngine::attend(int64_t b, std::span<const StepChunk> chunks) {
  const ZayaConfig& c = config_;
  const int64_t W = c.window_of(b), d = c.head_dim, P = options_.page_tokens, kind = pool_.kind_of(b);
  std::vector<CachedAttentionChunk>& work = attn_work_;
  std::vector<CachedKeySpan>& spans = attn_spans_;
  work.clear();
  spans.clear();
  std::vector<size_t>& first_span = attn_first_span_;
  first_span.clear();
  int64_t keys_read = 0;  // sum over rows of the keys each sees
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const int64_t r0 = rows_.chunk_row0[ci], past = rows_.chunk_past[ci], S = chunks[ci].count;
    CachedAttentionChunk ch;
    ch.q_SQ = buf_.q_TQ + r0 * c.q_width();
    ch.o_SQ = buf_.o_TQ + r0 * c.q_width();
    ch.past = past;
    ch.count = S;
    ch.window = W;
    ch.rowwise = chunks[ci].speculative;  // each row's bits as in a one-token step
    first_span.push_back(spans.size());
    const std::vector<int32_t>& table = pool_.table(chunks[ci].slot, kind);
    // The pages: every position through the chunk's own (appended already) on a full
    // block; on a sliding block those the first row sees before the chunk, then the
    // chunk's own keys, token-major in the step's workspace.
    const int64_t lo = W == 0 ? 0 : cached_attention_first_key(past, W), hi = W == 0 ? past + S : past;
    for (int64_t pos = lo; pos < hi;) {
      const int64_t i = pos / P, n = std::min(hi, (i + 1) * P) - pos, row = pos - i * P;
      const int64_t at = row * d * pool_.elem_bytes();
      spans.push_back({pool_.kpage(b, table[i]) + at, pool_.vpage(b, table[i]) + at, P * d, d, pos, n, kv_bf16()});
      pos += n;
    }
    if (W != 0) spans.push_back({buf_.k_TK + r0 * kw_, buf_.v_TK + r0 * kw_, d, kw_, past, S, false});
    work.push_back(ch);
    for (int64_t i = 0; i < S; ++i) keys_read += past + i + 1 - cached_attention_first_key(past + i, W);
  }
  for (size_t ci = 0; ci < work.size(); ++ci) {
    const size_t end = ci + 1 < work.size() ? first_span[ci + 1] : spans.size();
    work[ci].spans = spans.data() + first_span[ci];
    work[ci].span_count = int32_t(end - first_span[ci]);
  }
  stats_.kv_bytes += pool_.elem_bytes() * 2 * kw_ * keys_read;
  // Short decode attention (a few hundred KB of cache) is not worth a parallel
  // region (see kDecodeParallelMinMacs): one thread below kDecodeParallelMinMacs multiply-adds.
  const int64_t macs = 2 * c.q_heads * d * keys_read;
  cached_attention(work, CachedAttentionShape{c.q_heads, c.kv_heads, d}, buf_.attn_scratch, attn_scratch_per_thread_,
                   macs < kDecodeParallelMinMacs ? 1 : threads_);
}

void InferenceEngine::moe_layer(int64_t b, int64_t T, const float* r_prev, float* r_out) {
  ZAYA_PROFILE_SCOPE("infer.moe");
  const ZayaConfig& c = config_;
  const InferMoe& w = model_->weights().moe[b];
  const int64_t D = c.hidden, R = c.router_hidden, N = c.router_slots(), F = c.expert_ffn, J = c.top_k;
  int32_t* choice_TJ = choice_TJ_.data() + b * options_.max_step_tokens * J;  // kept: step_choices(b)
  // Router (spec §4); u and g serve both MLP layers.
  const bool small = T * D <= kSerialElements;
  // The matrices go through the runner; the op reads only the vectors.
  const RouterWeights<float> rw{.down_b_R = w.down_b_R,
                                .states_scale_R = w.states_scale_R,
                                .norm_R = w.eda_norm_R,
                                .mlp0_b_R = w.mlp0_b_R,
                                .mlp2_b_R = w.mlp2_b_R};
  RunnerRouterProducts products(linear_, w, lora_, b);
  RouterActs<float> ra{.r_TR = r_out,
                       .rstd_T = buf_.rstd_T,
                       .rn_TR = buf_.rn_TR,
                       .u1_TR = buf_.u_TR,
                       .g1_TR = buf_.g_TR,
                       .u2_TR = buf_.u_TR,
                       .g2_TR = buf_.g_TR,
                       .logits_TN = buf_.logits_TN,
                       .probs_TN = buf_.probs_TN,
                       .gate_TJ = buf_.gate_TJ,
                       .choice_TJ = choice_TJ};
  router_forward<float>(rw, products, RouterShape{T, D, R, N, J, c.skip_slot(), c.router_norm_eps}, buf_.x_TD, r_prev,
                        w.balancing_bias_N, ra, {}, small);
  {
    SerialIf serial(small);
    // Experts: tokens grouped by expert, one product pair per expert used.
    build_expert_plan(plan_, choice_TJ, T, J);
    gather_rows<float>(buf_.xp_MD, buf_.x_TD, plan_, D);
  }
  for (int64_t i = 0; i < T * J; ++i)
    if (choice_TJ[i] == c.skip_slot()) ++stats_.skip_choices;
  // Every used expert's product in one parallel loop (LinearRunner::run_products), then its LoRA branch.
  std::vector<LinearRunner::Product>& expert_products = expert_products_;
  expert_products.clear();
  for (int64_t e = 0; e < c.experts; ++e) {
    const int64_t r0 = plan_.offsets[e], n = plan_.count(e);
    if (n == 0) continue;
    ++stats_.expert_loads;
    expert_products.push_back({&w.fc1[e], buf_.xp_MD + r0 * D, D, n, buf_.h_M2F + r0 * 2 * F, 2 * F});
  }
  linear_.run_products(expert_products);
  for (int64_t e = 0; e < c.experts; ++e) {
    const int64_t r0 = plan_.offsets[e], n = plan_.count(e);
    if (n > 0 && lora_.any())
      lora_.add_expert(b, LoraTarget::kExpertGateUp, e, r0, n, plan_.row_token.data(), buf_.h_M2F, 2 * F, buf_.xp_MD,
                       D);
  }
  {
    SerialIf serial(small);
    swiglu_forward<float>(buf_.act_MF, buf_.h_M2F, plan_.rows, F);
  }
  expert_products.clear();
  for (int64_t e = 0; e < c.experts; ++e) {
    const int64_t r0 = plan_.offsets[e], n = plan_.count(e);
    if (n > 0) expert_products.push_back({&w.fc2[e], buf_.act_MF + r0 * F, F, n, buf_.y_MD + r0 * D, D});
  }
  linear_.run_products(expert_products);
  for (int64_t e = 0; e < c.experts; ++e) {
    const int64_t r0 = plan_.offsets[e], n = plan_.count(e);
    if (n > 0 && lora_.any())
      lora_.add_expert(b, LoraTarget::kExpertDown, e, r0, n, plan_.row_token.data(), buf_.y_MD, D, buf_.act_MF, F);
  }
  SerialIf serial(small);
  // Legacy: a skip token's output is p_skip * x; native checkpoints give it 0 (spec §8.1).
  combine_forward<float>(buf_.h_TD, buf_.y_MD, buf_.x_TD, buf_.gate_TJ, choice_TJ, plan_, T, J, D, skip_input_slot(c));
}

}  // namespace zaya
