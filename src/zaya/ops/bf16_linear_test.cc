#include "zaya/ops/bf16_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/ops/grad_check.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/matmul_bf16.h"

namespace zaya {
namespace {

using testing::random_vector;
using testing::to_float;

double round_bf16(float v) { return double(bf16_to_float(float_to_bf16(v))); }

// y = x w^T with both operands rounded to bf16, in double (exact products).
std::vector<double> reference_forward(const std::vector<float>& x, const std::vector<float>& w, int64_t T, int64_t I,
                                      int64_t O) {
  std::vector<double> y(T * O, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < I; ++i) y[t * O + o] += round_bf16(x[t * I + i]) * round_bf16(w[o * I + i]);
  return y;
}

struct Case {
  int64_t T, I, O;
};

// Row counts below, at and across the row bucket (the staged tail block), and
// accumulation into the output: bf16 operands, float32 accumulation.
TEST(Bf16Linear, ForwardAndBackwardUseBf16OperandsWithFloatAccumulation) {
  Bf16Context ctx;
  for (const Case& c : {Case{5, 24, 16}, Case{32, 40, 8}, Case{77, 64, 48}}) {
    const int64_t T = c.T, I = c.I, O = c.O;
    const auto x = to_float(random_vector(T * I, 1)), w = to_float(random_vector(O * I, 2));
    const auto dy = to_float(random_vector(T * O, 3)), y0 = to_float(random_vector(T * O, 4));
    std::vector<uint16_t> wb(O * I);
    convert_to_bf16(wb.data(), w.data(), O * I);
    // Forward, written and accumulated.
    std::vector<float> y(T * O), ya = y0;
    linear_forward_bf16(ctx, y.data(), x.data(), wb.data(), T, I, O, false);
    linear_forward_bf16(ctx, ya.data(), x.data(), wb.data(), T, I, O, true);
    const std::vector<double> ref = reference_forward(x, w, T, I, O);
    for (int64_t k = 0; k < T * O; ++k) {
      ASSERT_NEAR(y[k], ref[k], 1e-5 * I) << "T=" << T << " k=" << k;
      ASSERT_NEAR(ya[k], ref[k] + y0[k], 1e-5 * I) << "T=" << T << " k=" << k;
    }
    // Backward adds into dx and dw.
    std::vector<float> dx(T * I, 1.0f), dw(O * I, -1.0f);
    linear_backward_bf16(ctx, dx.data(), dw.data(), dy.data(), x.data(), wb.data(), T, I, O);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < I; ++i) {
        double want = 1.0;
        for (int64_t o = 0; o < O; ++o) want += round_bf16(dy[t * O + o]) * round_bf16(w[o * I + i]);
        ASSERT_NEAR(dx[t * I + i], want, 1e-5 * O) << "dx T=" << T;
      }
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < I; ++i) {
        double want = -1.0;
        for (int64_t t = 0; t < T; ++t) want += round_bf16(dy[t * O + o]) * round_bf16(x[t * I + i]);
        ASSERT_NEAR(dw[o * I + i], want, 1e-5 * T) << "dw T=" << T;
      }
  }
}

// A producer that writes dy in bf16 into bf16_dy_scratch gets what
// linear_backward_bf16 gives for the float dy, bit for bit, even after a
// larger call left other values in the scratch (the padding rows are zeroed).
TEST(Bf16Linear, BackwardFromARoundedOutputGradientMatches) {
  Bf16Context ctx;
  const int64_t T = 45, I = 24, O = 40;
  const auto x = to_float(random_vector(T * I, 11)), w = to_float(random_vector(O * I, 12));
  const auto dy = to_float(random_vector(T * O, 13)), big = to_float(random_vector(3 * T * O, 14));
  std::vector<uint16_t> wb(O * I);
  convert_to_bf16(wb.data(), w.data(), O * I);
  std::vector<float> dx_want(T * I, 0.5f), dw_want(O * I, 0.25f);
  linear_backward_bf16(ctx, dx_want.data(), dw_want.data(), dy.data(), x.data(), wb.data(), T, I, O);
  std::vector<float> dx_big(3 * T * I, 0.0f);
  linear_backward_bf16(ctx, dx_big.data(), nullptr, big.data(), x.data(), wb.data(), 3 * T, I,
                       O);  // dirties the scratch
  uint16_t* dyb = bf16_dy_scratch(ctx, T, O);
  for (int64_t k = 0; k < T * O; ++k) dyb[k] = float_to_bf16(dy[k]);
  std::vector<float> dx(T * I, 0.5f), dw(O * I, 0.25f);
  linear_backward_bf16_rounded(ctx, dx.data(), dw.data(), dyb, x.data(), wb.data(), T, I, O);
  for (int64_t k = 0; k < T * I; ++k) ASSERT_EQ(dx[k], dx_want[k]) << "dx " << k;
  for (int64_t k = 0; k < O * I; ++k) ASSERT_EQ(dw[k], dw_want[k]) << "dw " << k;
}

// In a bf16 precision, linear_forward / linear_backward of a weight inside
// the context's arena take the bf16 path; a weight outside it, or the float32
// precision, stays float32.
TEST(Bf16Linear, PrecisionRoutesOnlyTheArenasWeights) {
  const int64_t T = 40, I = 32, O = 24;
  const auto x = to_float(random_vector(T * I, 1)), arena = to_float(random_vector(2 * O * I, 2));
  const auto dy = to_float(random_vector(T * O, 3));
  std::vector<uint16_t> copy(2 * O * I);
  convert_to_bf16(copy.data(), arena.data(), 2 * O * I);
  const Bf16Weights weights{arena.data(), 2 * O * I, copy.data()};
  const float* w = arena.data() + O * I;  // the second matrix of the arena
  const std::vector<float> outside(arena.begin() + O * I, arena.end());
  Bf16Context ctx, plain;
  std::vector<float> want(T * O), f32(T * O), got(T * O), other(T * O), none(T * O);
  linear_forward_bf16(plain, want.data(), x.data(), copy.data() + O * I, T, I, O, false);
  linear_forward<float>(f32.data(), x.data(), w, T, I, O);
  std::vector<float> dx_want(T * I, 0.0f), dw_want(O * I, 0.0f), dx(T * I, 0.0f), dw(O * I, 0.0f);
  linear_backward_bf16(plain, dx_want.data(), dw_want.data(), dy.data(), x.data(), copy.data() + O * I, T, I, O);
  ctx.set_weights(&weights);
  const Precision bf16{&ctx};
  EXPECT_TRUE(bf16.bf16_gemms());
  EXPECT_FALSE(Precision{}.bf16_gemms());
  linear_forward<float>(bf16, got.data(), x.data(), w, T, I, O);
  linear_forward<float>(bf16, other.data(), x.data(), outside.data(), T, I, O);
  linear_forward<float>(Precision{}, none.data(), x.data(), w, T, I, O);
  linear_backward<float>(bf16, dx.data(), dw.data(), dy.data(), x.data(), w, T, I, O);
  EXPECT_EQ(ctx.copy_of(w), copy.data() + O * I);
  EXPECT_EQ(ctx.copy_of(outside.data()), nullptr);
  EXPECT_EQ(none, f32);
  EXPECT_EQ(got, want);
  EXPECT_EQ(other, f32);
  EXPECT_EQ(dx, dx_want);
  EXPECT_EQ(dw, dw_want);
  EXPECT_NE(got, f32);  // bf16 rounding is visible
}

}  // namespace
}  // namespace zaya
