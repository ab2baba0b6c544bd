#include "zaya/core/q8_0.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zaya/core/bf16.h"

namespace zaya {
namespace {

// The byte layout and rounding rule of ggml's Q8_0: f16 scale first, then
// 32 int8; amax 127 gives d = 1 exactly, halves round away from zero.
TEST(Q8_0, BlockLayoutAndRounding) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -127.0f;
  x[2] = 0.5f;
  x[3] = -0.5f;
  x[4] = 2.4f;
  x[5] = -2.6f;
  std::vector<uint8_t> q(kQ8BlockBytes);
  quantize_q8_0(x.data(), 32, q.data());
  EXPECT_EQ(q[0], 0x00);  // f16 1.0 = 0x3C00, little-endian
  EXPECT_EQ(q[1], 0x3C);
  const int8_t want[6] = {127, -127, 1, -1, 2, -3};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(int8_t(q[2 + i]), want[i]) << i;
  for (int i = 6; i < 32; ++i) EXPECT_EQ(q[2 + i], 0) << i;
}

// An all-zero block has scale 0; dequantization is d * q, within d / 2 of the
// input plus the f16 rounding of d (at most 127 * d * 2^-11).
TEST(Q8_0, RoundTripWithinHalfAStep) {
  std::vector<float> x(96);
  for (size_t i = 0; i < 32; ++i) x[i] = 0.0f;
  for (size_t i = 32; i < 96; ++i) x[i] = std::sin(float(i)) * (i < 64 ? 0.01f : 30.0f);
  std::vector<uint8_t> q(size_t(q8_0_row_bytes(96)));
  ASSERT_EQ(q.size(), 3u * 34u);
  quantize_q8_0(x.data(), 96, q.data());
  std::vector<float> back(96);
  dequantize_q8_0(q.data(), 96, back.data());
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(back[i], 0.0f);
  for (size_t b = 1; b < 3; ++b) {
    uint16_t h = uint16_t(q[b * 34] | (q[b * 34 + 1] << 8));
    const float d = f16_to_float(h);
    EXPECT_GT(d, 0.0f);
    for (size_t i = b * 32; i < b * 32 + 32; ++i)
      EXPECT_LE(std::fabs(back[i] - x[i]), d * (0.5f + 127.0f / 2048.0f)) << i;
  }
}

// The split layout of int8 matrices: the row's values, then its scales; the
// same bytes, back to blocks unchanged, dequantized as the blocks are.
TEST(Q8_0, SplitLayoutRegroupsTheBlocks) {
  std::vector<float> x(96);
  for (int i = 0; i < 96; ++i) x[i] = std::sin(0.7f * float(i)) * float(1 + i / 32);
  std::vector<uint8_t> blocks(size_t(q8_0_row_bytes(96))), split(blocks.size()), back(blocks.size());
  quantize_q8_0(x.data(), 96, blocks.data());
  q8_0_blocks_to_split(blocks.data(), 96, split.data());
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(split[96 + 2 * b], blocks[34 * b]);
    EXPECT_EQ(split[96 + 2 * b + 1], blocks[34 * b + 1]);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(split[32 * b + i], blocks[34 * b + 2 + i]);
  }
  q8_0_split_to_blocks(split.data(), 96, back.data());
  EXPECT_EQ(back, blocks);
  std::vector<float> a(96), c(96);
  dequantize_q8_0(blocks.data(), 96, a.data());
  dequantize_q8_0_split(split.data(), 96, c.data());
  EXPECT_EQ(a, c);
}

}  // namespace
}  // namespace zaya
