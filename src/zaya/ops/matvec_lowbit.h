#pragma once
// Decode products with weight-only low-bit matrices, kept in their packed
// form in memory (docs/inference.md, "Quantized experts"): y_TO (+)= x_TI W^T
// with W an MXFP4 matrix (WeightType::kMXFP4, core/mxfp4.h: 4.25 bits per
// weight) or an FP8 E4M3 one (WeightType::kFP8, core/fp8.h: 8 bits plus a
// float32 scale per 128 columns), the activations float32 as they are (no
// activation quantization): each weight is decoded exactly to float32
// (E2M1 x 2^(u - 127) and E4M3 x scale are exact in float32) and multiplied
// with FMAs, so the product is the float product with the dequantized matrix
// up to the order of the float additions.
//
// The kernel is chosen at run time: AVX-512 (F, BW) where the CPU has it,
// else AVX2 with FMA and F16C, else the portable loop; all share the loop
// order of ops/matvec_blocks.h (blocks of 8 rows, up to 4 tokens per weight
// decode). The vector kernels sum each row in 16 (AVX-512) or 8 (AVX2) float
// lanes per token, the portable loop in one: the results differ by rounding
// only, |y - y_exact| <= 1e-6 * in * sum |w x| (tests: ops/matvec_lowbit_test.cc).

#include <cstdint>

#include "zaya/ops/matvec.h"

namespace zaya {

// Rows [row_begin, row_end) on the calling thread; type kMXFP4 or kFP8; `in` a multiple of 32.
void matvec_lowbit_rows(WeightType type, const uint8_t* w, int64_t in, int64_t row_begin, int64_t row_end,
                        const float* x, int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate);

// The three kernels, for tests on CPUs that have them (matvec_lowbit_has_*).
bool matvec_lowbit_has_avx512();
bool matvec_lowbit_has_avx2();
void matvec_lowbit_rows_avx512(WeightType type, const uint8_t* w, int64_t in, int64_t row_begin, int64_t row_end,
                               const float* x, int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate);
void matvec_lowbit_rows_avx2(WeightType type, const uint8_t* w, int64_t in, int64_t row_begin, int64_t row_end,
                             const float* x, int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate);
void matvec_lowbit_rows_portable(WeightType type, const uint8_t* w, int64_t in, int64_t row_begin, int64_t row_end,
                                 const float* x, int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate);
// Rows [row_begin, row_end) dequantized to float32 (exact: the decode of the kernels above), row r at
// dst + (r - row_begin) * in: the tiles of LinearRunner's prefill GEMM. Equal bit for bit to weight_row_f32.
void lowbit_rows_f32(WeightType type, const uint8_t* w, int64_t in, int64_t row_begin, int64_t row_end, float* dst);
// "avx512", "avx2" or "portable": the kernel matvec_lowbit_rows runs on this CPU.
const char* matvec_lowbit_kernel_name();

}  // namespace zaya
