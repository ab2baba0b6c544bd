#pragma once
// FP8 E4M3 weights (core/fp8.h's rows: the E4M3 bytes, then one float32 scale
// per 128 columns) times activations rounded to bf16, the decode product of
// FP8 experts (docs/inference.md, "Quantized experts"):
//
//   y[t, r] = sum over the row's 128-column groups g of
//             s[r, g] * (sum_{i in g} e4m3(q[r, i]) * bf16(x[t, i])),
//
// bf16(x) the round-to-nearest-even bf16 of x with subnormal inputs read as
// zero (what vcvtneps2bf16 does; the portable rounding does the same). Every
// E4M3 value is exact in bf16 and each product e4m3 x bf16 is exact in
// float32 (4 + 8 significant bits), so the kernels differ from each other
// only in the order of the float additions inside a group:
//
//   * AVX-512 with AVX512_BF16: 32 E4M3 bytes at a time decoded into bf16 by
//     bit operations (the 7 magnitude bits under bf16's exponent, +120 to the
//     exponent; the 7 subnormal codes through a masked vpermw), one vdpbf16ps
//     per 32 columns and token (pairs of products into 16 float lanes; two
//     sums per token, even and odd 32-column chunks, added at the group's
//     end), each group's sum times its scale by an FMA into the row's sum;
//   * AVX2 with FMA and F16C: the weights decoded exactly to float32 (E4M3
//     bits under an IEEE half, vcvtph2ps: 2^-8 times the value, the 256 folded
//     into the scale), FMAs with the bf16-rounded activations in 8 lanes;
//   * portable: one float sum per group in column order.
//
// Bound (ops/matvec_fp8_bf16_test.cc): against the formula computed exactly,
//   |y - y_exact| <= 2^-23 x (in + 16) x sum_i |w_i bf16(x_i)| + 2^-120 x in
// (the last term: products below 2^-126 that vdpbf16ps flushes to zero); bit
// for bit between the kernels where every product and partial sum is an exact
// float (and one-hot activations return each dequantized weight exactly).
// Against the float32-activation product (ops/matvec_lowbit.h) it adds the
// activations' bf16 rounding: at most 2^-8 x sum_i |w_i x_i| (bf16 keeps 8 significant bits).
//
// NaN codes (0x7f, 0xff) are not decoded as NaN: the loader refuses them
// (formats/quantized_experts.cc) and zaya's quantizer never writes them.

#include <cstdint>

namespace zaya {

// Rows [row_begin, row_end) of y_TO (+)= bf16(x_TI) W^T on the calling thread; W: FP8 rows of `in` columns (`in` a
// multiple of 32).
void matvec_fp8_bf16_rows(const uint8_t* w, int64_t in, int64_t row_begin, int64_t row_end, const float* x, int64_t ldx,
                          int64_t tokens, float* y, int64_t ldy, bool accumulate);

// The kernels one by one, for tests on CPUs that have them (matvec_fp8_bf16_has_*).
bool matvec_fp8_bf16_has_avx512bf16();
bool matvec_fp8_bf16_has_avx2();
void matvec_fp8_bf16_rows_avx512bf16(const uint8_t* w, int64_t in, int64_t row_begin, int64_t row_end, const float* x,
                                     int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate);
void matvec_fp8_bf16_rows_avx2(const uint8_t* w, int64_t in, int64_t row_begin, int64_t row_end, const float* x,
                               int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate);
void matvec_fp8_bf16_rows_portable(const uint8_t* w, int64_t in, int64_t row_begin, int64_t row_end, const float* x,
                                   int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate);
// "avx512bf16", "avx2" or "portable": the kernel matvec_fp8_bf16_rows runs on this CPU.
const char* matvec_fp8_bf16_kernel_name();

// The activation rounding of the formula above: bf16, round to nearest even, subnormal inputs to (signed) zero.
float fp8_activation_bf16(float x);

// Whether FP8 products take bf16-rounded activations (this file's kernels) or float32 ones (ops/matvec_lowbit.h):
// the environment variable ZAYA_FP8_ACTIVATIONS, `bf16` or `float`, read once; unset: bf16. Any other value is an
// error naming the allowed ones.
bool fp8_bf16_activations();

}  // namespace zaya
