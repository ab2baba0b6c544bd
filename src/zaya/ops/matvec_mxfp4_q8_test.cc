#include "zaya/ops/matvec_mxfp4_q8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "zaya/core/mxfp4.h"
#include "zaya/ops/matvec.h"
#include "zaya/ops/matvec_lowbit.h"

namespace zaya {
namespace matvec_mxfp4_q8_test {

using Kernel = void (*)(const uint8_t*, int64_t, int64_t, const Q8Activations&, float*, int64_t, bool);

std::vector<std::pair<const char*, Kernel>> kernels() {
  std::vector<std::pair<const char*, Kernel>> k = {{"portable", matvec_mxfp4_q8_rows_portable},
                                                   {"dispatch", matvec_mxfp4_q8_rows}};
  if (matvec_mxfp4_q8_has_avx2()) k.push_back({"avx2", matvec_mxfp4_q8_rows_avx2});
  if (matvec_mxfp4_q8_has_vnni()) k.push_back({"vnni", matvec_mxfp4_q8_rows_vnni});
  return k;
}

// Random MXFP4 rows: every code, scale bytes u_lo..u_hi.
std::vector<uint8_t> random_mxfp4(int64_t rows, int64_t in, int u_lo, int u_hi, std::mt19937& g) {
  const int64_t rb = mxfp4_row_bytes(in);
  std::vector<uint8_t> w(size_t(rows * rb));
  std::uniform_int_distribution<int> byte(0, 255), u(u_lo, u_hi);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < in / 2; ++i) w[size_t(r * rb + i)] = uint8_t(byte(g));
    for (int64_t b = 0; b < in / 32; ++b) w[size_t(r * rb + in / 2 + b)] = uint8_t(u(g));
  }
  return w;
}

// Every kernel this CPU has against the formula in double, within the header's bound, for token counts across the
// 4-token blocks, widths with an odd block count (a last half pair), block counts that end a 16-block group of the
// VNNI kernel after 1, 2, 3 or 4 of its 64-byte loads (full or not) or fill it, row ranges not a multiple of the
// tiles, scales over a wide range (u = 0's subnormal 2^-128 included), accumulate on and off.
TEST(MatvecMxfp4Q8, KernelsMatchTheFormula) {
  std::mt19937 g(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t in : {32, 96, 160, 256, 288, 480, 512, 544, 2048})
    for (int64_t tokens : {1, 3, 5, 8}) {
      const int64_t rows = 19;
      std::vector<uint8_t> w = random_mxfp4(rows, in, 110, 140, g);
      w[size_t(2 * mxfp4_row_bytes(in) + in / 2)] = 0;  // row 2, block 0: u = 0
      std::vector<float> x(size_t(tokens * in));
      for (float& v : x) v = nd(g);
      Q8Activations xq;
      xq.quantize(x.data(), in, tokens, in);
      std::vector<float> want_set(size_t(tokens * rows)), want_acc(size_t(tokens * rows), 0.25f);
      matvec_mxfp4_q8_reference(w.data(), rows, xq, want_set.data(), rows, false);
      matvec_mxfp4_q8_reference(w.data(), rows, xq, want_acc.data(), rows, true);
      // sum |dw dx 2 e2m1 qx| per output: what bounds the float additions' rounding.
      std::vector<float> mag(size_t(tokens * rows));
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t r = 0; r < rows; ++r) {
          double m = 0;
          std::vector<float> row(static_cast<size_t>(in));
          dequantize_mxfp4_row(w.data() + r * mxfp4_row_bytes(in), in, row.data());
          for (int64_t i = 0; i < in; ++i)
            m += std::fabs(double(row[size_t(i)]) * xq.value(t, i) * xq.scale(t, i / 32));
          mag[size_t(t * rows + r)] = float(m);
        }
      const double bound = 1.2e-7 * double(in / 32 + 16);
      // A block scale product dw x dx below FLT_MIN (the u = 0 block) is rounded to a subnormal: up to 2^-150
      // absolute per unit of the block's integer dot (|dot| <= 32 x 12 x 127).
      const double subnormal = double(in / 32) * 32 * 12 * 127 * std::ldexp(1.0, -150);
      for (const auto& [name, kernel] : kernels())
        for (bool accumulate : {false, true}) {
          std::vector<float> y(size_t(tokens * rows), 0.25f);
          kernel(w.data(), 2, rows, xq, y.data(), rows, accumulate);
          for (int64_t t = 0; t < tokens; ++t)
            for (int64_t r = 0; r < rows; ++r) {
              const size_t k = size_t(t * rows + r);
              const double exact = r < 2 ? 0.25 : accumulate ? want_acc[k] : want_set[k];
              EXPECT_LE(std::fabs(y[k] - exact), bound * mag[k] + 1.2e-7 * std::fabs(exact) + subnormal)
                  << name << " in " << in << " tokens " << tokens << " row " << r << " accumulate " << accumulate;
            }
        }
    }
}

// Where every term and partial sum is an exact float (scales 2^-2 .. 2^0 on the weights' side, an activation
// scale of exactly 1: each block holds +-127 and integers), the kernels agree bit for bit with the portable loop,
// with the double formula, and with the float32-activation kernel of ops/matvec_lowbit.h over the same weights.
TEST(MatvecMxfp4Q8, ExactArithmeticGivesIdenticalBits) {
  std::mt19937 g(5);
  std::uniform_int_distribution<int> qi(-127, 127);
  const int64_t in = 256, rows = 21, tokens = 6;
  const std::vector<uint8_t> w = random_mxfp4(rows, in, 126, 128, g);
  std::vector<float> x(size_t(tokens * in));
  for (int64_t k = 0; k < tokens * in; ++k) x[size_t(k)] = float(k % 32 == 0 ? (k % 64 == 0 ? 127 : -127) : qi(g));
  Q8Activations xq;
  xq.quantize(x.data(), in, tokens, in);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t b = 0; b < in / 32; ++b) ASSERT_EQ(xq.scale(t, b), 1.0f);
  std::vector<float> want(size_t(tokens * rows)), flt(size_t(tokens * rows));
  matvec_mxfp4_q8_reference(w.data(), rows, xq, want.data(), rows, false);
  matvec_lowbit_rows(WeightType::kMXFP4, w.data(), in, 0, rows, x.data(), in, tokens, flt.data(), rows, false);
  EXPECT_EQ(flt, want);
  for (const auto& [name, kernel] : kernels()) {
    std::vector<float> y(size_t(tokens * rows));
    kernel(w.data(), 0, rows, xq, y.data(), rows, false);
    EXPECT_EQ(y, want) << name;
  }
}

// The parallel entry point gives the rows' bits whatever the split.
TEST(MatvecMxfp4Q8, ParallelEqualsRows) {
  std::mt19937 g(9);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t in = 1024, rows = 300, tokens = 2;
  const std::vector<uint8_t> w = random_mxfp4(rows, in, 120, 130, g);
  std::vector<float> x(size_t(tokens * in));
  for (float& v : x) v = nd(g);
  Q8Activations xq;
  xq.quantize(x.data(), in, tokens, in);
  std::vector<float> a(size_t(tokens * rows)), b(size_t(tokens * rows));
  matvec_mxfp4_q8_rows(w.data(), 0, rows, xq, a.data(), rows, false);
  matvec_mxfp4_q8(w.data(), rows, xq, b.data(), rows, false);
  EXPECT_EQ(a, b);
}

// A row's bits do not depend on the rows computed beside it (tiles of 8, 4, 2 rows or one alone): every kernel,
// rows one at a time against all at once.
TEST(MatvecMxfp4Q8, RowsAloneEqualRowsInTiles) {
  std::mt19937 g(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t in : {256, 544, 1024})
    for (int64_t tokens : {1, 2, 3, 4}) {
      const int64_t rows = 13;
      const std::vector<uint8_t> w = random_mxfp4(rows, in, 100, 150, g);
      std::vector<float> x(size_t(tokens * in));
      for (float& v : x) v = nd(g);
      Q8Activations xq;
      xq.quantize(x.data(), in, tokens, in);
      for (const auto& [name, kernel] : kernels()) {
        std::vector<float> all(size_t(tokens * rows)), alone(size_t(tokens * rows));
        kernel(w.data(), 0, rows, xq, all.data(), rows, false);
        for (int64_t r = 0; r < rows; ++r) kernel(w.data(), r, r + 1, xq, alone.data(), rows, false);
        EXPECT_EQ(all, alone) << name << " in " << in << " tokens " << tokens;
      }
    }
}

}  // namespace matvec_mxfp4_q8_test
}  // namespace zaya
