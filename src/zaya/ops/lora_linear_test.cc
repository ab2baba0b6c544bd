#include "zaya/ops/lora_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/ops/grad_check.h"

namespace zaya {
namespace {

using testing::dot;
using testing::random_vector;
using Vec = std::vector<double>;

LoraShape shape(double dropout) {
  LoraShape s;
  s.tokens = 5;
  s.in = 6;
  s.out = 4;
  s.rank = 3;
  s.out_stride = 7;  // a column slice of a wider output: the stride must be honoured
  s.scale = 16.0 / 3.0;
  s.dropout = dropout;
  s.seed = 11;
  s.stream = 42;
  return s;
}

// Straightforward loops, written from the formula.
Vec reference(const Vec& y0, const Vec& x, const Vec& a, const Vec& b, const LoraShape& s) {
  Vec y = y0;
  for (int64_t t = 0; t < s.tokens; ++t) {
    for (int64_t o = 0; o < s.out; ++o) {
      double sum = 0;
      for (int64_t k = 0; k < s.rank; ++k) {
        double h = 0;
        for (int64_t i = 0; i < s.in; ++i) {
          const int64_t at = t * s.in + i;
          const bool keep = uniform01(s.seed, s.stream, uint64_t(at)) >= float(s.dropout);
          h += a[k * s.in + i] * (keep ? x[at] / (1 - s.dropout) : 0.0);
        }
        sum += b[o * s.rank + k] * h;
      }
      y[t * s.out_stride + o] += s.scale * sum;
    }
  }
  return y;
}

void check(double dropout) {
  const LoraShape s = shape(dropout);
  Vec x = random_vector(s.tokens * s.in, 1), a = random_vector(s.rank * s.in, 2), b = random_vector(s.out * s.rank, 3);
  const Vec y0 = random_vector(s.tokens * s.out_stride, 4), probe = random_vector(s.tokens * s.out_stride, 5);
  Vec h(s.tokens * s.rank), scratch(size_t(lora_backward_scratch_floats(s)) + 1);
  auto run = [&] {
    Vec y = y0;
    lora_forward<double>(y.data(), h.data(), x.data(), a.data(), b.data(), s, scratch.data());
    return y;
  };
  const Vec y = run(), want = reference(y0, x, a, b, s);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want[i], 1e-12) << i;
  // The float path agrees with the double one.
  {
    auto f = [](const Vec& v) { return std::vector<float>(v.begin(), v.end()); };
    std::vector<float> yf = f(y0), hf(h.size()), sf(scratch.size()), xf = f(x), af = f(a), bf = f(b);
    lora_forward<float>(yf.data(), hf.data(), xf.data(), af.data(), bf.data(), s, sf.data());
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(yf[i], y[i], 1e-4 * (1 + std::fabs(y[i]))) << i;
  }
  auto loss = [&] { return dot(run(), probe); };
  run();
  Vec dx(x.size(), 0.0), da(a.size(), 0.0), db(b.size(), 0.0);
  lora_backward<double>(dx.data(), da.data(), db.data(), probe.data(), x.data(), h.data(), a.data(), b.data(), s,
                        scratch.data());
  testing::expect_gradient("lora x", x, dx, loss);
  testing::expect_gradient("lora A", a, da, loss);
  testing::expect_gradient("lora B", b, db, loss);
}

TEST(LoraLinear, MatchesReferenceAndFiniteDifferences) { check(0.0); }

TEST(LoraLinear, DropoutMatchesReferenceAndFiniteDifferences) { check(0.3); }

TEST(LoraLinear, DropoutMaskDependsOnlyOnSeedStreamAndPosition) {
  LoraShape s = shape(0.5);
  Vec x = random_vector(s.tokens * s.in, 1, 1.0, 3.0), a = random_vector(s.rank * s.in, 2),
      b = random_vector(s.out * s.rank, 3);
  Vec scratch(size_t(lora_backward_scratch_floats(s)));
  auto run = [&](const LoraShape& shape) {
    Vec y(s.tokens * s.out_stride, 0.0), h(s.tokens * s.rank);
    lora_forward<double>(y.data(), h.data(), x.data(), a.data(), b.data(), shape, scratch.data());
    return y;
  };
  EXPECT_EQ(run(s), run(s));
  LoraShape other = s;
  other.stream += 1;
  EXPECT_NE(run(s), run(other));
}

TEST(LoraLinear, MergeEqualsTheAdapterBranch) {
  const LoraShape s = shape(0.0);
  Vec x = random_vector(s.tokens * s.in, 1), a = random_vector(s.rank * s.in, 2), b = random_vector(s.out * s.rank, 3);
  Vec w = random_vector(s.out * s.in, 4), merged = w;
  lora_merge<double>(merged.data(), a.data(), b.data(), s.in, s.out, s.rank, s.scale);
  Vec h(s.tokens * s.rank), y(s.tokens * s.out_stride, 0.0);
  for (int64_t t = 0; t < s.tokens; ++t)
    for (int64_t o = 0; o < s.out; ++o)
      for (int64_t i = 0; i < s.in; ++i) y[t * s.out_stride + o] += w[o * s.in + i] * x[t * s.in + i];
  lora_forward<double>(y.data(), h.data(), x.data(), a.data(), b.data(), s, nullptr);
  for (int64_t t = 0; t < s.tokens; ++t) {
    for (int64_t o = 0; o < s.out; ++o) {
      double m = 0;
      for (int64_t i = 0; i < s.in; ++i) m += merged[o * s.in + i] * x[t * s.in + i];
      EXPECT_NEAR(m, y[t * s.out_stride + o], 1e-12);
    }
  }
}

}  // namespace
}  // namespace zaya
