#include "zaya/ops/matvec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/rng.h"

namespace zaya {
namespace {

std::vector<float> randn(int64_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = normal01(seed, 7, i);
  return v;
}

// Every token count (tile shapes 1..4 and their remainders), row counts that
// leave remainders of the 8- and 4-row tiles, `in` with and without a 16-lane
// tail, strided x and y, accumulation, bf16, f32 and int8 weights (with
// per-row scales): all against the double-accumulating loop.
TEST(Matvec, MatchesReferenceForAllShapes) {
  for (WeightType type : {WeightType::kF32, WeightType::kBF16, WeightType::kI8})
    for (int64_t in : {1, 15, 16, 37, 64, 200})
      for (int64_t out : {1, 3, 8, 13, 33})
        for (int64_t tokens : {1, 2, 3, 4, 5, 9}) {
          const int64_t ldx = in + 3, ldy = out + 5;
          std::vector<float> wf = randn(in * out, 1 + in + out);
          std::vector<uint16_t> wb(wf.size());
          for (size_t i = 0; i < wf.size(); ++i) wb[i] = float_to_bf16(wf[i]);
          std::vector<int8_t> wq(wf.size());
          std::vector<float> scale(out);
          for (int64_t r = 0; r < out; ++r) {
            scale[r] = 0.01f * float(r + 1);
            for (int64_t i = 0; i < in; ++i) wq[r * in + i] = int8_t(std::lround(40 * wf[r * in + i]) % 128);
          }
          const void* w = type == WeightType::kBF16 ? static_cast<const void*>(wb.data())
                          : type == WeightType::kI8 ? static_cast<const void*>(wq.data())
                                                    : wf.data();
          std::vector<float> x = randn(tokens * ldx, 2 + tokens);
          for (bool acc : {false, true}) {
            std::vector<float> y = randn(tokens * ldy, 3), ref = y;
            matvec(type, w, in, out, x.data(), ldx, tokens, y.data(), ldy, acc, scale.data());
            matvec_reference(type, w, in, out, x.data(), ldx, tokens, ref.data(), ldy, acc, scale.data());
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

}  // namespace
}  // namespace zaya
