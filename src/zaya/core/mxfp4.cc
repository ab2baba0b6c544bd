#include "zaya/core/mxfp4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace zaya {

const float kE2M1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

float e8m0_to_float(uint8_t u) {
  if (u == kE8M0Nan) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, int(u) - 127);
}

namespace {

// The E2M1 code nearest to v (|v| saturated at 6), ties to the even code.
uint8_t e2m1_code(float v) {
  const uint8_t sign = std::signbit(v) ? 8 : 0;
  const float a = std::fabs(v);
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    const float dc = std::fabs(a - kE2M1Values[c]), db = std::fabs(a - kE2M1Values[best]);
    if (dc < db || (dc == db && c % 2 == 0)) best = c;
  }
  if (!(a <= 6.0f)) best = 7;  // beyond the largest value (or NaN): saturate
  return uint8_t(sign | best);
}

}  // namespace

void quantize_mxfp4_row(const float* x, int64_t n, uint8_t* dst) {
  uint8_t* scales = dst + n / 2;
  for (int64_t b = 0; b < n / kMxBlock; ++b) {
    const float* src = x + b * kMxBlock;
    float amax = 0;
    for (int64_t i = 0; i < kMxBlock; ++i) amax = std::fmax(amax, std::fabs(src[i]));
    // compressed-tensors' generate_mx_scales: amax rounded to a power of two (up when its mantissa is >= 1.75,
    // else down), then its exponent - 2, biased by 127.
    uint32_t bits;
    std::memcpy(&bits, &amax, 4);
    const int exponent = int(((bits + (1u << 21)) >> 23) & 0xff);  // biased; 0 for zero and subnormal amax
    const int u = exponent == 0 ? 0 : std::clamp(exponent - 2, 0, 254);
    scales[b] = uint8_t(u);
    const float inv = std::ldexp(1.0f, 127 - u);
    for (int64_t i = 0; i < kMxBlock; i += 2) {
      const uint8_t lo = e2m1_code(src[i] * inv), hi = e2m1_code(src[i + 1] * inv);
      dst[(b * kMxBlock + i) / 2] = uint8_t(lo | (hi << 4));
    }
  }
}

void dequantize_mxfp4_row(const uint8_t* src, int64_t n, float* dst) {
  const uint8_t* scales = src + n / 2;
  for (int64_t b = 0; b < n / kMxBlock; ++b) {
    const float s = e8m0_to_float(scales[b]);
    for (int64_t i = 0; i < kMxBlock; i += 2) {
      const uint8_t byte = src[(b * kMxBlock + i) / 2];
      dst[b * kMxBlock + i] = kE2M1Values[byte & 15] * s;
      dst[b * kMxBlock + i + 1] = kE2M1Values[byte >> 4] * s;
    }
  }
}

void mxfp4_row_to_ggml(const uint8_t* row, int64_t n, uint8_t* blocks) {
  const uint8_t* scales = row + n / 2;
  for (int64_t b = 0; b < n / kMxBlock; ++b) {
    const uint8_t* q = row + b * kMxBlock / 2;  // element 2i low, 2i + 1 high
    uint8_t* out = blocks + b * kGgmlMxfp4BlockBytes;
    out[0] = scales[b];
    auto code = [q](int64_t i) { return uint8_t((q[i / 2] >> (4 * (i % 2))) & 15); };
    for (int64_t j = 0; j < kMxBlock / 2; ++j) out[1 + j] = uint8_t(code(j) | (code(j + kMxBlock / 2) << 4));
  }
}

void mxfp4_row_from_ggml(const uint8_t* blocks, int64_t n, uint8_t* row) {
  uint8_t* scales = row + n / 2;
  for (int64_t b = 0; b < n / kMxBlock; ++b) {
    const uint8_t* in = blocks + b * kGgmlMxfp4BlockBytes;
    uint8_t* q = row + b * kMxBlock / 2;
    scales[b] = in[0];
    auto code = [in](int64_t i) { return uint8_t(i < kMxBlock / 2 ? in[1 + i] & 15 : in[1 + i - kMxBlock / 2] >> 4); };
    for (int64_t i = 0; i < kMxBlock / 2; ++i) q[i] = uint8_t(code(2 * i) | (code(2 * i + 1) << 4));
  }
}

}  // namespace zaya
