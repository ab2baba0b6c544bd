#pragma once
// The two stacked causal convolutions of CCA (spec §3 step 3), on the packed
// q/k latent qk = [q ; k] of C = (Hq + Hk) * d channels, per sequence, with
// k0 = cca_time0 depthwise taps and k1 = cca_time1 grouped taps (ZAYA1: 2, 2):
//
//   H      = (k0 - 1) + (k1 - 1)                                 history rows
//   p      = qk left-padded with H zero time-steps               (length S + H)
//   a[t']  = bA + sum_j wA[:,j] * p[t'+j],  j < k0               (depthwise, t' = 0..S+k1-2)
//   c[t]   = bB + sum_m WB[:,:,m] . a[t+m], m < k1               (grouped, one group per head)
//
// PyTorch Conv1d is cross-correlation, so tap 0 multiplies the oldest step.
// convA's outputs over the padding are not zero (a[0] = bA) and convB sees
// them; this reproduces the reference exactly. Weights keep PyTorch layouts:
// wA [C, 1, k0], WB [C, d, k1] (output channel o reads inputs of its group
// (o / d) * d .. + d - 1). The weight names below still read C12 / Cd2, the
// ZAYA1 sizes.

#include <algorithm>
#include <cstdint>

namespace zaya {

class Bf16Context;  // ops/precision.h

// Taps allowed per convolution (cca_time0 / cca_time1: 1 .. this).
inline constexpr int64_t kCcaConvMaxTaps = 64;

struct CcaConvShape {
  int64_t batch = 0;      // B sequences
  int64_t seq = 0;        // S tokens per sequence
  int64_t channels = 0;   // C = (Hq + Hk) * head_dim
  int64_t head_dim = 0;   // d: group width of the grouped conv
  int64_t qk_stride = 0;  // row stride of qk / dqk (0 = channels; the fused q/k/v projection is wider)
  int64_t taps_a = 2;     // k0: depthwise taps (cca_time0)
  int64_t taps_b = 2;     // k1: grouped taps (cca_time1)
  int64_t hist_rows = 0;  // rows per sequence of the history (0 = history(); may be more, the last ones are used)
  const int32_t* doc_pos = nullptr;  // document masking: [batch * seq] position of each row in its document
  Bf16Context* bf16 = nullptr;  // float: conv B's products with bf16 operands (ops/cca_conv_bf16.h) in this context
  int64_t qk_ld() const { return qk_stride > 0 ? qk_stride : channels; }
  int64_t groups() const { return channels / head_dim; }
  int64_t history() const { return taps_a + taps_b - 2; }                    // H: past rows one output reads
  int64_t a_rows() const { return seq + taps_b - 1; }                        // U: convA outputs per sequence
  int64_t hist_ld() const { return hist_rows > 0 ? hist_rows : history(); }  // rows per sequence of hist
};

// One row of conv A with k0 = 2: a_C = bA + wA[:, 0] * older + wA[:, 1] * newer,
// from the raw qk rows of the older and newer positions (row strides free); a
// null row is zero padding and its term is left out. Training
// (cca_conv_forward) and the cached decoder (infer/engine.cc) both compute
// conv A with this (the ZAYA1 hot path) or with cca_conv_a_row_taps.
template <typename T>
inline void cca_conv_a_row(T* a_C, const T* older_C, const T* newer_C, const T* wA_C12, const T* bA_C, int64_t C) {
  if (older_C != nullptr && newer_C != nullptr) {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) a_C[c] = bA_C[c] + wA_C12[2 * c] * older_C[c] + wA_C12[2 * c + 1] * newer_C[c];
  } else if (newer_C != nullptr) {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) a_C[c] = bA_C[c] + wA_C12[2 * c + 1] * newer_C[c];
  } else if (older_C != nullptr) {
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) a_C[c] = bA_C[c] + wA_C12[2 * c] * older_C[c];
  } else {
    for (int64_t c = 0; c < C; ++c) a_C[c] = bA_C[c];
  }
}

// One row of conv A with any k0: a_C = bA + sum_j wA[:, j] * rows[j] (rows[0]
// the oldest position; wA_Ck [C, k0]); null rows are zero padding.
template <typename T>
inline void cca_conv_a_row_taps(T* a_C, const T* const* rows, const T* wA_Ck, const T* bA_C, int64_t C, int64_t k0) {
  std::copy(bA_C, bA_C + C, a_C);
  for (int64_t j = 0; j < k0; ++j) {
    const T* x = rows[j];
    if (x == nullptr) continue;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) a_C[c] += wA_Ck[c * k0 + j] * x[c];
  }
}

// Floats of scratch the forward and backward passes need (repacked weights).
inline int64_t cca_conv_scratch_floats(const CcaConvShape& s) { return s.taps_b * s.channels * s.head_dim; }

// History (context parallelism, issue [cp]): when a "sequence" here is a chunk
// in the middle of a longer one, hist_B2C [B, hist_ld(), qk_ld] ends with the
// H = history() qk rows before it (rows t0 - H .. t0 - 1) and takes the place
// of the zero padding; null means zeros (a sequence start). Zero rows give
// exactly the padded result.
//
// Document masking (shape.doc_pos, data.document_masking): every document
// restarts exactly as a sequence does. convA row t' is computed for output row
// max(t' - (k1 - 1), 0), and a qk row before that row's document (or history
// outside it) is zero padding; convB's taps of output row t that reach convA
// rows before t's document read bA there (the padding's convA output), a
// correction after convB's GEMMs.

// c_BSC = conv(qk_BSC); a_BUC [B, U = S + k1 - 1, C] keeps convA's output for backward.
// `scratch` holds cca_conv_scratch_floats() floats.
template <typename T>
void cca_conv_forward(T* c_BSC, T* a_BUC, const T* qk_BSC, const T* wA_C12, const T* bA_C, const T* wB_Cd2,
                      const T* bB_C, const CcaConvShape& shape, T* scratch, const T* hist_B2C = nullptr);

// Adds into dqk_BSC and the four parameter gradients (and into dhist_B2C, the
// history rows' gradient, when hist_B2C is given). `da_BUC` is scratch of
// B*U*C floats; `scratch` two times cca_conv_scratch_floats().
template <typename T>
void cca_conv_backward(T* dqk_BSC, T* dwA_C12, T* dbA_C, T* dwB_Cd2, T* dbB_C, const T* dc_BSC, const T* qk_BSC,
                       const T* a_BUC, const T* wA_C12, const T* bA_C, const T* wB_Cd2, const CcaConvShape& shape,
                       T* da_BUC, T* scratch, const T* hist_B2C = nullptr, T* dhist_B2C = nullptr);

}  // namespace zaya
