#include "zaya/ops/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "zaya/core/exp_f32.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/parallel_for.h"
#include "zaya/ops/row_max.h"

namespace zaya {

int64_t attention_query_block_end(const AttentionShape& sh, int64_t b, int64_t i0) {
  const int64_t end = std::min(sh.seq, i0 + kAttentionQueryBlock);
  if (sh.window == 0 && sh.doc_pos == nullptr) return end;
  const int32_t* doc = sh.doc_pos != nullptr ? sh.doc_pos + b * sh.seq : nullptr;
  int64_t i1 = i0 + 1;
  while (i1 < end && (sh.window == 0 || sh.pos(i1) - sh.pos(i0) < kAttentionQueryBlock) &&
         (doc == nullptr || doc[i1] != 0))
    ++i1;
  return i1;
}

template <typename T>
void attention_forward(T* o_TQ, T* lse_BHS, const T* q_TQ, const T* k_TK, const T* v_TK, const AttentionShape& sh,
                       T* scratch) {
  const int64_t B = sh.batch, S = sh.seq, Sk = sh.keys(), Hq = sh.q_heads, d = sh.head_dim;
  const int64_t QW = sh.q_width(), KW = sh.kv_width(), G = Hq / sh.kv_heads;
  const T scale = T(1) / std::sqrt(T(d));
  parallel_for_2d(B, Hq, B * Hq * S * Sk, [&](int64_t b, int64_t h) {
    T* probs = scratch + int64_t(omp_get_thread_num()) * 2 * kAttentionQueryBlock * Sk;
    const int64_t j = h / G;
    const T* q = q_TQ + b * S * QW + h * d;
    const T* k = k_TK + b * Sk * KW + j * d;
    const T* v = v_TK + b * Sk * KW + j * d;
    T* o = o_TQ + b * S * QW + h * d;
    T* lse = lse_BHS + (b * Hq + h) * S;
    for (int64_t i0 = 0, i1 = 0; i0 < S; i0 = i1) {
      // Keys first_key(i) .. pos(i) for row i: the block's first row sees the
      // first key, its last row the last; probs column c is key lo + c.
      i1 = attention_query_block_end(sh, b, i0);
      const int64_t rows = i1 - i0, lo = sh.first_key(b, i0), keys = sh.pos(i1 - 1) + 1 - lo;
      gemm<T>(false, true, rows, keys, d, scale, q + i0 * QW, QW, k + lo * KW, KW, T(0), probs, Sk);
      for (int64_t r = 0; r < rows; ++r) {
        T* p = probs + r * Sk;
        const int64_t c0 = sh.first_key(b, i0 + r) - lo, c1 = sh.pos(i0 + r) + 1 - lo;
        const T mx = row_max(p + c0, c1 - c0);
        T sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = c0; c < c1; ++c) {
          p[c] = exp_of(p[c] - mx);
          sum += p[c];
        }
        T inv = T(1) / sum;
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c) p[c] *= inv;
        for (int64_t c = 0; c < c0; ++c) p[c] = 0;
        for (int64_t c = c1; c < keys; ++c) p[c] = 0;
        lse[i0 + r] = mx + std::log(sum);
      }
      gemm<T>(false, false, rows, d, keys, T(1), probs, Sk, v + lo * KW, KW, T(0), o + i0 * QW, QW);
    }
  });
}

template <typename T>
void attention_backward(T* dq_TQ, T* dk_TK, T* dv_TK, const T* do_TQ, const T* q_TQ, const T* k_TK, const T* v_TK,
                        const T* o_TQ, const T* lse_BHS, const AttentionShape& sh, T* scratch) {
  const int64_t B = sh.batch, S = sh.seq, Sk = sh.keys(), Hq = sh.q_heads, Hk = sh.kv_heads, d = sh.head_dim;
  const int64_t QW = sh.q_width(), KW = sh.kv_width(), G = Hq / Hk;
  const T scale = T(1) / std::sqrt(T(d));
  // One task per (sequence, KV head): it owns dK_j and dV_j, and the dQ of its G query heads.
  parallel_for_2d(B, Hk, B * Hq * S * Sk, [&](int64_t b, int64_t j) {
    T* probs = scratch + int64_t(omp_get_thread_num()) * 2 * kAttentionQueryBlock * Sk;
    T* dprobs = probs + kAttentionQueryBlock * Sk;
    const T* k = k_TK + b * Sk * KW + j * d;
    const T* v = v_TK + b * Sk * KW + j * d;
    T* dk = dk_TK + b * Sk * KW + j * d;
    T* dv = dv_TK + b * Sk * KW + j * d;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t h = j * G + g;
      const T* q = q_TQ + b * S * QW + h * d;
      const T* o = o_TQ + b * S * QW + h * d;
      const T* dout = do_TQ + b * S * QW + h * d;
      T* dq = dq_TQ + b * S * QW + h * d;
      const T* lse = lse_BHS + (b * Hq + h) * S;
      for (int64_t i0 = 0, i1 = 0; i0 < S; i0 = i1) {
        i1 = attention_query_block_end(sh, b, i0);
        const int64_t rows = i1 - i0, lo = sh.first_key(b, i0), keys = sh.pos(i1 - 1) + 1 - lo;
        // Recompute P from the saved log-sum-exp (column c: key lo + c).
        gemm<T>(false, true, rows, keys, d, scale, q + i0 * QW, QW, k + lo * KW, KW, T(0), probs, Sk);
        gemm<T>(false, true, rows, keys, d, T(1), dout + i0 * QW, QW, v + lo * KW, KW, T(0), dprobs, Sk);
        for (int64_t r = 0; r < rows; ++r) {
          T* p = probs + r * Sk;
          T* dp = dprobs + r * Sk;
          const int64_t c0 = sh.first_key(b, i0 + r) - lo, c1 = sh.pos(i0 + r) + 1 - lo;
          const T row_lse = lse[i0 + r];
          // D_i = dO_i . O_i = sum_c dP_ic P_ic
          T di = 0;
          const T* o_row = o + (i0 + r) * QW;
          const T* do_row = dout + (i0 + r) * QW;
          for (int64_t c = 0; c < d; ++c) di += o_row[c] * do_row[c];
#pragma omp simd
          for (int64_t c = c0; c < c1; ++c) {
            p[c] = exp_of(p[c] - row_lse);
            dp[c] = p[c] * (dp[c] - di) * scale;  // gradient wrt q.k before scaling
          }
          for (int64_t c = 0; c < c0; ++c) p[c] = dp[c] = 0;
          for (int64_t c = c1; c < keys; ++c) p[c] = dp[c] = 0;
        }
        gemm<T>(false, false, rows, d, keys, T(1), dprobs, Sk, k + lo * KW, KW, T(1), dq + i0 * QW, QW);
        gemm<T>(true, false, keys, d, rows, T(1), dprobs, Sk, q + i0 * QW, QW, T(1), dk + lo * KW, KW);
        gemm<T>(true, false, keys, d, rows, T(1), probs, Sk, dout + i0 * QW, QW, T(1), dv + lo * KW, KW);
      }
    }
  });
}

template void attention_forward<float>(float*, float*, const float*, const float*, const float*, const AttentionShape&,
                                       float*);
template void attention_forward<double>(double*, double*, const double*, const double*, const double*,
                                        const AttentionShape&, double*);
template void attention_backward<float>(float*, float*, float*, const float*, const float*, const float*, const float*,
                                        const float*, const float*, const AttentionShape&, float*);
template void attention_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, const double*, const AttentionShape&, double*);

}  // namespace zaya
