#include "zaya/core/q8_0.h"

#include <cmath>
#include <cstring>

#include "zaya/core/bf16.h"

namespace zaya {

void quantize_q8_0(const float* x, int64_t n, uint8_t* dst) {
  for (int64_t b = 0; b < n / kQ8Block; ++b) {
    const float* src = x + b * kQ8Block;
    uint8_t* out = dst + b * kQ8BlockBytes;
    float amax = 0;
    for (int64_t i = 0; i < kQ8Block; ++i) amax = std::fmax(amax, std::fabs(src[i]));
    const float d = amax / 127.0f;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    const uint16_t h = float_to_f16(d);
    std::memcpy(out, &h, 2);
    for (int64_t i = 0; i < kQ8Block; ++i) out[2 + i] = uint8_t(int8_t(std::round(src[i] * id)));
  }
}

void dequantize_q8_0(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t b = 0; b < n / kQ8Block; ++b) {
    const uint8_t* in = src + b * kQ8BlockBytes;
    uint16_t h;
    std::memcpy(&h, in, 2);
    const float d = f16_to_float(h);
    for (int64_t i = 0; i < kQ8Block; ++i) dst[b * kQ8Block + i] = d * float(int8_t(in[2 + i]));
  }
}

void q8_0_blocks_to_split(const uint8_t* blocks, int64_t n, uint8_t* dst) {
  for (int64_t b = 0; b < n / kQ8Block; ++b) {
    std::memcpy(dst + b * kQ8Block, blocks + b * kQ8BlockBytes + 2, kQ8Block);
    std::memcpy(dst + n + 2 * b, blocks + b * kQ8BlockBytes, 2);
  }
}

void q8_0_split_to_blocks(const uint8_t* split, int64_t n, uint8_t* dst) {
  for (int64_t b = 0; b < n / kQ8Block; ++b) {
    std::memcpy(dst + b * kQ8BlockBytes, split + n + 2 * b, 2);
    std::memcpy(dst + b * kQ8BlockBytes + 2, split + b * kQ8Block, kQ8Block);
  }
}

void dequantize_q8_0_split(const uint8_t* src, int64_t n, float* dst) {
  for (int64_t b = 0; b < n / kQ8Block; ++b) {
    uint16_t h;
    std::memcpy(&h, src + n + 2 * b, 2);
    const float d = f16_to_float(h);
    for (int64_t i = 0; i < kQ8Block; ++i) dst[b * kQ8Block + i] = d * float(int8_t(src[b * kQ8Block + i]));
  }
}

}  // namespace zaya
