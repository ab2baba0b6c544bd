#pragma once
// Conv B of ops/cca_conv.h (the grouped convolution: per head group g and tap
// m a d x d product) with bf16 operands, for mixed-precision training
// (CcaConvShape::bf16, docs/model.md "Precision"). Conv A (depthwise),
// the biases, the sums over taps and the document-masking correction stay
// float32; the products run as one oneDNN batched matmul per tap over the G
// groups, each over all B x (S + k1 - 1) rows of its group at once, with
// float32 accumulation and results:
//
//   forward   Y_m = a_g W_m^T        c[t] = bB + sum_m Y_m[t + m]
//   backward  Z_m = dc_g W_m         da[t + m] += Z_m[t]
//             dW_m = dc_g^T a_g[m .. m + S - 1]   (summed over sequences and time)
//
// The operands are regrouped into [G, B, rows, d] bf16 so that every batch is
// dense (what oneDNN's AMX kernels take). Scratch and GEMMs are the shape's
// Bf16Context (ops/precision.h): grow-only, sized by
// reserve_cca_conv_bf16_scratch before the step loop.

#include "zaya/ops/cca_conv.h"
#include "zaya/ops/precision.h"

namespace zaya {

// Sizes s.bf16's scratch for this shape.
void reserve_cca_conv_bf16_scratch(const CcaConvShape& s);

// c_BSC = bB + conv B(a_BUC) with w_tap [k1][C][d] (the packed taps of cca_conv.cc).
void cca_conv_b_forward_bf16(float* c_BSC, const float* a_BUC, const float* w_tap, const float* bB_C,
                             const CcaConvShape& s);

// Adds conv B's input gradient into da_BUC and writes its tap gradients into
// dw_tap [k1][C][d].
void cca_conv_b_backward_bf16(float* da_BUC, float* dw_tap, const float* dc_BSC, const float* a_BUC, const float* w_tap,
                              const CcaConvShape& s);

}  // namespace zaya
