// Token sampling: greedy, temperature, top-k, top-p against their definitions,
// reproducibility per seed, and padding ids never chosen.
#include "zaya/infer/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

// Frequencies of `draws` samples.
std::vector<double> frequencies(const std::vector<float>& logits, int64_t vocab, const SamplingOptions& o, int draws) {
  std::vector<double> f(logits.size(), 0.0);
  Rng rng{o.seed, 1, 0};
  std::vector<std::pair<float, int32_t>> scratch;
  for (int i = 0; i < draws; ++i) f[sample_token(logits.data(), vocab, o, rng, scratch)] += 1.0 / draws;
  return f;
}

std::vector<double> softmax(const std::vector<float>& l, int64_t n, double t) {
  std::vector<double> p(n);
  double mx = *std::max_element(l.begin(), l.begin() + n), s = 0;
  for (int64_t i = 0; i < n; ++i) s += p[i] = std::exp((l[i] - mx) / t);
  for (double& v : p) v /= s;
  return p;
}

const std::vector<float> kLogits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 40.0f /* padding */};
constexpr int64_t kReal = 6;

TEST(Sampling, GreedyIsArgmaxOverTheRealVocabulary) {
  SamplingOptions o;
  o.temperature = 0;
  Rng rng;
  std::vector<std::pair<float, int32_t>> s;
  EXPECT_EQ(sample_token(kLogits.data(), kReal, o, rng, s), 1);
  o.temperature = 1;
  o.top_k = 1;
  EXPECT_EQ(sample_token(kLogits.data(), kReal, o, rng, s), 1);
  o.top_k = 0;
  o.top_p = 1e-6;
  EXPECT_EQ(sample_token(kLogits.data(), kReal, o, rng, s), 1);
}

TEST(Sampling, FrequenciesFollowTheFilteredSoftmax) {
  const int draws = 40000;
  const double tol = 0.012;
  // Plain temperature sampling over the whole real vocabulary.
  SamplingOptions o;
  o.temperature = 0.7;
  o.top_k = 0;
  o.top_p = 1;
  std::vector<double> f = frequencies(kLogits, kReal, o, draws), p = softmax(kLogits, kReal, 0.7);
  for (int64_t i = 0; i < kReal; ++i) EXPECT_NEAR(f[i], p[i], tol) << i;
  EXPECT_EQ(f[6], 0.0);  // padding
  // top-k = 3: ids 1, 3, 5 renormalised.
  o.temperature = 1;
  o.top_k = 3;
  f = frequencies(kLogits, kReal, o, draws);
  const double z = std::exp(2.5) + std::exp(2.0) + std::exp(1.7);
  EXPECT_NEAR(f[1], std::exp(2.5) / z, tol);
  EXPECT_NEAR(f[3], std::exp(2.0) / z, tol);
  EXPECT_NEAR(f[5], std::exp(1.7) / z, tol);
  EXPECT_EQ(f[0] + f[2] + f[4] + f[6], 0.0);
  // top-p: the smallest prefix of the sorted distribution reaching p.
  o.top_k = 0;
  p = softmax(kLogits, kReal, 1.0);
  std::vector<int> order(kReal);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  o.top_p = p[order[0]] + p[order[1]] + 0.01;  // needs three tokens
  f = frequencies(kLogits, kReal, o, draws);
  const double z3 = p[order[0]] + p[order[1]] + p[order[2]];
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(f[order[k]], p[order[k]] / z3, tol) << k;
  for (int k = 3; k < kReal; ++k) EXPECT_EQ(f[order[k]], 0.0) << k;
}

TEST(Sampling, SameSeedSameTokens) {
  SamplingOptions o;
  o.temperature = 1.3;
  o.top_k = 0;
  o.top_p = 0.9;
  std::vector<std::pair<float, int32_t>> s;
  Rng a{5, 1, 0}, b{5, 1, 0}, c{6, 1, 0};
  std::vector<int32_t> x, y, z;
  for (int i = 0; i < 50; ++i) {
    x.push_back(sample_token(kLogits.data(), kReal, o, a, s));
    y.push_back(sample_token(kLogits.data(), kReal, o, b, s));
    z.push_back(sample_token(kLogits.data(), kReal, o, c, s));
  }
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
}

TEST(Sampling, RejectsBadOptions) {
  SamplingOptions o;
  o.temperature = -1;
  testing::expect_error([&] { o.validate(); }, "--temperature -1 is invalid");
  o = {};
  o.top_k = -2;
  testing::expect_error([&] { o.validate(); }, "--top-k -2 is invalid");
  o = {};
  o.top_p = 1.5;
  testing::expect_error([&] { o.validate(); }, "--top-p 1.5 is invalid");
}

}  // namespace
}  // namespace zaya
