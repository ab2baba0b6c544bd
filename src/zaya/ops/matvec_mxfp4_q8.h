#pragma once
// MXFP4 weights (core/mxfp4.h) times activations quantized to int8 blocks of
// 32 (ops/matvec_q8.h's Q8Activations), the decode product of MXFP4 experts
// when their activations are int8 (docs/inference.md, "Quantized experts"):
// an MXFP4 block and an activation block both span 32 columns, and twice an
// E2M1 value is an integer in [-12, 12], so
//
//   y[t, r] = sum over blocks b of  (2^(u[r, b] - 127) / 2) * dx[t, b] * (sum_i 2 e2m1[r, 32b + i] * qx[t, 32b + i]),
//
// the inner sum an exact integer (|sum| <= 32 x 12 x 127). The kernels decode
// E2M1 codes into int8 through a 16-entry byte table (vpshufb) and take the
// integer dots with AVX512-VNNI's vpdpbusd where the CPU has it (128 codes per
// 64-byte load, against activations rearranged once per call to match the
// packed layout; matvec_mxfp4_q8.cc), else AVX2's vpmaddubsw, else a portable
// loop; all compute the formula above, differing only in the order of the
// float additions over the exact block dots (the VNNI kernel: 16 float lanes,
// lane i taking one block of each 16, then a fixed tree over the lanes; the
// others block by block): |y - y_exact| <= 1.2e-7 x (blocks + 16) x
// sum_i |dw dx 2 e2m1_i qx_i| (plus
// 2^-150 per unit of a block's dot where dw x dx is a subnormal float)
// (ops/matvec_mxfp4_q8_test.cc; bit for bit where every term and partial sum
// is an exact float).
//
// Compared with ops/matvec_lowbit.h (float32 activations, exact weights), the
// activations carry Q8's rounding (at most dx / 2 each): the same error int8
// models accept for their attention and LM head.

#include <cstdint>

#include "zaya/ops/matvec_q8.h"

namespace zaya {

// Rows [row_begin, row_end) of y_TO (+)= xq W^T on the calling thread; W: MXFP4 rows of xq.in() columns.
void matvec_mxfp4_q8_rows(const uint8_t* w, int64_t row_begin, int64_t row_end, const Q8Activations& xq, float* y,
                          int64_t ldy, bool accumulate);
// All `out` rows, split over the work pool's threads when worth a parallel region.
void matvec_mxfp4_q8(const uint8_t* w, int64_t out, const Q8Activations& xq, float* y, int64_t ldy, bool accumulate);

// The kernels one by one, for tests on CPUs that have them (matvec_mxfp4_q8_has_*).
bool matvec_mxfp4_q8_has_vnni();
bool matvec_mxfp4_q8_has_avx2();
void matvec_mxfp4_q8_rows_vnni(const uint8_t* w, int64_t row_begin, int64_t row_end, const Q8Activations& xq, float* y,
                               int64_t ldy, bool accumulate);
void matvec_mxfp4_q8_rows_avx2(const uint8_t* w, int64_t row_begin, int64_t row_end, const Q8Activations& xq, float* y,
                               int64_t ldy, bool accumulate);
void matvec_mxfp4_q8_rows_portable(const uint8_t* w, int64_t row_begin, int64_t row_end, const Q8Activations& xq,
                                   float* y, int64_t ldy, bool accumulate);
// The formula above with double accumulation, for tests.
void matvec_mxfp4_q8_reference(const uint8_t* w, int64_t out, const Q8Activations& xq, float* y, int64_t ldy,
                               bool accumulate);
// "vnni", "avx2" or "portable": the kernel matvec_mxfp4_q8_rows runs on this CPU.
const char* matvec_mxfp4_q8_kernel_name();

// Whether MXFP4 products take int8-quantized activations (this file's kernels) or float32 ones
// (ops/matvec_lowbit.h): the environment variable ZAYA_MXFP4_ACTIVATIONS, `int8` or `float`, read once;
// unset: int8 (docs/inference.md: the faster, measured). Any other value is an error naming the allowed ones.
bool mxfp4_int8_activations();

}  // namespace zaya
