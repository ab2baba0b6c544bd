#include "zaya/ops/attention_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "zaya/core/arena.h"
#include "zaya/core/bf16.h"
#include "zaya/core/error.h"
#include "zaya/core/exp_f32.h"
#include "zaya/ops/matmul_bf16.h"
#include "zaya/ops/parallel_for.h"
#include "zaya/ops/row_max.h"

namespace zaya {
namespace {

using AttentionScratch = AttentionBf16Scratch;

struct Block {
  int64_t i0, rows, lo, keys;  // query rows i0 .. i0 + rows - 1 see keys lo .. lo + keys - 1
};

// Block bounds are the same for every sequence without document masking.
Block block_at(const AttentionShape& sh, int64_t i0) {
  const int64_t i1 = attention_query_block_end(sh, 0, i0), lo = sh.first_key(0, i0);
  return {i0, i1 - i0, lo, sh.pos(i1 - 1) + 1 - lo};
}

// Row-major strides of a dense tensor of these dims.
BatchedMatrix dense(int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t d4) {
  BatchedMatrix m;
  m.dims = {d0, d1, d2, d3, d4};
  m.strides[4] = 1;
  for (int i = 3; i >= 0; --i) m.strides[i] = m.strides[i + 1] * m.dims[i + 1];
  return m;
}

// One [B, H, rows, d] head-major bf16 copy of x (rows of sequence b from row r0,
// [.., H * d] wide): out[((b * H + h) * rows + r) * d + c] = bf16(x[(b * seq + r0 + r) * H * d + h * d + c]).
void gather_heads(uint16_t* out, const float* x, int64_t B, int64_t seq, int64_t r0, int64_t rows, int64_t H,
                  int64_t d) {
  parallel_for_2d(B, rows, B * rows * H * d, [&](int64_t b, int64_t r) {
    const float* src = x + (b * seq + r0 + r) * H * d;
    for (int64_t h = 0; h < H; ++h) {
      uint16_t* dst = out + ((b * H + h) * rows + r) * d;
#pragma omp simd
      for (int64_t c = 0; c < d; ++c) dst[c] = float_to_bf16(src[h * d + c]);
    }
  });
}

// The inverse of gather_heads for float32 blocks, writing or adding.
void scatter_heads(float* x, const float* blk, int64_t B, int64_t seq, int64_t r0, int64_t rows, int64_t H, int64_t d,
                   bool add) {
  parallel_for_2d(B, rows, B * rows * H * d, [&](int64_t b, int64_t r) {
    float* dst = x + (b * seq + r0 + r) * H * d;
    for (int64_t h = 0; h < H; ++h) {
      const float* src = blk + ((b * H + h) * rows + r) * d;
      if (add) {
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) dst[h * d + c] += src[c];
      } else {
        std::memcpy(dst + h * d, src, sizeof(float) * size_t(d));
      }
    }
  });
}

// The block's keys lo .. lo + N - 1 of every (sequence, KV head), dense.
void copy_slices(uint16_t* blk, const uint16_t* full, int64_t heads_total, int64_t Sk, int64_t lo, int64_t N,
                 int64_t d) {
  parallel_for(heads_total, heads_total * N * d, [&](int64_t bh) {
    std::memcpy(blk + bh * N * d, full + (bh * Sk + lo) * d, sizeof(uint16_t) * size_t(N * d));
  });
}

// The batched layouts of one block: B sequences, Hk KV heads, G query heads
// per KV head, R query rows, N keys, head width d.
struct Layouts {
  BatchedMatrix rows_d, keys_t, scores, keys_d, rows_t, stacked_d, keys_out;
  Layouts(int64_t B, int64_t Hk, int64_t G, int64_t R, int64_t N, int64_t d) {
    rows_d = dense(B, Hk, G, R, d);                                 // Q, dO, O, dQ
    keys_t = {{B, Hk, 1, d, N}, {Hk * N * d, N * d, N * d, 1, d}};  // K^T or V^T, broadcast over G
    scores = dense(B, Hk, G, R, N);                                 // S, dP, P, dS
    keys_d = {{B, Hk, 1, N, d}, {Hk * N * d, N * d, N * d, d, 1}};  // K or V, broadcast over G
    // dS^T or P^T: the G x R rows of a KV head stacked, read transposed.
    rows_t = {{1, B, Hk, N, G * R}, {B * Hk * G * R * N, Hk * G * R * N, G * R * N, 1, N}};
    stacked_d = dense(1, B, Hk, G * R, d);  // Q or dO with the G x R rows stacked
    keys_out = dense(1, B, Hk, N, d);       // dK, dV of the block's keys
  }
};

// The layer's K and V in bf16 [B, Hk, Sk, d].
struct LayerKv {
  const uint16_t* k;
  const uint16_t* v;
};
LayerKv layer_kv(AttentionScratch& s, const AttentionShape& sh, const float* k_TK, const float* v_TK) {
  const int64_t B = sh.batch, Sk = sh.keys(), Hk = sh.kv_heads, d = sh.head_dim;
  uint16_t* k = s.k.get(B * Hk * Sk * d);
  uint16_t* v = s.v.get(B * Hk * Sk * d);
  gather_heads(k, k_TK, B, Sk, 0, Sk, Hk, d);
  gather_heads(v, v_TK, B, Sk, 0, Sk, Hk, d);
  return {k, v};
}

// One query block's operands, shared by forward and backward: the dense key
// and value slices, Q's rows in bf16 and the scores S = Q K^T in float32.
struct BlockScores {
  Block blk;
  Layouts L;
  uint16_t* k_blk;
  uint16_t* v_blk;
  uint16_t* q_blk;
  float* s_blk;
};
BlockScores block_scores(Bf16Context& ctx, const AttentionShape& sh, const LayerKv& kv, const float* q_TQ, int64_t i0) {
  AttentionScratch& s = ctx.attention;
  const int64_t B = sh.batch, S = sh.seq, Sk = sh.keys(), Hq = sh.q_heads, Hk = sh.kv_heads, d = sh.head_dim;
  const Block blk = block_at(sh, i0);
  const int64_t R = blk.rows, N = blk.keys;
  BlockScores out{blk,
                  Layouts(B, Hk, Hq / Hk, R, N, d),
                  s.k_blk.get(B * Hk * N * d),
                  s.v_blk.get(B * Hk * N * d),
                  s.q_blk.get(B * Hq * R * d),
                  s.s_blk.get(B * Hq * R * N)};
  copy_slices(out.k_blk, kv.k, B * Hk, Sk, blk.lo, N, d);
  copy_slices(out.v_blk, kv.v, B * Hk, Sk, blk.lo, N, d);
  gather_heads(out.q_blk, q_TQ, B, S, i0, R, Hq, d);
  matmul_bf16_batched(ctx.gemms, out.L.rows_d, out.q_blk, out.L.keys_t, out.k_blk, out.L.scores, out.s_blk);
  return out;
}

}  // namespace

bool attention_bf16_supports(const AttentionShape& s) { return s.doc_pos == nullptr; }

void reserve_attention_bf16_scratch(Bf16Context& ctx, const AttentionShape& sh) {
  const int64_t B = sh.batch, Hq = sh.q_heads, Hk = sh.kv_heads, d = sh.head_dim, N = sh.keys();
  const int64_t R = kAttentionQueryBlock;
  AttentionScratch& s = ctx.attention;
  for (GrowBuffer<uint16_t>* b : {&s.k, &s.v}) b->get(B * Hk * N * d);
  for (GrowBuffer<uint16_t>* b : {&s.k_blk, &s.v_blk}) b->get(B * Hk * N * d);
  for (GrowBuffer<uint16_t>* b : {&s.q_blk, &s.do_blk}) b->get(B * Hq * R * d);
  for (GrowBuffer<uint16_t>* b : {&s.p_blk, &s.ds_blk}) b->get(B * Hq * R * N);
  for (GrowBuffer<float>* b : {&s.s_blk, &s.dp_blk}) b->get(B * Hq * R * N);
  s.out_blk.get(B * Hq * R * d);
  for (GrowBuffer<float>* b : {&s.dk_blk, &s.dv_blk}) b->get(B * Hk * N * d);
}

void attention_forward_bf16(Bf16Context& ctx, float* o_TQ, float* lse_BHS, const float* q_TQ, const float* k_TK,
                            const float* v_TK, const AttentionShape& sh) {
  ZAYA_ASSERT(attention_bf16_supports(sh) && !omp_in_parallel());
  const int64_t B = sh.batch, S = sh.seq, Hq = sh.q_heads, d = sh.head_dim;
  const float scale = 1.0f / std::sqrt(float(d));
  AttentionScratch& s = ctx.attention;
  const LayerKv kv = layer_kv(s, sh, k_TK, v_TK);
  for (int64_t i0 = 0; i0 < S;) {
    const BlockScores bs = block_scores(ctx, sh, kv, q_TQ, i0);
    const Block& blk = bs.blk;
    const int64_t R = blk.rows, N = blk.keys;
    float* s_blk = bs.s_blk;
    uint16_t* p_blk = s.p_blk.get(B * Hq * R * N);
    float* o_blk = s.out_blk.get(B * Hq * R * d);
    // Softmax per query row, float32; P in bf16 with zeros outside the row's keys.
    parallel_for(B * Hq * R, B * Hq * R * N, [&](int64_t row) {
      const int64_t r = row % R, bh = row / R, i = i0 + r;
      const int64_t c0 = sh.first_key(0, i) - blk.lo, c1 = sh.pos(i) + 1 - blk.lo;
      float* x = s_blk + row * N;
      uint16_t* p = p_blk + row * N;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) x[c] *= scale;
      const float mx = row_max(x + c0, c1 - c0);
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t c = c0; c < c1; ++c) {
        x[c] = exp_of(x[c] - mx);
        sum += x[c];
      }
      const float inv = 1.0f / sum;
      std::fill(p, p + c0, uint16_t(0));
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) p[c] = float_to_bf16(x[c] * inv);
      std::fill(p + c1, p + N, uint16_t(0));
      lse_BHS[bh * S + i] = mx + std::log(sum);
    });
    matmul_bf16_batched(ctx.gemms, bs.L.scores, p_blk, bs.L.keys_d, bs.v_blk, bs.L.rows_d, o_blk);
    scatter_heads(o_TQ, o_blk, B, S, i0, R, Hq, d, false);
    i0 += R;
  }
}

void attention_backward_bf16(Bf16Context& ctx, float* dq_TQ, float* dk_TK, float* dv_TK, const float* do_TQ,
                             const float* q_TQ, const float* k_TK, const float* v_TK, const float* o_TQ,
                             const float* lse_BHS, const AttentionShape& sh) {
  ZAYA_ASSERT(attention_bf16_supports(sh) && !omp_in_parallel());
  const int64_t B = sh.batch, S = sh.seq, Sk = sh.keys(), Hq = sh.q_heads, Hk = sh.kv_heads, d = sh.head_dim;
  const int64_t QW = sh.q_width();
  const float scale = 1.0f / std::sqrt(float(d));
  AttentionScratch& s = ctx.attention;
  const LayerKv kv = layer_kv(s, sh, k_TK, v_TK);
  for (int64_t i0 = 0; i0 < S;) {
    // Recompute the scores; dP = dO V^T.
    const BlockScores bs = block_scores(ctx, sh, kv, q_TQ, i0);
    const Block& blk = bs.blk;
    const Layouts& L = bs.L;
    const int64_t R = blk.rows, N = blk.keys;
    uint16_t* do_blk = s.do_blk.get(B * Hq * R * d);
    float* dp_blk = s.dp_blk.get(B * Hq * R * N);
    uint16_t* p_blk = s.p_blk.get(B * Hq * R * N);
    uint16_t* ds_blk = s.ds_blk.get(B * Hq * R * N);
    float* dq_blk = s.out_blk.get(B * Hq * R * d);
    float* dk_blk = s.dk_blk.get(B * Hk * N * d);
    float* dv_blk = s.dv_blk.get(B * Hk * N * d);
    gather_heads(do_blk, do_TQ, B, S, i0, R, Hq, d);
    matmul_bf16_batched(ctx.gemms, L.rows_d, do_blk, L.keys_t, bs.v_blk, L.scores, dp_blk);
    // P from the saved log-sum-exp; dS = P (dP - D) / sqrt(d), D = dO . O (float32).
    parallel_for(B * Hq * R, B * Hq * R * N, [&](int64_t row) {
      const int64_t r = row % R, bh = row / R, b = bh / Hq, h = bh % Hq, i = i0 + r;
      const int64_t c0 = sh.first_key(0, i) - blk.lo, c1 = sh.pos(i) + 1 - blk.lo;
      const float* o_row = o_TQ + (b * S + i) * QW + h * d;
      const float* do_row = do_TQ + (b * S + i) * QW + h * d;
      float di = 0;
#pragma omp simd reduction(+ : di)
      for (int64_t c = 0; c < d; ++c) di += o_row[c] * do_row[c];
      const float row_lse = lse_BHS[bh * S + i];
      const float* x = bs.s_blk + row * N;
      const float* dp = dp_blk + row * N;
      uint16_t* p = p_blk + row * N;
      uint16_t* ds = ds_blk + row * N;
      std::fill(p, p + c0, uint16_t(0));
      std::fill(ds, ds + c0, uint16_t(0));
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) {
        const float pc = exp_of(x[c] * scale - row_lse);
        p[c] = float_to_bf16(pc);
        ds[c] = float_to_bf16(pc * (dp[c] - di) * scale);
      }
      std::fill(p + c1, p + N, uint16_t(0));
      std::fill(ds + c1, ds + N, uint16_t(0));
    });
    // dQ = dS K; dK = dS^T Q and dV = P^T dO over the G x R rows of each KV head.
    matmul_bf16_batched(ctx.gemms, L.scores, ds_blk, L.keys_d, bs.k_blk, L.rows_d, dq_blk);
    matmul_bf16_batched(ctx.gemms, L.rows_t, ds_blk, L.stacked_d, bs.q_blk, L.keys_out, dk_blk);
    matmul_bf16_batched(ctx.gemms, L.rows_t, p_blk, L.stacked_d, do_blk, L.keys_out, dv_blk);
    scatter_heads(dq_TQ, dq_blk, B, S, i0, R, Hq, d, true);
    scatter_heads(dk_TK, dk_blk, B, Sk, blk.lo, N, Hk, d, true);
    scatter_heads(dv_TK, dv_blk, B, Sk, blk.lo, N, Hk, d, true);
    i0 += R;
  }
}

}  // namespace zaya
