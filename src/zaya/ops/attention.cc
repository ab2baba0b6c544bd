#include "zaya/ops/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "zaya/ops/matmul.h"

namespace zaya {

template <typename T>
void attention_forward(T* o_TQ, T* lse_BHS, const T* q_TQ, const T* k_TK, const T* v_TK, const AttentionShape& sh,
                       T* scratch) {
  const int64_t B = sh.batch, S = sh.seq, Sk = sh.keys(), Hq = sh.q_heads, d = sh.head_dim;
  const int64_t QW = sh.q_width(), KW = sh.kv_width(), G = Hq / sh.kv_heads;
  const T scale = T(1) / std::sqrt(T(d));
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < Hq; ++h) {
      T* probs = scratch + int64_t(omp_get_thread_num()) * 2 * kAttentionQueryBlock * Sk;
      const int64_t j = h / G;
      const T* q = q_TQ + b * S * QW + h * d;
      const T* k = k_TK + b * Sk * KW + j * d;
      const T* v = v_TK + b * Sk * KW + j * d;
      T* o = o_TQ + b * S * QW + h * d;
      T* lse = lse_BHS + (b * Hq + h) * S;
      for (int64_t i0 = 0; i0 < S; i0 += kAttentionQueryBlock) {
        // Keys 0 .. pos(i) for row i; the block's last row sees the most.
        const int64_t i1 = std::min(S, i0 + kAttentionQueryBlock), rows = i1 - i0, keys = sh.pos(i1 - 1) + 1;
        gemm<T>(false, true, rows, keys, d, scale, q + i0 * QW, QW, k, KW, T(0), probs, Sk);
        for (int64_t r = 0; r < rows; ++r) {
          T* p = probs + r * Sk;
          const int64_t valid = sh.pos(i0 + r) + 1;
          T mx = -std::numeric_limits<T>::infinity();
          for (int64_t c = 0; c < valid; ++c) mx = std::max(mx, p[c]);
          T sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t c = 0; c < valid; ++c) {
            p[c] = std::exp(p[c] - mx);
            sum += p[c];
          }
          T inv = T(1) / sum;
#pragma omp simd
          for (int64_t c = 0; c < valid; ++c) p[c] *= inv;
          for (int64_t c = valid; c < keys; ++c) p[c] = 0;
          lse[i0 + r] = mx + std::log(sum);
        }
        gemm<T>(false, false, rows, d, keys, T(1), probs, Sk, v, KW, T(0), o + i0 * QW, QW);
      }
    }
  }
}

template <typename T>
void attention_backward(T* dq_TQ, T* dk_TK, T* dv_TK, const T* do_TQ, const T* q_TQ, const T* k_TK, const T* v_TK,
                        const T* o_TQ, const T* lse_BHS, const AttentionShape& sh, T* scratch) {
  const int64_t B = sh.batch, S = sh.seq, Sk = sh.keys(), Hq = sh.q_heads, Hk = sh.kv_heads, d = sh.head_dim;
  const int64_t QW = sh.q_width(), KW = sh.kv_width(), G = Hq / Hk;
  const T scale = T(1) / std::sqrt(T(d));
  // One task per (sequence, KV head): it owns dK_j and dV_j, and the dQ of its G query heads.
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < Hk; ++j) {
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
        for (int64_t i0 = 0; i0 < S; i0 += kAttentionQueryBlock) {
          const int64_t i1 = std::min(S, i0 + kAttentionQueryBlock), rows = i1 - i0, keys = sh.pos(i1 - 1) + 1;
          // Recompute P from the saved log-sum-exp.
          gemm<T>(false, true, rows, keys, d, scale, q + i0 * QW, QW, k, KW, T(0), probs, Sk);
          gemm<T>(false, true, rows, keys, d, T(1), dout + i0 * QW, QW, v, KW, T(0), dprobs, Sk);
          for (int64_t r = 0; r < rows; ++r) {
            T* p = probs + r * Sk;
            T* dp = dprobs + r * Sk;
            const int64_t valid = sh.pos(i0 + r) + 1;
            const T row_lse = lse[i0 + r];
            // D_i = dO_i . O_i = sum_c dP_ic P_ic
            T di = 0;
            const T* o_row = o + (i0 + r) * QW;
            const T* do_row = dout + (i0 + r) * QW;
            for (int64_t c = 0; c < d; ++c) di += o_row[c] * do_row[c];
#pragma omp simd
            for (int64_t c = 0; c < valid; ++c) {
              p[c] = std::exp(p[c] - row_lse);
              dp[c] = p[c] * (dp[c] - di) * scale;  // gradient wrt q.k before scaling
            }
            for (int64_t c = valid; c < keys; ++c) p[c] = dp[c] = 0;
          }
          gemm<T>(false, false, rows, d, keys, T(1), dprobs, Sk, k, KW, T(1), dq + i0 * QW, QW);
          gemm<T>(true, false, keys, d, rows, T(1), dprobs, Sk, q + i0 * QW, QW, T(1), dk, KW);
          gemm<T>(true, false, keys, d, rows, T(1), probs, Sk, dout + i0 * QW, QW, T(1), dv, KW);
        }
      }
    }
  }
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
