#include "zaya/ops/matvec_fp8_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/fp8.h"
#include "zaya/ops/matvec.h"
#include "zaya/ops/matvec_lowbit.h"

namespace zaya {
namespace matvec_fp8_bf16_test {

using Kernel = void (*)(const uint8_t*, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t,
                        bool);

std::vector<std::pair<const char*, Kernel>> kernels() {
  std::vector<std::pair<const char*, Kernel>> k = {{"portable", matvec_fp8_bf16_rows_portable},
                                                   {"dispatch", matvec_fp8_bf16_rows}};
  if (matvec_fp8_bf16_has_avx2()) k.push_back({"avx2", matvec_fp8_bf16_rows_avx2});
  if (matvec_fp8_bf16_has_avx512bf16()) k.push_back({"avx512bf16", matvec_fp8_bf16_rows_avx512bf16});
  return k;
}

// FP8 rows with the codes code(r, i) and the scales scale(r, g).
template <typename Code, typename Scale>
std::vector<uint8_t> fp8_rows(int64_t rows, int64_t in, Code code, Scale scale) {
  const int64_t rb = fp8_row_bytes(in);
  std::vector<uint8_t> w(size_t(rows * rb));
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = w.data() + r * rb;
    for (int64_t i = 0; i < in; ++i) row[i] = code(r, i);
    for (int64_t g = 0; g < (in + 127) / 128; ++g) {
      const float s = scale(r, g);
      std::memcpy(row + in + 4 * g, &s, 4);
    }
  }
  return w;
}

TEST(MatvecFp8Bf16, ActivationRoundingIsBf16NearestEvenWithSubnormalsToZero) {
  EXPECT_EQ(fp8_activation_bf16(1.0f), 1.0f);
  EXPECT_EQ(fp8_activation_bf16(1.0f + 0x1p-8f), 1.0f);                // tie: to even
  EXPECT_EQ(fp8_activation_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);  // tie: to even (up)
  EXPECT_EQ(fp8_activation_bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(fp8_activation_bf16(0x1p-127f), 0.0f);
  EXPECT_TRUE(std::signbit(fp8_activation_bf16(-0x1p-130f)));
  EXPECT_EQ(fp8_activation_bf16(0x1p-126f), 0x1p-126f);
}

// One-hot activations return each weight's dequantized value bit for bit, for every E4M3 code but NaN
// (subnormals included) and per-group scales (the block FP8 layout): the decode of every kernel is exact.
TEST(MatvecFp8Bf16, OneHotActivationsReturnEveryDequantizedWeight) {
  const int64_t in = 256, rows = 9;
  const std::vector<uint8_t> w = fp8_rows(
      rows, in,
      [](int64_t r, int64_t i) {
        const uint8_t c = uint8_t(i + 37 * r);
        return e4m3_is_nan(c) ? uint8_t(0x7e) : c;
      },
      [](int64_t r, int64_t g) { return std::ldexp(1.0f, int(r) - 4) * (g == 0 ? 1.0f : 0.75f); });
  std::vector<float> wf(size_t(rows * in));
  for (int64_t r = 0; r < rows; ++r) weight_row_f32(WeightType::kFP8, w.data(), in, r, wf.data() + r * in);
  for (const auto& [name, kernel] : kernels())
    for (int64_t i = 0; i < in; ++i) {
      std::vector<float> x(size_t(in), 0.0f), y(size_t(rows), -1.0f);
      x[size_t(i)] = 1.0f;
      kernel(w.data(), in, 0, rows, x.data(), in, 1, y.data(), rows, false);
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_EQ(y[size_t(r)], wf[size_t(r * in + i)]) << name << " row " << r << " column " << i;
    }
}

// Where every product and partial sum is an exact float (weights of a few bits, activations of a few bits, scales
// powers of two), every kernel gives the same bits whatever its order: the exact product of the formula.
TEST(MatvecFp8Bf16, KernelsAgreeBitForBitWhereEverySumIsExact) {
  std::mt19937 g(3);
  // Weights 1-7.5 in steps of 1/8, activations 1/4-8 in steps of 1/4, scales 1/2-2: every group's sum a multiple
  // of 2^-5 below 2^13, the row's a multiple of 2^-6 below 2^17: 23 bits.
  std::uniform_int_distribution<int> e(7, 9), m(0, 7), sign(0, 1), xe(-2, 0), se(-1, 1);
  const int64_t in = 1024, rows = 21, tokens = 7;
  const std::vector<uint8_t> w = fp8_rows(
      rows, in, [&](int64_t, int64_t) { return uint8_t(sign(g) << 7 | e(g) << 3 | m(g)); },
      [&](int64_t, int64_t) { return std::ldexp(1.0f, se(g)); });
  std::vector<float> x(size_t(tokens * in));
  for (float& v : x) v = std::ldexp(float(1 + m(g)), xe(g)) * (sign(g) ? -1.0f : 1.0f);
  std::vector<float> want;
  for (const auto& [name, kernel] : kernels())
    for (bool accumulate : {false, true}) {
      std::vector<float> y(size_t(tokens * rows), 0.5f);
      kernel(w.data(), in, 1, rows, x.data(), in, tokens, y.data(), rows, accumulate);
      if (want.empty()) {
        want.assign(y.size(), 0.0f);
        std::vector<float> wf(static_cast<size_t>(in));
        for (int64_t r = 0; r < rows; ++r) {
          weight_row_f32(WeightType::kFP8, w.data(), in, r, wf.data());
          for (int64_t t = 0; t < tokens; ++t) {
            double s = 0;
            for (int64_t i = 0; i < in; ++i) s += double(wf[size_t(i)]) * x[size_t(t * in + i)];
            want[size_t(t * rows + r)] = r == 0 ? 0.5f : float(s);
          }
        }
      }
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t r = 0; r < rows; ++r) {
          const float expected = want[size_t(t * rows + r)] + (accumulate && r > 0 ? 0.5f : 0.0f);
          ASSERT_EQ(y[size_t(t * rows + r)], expected) << name << " token " << t << " row " << r;
        }
    }
}

// Random codes (every one but NaN), random scales and normal activations: every kernel within the header's bound
// of the formula computed in double, for widths across the 128-column groups (a last group of 32, 64, 96), token
// counts across the 4-token blocks, row ranges not a multiple of 8 and accumulate on and off; and within the bf16
// rounding bound of the float32-activation kernel (ops/matvec_lowbit.h).
TEST(MatvecFp8Bf16, KernelsMatchTheFormulaWithinTheBound) {
  std::mt19937 g(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.01f, 4.0f);
  for (int64_t in : {32, 96, 160, 224, 2048})
    for (int64_t tokens : {1, 3, 5, 8}) {
      const int64_t rows = 19;
      const std::vector<uint8_t> w = fp8_rows(
          rows, in,
          [&](int64_t, int64_t) {
            const uint8_t c = uint8_t(byte(g));
            return e4m3_is_nan(c) ? uint8_t(0x01) : c;
          },
          [&](int64_t, int64_t) { return scale(g); });
      std::vector<float> x(size_t(tokens * in));
      for (float& v : x) v = nd(g);
      std::vector<float> wf(size_t(rows * in));
      for (int64_t r = 0; r < rows; ++r) weight_row_f32(WeightType::kFP8, w.data(), in, r, wf.data() + r * in);
      std::vector<float> yf(size_t(tokens * rows));
      matvec_lowbit_rows(WeightType::kFP8, w.data(), in, 0, rows, x.data(), in, tokens, yf.data(), rows, false);
      for (const auto& [name, kernel] : kernels())
        for (bool accumulate : {false, true}) {
          std::vector<float> y(size_t(tokens * rows), 0.25f);
          kernel(w.data(), in, 2, rows, x.data(), in, tokens, y.data(), rows, accumulate);
          for (int64_t t = 0; t < tokens; ++t)
            for (int64_t r = 2; r < rows; ++r) {
              double exact = accumulate ? 0.25 : 0.0, mag = 0, mag_f = 0;
              for (int64_t i = 0; i < in; ++i) {
                const double wi = wf[size_t(r * in + i)], xi = x[size_t(t * in + i)];
                exact += wi * fp8_activation_bf16(float(xi));
                mag += std::fabs(wi * fp8_activation_bf16(float(xi)));
                mag_f += std::fabs(wi * xi);
              }
              const double got = y[size_t(t * rows + r)];
              const double bound = 0x1p-23 * double(in + 16) * mag + 0x1p-120 * double(in) + 0x1p-24 * 0.25;
              ASSERT_LE(std::fabs(got - exact), bound)
                  << name << " in " << in << " tokens " << tokens << " row " << r << " accumulate " << accumulate;
              if (!accumulate) {  // the float32-activation kernel's product: its own bound plus bf16's rounding
                ASSERT_LE(std::fabs(got - yf[size_t(t * rows + r)]), 0x1p-8 * mag_f + bound + 1e-6 * double(in) * mag_f)
                    << name << " vs float activations, in " << in << " tokens " << tokens << " row " << r << " got "
                    << got << " float " << yf[size_t(t * rows + r)] << " formula " << exact;
              }
            }
          for (int64_t t = 0; t < tokens; ++t)
            for (int64_t r = 0; r < 2; ++r) ASSERT_EQ(y[size_t(t * rows + r)], 0.25f) << name << " wrote row " << r;
        }
    }
}

// ZAYA_FP8_ACTIVATIONS unset or bf16 (the test environment): matvec_rows on FP8 runs this file's kernels.
TEST(MatvecFp8Bf16, MatvecRowsTakesTheBf16KernelForFp8) {
  if (!fp8_bf16_activations()) GTEST_SKIP() << "ZAYA_FP8_ACTIVATIONS=float";
  std::mt19937 g(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t in = 512, rows = 24;
  std::uniform_int_distribution<int> byte(0, 0x7e);
  const std::vector<uint8_t> w = fp8_rows(
      rows, in, [&](int64_t, int64_t) { return uint8_t(byte(g)); }, [](int64_t, int64_t) { return 0.01f; });
  std::vector<float> x(size_t(2 * in));
  for (float& v : x) v = nd(g);
  std::vector<float> a(size_t(2 * rows)), b(size_t(2 * rows));
  matvec_rows(WeightType::kFP8, w.data(), in, 0, rows, x.data(), in, 2, a.data(), rows, false);
  matvec_fp8_bf16_rows(w.data(), in, 0, rows, x.data(), in, 2, b.data(), rows, false);
  EXPECT_EQ(a, b);
}

}  // namespace matvec_fp8_bf16_test
}  // namespace zaya
