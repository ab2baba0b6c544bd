#include "zaya/ops/matvec_q8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/q8_0.h"
#include "zaya/core/rng.h"
#include "zaya/core/test_util.h"
#include "zaya/ops/matvec.h"

namespace zaya {
namespace {

std::vector<float> q8_randn(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * normal01(seed, 7, i);
  return v;
}

// Q8_0 rows from random values, a different magnitude per row, in the split layout (core/q8_0.h).
std::vector<uint8_t> random_q8_rows(int64_t out, int64_t in, uint64_t seed) {
  std::vector<float> wf = q8_randn(in * out, seed);
  const int64_t row_bytes = q8_0_row_bytes(in);
  std::vector<uint8_t> wq(static_cast<size_t>(out * row_bytes)), blocks(static_cast<size_t>(row_bytes));
  for (int64_t r = 0; r < out; ++r) {
    for (int64_t i = 0; i < in; ++i) wf[r * in + i] *= 0.01f * float(r + 1);
    quantize_q8_0(wf.data() + r * in, in, blocks.data());
    q8_0_blocks_to_split(blocks.data(), in, wq.data() + r * row_bytes);
  }
  return wq;
}

using Kernel = void (*)(const uint8_t*, int64_t, int64_t, const Q8Activations&, float*, int64_t, bool);

// The kernel this CPU runs (VNNI, AVX2 or portable), the portable loop, and
// the AVX2 kernel wherever the CPU has AVX2 (on a VNNI machine too).
std::vector<std::pair<const char*, Kernel>> kernels() {
  std::vector<std::pair<const char*, Kernel>> k = {{"dispatched", matvec_q8_rows},
                                                   {"portable", matvec_q8_rows_portable}};
  if (matvec_q8_has_avx2()) k.emplace_back("avx2", matvec_q8_rows_avx2);
  return k;
}

// The quantizer the kernel uses equals the scalar definition bit for bit (and
// the portable quantizer's bytes): the same int8 values and scales,
// corrections -128 x each 4 values' sum, the
// missing second block of an odd count zeros; ties round to even; a zero block
// has scale 0, a block of values below FLT_MIN * 127 quantizes to zeros, and a
// NaN or an infinity makes its block's scale NaN.
TEST(MatvecQ8, ActivationQuantizerMatchesScalarDefinition) {
  std::printf("int8 kernel on this CPU: %s\n", matvec_q8_kernel_name());
  const int64_t tokens = 3, in = 32 * 7, ldx = in + 5;
  std::vector<float> x = q8_randn(tokens * ldx, 4, 3.0f);
  for (int64_t i = 0; i < 32; ++i) x[32 + i] = 0.0f;                               // token 0, block 1: zeros
  for (int64_t i = 0; i < 32; ++i) x[64 + i] = 1e-40f;                             // token 0, block 2: subnormal
  x[ldx + 100] = std::numeric_limits<float>::quiet_NaN();                          // token 1, block 3
  x[2 * ldx + 5] = -std::numeric_limits<float>::infinity();                        // token 2, block 0
  for (int64_t i = 0; i < 32; ++i) x[ldx + 128 + i] = 0.5f * float(i % 8) - 2.0f;  // token 1, block 4: ties
  x[ldx + 128] = 127.0f;  // d = 1: x = -1.5 -> -2, -0.5 -> 0, 0.5 -> 0, 1.5 -> 2
  Q8Activations xq;
  xq.quantize(x.data(), ldx, tokens, in);
  ASSERT_EQ(xq.pairs(), 4);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t b = 0; b < in / 32; ++b) {
      int8_t q[32];
      float d = 0;
      quantize_activation_block(x.data() + t * ldx + 32 * b, q, &d);
      if (std::isnan(d)) {
        EXPECT_TRUE(std::isnan(xq.scale(t, b))) << t << " " << b;
      } else {
        EXPECT_EQ(xq.scale(t, b), d) << t << " " << b;
      }
      for (int i = 0; i < 32; ++i) ASSERT_EQ(xq.value(t, 32 * b + i), q[i]) << t << " " << b << " " << i;
    }
    for (int64_t p = 0; p < xq.pairs(); ++p) {
      const Q8ActivationPair& pr = xq.row(t)[p];
      for (int l = 0; l < 16; ++l) {
        EXPECT_EQ(pr.corr[l], -128 * (pr.q[4 * l] + pr.q[4 * l + 1] + pr.q[4 * l + 2] + pr.q[4 * l + 3]));
        const float d = pr.d[l], first = pr.d[l / 8 * 8];
        EXPECT_TRUE(d == first || (std::isnan(d) && std::isnan(first)));
      }
    }
    const Q8ActivationPair& last = xq.row(t)[3];  // blocks 6 and (missing) 7
    for (int i = 32; i < 64; ++i) EXPECT_EQ(last.q[i], 0);
    EXPECT_EQ(last.d[8], 0.0f);
  }
  // The portable quantizer (CPUs without VNNI) fills the same bytes.
  Q8Activations scalar;
  scalar.quantize(x.data(), ldx, tokens, in, true);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t p = 0; p < xq.pairs(); ++p) {
      const Q8ActivationPair &a = xq.row(t)[p], &b = scalar.row(t)[p];
      EXPECT_EQ(std::memcmp(a.q, b.q, sizeof a.q), 0) << t << " " << p;
      EXPECT_EQ(std::memcmp(a.corr, b.corr, sizeof a.corr), 0) << t << " " << p;
      EXPECT_EQ(std::memcmp(a.d, b.d, sizeof a.d), 0) << t << " " << p;  // the same NaN bits too
    }
  EXPECT_EQ(xq.scale(0, 1), 0.0f);
  EXPECT_EQ(xq.scale(0, 2), 0.0f);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(xq.value(0, 64 + i), 0);
  EXPECT_TRUE(std::isnan(xq.scale(1, 3)));
  EXPECT_TRUE(std::isnan(xq.scale(2, 0)));
  EXPECT_EQ(xq.scale(1, 4), 1.0f);
  const int8_t ties[8] = {127, -2, -1, 0, 0, 0, 1, 2};  // x = -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5 (x[0] = 127)
  for (int i = 0; i < 8; ++i) EXPECT_EQ(xq.value(1, 128 + i), ties[i]) << i;
  // A block at the full scale: d = amax / 127 in f32, the extremes +-127.
  std::vector<float> y = q8_randn(32, 9);
  y[17] = -40.0f;
  Q8Activations one;
  one.quantize(y.data(), 32, 1, 32);
  EXPECT_EQ(one.scale(0, 0), 40.0f / 127.0f);
  EXPECT_EQ(one.value(0, 17), -127);
}

// With unit scales (f16 1.0 weights, activations of integers with a +-127 in
// every block, so d = 1 and q = x) the product is the exact integer dot
// product, every int8 weight from -128 to 127 included: both kernels, every
// tile shape (rows 1..13, tokens 1..9), odd and even block counts.
TEST(MatvecQ8, UnitScalesGiveTheExactIntegerDot) {
  for (int64_t in : {32, 64, 96, 512})
    for (int64_t out : {1, 5, 8, 13})
      for (int64_t tokens : {1, 2, 3, 4, 5, 9}) {
        const int64_t row_bytes = q8_0_row_bytes(in);
        std::vector<uint8_t> w(size_t(out * row_bytes));  // split rows: values, then f16 scales
        for (int64_t r = 0; r < out; ++r) {
          uint8_t* row = w.data() + r * row_bytes;
          for (int64_t b = 0; b < in / 32; ++b) {
            row[in + 2 * b] = 0x00, row[in + 2 * b + 1] = 0x3C;  // f16 1.0
            for (int i = 0; i < 32; ++i)
              row[32 * b + i] = uint8_t((r * 131 + b * 37 + i * 11 + 256 * 1000 - 128) % 256);
          }
        }
        std::vector<float> x(size_t(tokens * in));
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t i = 0; i < in; ++i)
            x[t * in + i] =
                i % 32 == (t + i / 32) % 32 ? (t % 2 ? -127.0f : 127.0f) : float((t * 53 + i * 29) % 255 - 127);
        Q8Activations xq;
        xq.quantize(x.data(), in, tokens, in);
        for (const auto& [name, kernel] : kernels()) {
          std::vector<float> y(size_t(tokens * out), -1.0f);
          kernel(w.data(), 0, out, xq, y.data(), out, false);
          for (int64_t t = 0; t < tokens; ++t)
            for (int64_t r = 0; r < out; ++r) {
              int64_t dot = 0;
              for (int64_t i = 0; i < in; ++i) {
                const int8_t q = int8_t(w[size_t(r * row_bytes + i)]);
                dot += int64_t(q) * int64_t(x[t * in + i]);
              }
              ASSERT_EQ(y[t * out + r], float(dot))
                  << name << " in=" << in << " out=" << out << " t=" << t << " r=" << r;
            }
        }
      }
}

// Both kernels against the double-accumulating loop of the formula, for every
// tile shape and remainder, strided input and output, accumulation.
TEST(MatvecQ8, KernelsMatchReference) {
  for (int64_t in : {32, 64, 96, 224, 512})
    for (int64_t out : {1, 3, 8, 13, 33})
      for (int64_t tokens : {1, 2, 3, 4, 5, 9}) {
        const int64_t ldx = in + 3, ldy = out + 5;
        const std::vector<uint8_t> w = random_q8_rows(out, in, 1 + in + out);
        const std::vector<float> x = q8_randn(tokens * ldx, 2 + tokens);
        Q8Activations xq;
        xq.quantize(x.data(), ldx, tokens, in);
        for (const auto& [name, kernel] : kernels())
          for (bool acc : {false, true}) {
            std::vector<float> y = q8_randn(tokens * ldy, 3), ref = y;
            kernel(w.data(), 0, out, xq, y.data(), ldy, acc);
            matvec_q8_reference(w.data(), out, xq, ref.data(), ldy, acc);
            for (int64_t t = 0; t < tokens; ++t)
              for (int64_t r = 0; r < ldy; ++r)
                ASSERT_NEAR(y[t * ldy + r], ref[t * ldy + r], 1e-5f * (1.0f + std::fabs(ref[t * ldy + r])))
                    << name << " in=" << in << " out=" << out << " tokens=" << tokens << " acc=" << acc << " t=" << t
                    << " r=" << r;
          }
        // A row range leaves the other rows alone.
        std::vector<float> y(size_t(tokens * ldy), 7.0f);
        matvec_q8_rows(w.data(), out / 3, out, xq, y.data(), ldy, false);
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t r = 0; r < out / 3; ++r) ASSERT_EQ(y[t * ldy + r], 7.0f);
      }
}

// Against the float product of the dequantized weights with the unrounded
// activations the only difference is the activations' rounding, at most
// dx / 2 per value: |y_q8 - y_f32| <= sum_b dx_b / 2 * sum_{i in b} |w_i|,
// plus float rounding of the sums.
TEST(MatvecQ8, ActivationRoundingErrorWithinItsBound) {
  const int64_t in = 512, out = 40, tokens = 5;
  const std::vector<uint8_t> w = random_q8_rows(out, in, 21);
  std::vector<float> x = q8_randn(tokens * in, 22);
  for (int64_t i = 0; i < tokens * in; i += 97) x[i] *= 20.0f;  // outliers: some blocks get coarse scales
  Q8Activations xq;
  xq.quantize(x.data(), in, tokens, in);
  std::vector<float> y(static_cast<size_t>(tokens * out)), wrow(static_cast<size_t>(in));
  matvec(WeightType::kI8, w.data(), in, out, x.data(), in, tokens, y.data(), out, false);
  double worst = 0;
  for (int64_t r = 0; r < out; ++r) {
    weight_row_f32(WeightType::kI8, w.data(), in, r, wrow.data());
    for (int64_t t = 0; t < tokens; ++t) {
      double exact = 0, bound = 0, mag = 0;
      for (int64_t i = 0; i < in; ++i) {
        exact += double(wrow[size_t(i)]) * double(x[t * in + i]);
        bound += std::fabs(double(wrow[size_t(i)])) * double(xq.scale(t, i / 32)) / 2;
        mag += std::fabs(double(wrow[size_t(i)]) * double(x[t * in + i]));
      }
      const double err = std::fabs(double(y[t * out + r]) - exact);
      EXPECT_LE(err, bound + 1e-6 * mag) << "t=" << t << " r=" << r;
      worst = std::max(worst, err / bound);
    }
  }
  EXPECT_GT(worst, 0.01);  // the bound is not vacuous: the rounding is visible
}

// A NaN or infinite activation makes the outputs that read it NaN, as in the float product.
TEST(MatvecQ8, NonFiniteActivationsGiveNaN) {
  const int64_t in = 96, out = 9;
  const std::vector<uint8_t> w = random_q8_rows(out, in, 5);
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> x = q8_randn(2 * in, 6);
    x[in + 70] = bad;
    Q8Activations xq;
    xq.quantize(x.data(), in, 2, in);
    for (const auto& [name, kernel] : kernels()) {
      std::vector<float> y(size_t(2 * out));
      kernel(w.data(), 0, out, xq, y.data(), out, false);
      for (int64_t r = 0; r < out; ++r) {
        EXPECT_TRUE(std::isfinite(y[r])) << name;
        EXPECT_TRUE(std::isnan(y[out + r])) << name;
      }
    }
  }
}

// Quantizing into storage that has held as many values allocates nothing (decode steps reuse it).
TEST(MatvecQ8, RequantizingAllocatesNothing) {
  const std::vector<float> x = q8_randn(4 * 256, 8);
  Q8Activations xq;
  xq.quantize(x.data(), 256, 4, 256);
  const long before = testing::allocation_count();
  for (int i = 0; i < 10; ++i) {
    xq.quantize(x.data(), 256, 1 + i % 4, 256);
    xq.quantize(x.data(), 128, 8, 128);
  }
  EXPECT_EQ(testing::allocation_count(), before);
}

}  // namespace
}  // namespace zaya
