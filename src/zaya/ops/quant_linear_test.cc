// The products over packed frozen rows (ops/quant_linear.h) are the float32
// products with the exactly dequantized matrix: forward and input gradient,
// over several tiles, for MXFP4, FP8 and int8 rows.
#include "zaya/ops/quant_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/core/test_util.h"
#include "zaya/ops/matmul.h"
#include "zaya/ops/precision.h"

namespace zaya {
namespace {

struct Packed {
  std::vector<uint8_t> rows;
  std::vector<float> dequantized;  // [out, in]
};

Packed pack(WeightType type, int64_t out, int64_t in, uint64_t seed) {
  std::vector<float> w(size_t(out * in));
  for (int64_t i = 0; i < out * in; ++i) w[size_t(i)] = 0.05f * normal01(seed, 1, uint64_t(i));
  Packed p;
  const int64_t rb = weight_row_bytes(type, in);
  p.rows.resize(size_t(out * rb));
  p.dequantized.resize(w.size());
  for (int64_t r = 0; r < out; ++r) quantize_weight_row(type, w.data() + r * in, in, p.rows.data() + r * rb);
  for (int64_t r = 0; r < out; ++r) weight_row_f32(type, p.rows.data(), in, r, p.dequantized.data() + r * in);
  return p;
}

// |a - b| <= 1e-5 * (1 + max |b|): float32 sums in another order.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  float scale = 0;
  for (float v : b) scale = std::fmax(scale, std::fabs(v));
  int bad = 0;
  for (size_t i = 0; i < a.size() && bad < 5; ++i)
    if (!(std::fabs(a[i] - b[i]) <= 1e-5f * (1 + scale))) {
      ADD_FAILURE() << what << " [" << i << "]: " << a[i] << " vs " << b[i];
      ++bad;
    }
}

TEST(QuantLinear, ForwardAndInputGradientAreTheFloatProductsOfTheDequantizedMatrix) {
  // in = 64: a tile holds 4096 rows, so 4100 rows make two tiles (the second of 4 rows).
  const int64_t in = 64, out = kQuantTileFloats / in + 4, tokens = 5;
  for (WeightType type : {WeightType::kMXFP4, WeightType::kFP8, WeightType::kI8}) {
    SCOPED_TRACE(weight_type_name(type));
    const Packed p = pack(type, out, in, 3);
    std::vector<float> x(size_t(tokens * in)), dy(size_t(tokens * out));
    for (size_t i = 0; i < x.size(); ++i) x[i] = normal01(4, 2, i);
    for (size_t i = 0; i < dy.size(); ++i) dy[i] = normal01(5, 3, i);
    QuantContext ctx;
    std::vector<float> y(size_t(tokens * out), 7.0f), want(y.size(), 0.0f);
    quant_linear_forward(ctx, type, y.data(), x.data(), p.rows.data(), tokens, in, out, false);
    linear_forward<float>(want.data(), x.data(), p.dequantized.data(), tokens, in, out);
    expect_close(y, want, "forward");
    // accumulate adds
    std::vector<float> y2(y.size(), 1.0f);
    quant_linear_forward(ctx, type, y2.data(), x.data(), p.rows.data(), tokens, in, out, true);
    for (float& v : want) v += 1.0f;
    expect_close(y2, want, "forward, accumulated");
    std::vector<float> dx(x.size(), 0.5f), dx_want(x.size(), 0.5f);
    quant_linear_backward(ctx, type, dx.data(), dy.data(), p.rows.data(), tokens, in, out);
    linear_backward<float>(dx_want.data(), nullptr, dy.data(), x.data(), p.dequantized.data(), tokens, in, out);
    expect_close(dx, dx_want, "input gradient");
  }
}

TEST(QuantLinear, LinearLayersFindPackedRowsByTheirViewsAddress) {
  const int64_t in = 32, out = 6, tokens = 3;
  const Packed p = pack(WeightType::kMXFP4, 2 * out, in, 8);
  std::vector<float> view(size_t(3 * out * in), NAN);  // never read: only its addresses matter
  QuantWeights qw;
  qw.type = WeightType::kMXFP4;
  // Two matrices of `out` rows, the second first (sort() orders them); a hole between them.
  qw.matrices.push_back({view.data() + 2 * out * in, out, in, p.rows.data() + out * weight_row_bytes(qw.type, in)});
  qw.matrices.push_back({view.data(), out, in, p.rows.data()});
  qw.sort();
  EXPECT_EQ(qw.rows_of(view.data(), in), p.rows.data());
  EXPECT_EQ(qw.rows_of(view.data() + 2 * in, in), p.rows.data() + 2 * weight_row_bytes(qw.type, in));
  EXPECT_EQ(qw.rows_of(view.data() + out * in, in), nullptr);  // the hole
  testing::expect_error([&] { qw.rows_of(view.data() + 3, in); }, "internal error");
  QuantContext ctx(&qw);
  const Precision precision{nullptr, &ctx};
  std::vector<float> x(size_t(tokens * in));
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal01(9, 4, i);
  std::vector<float> y(size_t(tokens * out)), want(y.size());
  linear_forward(precision, y.data(), x.data(), view.data() + 2 * out * in, tokens, in, out);
  linear_forward<float>(want.data(), x.data(), p.dequantized.data() + out * in, tokens, in, out);
  expect_close(y, want, "second matrix");
  // A frozen matrix has no weight gradient.
  std::vector<float> dw(size_t(out * in));
  testing::expect_error(
      [&] { linear_backward(precision, x.data(), dw.data(), y.data(), x.data(), view.data(), tokens, in, out); },
      "frozen quantized matrix");
}

}  // namespace
}  // namespace zaya
