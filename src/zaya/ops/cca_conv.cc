#include "zaya/ops/cca_conv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "zaya/ops/matmul.h"
#include "zaya/ops/reduce.h"

namespace zaya {
namespace {

// WB [C, d, 2] -> w_tap [2][C][d]: w_tap[k][o][i] = WB[o][i][k], so that each
// group's taps are plain row-major d x d matrices for the GEMMs.
template <typename T>
void pack_taps(T* w_tap, const T* wB, int64_t C, int64_t d) {
  for (int64_t o = 0; o < C; ++o)
    for (int64_t i = 0; i < d; ++i) {
      w_tap[o * d + i] = wB[(o * d + i) * 2 + 0];
      w_tap[C * d + o * d + i] = wB[(o * d + i) * 2 + 1];
    }
}

// Runs body(c0, c1) on per-thread channel ranges (bit-reproducible sums per channel).
template <typename Body>
void for_channel_ranges(int64_t C, Body body) {
#pragma omp parallel
  {
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    int64_t c0 = C * id / nt, c1 = C * (id + 1) / nt;
    if (c0 < c1) body(c0, c1);
  }
}

// Document masking: is tap k (0: older, 1: newer) of convA row t' before the
// document of the output row it is computed for (t' - 1, or 0 for t' = 0)?
bool masked_tap(const int32_t* doc_BS, int64_t b, int64_t tp, int k, int64_t S) {
  const int64_t row = tp > 0 ? tp - 1 : 0, back = row - (tp - 2 + k);
  return back > doc_BS[b * S + row];
}

// Row t' - 2 + k (k = 0: older tap, 1: newer) of sequence b, in the sequence
// or its history; null for zero padding (and for masked taps).
template <typename T>
T* tap_row(T* x_BSL, T* hist_B2C, int64_t b, int64_t tp, int k, int64_t S, int64_t L, const int32_t* doc_BS) {
  if (doc_BS != nullptr && masked_tap(doc_BS, b, tp, k, S)) return nullptr;
  const int64_t t = tp - 2 + k;
  if (t >= 0) return x_BSL + (b * S + t) * L;
  return hist_B2C != nullptr ? hist_B2C + (b * 2 + 2 + t) * L : nullptr;
}

// Document masking, convB's older tap at the document starts t >= 1 of
// sequence b, group g: c[t] += W0 (bA - a[t]) (forward) and its backward
// (da[t] loses W0^T dc[t], which goes to dbA; dW0 += dc[t] (bA - a[t])^T).
template <typename T>
void doc_starts_forward(T* c_BSC, const T* a_BUC, const T* w_tap, const T* bA, const CcaConvShape& sh, int64_t b,
                        int64_t g) {
  const int64_t S = sh.seq, C = sh.channels, d = sh.head_dim;
  for (int64_t t = 1; t < S; ++t) {
    if (sh.doc_pos[b * S + t] != 0) continue;
    const T* a = a_BUC + (b * (S + 1) + t) * C + g * d;
    T* c = c_BSC + (b * S + t) * C + g * d;
    for (int64_t o = 0; o < d; ++o) {
      const T* w = w_tap + (g * d + o) * d;
      T acc = 0;
      for (int64_t i = 0; i < d; ++i) acc += w[i] * (bA[g * d + i] - a[i]);
      c[o] += acc;
    }
  }
}
template <typename T>
void doc_starts_backward(T* da_BUC, T* dbA, T* dw_tap, const T* dc_BSC, const T* a_BUC, const T* w_tap, const T* bA,
                         const CcaConvShape& sh, int64_t b, int64_t g) {
  const int64_t S = sh.seq, C = sh.channels, d = sh.head_dim;
  for (int64_t t = 1; t < S; ++t) {
    if (sh.doc_pos[b * S + t] != 0) continue;
    const T* a = a_BUC + (b * (S + 1) + t) * C + g * d;
    const T* dc = dc_BSC + (b * S + t) * C + g * d;
    T* da = da_BUC + (b * (S + 1) + t) * C + g * d;
    for (int64_t o = 0; o < d; ++o) {
      const T* w = w_tap + (g * d + o) * d;
      T* dw = dw_tap + (g * d + o) * d;
      for (int64_t i = 0; i < d; ++i) {
        da[i] -= w[i] * dc[o];
        dbA[g * d + i] += w[i] * dc[o];
        dw[i] += dc[o] * (bA[g * d + i] - a[i]);
      }
    }
  }
}

}  // namespace

template <typename T>
void cca_conv_forward(T* c_BSC, T* a_BUC, const T* qk_BSC, const T* wA, const T* bA, const T* wB, const T* bB,
                      const CcaConvShape& sh, T* scratch, const T* hist) {
  const int64_t B = sh.batch, S = sh.seq, C = sh.channels, d = sh.head_dim, P = S + 1, G = sh.groups();
  const int64_t L = sh.qk_ld();
  // convA (depthwise): a[t'] = bA + wA0 * qk[t'-2] + wA1 * qk[t'-1], zero (or history) before the sequence.
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t tp = 0; tp < P; ++tp) {
      cca_conv_a_row(a_BUC + (b * P + tp) * C, tap_row(qk_BSC, hist, b, tp, 0, S, L, sh.doc_pos),
                     tap_row(qk_BSC, hist, b, tp, 1, S, L, sh.doc_pos), wA, bA, C);
    }
  }
  // convB (grouped, d x d per head group and tap), as GEMMs per (sequence, group).
  T* w_tap = scratch;
  pack_taps(w_tap, wB, C, d);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t g = 0; g < G; ++g) {
      const T* a_lo = a_BUC + (b * P) * C + g * d;  // a[t]   for t = 0..S-1
      const T* a_hi = a_lo + C;                     // a[t+1]
      T* c = c_BSC + (b * S) * C + g * d;
      for (int64_t t = 0; t < S; ++t) std::copy(bB + g * d, bB + (g + 1) * d, c + t * C);
      gemm<T>(false, true, S, d, d, T(1), a_lo, C, w_tap + g * d * d, d, T(1), c, C);
      gemm<T>(false, true, S, d, d, T(1), a_hi, C, w_tap + C * d + g * d * d, d, T(1), c, C);
      if (sh.doc_pos != nullptr) doc_starts_forward(c_BSC, a_BUC, w_tap, bA, sh, b, g);
    }
  }
}

template <typename T>
void cca_conv_backward(T* dqk_BSC, T* dwA, T* dbA, T* dwB, T* dbB, const T* dc_BSC, const T* qk_BSC, const T* a_BUC,
                       const T* wA, const T* bA, const T* wB, const CcaConvShape& sh, T* da_BUC, T* scratch,
                       const T* hist, T* dhist) {
  const int64_t B = sh.batch, S = sh.seq, C = sh.channels, d = sh.head_dim, P = S + 1, G = sh.groups();
  const int64_t L = sh.qk_ld();
  T* w_tap = scratch;
  T* dw_tap = scratch + 2 * C * d;
  pack_taps(w_tap, wB, C, d);
  std::memset(dw_tap, 0, sizeof(T) * 2 * C * d);
  std::memset(da_BUC, 0, sizeof(T) * B * P * C);

  // convB: da[t] += dc[t] W0, da[t+1] += dc[t] W1; dW0 += dc^T a[0..S-1], dW1 += dc^T a[1..S].
  // One group per task; sequences in order inside it, so weight sums are reproducible.
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t b = 0; b < B; ++b) {
      const T* dc = dc_BSC + (b * S) * C + g * d;
      const T* a_lo = a_BUC + (b * P) * C + g * d;
      T* da_lo = da_BUC + (b * P) * C + g * d;
      gemm<T>(false, false, S, d, d, T(1), dc, C, w_tap + g * d * d, d, T(1), da_lo, C);
      gemm<T>(false, false, S, d, d, T(1), dc, C, w_tap + C * d + g * d * d, d, T(1), da_lo + C, C);
      gemm<T>(true, false, d, d, S, T(1), dc, C, a_lo, C, T(1), dw_tap + g * d * d, d);
      gemm<T>(true, false, d, d, S, T(1), dc, C, a_lo + C, C, T(1), dw_tap + C * d + g * d * d, d);
      if (sh.doc_pos != nullptr) doc_starts_backward(da_BUC, dbA, dw_tap, dc_BSC, a_BUC, w_tap, bA, sh, b, g);
    }
  }
  for (int64_t o = 0; o < C; ++o)
    for (int64_t i = 0; i < d; ++i) {
      dwB[(o * d + i) * 2 + 0] += dw_tap[o * d + i];
      dwB[(o * d + i) * 2 + 1] += dw_tap[C * d + o * d + i];
    }
  column_sum(dbB, dc_BSC, B * S, C);

  // convA: per channel, over sequences and time in order.
  for_channel_ranges(C, [&](int64_t c0, int64_t c1) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t tp = 0; tp < P; ++tp) {
        const T* da = da_BUC + (b * P + tp) * C;
        const T* older = tap_row(qk_BSC, hist, b, tp, 0, S, L, sh.doc_pos);
        const T* newer = tap_row(qk_BSC, hist, b, tp, 1, S, L, sh.doc_pos);
        T* dolder = tap_row(dqk_BSC, hist != nullptr ? dhist : nullptr, b, tp, 0, S, L, sh.doc_pos);
        T* dnewer = tap_row(dqk_BSC, hist != nullptr ? dhist : nullptr, b, tp, 1, S, L, sh.doc_pos);
        for (int64_t c = c0; c < c1; ++c) {
          dbA[c] += da[c];
          if (older) dwA[c * 2 + 0] += older[c] * da[c];
          if (dolder) dolder[c] += wA[c * 2 + 0] * da[c];
          if (newer) dwA[c * 2 + 1] += newer[c] * da[c];
          if (dnewer) dnewer[c] += wA[c * 2 + 1] * da[c];
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
