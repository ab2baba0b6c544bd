#pragma once
// Mixed-precision linear layers (train.precision = "bf16", docs/model.md
// "Precision"): bf16 operands, float32 accumulation, float32 results.
//
// The weights come from a bf16 copy of a float32 weight arena (the model's
// master weights), refreshed by its owner once per optimizer update; the
// activations and gradients are rounded to bf16 into the scratch of the
// Bf16Context the caller passes (ops/precision.h). linear_forward and
// linear_backward (ops/matmul.h) given a bf16 Precision take this path for
// any weight inside its context's arena, so the model's blocks, the router
// chain and the LM head need no second code path; every other GEMM
// (attention scores, the grouped convolution, Muon, tests) is untouched.
//
// Row counts that vary from call to call (the tokens routed to each expert)
// are cut into pieces of 32 x 2^k rows, largest first, and a zero-padded tail
// block of 32 rows, so each weight shape needs at most log2(rows / 32) + 2
// oneDNN primitives (each one JIT-compiled once) whatever the routing does;
// the reduction over tokens of a weight gradient runs over the zero-padded
// rows in the same pieces, in order. Results depend only on the operands and
// the thread count.

#include <cstdint>

#include "zaya/ops/precision.h"

namespace zaya {

inline constexpr int64_t kBf16RowBucket = 32;

// Sizes ctx's conversion scratch for operands of up to `a_elements` (x, or
// dy) and `b_elements` (x in backward) values and output rows up to `width`
// wide, so the step loop does not allocate; a larger call later grows it.
void reserve_bf16_linear_scratch(Bf16Context& ctx, int64_t a_elements, int64_t b_elements, int64_t width);

// y_TO (+)= bf16(x_TI) w_OI^T, as linear_forward.
void linear_forward_bf16(Bf16Context& ctx, float* y_TO, const float* x_TI, const uint16_t* w_OI, int64_t tokens,
                         int64_t in, int64_t out, bool accumulate);

// As linear_backward: dx_TI += bf16(dy_TO) w_OI, dw_OI += bf16(dy_TO)^T bf16(x_TI) (either may be null).
void linear_backward_bf16(Bf16Context& ctx, float* dx_TI, float* dw_OI, const float* dy_TO, const float* x_TI,
                          const uint16_t* w_OI, int64_t tokens, int64_t in, int64_t out);

// For a producer that writes the output gradient in bf16 itself (the
// cross-entropy over the vocabulary: ops/cross_entropy.h), saving a float32
// write and read of it: the scratch linear_backward_bf16_rounded reads dy
// from, `tokens` rows of `out`, its padding rows (up to the next multiple of
// kBf16RowBucket) already zero. Valid until the next bf16 linear call.
uint16_t* bf16_dy_scratch(Bf16Context& ctx, int64_t tokens, int64_t out);

// linear_backward_bf16 with dy_TO already rounded, in bf16_dy_scratch(tokens, out).
void linear_backward_bf16_rounded(Bf16Context& ctx, float* dx_TI, float* dw_OI, const uint16_t* dy_TO,
                                  const float* x_TI, const uint16_t* w_OI, int64_t tokens, int64_t in, int64_t out);

// Rows of a bf16 operand of `tokens` rows as the GEMMs read it: the next
// multiple of kBf16RowBucket, the rows after `tokens` zero.
int64_t bf16_padded_rows(int64_t tokens);

// An input kept in bf16 for the backward (docs/model.md "Precision"):
// where only GEMMs read an activation, the forward's rounding of it is the
// one copy kept, and its float32 values need not outlive the forward. The
// results are the bits of linear_forward_bf16 / linear_backward_bf16.
//
// xb_TI = bf16(x_TI) with its zero padding (bf16_padded_rows(tokens) rows),
// then y_TO (+)= xb_TI w_OI^T.
void linear_forward_bf16_keep(Bf16Context& ctx, float* y_TO, const float* x_TI, uint16_t* xb_TI, const uint16_t* w_OI,
                              int64_t tokens, int64_t in, int64_t out, bool accumulate);

// As linear_backward_bf16, with x the kept xb_TI of linear_forward_bf16_keep.
void linear_backward_bf16_kept(Bf16Context& ctx, float* dx_TI, float* dw_OI, const float* dy_TO, const uint16_t* xb_TI,
                               const uint16_t* w_OI, int64_t tokens, int64_t in, int64_t out);

}  // namespace zaya
