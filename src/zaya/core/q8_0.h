#pragma once
// The int8 weight format of zaya.cpp, which is ggml's Q8_0 block format
// (GGML_TYPE_Q8_0 = 8): a row of n elements (n a multiple of 32) is n / 32
// blocks of 34 bytes, each { f16 scale d (little-endian) | 32 x int8 q },
// element i of a block being d * q[i]. `--dtype int8` quantizes at load time
// into this layout and `zaya ckpt export --dtype q8_0` writes the same bytes
// into GGUF, so an exported file loads back bit-exact (docs/inference.md).
//
// Quantization as ggml's reference (quantize_row_q8_0_ref): per block,
// amax = max |x|, d = amax / 127, q = round(x / d) (half away from zero, with
// the float32 d), and d stored rounded to f16; an all-zero block has d = 0.

#include <cstdint>

namespace zaya {

inline constexpr int64_t kQ8Block = 32;       // elements per block
inline constexpr int64_t kQ8BlockBytes = 34;  // f16 scale + 32 int8

// Bytes of a row of n elements (n a multiple of kQ8Block).
inline constexpr int64_t q8_0_row_bytes(int64_t n) { return n / kQ8Block * kQ8BlockBytes; }

// n floats (a multiple of kQ8Block) into n / 32 blocks at dst.
void quantize_q8_0(const float* x, int64_t n, uint8_t* dst);
// n / 32 blocks at src into n floats.
void dequantize_q8_0(const uint8_t* src, int64_t n, float* dst);

// The in-memory layout of an int8 matrix row (WeightType::kI8, ops/matvec_q8.h):
// the bytes of its Q8_0 blocks regrouped, the row's n int8 values first, then
// its n / 32 f16 scales. Same size (q8_0_row_bytes(n)), so the decode kernel
// loads 64 values with one instruction and 16 scales with another, where the
// interleaved blocks need shuffles. Loading a Q8_0 file or quantizing at load
// time regroups each row; the file format stays Q8_0.
void q8_0_blocks_to_split(const uint8_t* blocks, int64_t n, uint8_t* dst);
void q8_0_split_to_blocks(const uint8_t* split, int64_t n, uint8_t* dst);
// A split row of n values into n floats.
void dequantize_q8_0_split(const uint8_t* src, int64_t n, float* dst);

}  // namespace zaya
