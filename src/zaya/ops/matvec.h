#pragma once
// Matrix-vector products for inference: y_TO = x_TI W_OI^T for a few tokens
// (decode steps, T <= a few dozen), with W in nn.Linear layout [out, in] stored
// as float32, bfloat16 (raw bit patterns, e.g. straight from a memory-mapped
// safetensors file) or int8 in ggml's Q8_0 blocks regrouped per row
// (core/q8_0.h, the split layout: a row's `in` int8 values, then its in / 32
// f16 scales; `in` a multiple of 32), and activations and accumulation in float32.
//
// Decode reads every active weight once per step, so it is bound by memory
// bandwidth; the kernel streams each weight row once per block of up to four
// tokens (a block of rows stays in L1 while the token blocks pass over it),
// widens bf16 to f32 exactly (a 16-bit shift) and accumulates with FMAs, so a
// bf16 weight gives the same result as its f32 widening up to summation order.
// AVX-512 where the compiler targets it; else AVX2 with FMA, whose tiles keep
// ops/dot_widened.h's order (the portable loop's bits, faster: it shares each
// weight load between tokens and prefetches the next rows); else the portable
// loop. int8
// weights go to ops/matvec_q8.h: the activations are quantized to int8 blocks
// too and the blocks' dot products are integer (AVX512-VNNI where the CPU has
// it), so kI8 computes the Q8_0 x Q8_0 product defined there.

#include <cstdint>

namespace zaya {

// Below this many multiply-adds a matvec (any weight type) runs on the calling
// thread: a parallel region would cost more than it saves.
constexpr int64_t kMatvecParallelMinMacs = int64_t(1) << 16;

// kI8: int8 Q8_0 rows in the split layout (core/q8_0.h). kMXFP4 and kFP8:
// weight-only MXFP4 and FP8 E4M3 rows (core/mxfp4.h, core/fp8.h; products in
// ops/matvec_lowbit.h on float32 activations, FP8 ones on bf16 activations in
// ops/matvec_fp8_bf16.h unless ZAYA_FP8_ACTIVATIONS=float), the quantized experts of
// compressed-tensors checkpoints (docs/inference.md).
enum class WeightType { kF32, kBF16, kI8, kMXFP4, kFP8 };

// Rows [row_begin, row_end) of y_TO = x_TI W^T on the calling thread.
// y has row stride ldy, x row stride ldx, W rows of `in` elements
// (contiguous, weight_row_bytes(type, in) bytes each). accumulate: y += instead of y =.
void matvec_rows(WeightType type, const void* w, int64_t in, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate);

// Rows per piece of a parallel matvec: an even share of `out` between
// `threads`, rounded up to the kernel's 8-row tile. Each thread streams one
// contiguous piece, as a static split would, but a piece is claimed by
// whichever worker comes first (core/work_pool.h): a helper the machine has not
// run yet leaves its piece to the others instead of holding the step up.
int64_t matvec_piece_rows(int64_t out, int threads);

// All `out` rows, split in pieces over omp_get_max_threads() workers of
// core/work_pool.h when the product is large enough to pay for it. Every row's
// sum has one order whoever computes it: results do not depend on the threads.
void matvec(WeightType type, const void* w, int64_t in, int64_t out, const float* x, int64_t ldx, int64_t tokens,
            float* y, int64_t ldy, bool accumulate);

// The loop-nest reference (double accumulation) for tests; kI8: matvec_q8_reference
// on the quantized activations.
void matvec_reference(WeightType type, const void* w, int64_t in, int64_t out, const float* x, int64_t ldx,
                      int64_t tokens, float* y, int64_t ldy, bool accumulate);

// Bytes of one row of `cols` elements (kI8: cols a multiple of 32, 34 bytes per 32).
int64_t weight_row_bytes(WeightType t, int64_t cols);
const char* weight_type_name(WeightType t);
// "avx512", "avx2" or "portable": the float32 / bf16 kernel this build runs.
const char* matvec_kernel_name();
// Row `row` of a [*, cols] matrix as float32 (kI8 dequantized).
void weight_row_f32(WeightType t, const void* w, int64_t cols, int64_t row, float* dst);

}  // namespace zaya
