#include "zaya/ops/cca_conv.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "zaya/core/error.h"
#include "zaya/core/zero_fill.h"
#include "zaya/ops/cca_conv_bf16.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/parallel_for.h"
#include "zaya/ops/reduce.h"

namespace zaya {
namespace {

constexpr int64_t kMaxTaps = kCcaConvMaxTaps;

// WB [C, d, k1] -> w_tap [k1][C][d]: w_tap[m][o][i] = WB[o][i][m], so that each
// group's taps are plain row-major d x d matrices for the GEMMs.
template <typename T>
void pack_taps(T* w_tap, const T* wB, int64_t C, int64_t d, int64_t k1) {
  for (int64_t o = 0; o < C; ++o)
    for (int64_t i = 0; i < d; ++i)
      for (int64_t m = 0; m < k1; ++m) w_tap[m * C * d + o * d + i] = wB[(o * d + i) * k1 + m];
}

// Runs body(c0, c1) on per-thread channel ranges (bit-reproducible sums per
// channel; `work` floats in all, ops/parallel_for.h).
template <typename Body>
void for_channel_ranges(int64_t C, int64_t work, Body body) {
  parallel_region(work, [&](int id, int nt) {
    int64_t c0 = C * id / nt, c1 = C * (id + 1) / nt;
    if (c0 < c1) body(c0, c1);
  });
}

// Row t' - H + j (tap j of convA output t', 0 = oldest) of sequence b, in the
// sequence or its history (hist_ld() rows per sequence, the last H used); null
// for zero padding. Document masking: convA row t' is computed for output row
// max(t' - (k1 - 1), 0) (its own position, or the first row for history
// positions), and a tap before that row's document is zero padding.
template <typename T>
T* tap_row(T* x_BSL, T* hist_B2C, int64_t b, int64_t tp, int64_t j, const CcaConvShape& sh) {
  const int64_t t = tp - sh.history() + j, L = sh.qk_ld();
  if (sh.doc_pos != nullptr) {
    const int64_t row = std::max<int64_t>(tp - (sh.taps_b - 1), 0);
    if (row - t > sh.doc_pos[b * sh.seq + row]) return nullptr;
  }
  if (t >= 0) return x_BSL + (b * sh.seq + t) * L;
  const int64_t R = sh.hist_ld();
  return hist_B2C != nullptr ? hist_B2C + (b * R + R + t) * L : nullptr;
}

// Document masking, convB: tap m of output row t reads convA row t + m, at
// position t + m - (k1 - 1); when that lies before row t's document
// (k1 - 1 - m > doc_pos[t]) it must read the padding's convA output, bA. A
// correction after the GEMMs: c[t] += W_m (bA - a[t + m]) for sequence b,
// group g; backward: da[t + m] -= W_m^T dc[t] (to dbA instead) and
// dW_m += dc[t] (bA - a[t + m])^T. A convA row wholly before row 0's document
// is bA already (every tap padding) and needs none, so a window of one
// document keeps the unmasked bits.
template <typename T>
void masked_taps_forward(T* c_BSC, const T* a_BUC, const T* w_tap, const T* bA, const CcaConvShape& sh, int64_t b,
                         int64_t g) {
  const int64_t S = sh.seq, C = sh.channels, d = sh.head_dim, P = sh.a_rows(), k1 = sh.taps_b;
  for (int64_t t = 0; t < S; ++t) {
    const int64_t dp = sh.doc_pos[b * S + t];
    for (int64_t m = 0; k1 - 1 - m > dp; ++m) {
      if (t + m - (k1 - 1) < -sh.doc_pos[b * S]) continue;  // wholly before row 0's document: a is bA already
      const T* a = a_BUC + (b * P + t + m) * C + g * d;
      T* c = c_BSC + (b * S + t) * C + g * d;
      for (int64_t o = 0; o < d; ++o) {
        const T* w = w_tap + m * C * d + (g * d + o) * d;
        T acc = 0;
        for (int64_t i = 0; i < d; ++i) acc += w[i] * (bA[g * d + i] - a[i]);
        c[o] += acc;
      }
    }
  }
}
template <typename T>
void masked_taps_backward(T* da_BUC, T* dbA, T* dw_tap, const T* dc_BSC, const T* a_BUC, const T* w_tap, const T* bA,
                          const CcaConvShape& sh, int64_t b, int64_t g) {
  const int64_t S = sh.seq, C = sh.channels, d = sh.head_dim, P = sh.a_rows(), k1 = sh.taps_b;
  for (int64_t t = 0; t < S; ++t) {
    const int64_t dp = sh.doc_pos[b * S + t];
    for (int64_t m = 0; k1 - 1 - m > dp; ++m) {
      if (t + m - (k1 - 1) < -sh.doc_pos[b * S]) continue;  // wholly before row 0's document: a is bA already
      const T* a = a_BUC + (b * P + t + m) * C + g * d;
      const T* dc = dc_BSC + (b * S + t) * C + g * d;
      T* da = da_BUC + (b * P + t + m) * C + g * d;
      for (int64_t o = 0; o < d; ++o) {
        const T* w = w_tap + m * C * d + (g * d + o) * d;
        T* dw = dw_tap + m * C * d + (g * d + o) * d;
        for (int64_t i = 0; i < d; ++i) {
          da[i] -= w[i] * dc[o];
          dbA[g * d + i] += w[i] * dc[o];
          dw[i] += dc[o] * (bA[g * d + i] - a[i]);
        }
      }
    }
  }
}

// convB in float32 (or double), as GEMMs per (sequence, group): c[t] = bB + sum_m W_m a[t + m].
template <typename T>
void conv_b_forward_f32(T* c_BSC, const T* a_BUC, const T* w_tap, const T* bA, const T* bB, const CcaConvShape& sh) {
  const int64_t B = sh.batch, S = sh.seq, C = sh.channels, d = sh.head_dim, P = sh.a_rows(), G = sh.groups();
  const int64_t k1 = sh.taps_b;
  parallel_for_2d(B, G, B * S * C * d * k1, [&](int64_t b, int64_t g) {
    const T* a0 = a_BUC + (b * P) * C + g * d;  // a[t + m] for t = 0..S-1 starts at a0 + m * C
    T* c = c_BSC + (b * S) * C + g * d;
    for (int64_t t = 0; t < S; ++t) std::copy(bB + g * d, bB + (g + 1) * d, c + t * C);
    for (int64_t m = 0; m < k1; ++m)
      gemm<T>(false, true, S, d, d, T(1), a0 + m * C, C, w_tap + m * C * d + g * d * d, d, T(1), c, C);
    if (sh.doc_pos != nullptr) masked_taps_forward(c_BSC, a_BUC, w_tap, bA, sh, b, g);
  });
}

// convB's backward in float32 (or double): da[t+m] += dc[t] W_m; dW_m += dc^T a[m..m+S-1].
// One group per task; sequences in order inside it, so weight sums are reproducible.
template <typename T>
void conv_b_backward_f32(T* da_BUC, T* dbA, T* dw_tap, const T* dc_BSC, const T* a_BUC, const T* w_tap, const T* bA,
                         const CcaConvShape& sh) {
  const int64_t B = sh.batch, S = sh.seq, C = sh.channels, d = sh.head_dim, P = sh.a_rows(), G = sh.groups();
  const int64_t k1 = sh.taps_b;
  parallel_for(G, B * S * C * d * k1, [&](int64_t g) {
    for (int64_t b = 0; b < B; ++b) {
      const T* dc = dc_BSC + (b * S) * C + g * d;
      const T* a0 = a_BUC + (b * P) * C + g * d;
      T* da0 = da_BUC + (b * P) * C + g * d;
      for (int64_t m = 0; m < k1; ++m)
        gemm<T>(false, false, S, d, d, T(1), dc, C, w_tap + m * C * d + g * d * d, d, T(1), da0 + m * C, C);
      for (int64_t m = 0; m < k1; ++m)
        gemm<T>(true, false, d, d, S, T(1), dc, C, a0 + m * C, C, T(1), dw_tap + m * C * d + g * d * d, d);
      if (sh.doc_pos != nullptr) masked_taps_backward(da_BUC, dbA, dw_tap, dc_BSC, a_BUC, w_tap, bA, sh, b, g);
    }
  });
}

}  // namespace

template <typename T>
void cca_conv_forward(T* c_BSC, T* a_BUC, const T* qk_BSC, const T* wA, const T* bA, const T* wB, const T* bB,
                      const CcaConvShape& sh, T* scratch, const T* hist) {
  const int64_t B = sh.batch, C = sh.channels, d = sh.head_dim, P = sh.a_rows(), G = sh.groups();
  const int64_t k0 = sh.taps_a, k1 = sh.taps_b;
  ZAYA_ASSERT(k0 >= 1 && k0 <= kMaxTaps && k1 >= 1 && (hist == nullptr || sh.hist_ld() >= sh.history()));
  // convA (depthwise): a[t'] = bA + sum_j wA_j * qk[t'-H+j], zero (or history) before the sequence.
  if (k0 == 2) {
    parallel_for_2d(B, P, B * P * C * k0, [&](int64_t b, int64_t tp) {
      cca_conv_a_row(a_BUC + (b * P + tp) * C, tap_row(qk_BSC, hist, b, tp, 0, sh), tap_row(qk_BSC, hist, b, tp, 1, sh),
                     wA, bA, C);
    });
  } else {
    parallel_for_2d(B, P, B * P * C * k0, [&](int64_t b, int64_t tp) {
      const T* rows[kMaxTaps];
      for (int64_t j = 0; j < k0; ++j) rows[j] = tap_row(qk_BSC, hist, b, tp, j, sh);
      cca_conv_a_row_taps(a_BUC + (b * P + tp) * C, rows, wA, bA, C, k0);
    });
  }
  // convB (grouped, d x d per head group and tap), as GEMMs per (sequence, group).
  T* w_tap = scratch;
  pack_taps(w_tap, wB, C, d, k1);
  if (std::is_same_v<T, float> && sh.bf16 != nullptr) {
    // bf16 operands: one batched product per tap over all groups, then the mask's correction.
    if constexpr (std::is_same_v<T, float>) cca_conv_b_forward_bf16(c_BSC, a_BUC, w_tap, bB, sh);
    if (sh.doc_pos != nullptr) {
      parallel_for_2d(B, G, B * P * C,
                      [&](int64_t b, int64_t g) { masked_taps_forward(c_BSC, a_BUC, w_tap, bA, sh, b, g); });
    }
  } else {
    conv_b_forward_f32(c_BSC, a_BUC, w_tap, bA, bB, sh);
  }
}

template <typename T>
void cca_conv_backward(T* dqk_BSC, T* dwA, T* dbA, T* dwB, T* dbB, const T* dc_BSC, const T* qk_BSC, const T* a_BUC,
                       const T* wA, const T* bA, const T* wB, const CcaConvShape& sh, T* da_BUC, T* scratch,
                       const T* hist, T* dhist) {
  const int64_t B = sh.batch, S = sh.seq, C = sh.channels, d = sh.head_dim, P = sh.a_rows(), G = sh.groups();
  const int64_t k0 = sh.taps_a, k1 = sh.taps_b;
  ZAYA_ASSERT(k0 >= 1 && k0 <= kMaxTaps && k1 >= 1 && (hist == nullptr || sh.hist_ld() >= sh.history()));
  T* w_tap = scratch;
  T* dw_tap = scratch + k1 * C * d;
  pack_taps(w_tap, wB, C, d, k1);
  zero_fill(dw_tap, k1 * C * d);
  zero_fill(da_BUC, B * P * C);

  // convB: da[t+m] += dc[t] W_m; dW_m += dc^T a[m..m+S-1].
  if (std::is_same_v<T, float> && sh.bf16 != nullptr) {
    // bf16 operands: one batched product per tap over all groups, then the mask's correction.
    if constexpr (std::is_same_v<T, float>) cca_conv_b_backward_bf16(da_BUC, dw_tap, dc_BSC, a_BUC, w_tap, sh);
    if (sh.doc_pos != nullptr) {
      parallel_for(G, B * S * C, [&](int64_t g) {
        for (int64_t b = 0; b < B; ++b) masked_taps_backward(da_BUC, dbA, dw_tap, dc_BSC, a_BUC, w_tap, bA, sh, b, g);
      });
    }
  } else {
    conv_b_backward_f32(da_BUC, dbA, dw_tap, dc_BSC, a_BUC, w_tap, bA, sh);
  }
  for (int64_t o = 0; o < C; ++o)
    for (int64_t i = 0; i < d; ++i)
      for (int64_t m = 0; m < k1; ++m) dwB[(o * d + i) * k1 + m] += dw_tap[m * C * d + o * d + i];
  column_sum(dbB, dc_BSC, B * S, C);

  // convA: per channel, over sequences and time in order.
  T* dh = hist != nullptr ? dhist : nullptr;
  if (k0 == 2) {
    // The ZAYA1 taps, vectorised: a thread's channels in chunks, the weight
    // sums held locally (explicit FMAs, so the bits do not depend on how the
    // compiler contracts).
    constexpr int64_t kChunk = 256;
    for_channel_ranges(C, 3 * B * P * C, [&](int64_t c0, int64_t c1) {
      T sum_b[kChunk], sum_0[kChunk], sum_1[kChunk], w_0[kChunk], w_1[kChunk];
      for (int64_t q0 = c0; q0 < c1; q0 += kChunk) {
        const int64_t n = std::min(kChunk, c1 - q0);
        for (int64_t i = 0; i < n; ++i) {
          sum_b[i] = dbA[q0 + i];
          sum_0[i] = dwA[(q0 + i) * 2 + 0];
          sum_1[i] = dwA[(q0 + i) * 2 + 1];
          w_0[i] = wA[(q0 + i) * 2 + 0];
          w_1[i] = wA[(q0 + i) * 2 + 1];
        }
        for (int64_t b = 0; b < B; ++b) {
          for (int64_t tp = 0; tp < P; ++tp) {
            const T* da = da_BUC + (b * P + tp) * C + q0;
            const T* older = tap_row(qk_BSC, hist, b, tp, 0, sh);
            const T* newer = tap_row(qk_BSC, hist, b, tp, 1, sh);
            T* dolder = tap_row(dqk_BSC, dh, b, tp, 0, sh);
            T* dnewer = tap_row(dqk_BSC, dh, b, tp, 1, sh);
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) sum_b[i] += da[i];
            if (older != nullptr) {
              older += q0;
#pragma omp simd
              for (int64_t i = 0; i < n; ++i) sum_0[i] = std::fma(older[i], da[i], sum_0[i]);
            }
            if (dolder != nullptr) {
              dolder += q0;
#pragma omp simd
              for (int64_t i = 0; i < n; ++i) dolder[i] = std::fma(w_0[i], da[i], dolder[i]);
            }
            if (newer != nullptr) {
              newer += q0;
#pragma omp simd
              for (int64_t i = 0; i < n; ++i) sum_1[i] = std::fma(newer[i], da[i], sum_1[i]);
            }
            if (dnewer != nullptr) {
              dnewer += q0;
#pragma omp simd
              for (int64_t i = 0; i < n; ++i) dnewer[i] = std::fma(w_1[i], da[i], dnewer[i]);
            }
          }
        }
        for (int64_t i = 0; i < n; ++i) {
          dbA[q0 + i] = sum_b[i];
          dwA[(q0 + i) * 2 + 0] = sum_0[i];
          dwA[(q0 + i) * 2 + 1] = sum_1[i];
        }
      }
    });
    return;
  }
  for_channel_ranges(C, 3 * B * P * C, [&](int64_t c0, int64_t c1) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t tp = 0; tp < P; ++tp) {
        const T* da = da_BUC + (b * P + tp) * C;
        for (int64_t c = c0; c < c1; ++c) dbA[c] += da[c];
        for (int64_t j = 0; j < k0; ++j) {
          const T* x = tap_row(qk_BSC, hist, b, tp, j, sh);
          T* dx = tap_row(dqk_BSC, dh, b, tp, j, sh);
          if (x != nullptr)
            for (int64_t c = c0; c < c1; ++c) dwA[c * k0 + j] += x[c] * da[c];
          if (dx != nullptr)
            for (int64_t c = c0; c < c1; ++c) dx[c] += wA[c * k0 + j] * da[c];
        }
      }
    }
  });
}

template void cca_conv_forward<float>(float*, float*, const float*, const float*, const float*, const float*,
                                      const float*, const CcaConvShape&, float*, const float*);
template void cca_conv_forward<double>(double*, double*, const double*, const double*, const double*, const double*,
                                       const double*, const CcaConvShape&, double*, const double*);
template void cca_conv_backward<float>(float*, float*, float*, float*, float*, const float*, const float*, const float*,
                                       const float*, const float*, const float*, const CcaConvShape&, float*, float*,
                                       const float*, float*);
template void cca_conv_backward<double>(double*, double*, double*, double*, double*, const double*, const double*,
                                        const double*, const double*, const double*, const double*, const CcaConvShape&,
                                        double*, double*, const double*, double*);

}  // namespace zaya
