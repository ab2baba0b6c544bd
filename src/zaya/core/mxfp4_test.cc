#include "zaya/core/mxfp4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "zaya/core/fp8.h"

namespace zaya {
namespace mxfp4_test {

// The layout of core/mxfp4.h: element 0 in the low nibble, the scale byte after the packed bytes, 2^(u - 127).
TEST(Mxfp4, LayoutNibbleOrderAndScale) {
  std::vector<uint8_t> row(size_t(mxfp4_row_bytes(32)), 0);
  row[0] = 0x2F;   // element 0: code 15 = -6, element 1: code 2 = 1
  row[15] = 0x70;  // element 30: 0, element 31: code 7 = 6
  row[16] = 128;   // scale 2
  std::vector<float> x(32);
  dequantize_mxfp4_row(row.data(), 32, x.data());
  EXPECT_EQ(x[0], -12.0f);
  EXPECT_EQ(x[1], 2.0f);
  EXPECT_EQ(x[30], 0.0f);
  EXPECT_EQ(x[31], 12.0f);
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(0), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
}

// Values that are E2M1 x 2^k come back exactly; others within half a step of their block's grid.
TEST(Mxfp4, QuantizeRoundTrip) {
  std::vector<float> x(64);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = kE2M1Values[i % 16] * 0.25f;
  for (int i = 32; i < 64; ++i) x[size_t(i)] = std::sin(float(i)) * 3.7f;
  std::vector<uint8_t> q(size_t(mxfp4_row_bytes(64)));
  quantize_mxfp4_row(x.data(), 64, q.data());
  EXPECT_EQ(q[32], 127 - 2);  // amax 1.5 (mantissa below 1.75) rounds down to 2^0: u = 0 - 2 + 127
  std::vector<float> back(64);
  dequantize_mxfp4_row(q.data(), 64, back.data());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back[size_t(i)], x[size_t(i)]) << i;
  const float step = e8m0_to_float(q[33]);  // the largest gap of the grid (4 -> 6) is 2 steps
  for (int i = 32; i < 64; ++i) EXPECT_LE(std::fabs(back[size_t(i)] - x[size_t(i)]), step) << i;
  // compressed-tensors' rounding of amax to a power of two: 1.75 and up go to the next one.
  std::vector<float> y(32, 0.0f);
  y[0] = 1.75f;
  quantize_mxfp4_row(y.data(), 32, q.data());
  EXPECT_EQ(q[16], 127 + 1 - 2);
  y[0] = 1.7f;
  quantize_mxfp4_row(y.data(), 32, q.data());
  EXPECT_EQ(q[16], 127 + 0 - 2);
}

TEST(Fp8, E4m3Codes) {
  EXPECT_EQ(e4m3_to_float(0x38), 1.0f);  // exponent 7, mantissa 0
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0xfe), -448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
  for (int c = 0; c < 256; ++c)
    if (!e4m3_is_nan(uint8_t(c)) && c != 0x80) {
      EXPECT_EQ(float_to_e4m3(e4m3_to_float(uint8_t(c))), c) << c;
    }
  EXPECT_EQ(float_to_e4m3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);  // halfway between 1 and 1.125: to the even code
}

TEST(Fp8, RowScalesPer128Columns) {
  const int64_t n = 160;
  std::vector<uint8_t> row(size_t(fp8_row_bytes(n)), 0x38);  // every value 1
  const float s[2] = {0.5f, 3.0f};
  std::memcpy(row.data() + n, s, 8);
  std::vector<float> x(static_cast<size_t>(n));
  dequantize_fp8_row(row.data(), n, x.data());
  EXPECT_EQ(x[0], 0.5f);
  EXPECT_EQ(x[127], 0.5f);
  EXPECT_EQ(x[128], 3.0f);
  EXPECT_EQ(x[159], 3.0f);
}

// ggml's block_mxfp4: scale byte first, then byte j = element j (low nibble) | element j + 16 (high nibble).
TEST(Mxfp4, GgmlBlocksRegroupTheSameCodes) {
  const int64_t n = 64;
  std::vector<uint8_t> row(size_t(mxfp4_row_bytes(n)));
  for (int64_t i = 0; i < n / 2; ++i) row[size_t(i)] = uint8_t((i * 7 + 3) & 0xff);  // codes: any nibbles
  row[size_t(n / 2)] = 120;
  row[size_t(n / 2 + 1)] = 131;
  std::vector<uint8_t> blocks(size_t(n / kMxBlock * kGgmlMxfp4BlockBytes));
  mxfp4_row_to_ggml(row.data(), n, blocks.data());
  auto code = [&](int64_t i) { return (row[size_t(i / 2)] >> (4 * (i % 2))) & 15; };  // compressed-tensors pairs
  for (int64_t b = 0; b < 2; ++b) {
    const uint8_t* blk = blocks.data() + b * kGgmlMxfp4BlockBytes;
    EXPECT_EQ(blk[0], b == 0 ? 120 : 131);
    for (int64_t j = 0; j < 16; ++j) {
      EXPECT_EQ(blk[1 + j] & 15, code(b * 32 + j)) << b << " " << j;
      EXPECT_EQ(blk[1 + j] >> 4, code(b * 32 + j + 16)) << b << " " << j;
    }
  }
  std::vector<uint8_t> back(row.size());
  mxfp4_row_from_ggml(blocks.data(), n, back.data());
  EXPECT_EQ(back, row);
}

}  // namespace mxfp4_test
}  // namespace zaya
