#pragma once
// FP8 E4M3 (the "fn" variant of OCP FP8 and torch.float8_e4m3fn, safetensors
// dtype F8_E4M3; docs/formats.md "Quantized experts"): sign | 4-bit exponent
// (bias 7) | 3-bit mantissa, subnormals at exponent 0, no infinities, the
// codes 0x7f and 0xff NaN, the largest finite magnitude 448.
//
// The in-memory layout of an FP8 matrix row (WeightType::kFP8,
// ops/matvec_lowbit.h): the row's n E4M3 bytes, then one float32 scale per
// group of kFp8ScaleGroup columns (the last group possibly shorter), so weight
// i of the row is e4m3(q[i]) * scale[i / 128]. It holds both FP8 checkpoint
// kinds: compressed-tensors' per-output-channel scales (every group of a row
// the same scale) and Hugging Face's fine-grained 128 x 128 blocks
// (`weight_scale_inv`, a multiplier despite its name: row r's group g takes
// block [r / 128, g]).

#include <cstdint>

namespace zaya {

inline constexpr int64_t kFp8ScaleGroup = 128;

// Bytes of a row of n values: n bytes, then ceil(n / 128) float32 scales. n a multiple of 4 keeps the scales aligned.
inline constexpr int64_t fp8_row_bytes(int64_t n) { return n + 4 * ((n + kFp8ScaleGroup - 1) / kFp8ScaleGroup); }

// The value of an E4M3 code (exact; NaN for 0x7f and 0xff).
float e4m3_to_float(uint8_t code);
// The nearest E4M3 code to f (ties to even), saturating at +-448; NaN gives 0x7f.
uint8_t float_to_e4m3(float f);
inline bool e4m3_is_nan(uint8_t code) { return (code & 0x7f) == 0x7f; }

// n floats into a row in the layout above with one scale for the whole row (compressed-tensors' `float-quantized`
// channel strategy): scale = amax / 448 (1 for an all-zero row), each value the nearest E4M3 code of x / scale.
void quantize_fp8_channel_row(const float* x, int64_t n, uint8_t* dst);
// A row of n values in the layout above into n floats.
void dequantize_fp8_row(const uint8_t* src, int64_t n, float* dst);

}  // namespace zaya
