#pragma once
// Matrix-vector products for inference: y_TO = x_TI W_OI^T for a few tokens
// (decode steps, T <= a few dozen), with W in nn.Linear layout [out, in] stored
// as float32, bfloat16 (raw bit patterns, e.g. straight from a memory-mapped
// safetensors file) or int8 with one float scale per row (per output channel:
// W[r, i] = scale[r] * q[r, i]), and activations and accumulation in float32.
//
// Decode reads every active weight once per step, so it is bound by memory
// bandwidth; the kernel streams each weight row once per block of up to four
// tokens (a block of rows stays in L1 while the token blocks pass over it),
// widens bf16 to f32 exactly (a 16-bit shift) and accumulates with FMAs, so a
// bf16 weight gives the same result as its f32 widening up to summation order;
// an int8 row is widened exactly and its sum multiplied by the row's scale.
// AVX-512 where the compiler targets it, a portable loop otherwise.

#include <cstdint>

namespace zaya {

enum class WeightType { kF32, kBF16, kI8 };

// Rows [row_begin, row_end) of y_TO = x_TI W^T on the calling thread.
// y has row stride ldy, x row stride ldx, W rows of `in` elements (contiguous).
// accumulate: y += instead of y =. row_scale: kI8's per-row scales, indexed
// by row (row_scale[row_begin] is row row_begin's); unused for kF32 and kBF16.
void matvec_rows(WeightType type, const void* w, int64_t in, int64_t row_begin, int64_t row_end, const float* x,
                 int64_t ldx, int64_t tokens, float* y, int64_t ldy, bool accumulate, const float* row_scale = nullptr);

// All `out` rows, split over the OpenMP threads when the product is large
// enough to pay for a parallel region.
void matvec(WeightType type, const void* w, int64_t in, int64_t out, const float* x, int64_t ldx, int64_t tokens,
            float* y, int64_t ldy, bool accumulate, const float* row_scale = nullptr);

// The loop-nest reference (double accumulation) for tests.
void matvec_reference(WeightType type, const void* w, int64_t in, int64_t out, const float* x, int64_t ldx,
                      int64_t tokens, float* y, int64_t ldy, bool accumulate, const float* row_scale = nullptr);

// Bytes of one weight element.
inline int64_t weight_type_bytes(WeightType t) { return t == WeightType::kI8 ? 1 : t == WeightType::kBF16 ? 2 : 4; }
const char* weight_type_name(WeightType t);

}  // namespace zaya
