#pragma once
// MXFP4 (OCP Microscaling Formats v1.0, the `mxfp4-pack-quantized` format of
// compressed-tensors, docs/formats.md "Quantized experts"): a row of n
// weights (n a multiple of 32) is n / 32 blocks of 32 FP4 E2M1 values sharing
// one E8M0 scale byte u, element i of a block being e2m1[i] * 2^(u - 127).
// E2M1 is sign | 2-bit exponent | 1-bit mantissa: magnitudes 0, 0.5, 1, 1.5,
// 2, 3, 4, 6. Two values share a byte, the even-numbered element in the low
// nibble (compressed-tensors' pack_fp4_to_uint8). The scale byte 255 is NaN
// in the MX spec: files holding it are refused at load (never read as a number).
//
// The in-memory layout of an MXFP4 matrix row (WeightType::kMXFP4,
// ops/matvec_lowbit.h): the row's n / 2 packed bytes, then its n / 32 scale
// bytes: 4.25 bits per weight.

#include <cstdint>

namespace zaya {

inline constexpr int64_t kMxBlock = 32;  // values per E8M0 scale
inline constexpr uint8_t kE8M0Nan = 255;

// Bytes of a row of n values (n a multiple of kMxBlock).
inline constexpr int64_t mxfp4_row_bytes(int64_t n) { return n / 2 + n / kMxBlock; }

// The 16 E2M1 codes as floats (code 8 is -0).
extern const float kE2M1Values[16];

// 2^(u - 127) (u = 0 gives 2^-127, a float subnormal; u = 255 gives NaN).
float e8m0_to_float(uint8_t u);

// n floats into a row in the layout above: per block, compressed-tensors' scale (generate_mx_scales: amax rounded
// to a power of two 2^k, up when its mantissa is 1.75 or more, and u = k - 2 + 127, clamped to 0-254: the largest
// value lands in [3.5, 7)), each value divided by 2^(u - 127) and rounded to the nearest E2M1 value (ties to the
// even code), saturating at +-6, so an error of at most one scale step. An all-zero block gets u = 0.
void quantize_mxfp4_row(const float* x, int64_t n, uint8_t* dst);
// A row of n values in the layout above into n floats.
void dequantize_mxfp4_row(const uint8_t* src, int64_t n, float* dst);

// ggml's MXFP4 (GGML_TYPE_MXFP4 = 39, block_mxfp4 of ggml-common.h; gguf-py's
// quants.MXFP4): blocks of 32 values in 17 bytes, the E8M0 scale byte first,
// then 16 bytes whose byte j holds element j in its low nibble and element
// j + 16 in its high nibble (not compressed-tensors' even/odd pairs); the
// same E2M1 codes and the same value e2m1 * 2^(u - 127).
inline constexpr int64_t kGgmlMxfp4BlockBytes = 17;
// A row of n values in the layout above (n a multiple of 32) as n / 32 ggml
// blocks, and back: the same codes and scales, bit for bit.
void mxfp4_row_to_ggml(const uint8_t* row, int64_t n, uint8_t* blocks);
void mxfp4_row_from_ggml(const uint8_t* blocks, int64_t n, uint8_t* row);

}  // namespace zaya
