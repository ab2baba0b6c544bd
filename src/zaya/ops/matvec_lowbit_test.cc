#include "zaya/ops/matvec_lowbit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "zaya/core/fp8.h"
#include "zaya/core/mxfp4.h"
#include "zaya/ops/matvec.h"

namespace zaya {
namespace matvec_lowbit_test {

// Random rows of `type` (every E2M1 code and E4M3 code but NaN, subnormals included; scales over a wide range).
std::vector<uint8_t> random_lowbit_rows(WeightType type, int64_t rows, int64_t in, std::mt19937& g) {
  const int64_t rb = weight_row_bytes(type, in);
  std::vector<uint8_t> w(size_t(rows * rb));
  std::uniform_int_distribution<int> byte(0, 255), u(100, 140);
  std::uniform_real_distribution<float> scale(0.01f, 4.0f);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = w.data() + r * rb;
    if (type == WeightType::kMXFP4) {
      for (int64_t i = 0; i < in / 2; ++i) row[i] = uint8_t(byte(g));
      for (int64_t b = 0; b < in / 32; ++b) row[in / 2 + b] = uint8_t(u(g));
    } else {
      for (int64_t i = 0; i < in; ++i) {
        row[i] = uint8_t(byte(g));
        if (e4m3_is_nan(row[i])) row[i] = 0x01;
      }
      for (int64_t k = 0; k < (in + 127) / 128; ++k) {
        const float s = scale(g);
        std::memcpy(row + in + 4 * k, &s, 4);
      }
    }
  }
  return w;
}

using Kernel = void (*)(WeightType, const uint8_t*, int64_t, int64_t, int64_t, const float*, int64_t, int64_t, float*,
                        int64_t, bool);

// Every kernel this CPU has against the dequantized matrix's product in double, within the bound of
// ops/matvec_lowbit.h, for token counts across the 4-token blocks, widths across the 128-column groups,
// row ranges not a multiple of 8, and accumulate on and off.
TEST(MatvecLowbit, KernelsMatchTheDequantizedProduct) {
  std::vector<std::pair<const char*, Kernel>> kernels = {{"portable", matvec_lowbit_rows_portable},
                                                         {"dispatch", matvec_lowbit_rows}};
  if (matvec_lowbit_has_avx2()) kernels.push_back({"avx2", matvec_lowbit_rows_avx2});
  if (matvec_lowbit_has_avx512()) kernels.push_back({"avx512", matvec_lowbit_rows_avx512});
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (WeightType type : {WeightType::kMXFP4, WeightType::kFP8})
    for (int64_t in : {32, 96, 160, 512})
      for (int64_t tokens : {1, 3, 5, 8}) {
        const int64_t rows = 19;
        const std::vector<uint8_t> w = random_lowbit_rows(type, rows, in, g);
        std::vector<float> x(size_t(tokens * in));
        for (float& v : x) v = nd(g);
        std::vector<float> wf(size_t(rows * in));
        for (int64_t r = 0; r < rows; ++r) weight_row_f32(type, w.data(), in, r, wf.data() + r * in);
        for (const auto& [name, kernel] : kernels)
          for (bool accumulate : {false, true}) {
            std::vector<float> y(size_t(tokens * rows), 0.25f);
            kernel(type, w.data(), in, 2, rows, x.data(), in, tokens, y.data(), rows, accumulate);
            for (int64_t t = 0; t < tokens; ++t)
              for (int64_t r = 0; r < rows; ++r) {
                double exact = accumulate || r < 2 ? 0.25 : 0.0, mag = 0;
                if (r >= 2)
                  for (int64_t i = 0; i < in; ++i) {
                    exact += double(wf[size_t(r * in + i)]) * x[size_t(t * in + i)];
                    mag += std::fabs(double(wf[size_t(r * in + i)]) * x[size_t(t * in + i)]);
                  }
                EXPECT_LE(std::fabs(y[size_t(t * rows + r)] - exact),
                          1e-6 * double(in) * mag + 1.2e-7 * std::fabs(exact))
                    << name << " " << weight_type_name(type) << " in " << in << " tokens " << tokens << " row " << r;
              }
          }
      }
}

// The vector kernels decode each weight exactly: with one-hot activations they return the dequantized weights bit
// for bit (every E4M3 subnormal and E2M1 code included).
TEST(MatvecLowbit, OneHotActivationsGiveTheDequantizedWeightsExactly) {
  std::mt19937 g(3);
  const int64_t in = 256, rows = 8;
  for (WeightType type : {WeightType::kMXFP4, WeightType::kFP8}) {
    const std::vector<uint8_t> w = random_lowbit_rows(type, rows, in, g);
    std::vector<float> wf(size_t(rows * in));
    for (int64_t r = 0; r < rows; ++r) weight_row_f32(type, w.data(), in, r, wf.data() + r * in);
    for (int64_t i = 0; i < in; ++i) {
      std::vector<float> x(size_t(in), 0.0f);
      x[size_t(i)] = 1.0f;
      std::vector<float> y(static_cast<size_t>(rows));
      matvec_lowbit_rows(type, w.data(), in, 0, rows, x.data(), in, 1, y.data(), rows, false);
      for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(y[size_t(r)], wf[size_t(r * in + i)]) << i << " " << r;
    }
  }
}

// The prefill tiles' dequantization equals weight_row_f32 bit for bit (every code, subnormals included).
TEST(MatvecLowbit, RowsToFloatEqualTheDequantizedRows) {
  std::mt19937 g(13);
  const int64_t in = 160, rows = 11;
  for (WeightType type : {WeightType::kMXFP4, WeightType::kFP8}) {
    const std::vector<uint8_t> w = random_lowbit_rows(type, rows, in, g);
    std::vector<float> want(size_t((rows - 3) * in)), got(size_t((rows - 3) * in));
    for (int64_t r = 3; r < rows; ++r) weight_row_f32(type, w.data(), in, r, want.data() + (r - 3) * in);
    lowbit_rows_f32(type, w.data(), in, 3, rows, got.data());
    EXPECT_EQ(got, want) << weight_type_name(type);
  }
}

}  // namespace matvec_lowbit_test
}  // namespace zaya
