#pragma once
// The two stacked causal convolutions of CCA (spec §3 step 3), on the packed
// q/k latent qk = [q ; k] of C = (Hq + Hk) * d channels, per sequence:
//
//   p      = qk left-padded with 2 zero time-steps              (length S + 2)
//   a[t']  = bA + wA[:,0] * p[t'] + wA[:,1] * p[t'+1]            (depthwise, t' = 0..S)
//   c[t]   = bB + WB[:,:,0] . a[t] + WB[:,:,1] . a[t+1]          (grouped, one group per head)
//
// PyTorch Conv1d is cross-correlation, so tap 0 multiplies the older step.
// convA's outputs over the padding are not zero (a[0] = bA) and convB sees
// them; this reproduces the reference exactly. Weights keep PyTorch layouts:
// wA [C, 1, 2], WB [C, d, 2] (output channel o reads inputs of its group
// (o / d) * d .. + d - 1).

#include <cstdint>

namespace zaya {

struct CcaConvShape {
  int64_t batch = 0;                 // B sequences
  int64_t seq = 0;                   // S tokens per sequence
  int64_t channels = 0;              // C = (Hq + Hk) * head_dim
  int64_t head_dim = 0;              // d: group width of the grouped conv
  int64_t qk_stride = 0;             // row stride of qk / dqk (0 = channels; the fused q/k/v projection is wider)
  const int32_t* doc_pos = nullptr;  // document masking: [batch * seq] position of each row in its document
  int64_t qk_ld() const { return qk_stride > 0 ? qk_stride : channels; }
  int64_t groups() const { return channels / head_dim; }
};

// One row of conv A: a_C = bA + wA[:, 0] * older + wA[:, 1] * newer, from the
// raw qk rows of the older and newer positions (row strides free); a null row
// is zero padding and its term is left out. Training (cca_conv_forward) and the
// cached decoder (infer/engine.cc) both compute conv A with this.
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

// Floats of scratch the forward and backward passes need (repacked weights).
inline int64_t cca_conv_scratch_floats(const CcaConvShape& s) { return 2 * s.channels * s.head_dim; }

// History (context parallelism, issue [cp]): when a "sequence" here is a chunk
// in the middle of a longer one, hist_B2C [B, 2, qk_ld] holds the two qk rows
// before it (rows t0 - 2, t0 - 1) and takes the place of the zero padding;
// null means zeros (a sequence start). Zero rows give exactly the padded result.
//
// Document masking (shape.doc_pos, data.document_masking): output row t reads
// qk rows t-2..t, and row t-k counts as zero padding when k > doc_pos[t] (it
// lies before the row's document, or is history), so every document restarts
// exactly as a sequence does. a_BUC then holds convA computed for output row
// t'-1 (row 0 for t' = 0); a document start t >= 1 takes bA as its older
// convA row (both taps padding), a correction after convB's GEMMs.

// c_BSC = conv(qk_BSC); a_BUC [B, S+1, C] keeps convA's output for backward.
// `scratch` holds cca_conv_scratch_floats() floats.
template <typename T>
void cca_conv_forward(T* c_BSC, T* a_BUC, const T* qk_BSC, const T* wA_C12, const T* bA_C, const T* wB_Cd2,
                      const T* bB_C, const CcaConvShape& shape, T* scratch, const T* hist_B2C = nullptr);

// Adds into dqk_BSC and the four parameter gradients (and into dhist_B2C, the
// history rows' gradient, when hist_B2C is given). `da_BUC` is scratch of
// B*(S+1)*C floats; `scratch` two times cca_conv_scratch_floats().
template <typename T>
void cca_conv_backward(T* dqk_BSC, T* dwA_C12, T* dbA_C, T* dwB_Cd2, T* dbB_C, const T* dc_BSC, const T* qk_BSC,
                       const T* a_BUC, const T* wA_C12, const T* bA_C, const T* wB_Cd2, const CcaConvShape& shape,
                       T* da_BUC, T* scratch, const T* hist_B2C = nullptr, T* dhist_B2C = nullptr);

}  // namespace zaya
