#include "zaya/infer/linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "zaya/core/fp8.h"
#include "zaya/core/mxfp4.h"
#include "zaya/ops/matvec.h"
#include "zaya/ops/matvec_lowbit.h"
#include "zaya/ops/matvec_mxfp4_q8.h"

namespace zaya {
namespace linear_test {

// A random [rows, cols] matrix of `type` quantized from normal floats (core/mxfp4.h, core/fp8.h's layouts).
std::vector<uint8_t> random_lowbit(WeightType type, int64_t rows, int64_t cols, std::mt19937& g) {
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const int64_t rb = weight_row_bytes(type, cols);
  std::vector<uint8_t> w(size_t(rows * rb));
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = nd(g);
    uint8_t* dst = w.data() + r * rb;
    if (type == WeightType::kMXFP4) {
      quantize_mxfp4_row(row.data(), cols, dst);
    } else {
      float amax = 0;
      for (float v : row) amax = std::max(amax, std::fabs(v));
      const float s = amax / 448.0f;
      for (int64_t i = 0; i < cols; ++i) dst[i] = float_to_e4m3(row[size_t(i)] / s);
      for (int64_t k = 0; k < (cols + 127) / 128; ++k) std::memcpy(dst + cols + 4 * k, &s, 4);
    }
  }
  return w;
}

// Prefill (more than kMatvecMaxTokens rows) on MXFP4 and FP8 matrices runs an f32 GEMM over dequantized tiles
// (two tiles: 1,100 rows of 1,024 columns at 1,024 rows per tile): it equals the float32-activation matvec
// kernel (ops/matvec_lowbit.h) over the same weights within two float sums' rounding (2 x I x 2^-23 x sum |w x|),
// accumulate on and off.
TEST(LinearRunner, LowbitPrefillGemmEqualsTheMatvecProduct) {
  std::mt19937 g(21);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t I = 1024, O = 1100, T = 40;
  for (WeightType type : {WeightType::kMXFP4, WeightType::kFP8}) {
    const std::vector<uint8_t> w = random_lowbit(type, O, I, g);
    const WeightMatrix wm{type, w.data(), O, I};
    std::vector<float> x(size_t(T * I));
    for (float& v : x) v = nd(g);
    std::vector<float> wf(size_t(O * I));
    for (int64_t r = 0; r < O; ++r) wm.row_f32(r, wf.data() + r * I);
    std::vector<double> mag(size_t(T * O), 0.0);  // sum |w x| per output
    for (int64_t t = 0; t < T; ++t)
      for (int64_t r = 0; r < O; ++r)
        for (int64_t i = 0; i < I; ++i)
          mag[size_t(t * O + r)] += std::fabs(double(wf[size_t(r * I + i)]) * x[size_t(t * I + i)]);
    LinearRunner runner(I, O, true);
    for (bool accumulate : {false, true}) {
      std::vector<float> gemm_y(size_t(T * O), 0.5f), matvec_y(size_t(T * O), 0.5f);
      runner.run(gemm_y.data(), O, x.data(), I, T, wm, accumulate);
      matvec_lowbit_rows(type, w.data(), I, 0, O, x.data(), I, T, matvec_y.data(), O, accumulate);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t r = 0; r < O; ++r) {
          const size_t k = size_t(t * O + r);
          ASSERT_LE(std::fabs(gemm_y[k] - matvec_y[k]), 2.4e-7 * double(I) * mag[k] + 1.2e-7 * std::fabs(matvec_y[k]))
              << weight_type_name(type) << " token " << t << " row " << r << " accumulate " << accumulate;
        }
    }
  }
}

// The experts of a decode step, each over its own input, in one run_products call: each product equals its own
// run() (MXFP4 with int8 activations: each input quantized on its own; FP8 and float-input MXFP4: float).
TEST(LinearRunner, ProductsOverDistinctInputsEqualSingleRuns) {
  std::mt19937 g(4);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t I = 512, O = 768;
  for (WeightType type : {WeightType::kMXFP4, WeightType::kFP8}) {
    std::vector<std::vector<uint8_t>> ws;
    std::vector<WeightMatrix> wms;
    for (int e = 0; e < 3; ++e) ws.push_back(random_lowbit(type, O, I, g));
    for (int e = 0; e < 3; ++e) wms.push_back({type, ws[size_t(e)].data(), O, I});
    const int64_t tokens[3] = {1, 3, 2};
    std::vector<float> x(size_t(6 * I));
    for (float& v : x) v = nd(g);
    std::vector<float> y(size_t(6 * O)), want(size_t(6 * O));
    LinearRunner runner(I, O, true), single(I, O, true);
    std::vector<LinearRunner::Product> products;
    int64_t row = 0;
    for (int e = 0; e < 3; ++e) {
      products.push_back({&wms[size_t(e)], x.data() + row * I, I, tokens[e], y.data() + row * O, O});
      single.run(want.data() + row * O, O, x.data() + row * I, I, tokens[e], wms[size_t(e)]);
      row += tokens[e];
    }
    runner.run_products(products);
    EXPECT_EQ(y, want) << weight_type_name(type);
    if (type == WeightType::kMXFP4 && mxfp4_int8_activations()) {  // the int8 kernel ran: its own bits
      Q8Activations xq;
      xq.quantize(x.data() + I, I, 3, I);
      std::vector<float> y1(size_t(3 * O));
      matvec_mxfp4_q8_rows(ws[1].data(), 0, O, xq, y1.data(), O, false);
      EXPECT_EQ(std::vector<float>(y.begin() + O, y.begin() + 4 * O), y1);
    }
  }
}

}  // namespace linear_test
}  // namespace zaya
