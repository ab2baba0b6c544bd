#include "zaya/ops/matvec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/q8_0.h"
#include "zaya/core/rng.h"
#include "zaya/ops/dot_widened.h"

namespace zaya {
namespace {

std::vector<float> randn(int64_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = normal01(seed, 7, i);
  return v;
}

// Every token count (tile shapes 1..4 and their remainders), row counts that
// leave remainders of the 8- and 4-row tiles, `in` with and without a 16-lane
// tail, strided x and y, accumulation, bf16, f32 and int8 weights (Q8_0
// blocks, rows of a multiple of 32; the activations quantized as
// ops/matvec_q8.h does): all against the double-accumulating loop.
TEST(Matvec, MatchesReferenceForAllShapes) {
  for (WeightType type : {WeightType::kF32, WeightType::kBF16, WeightType::kI8})
    for (int64_t in : {1, 15, 16, 32, 37, 64, 96, 200, 224})
      for (int64_t out : {1, 3, 8, 13, 33})
        for (int64_t tokens : {1, 2, 3, 4, 5, 9}) {
          if (type == WeightType::kI8 && in % kQ8Block != 0) continue;
          const int64_t ldx = in + 3, ldy = out + 5;
          std::vector<float> wf = randn(in * out, 1 + in + out);
          std::vector<uint16_t> wb(wf.size());
          for (size_t i = 0; i < wf.size(); ++i) wb[i] = float_to_bf16(wf[i]);
          std::vector<uint8_t> wq;
          if (type == WeightType::kI8) {
            wq.resize(size_t(out * q8_0_row_bytes(in)));
            std::vector<uint8_t> blocks(static_cast<size_t>(q8_0_row_bytes(in)));
            for (int64_t r = 0; r < out; ++r) {
              std::vector<float> row(wf.begin() + r * in, wf.begin() + (r + 1) * in);
              for (float& v : row) v *= 0.01f * float(r + 1);  // a different scale per row
              quantize_q8_0(row.data(), in, blocks.data());
              q8_0_blocks_to_split(blocks.data(), in, wq.data() + r * q8_0_row_bytes(in));
            }
          }
          const void* w = type == WeightType::kBF16 ? static_cast<const void*>(wb.data())
                          : type == WeightType::kI8 ? static_cast<const void*>(wq.data())
                                                    : wf.data();
          std::vector<float> x = randn(tokens * ldx, 2 + tokens);
          for (bool acc : {false, true}) {
            std::vector<float> y = randn(tokens * ldy, 3), ref = y;
            matvec(type, w, in, out, x.data(), ldx, tokens, y.data(), ldy, acc);
            matvec_reference(type, w, in, out, x.data(), ldx, tokens, ref.data(), ldy, acc);
            for (int64_t t = 0; t < tokens; ++t)
              for (int64_t r = 0; r < ldy; ++r) {
                const float a = y[t * ldy + r], b = ref[t * ldy + r];
                ASSERT_NEAR(a, b, 1e-4f * (1.0f + std::sqrt(float(in))))
                    << weight_type_name(type) << " in=" << in << " out=" << out << " tokens=" << tokens
                    << " acc=" << acc << " t=" << t << " r=" << r;
              }
          }
        }
}

// The reference itself reads Q8_0 as ggml does: element i of a block is
// d * q[i]. The activations here are each their block's largest magnitude, so
// they quantize to +-127 with d = |x| / 127 and come back up to float rounding.
TEST(Matvec, Q8ReferenceIsBlockScaleTimesQuant) {
  std::vector<uint8_t> w(size_t(2 * q8_0_row_bytes(64)), 0);
  // Row 0: block 0 d = 0.5 (f16 0x3800), q[3] = 4; block 1 d = 2 (0x4000), q[0] = -3.
  w[0] = 0x00, w[1] = 0x38, w[2 + 3] = 4;
  w[34] = 0x00, w[35] = 0x40, w[36] = uint8_t(int8_t(-3));
  // Row 1: block 1 d = 1 (0x3C00), q[31] = 127.
  w[68 + 34] = 0x00, w[68 + 35] = 0x3C, w[68 + 34 + 2 + 31] = 127;
  for (int r = 0; r < 2; ++r) {  // into the split layout of int8 matrices (core/q8_0.h)
    const std::vector<uint8_t> blocks(w.begin() + 68 * r, w.begin() + 68 * (r + 1));
    q8_0_blocks_to_split(blocks.data(), 64, w.data() + 68 * r);
  }
  std::vector<float> x(64, 0.0f);
  x[3] = 1.5f, x[32] = 1.0f, x[63] = -1.0f;
  float y[2], ref[2];
  matvec(WeightType::kI8, w.data(), 64, 2, x.data(), 64, 1, y, 2, false);
  matvec_reference(WeightType::kI8, w.data(), 64, 2, x.data(), 64, 1, ref, 2, false);
  EXPECT_FLOAT_EQ(ref[0], 0.5f * 4 * 1.5f + 2.0f * -3 * 1.0f);
  EXPECT_FLOAT_EQ(ref[1], -127.0f);
  EXPECT_FLOAT_EQ(y[0], ref[0]);
  EXPECT_FLOAT_EQ(y[1], ref[1]);
}

// A bf16 weight is used exactly: the result equals the f32 product with the
// widened weight, to float rounding.
TEST(Matvec, Bf16EqualsWidenedF32) {
  const int64_t in = 512, out = 300, tokens = 3;
  std::vector<float> wf = randn(in * out, 11);
  std::vector<uint16_t> wb(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) {
    wb[i] = float_to_bf16(wf[i]);
    wf[i] = bf16_to_float(wb[i]);
  }
  std::vector<float> x = randn(tokens * in, 12), y1(tokens * out), y2(tokens * out);
  matvec(WeightType::kBF16, wb.data(), in, out, x.data(), in, tokens, y1.data(), out, false);
  matvec(WeightType::kF32, wf.data(), in, out, x.data(), in, tokens, y2.data(), out, false);
  for (size_t i = 0; i < y1.size(); ++i) EXPECT_EQ(y1[i], y2[i]) << i;
}

// The AVX2 kernel keeps the portable loop's order (ops/dot_widened.h): every
// result has dot_widened's bits, for f32 and bf16 weights, every tile shape
// and its row and token remainders, lengths with and without a 16-lane tail,
// accumulation. (The AVX-512 kernel sums in its own order: checked against
// the reference above only.)
TEST(Matvec, Avx2AndPortableKernelsGiveTheFixedOrderDotsBits) {
  const std::string kernel = matvec_kernel_name();
  if (kernel == "avx512") GTEST_SKIP() << "this build runs the AVX-512 kernel";
  std::printf("matvec kernel in this build: %s\n", kernel.c_str());
  int64_t checked = 0;
  for (int64_t in : {1, 15, 16, 17, 48, 100, 512})
    for (int64_t out : {1, 3, 8, 13})
      for (int64_t tokens : {1, 2, 3, 4, 5, 7}) {
        const int64_t ldx = in + 1, ldy = out + 2;
        std::vector<float> wf = randn(in * out, 5 + in), x = randn(tokens * ldx, 6 + tokens);
        std::vector<uint16_t> wb(wf.size());
        for (size_t i = 0; i < wf.size(); ++i) wb[i] = float_to_bf16(wf[i]);
        for (bool acc : {false, true}) {
          std::vector<float> y = randn(tokens * ldy, 9), yb = y;
          matvec(WeightType::kF32, wf.data(), in, out, x.data(), ldx, tokens, y.data(), ldy, acc);
          matvec(WeightType::kBF16, wb.data(), in, out, x.data(), ldx, tokens, yb.data(), ldy, acc);
          const std::vector<float> y0 = randn(tokens * ldy, 9);
          for (int64_t t = 0; t < tokens; ++t)
            for (int64_t r = 0; r < out; ++r) {
              const float base = acc ? y0[t * ldy + r] : 0.0f;
              const float f = dot_widened(wf.data() + r * in, x.data() + t * ldx, in);
              const float b = dot_widened(wb.data() + r * in, x.data() + t * ldx, in);
              ASSERT_EQ(y[t * ldy + r], acc ? base + f : f) << "f32 in=" << in << " out=" << out << " t=" << t;
              ASSERT_EQ(yb[t * ldy + r], acc ? base + b : b)
                  << "bf16 in=" << in << " out=" << out << " t=" << t << " r=" << r << " acc=" << acc
                  << " tokens=" << tokens << std::hexfloat << " " << yb[t * ldy + r] << " " << b;
              ++checked;
            }
        }
      }
  EXPECT_GT(checked, 1000);
}

}  // namespace
}  // namespace zaya
