// Token sampling: greedy, temperature, top-k, top-p against their definitions,
// reproducibility per seed, and padding ids never chosen.
#include "zaya/infer/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "zaya/core/exp_f32.h"
#include "zaya/core/test_util.h"

namespace zaya {
namespace {

// Frequencies of `draws` samples.
std::vector<double> frequencies(const std::vector<float>& logits, int64_t vocab, const SamplingOptions& o, int draws) {
  std::vector<double> f(logits.size(), 0.0);
  Rng rng{o.seed, 1, 0};
  SamplingScratch scratch;
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
  SamplingScratch s;
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
  SamplingScratch s;
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

// Logits shaped like a trained model's (the red-team report's tiny model:
// the top few near 15, the bulk a few units around 0), `seed` picking them.
std::vector<float> realistic_logits(int64_t vocab, uint64_t seed) {
  std::vector<float> l(vocab);
  for (int64_t v = 0; v < vocab; ++v) l[v] = 3.0f * normal01(seed, 7, uint64_t(v));
  const float top = 14.0f + 2.0f * uniform01(seed, 8, 0);
  for (int64_t k = 0; k < 4; ++k) l[(seed * 131 + uint64_t(k) * 977) % uint64_t(vocab)] = top - 0.4f * float(k);
  return l;
}

// The sampler's three branches (whole distribution, top-k, top-p) and both filters.
std::vector<SamplingOptions> every_branch(double temperature, uint64_t seed) {
  std::vector<SamplingOptions> all;
  for (auto [k, p] : {std::pair<int64_t, double>{0, 1.0}, {40, 1.0}, {0, 0.95}, {40, 0.95}}) {
    SamplingOptions o;
    o.temperature = temperature;
    o.top_k = k;
    o.top_p = p;
    o.seed = seed;
    all.push_back(o);
  }
  return all;
}

// A tiny positive temperature is greedy. Scaling before subtracting the
// maximum (exp(l / T - max / T)) left the top token's exponent as the rounding
// error of l / T, +-512 at T = 1e-9 (worse with the multiply and subtract fused
// into an FMA), and 1/T = inf below ~3e-39 made it NaN: the sampler returned
// token 0 or a random one (red-team M3).
TEST(Sampling, TinyTemperatureIsGreedy) {
  const int64_t vocab = 4096;
  SamplingScratch s;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const std::vector<float> l = realistic_logits(vocab, seed);
    const int32_t greedy = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
    for (double t : {1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-12, 1e-30, 1e-38, 1e-40, 1e-300, 4.9e-324})
      for (const SamplingOptions& o : every_branch(t, seed)) {
        Rng rng = sampling_rng(seed);
        for (int draw = 0; draw < 4; ++draw)
          EXPECT_EQ(sample_token(l.data(), vocab, o, rng, s), greedy)
              << "T " << t << " top_k " << o.top_k << " top_p " << o.top_p << " seed " << seed;
      }
  }
}

// The filtered softmax in double precision: the definition the sampler follows.
std::vector<double> reference_probs(const std::vector<float>& l, const SamplingOptions& o) {
  const int64_t n = int64_t(l.size());
  std::vector<double> p = softmax(l, n, o.temperature);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  int64_t keep = o.top_k > 0 ? std::min(o.top_k, n) : n;
  double kept = 0;
  for (int64_t i = 0; i < keep; ++i) kept += p[order[i]];
  if (o.top_p < 1) {
    double mass = 0;
    int64_t m = 0;
    while (m < keep && mass / kept < o.top_p) mass += p[order[m++]];
    keep = m;
  }
  std::vector<double> q(n, 0.0);
  double z = 0;
  for (int64_t i = 0; i < keep; ++i) z += p[order[i]];
  for (int64_t i = 0; i < keep; ++i) q[order[i]] = p[order[i]] / z;
  return q;
}

// At ordinary temperatures the weights are the same softmax as before the
// subtraction moved, on logits of a trained model's size, in every branch.
TEST(Sampling, ModerateTemperatureFollowsTheDoublePrecisionSoftmax) {
  const int64_t vocab = 48;
  const int draws = 40000;
  const double tol = 0.012;
  std::vector<float> l(vocab);
  for (int64_t v = 0; v < vocab; ++v) l[v] = 13.0f + 2.5f * normal01(11, 3, uint64_t(v));
  for (double t : {0.5, 1.0, 1.7})
    for (SamplingOptions o : every_branch(t, 9)) {
      o.top_k = o.top_k > 0 ? 6 : 0;  // a filter that cuts this small vocabulary
      const std::vector<double> want = reference_probs(l, o), got = frequencies(l, vocab, o, draws);
      for (int64_t v = 0; v < vocab; ++v)
        EXPECT_NEAR(got[v], want[v], tol) << "id " << v << " T " << t << " top_k " << o.top_k << " top_p " << o.top_p;
    }
}

// The whole-distribution draw's contract (sampling.h) as a plain loop, one
// id at a time: the 64-id blocks, each summed in 8 lanes (id i of the block
// into lane i % 8) and the lanes paired, the block sums added in order, then
// the walk over the blocks and inside the chosen one. The order of every add
// is fixed by the source, so however the library's loops are vectorised
// (AVX-512, AVX2, none) their tokens must be these, bit for bit.
int32_t reference_draw(const std::vector<float>& w, double r) {
  const int64_t n = int64_t(w.size()), blocks = (n + 63) / 64;
  const auto weight = [&](int64_t v) { return v < n ? w[size_t(v)] : 0.0f; };
  std::vector<double> sum(static_cast<size_t>(blocks));
  double total = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < 64; ++i) lane[i % 8] += double(weight(b * 64 + i));
    sum[size_t(b)] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    total += sum[size_t(b)];
  }
  double u = r * total;
  for (int64_t b = 0; b < blocks; ++b) {
    if (sum[size_t(b)] > 0 && u - sum[size_t(b)] <= 0) {
      int64_t last = 0;
      for (int64_t i = 0; i < 64; ++i) {
        const double p = weight(b * 64 + i);
        if (p > 0) last = i;
        u -= p;
        if (u <= 0 && p > 0) return int32_t(b * 64 + i);
      }
      return int32_t(b * 64 + last);
    }
    u -= sum[size_t(b)];
  }
  for (int64_t v = n - 1; v >= 0; --v)
    if (w[size_t(v)] > 0) return int32_t(v);
  return 0;
}

// sample_token's weights, one id at a time.
std::vector<float> scalar_weights(const float* logits, int64_t n, double temperature) {
  float mx = logits[0];
  for (int64_t v = 1; v < n; ++v) mx = std::max(mx, logits[v]);
  const float inv_t = float(1.0 / temperature);
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t v = 0; v < n; ++v) w[size_t(v)] = exp_f32((logits[v] - mx) * inv_t);
  return w;
}

TEST(Sampling, WholeDistributionDrawsAsTheReferenceLoop) {
  for (int64_t n : {1, 7, 63, 64, 65, 255, 256, 1000, 1027}) {
    std::vector<float> logits(static_cast<size_t>(n));
    for (int64_t v = 0; v < n; ++v) logits[size_t(v)] = float(std::sin(double(v) * 0.37) * 6.0 + double(v % 5));
    if (n > 300) logits[300] = -std::numeric_limits<float>::infinity();  // a masked id
    for (double t : {0.3, 1.0, 2.5}) {
      SamplingOptions o{.temperature = t, .top_k = 0, .top_p = 1.0, .seed = 7};
      Rng a = sampling_rng(uint64_t(n)), b = sampling_rng(uint64_t(n));
      const std::vector<float> w = scalar_weights(logits.data(), n, t);
      SamplingScratch scratch;
      for (int i = 0; i < 200; ++i)
        ASSERT_EQ(sample_token(logits.data(), n, o, a, scratch), reference_draw(w, b.next_double()))
            << "vocabulary " << n << ", temperature " << t << ", draw " << i;
      EXPECT_EQ(a.next_u64(), b.next_u64()) << "one double drawn per token";
    }
  }
}

// draw_whole_distribution against the reference loop on random rows (weights spread over many orders of
// magnitude, zeros, rows shorter and longer than a block) and on the edges of the contract.
TEST(Sampling, BlockedDrawAsTheReferenceLoop) {
  Rng gen{11, 3, 0};
  for (int row = 0; row < 300; ++row) {
    const int64_t n = 1 + int64_t(gen.next_u64() % 700);
    std::vector<float> w(static_cast<size_t>(n));
    for (float& x : w) {
      const uint64_t k = gen.next_u64() % 10;
      x = k == 0 ? 0.0f : k == 1 ? 1.0f : float(std::exp(-30.0 * gen.next_double()));
    }
    for (int i = 0; i < 50; ++i) {
      const double r = i == 0 ? 0.0 : i == 1 ? std::nextafter(1.0, 0.0) : gen.next_double();
      ASSERT_EQ(draw_whole_distribution(w.data(), n, r), reference_draw(w, r)) << "row " << row << ", r " << r;
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // u exactly on a block boundary: 128 weights of 1, u = 0.5 x 128 = 64 = the first block's sum.
  std::vector<float> ones(128, 1.0f);
  EXPECT_EQ(draw_whole_distribution(ones.data(), 128, 0.5), 63);
  EXPECT_EQ(draw_whole_distribution(ones.data(), 128, std::nextafter(0.5, 1.0)), 64);
  EXPECT_EQ(draw_whole_distribution(ones.data(), 128, 0.0), 0);
  EXPECT_EQ(draw_whole_distribution(ones.data(), 128, std::nextafter(1.0, 0.0)), 127);
  // All the mass in one id, in the middle of a later block, and zero weights around it.
  std::vector<float> one(300, 0.0f);
  one[200] = 0.25f;
  for (double r : {0.0, 0.3, std::nextafter(1.0, 0.0)}) EXPECT_EQ(draw_whole_distribution(one.data(), 300, r), 200);
  // Zero weights are never drawn: u = 0 skips the leading zeros.
  std::vector<float> lead(70, 0.0f);
  lead[66] = lead[69] = 1.0f;
  EXPECT_EQ(draw_whole_distribution(lead.data(), 70, 0.0), 66);
  EXPECT_EQ(draw_whole_distribution(lead.data(), 70, 0.75), 69);
  // A NaN weight makes the total NaN: the row's last id of positive weight.
  std::vector<float> with_nan(150, 0.0f);
  with_nan[3] = 1.0f;
  with_nan[90] = nan;
  with_nan[100] = 1.0f;
  EXPECT_EQ(draw_whole_distribution(with_nan.data(), 150, 0.1), 100);
  EXPECT_EQ(reference_draw(with_nan, 0.1), 100);
  // No positive weight at all: 0.
  std::vector<float> zeros(80, 0.0f);
  EXPECT_EQ(draw_whole_distribution(zeros.data(), 80, 0.5), 0);
  // Rounding that leaves u above 0 inside the chosen block: tiny weights before a 1 at id 62, which the lanes keep
  // (the block sums to about 1 + 2^-48) but the walk loses against u ~ 1, so after the 1 u is still above 0 and
  // the block's last positive weight (63) is drawn.
  std::vector<float> round_up(64, 0x1p-54f);
  round_up[62] = 1.0f;
  const double r_top = std::nextafter(1.0, 0.0);
  EXPECT_EQ(draw_whole_distribution(round_up.data(), 64, r_top), 63);
  EXPECT_EQ(reference_draw(round_up, r_top), 63);
}

// The greedy token is the serial scan's `if (logits[v] > logits[best]) best = v` (the first id of the largest
// logit; NaNs skipped unless first), however the maximum is found: ties, signed zeros, NaNs, infinities.
TEST(Sampling, GreedyIsTheSerialScansArgmax) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<float>> rows = {
      {-0.0f, 0.0f, -1.0f},     {0.0f, -0.0f}, {nan, 3.0f, 5.0f}, {1.0f, nan, 5.0f, 5.0f},     {-inf, -inf, -inf},
      {2.0f, 7.0f, 7.0f, 1.0f}, {inf, inf},    {-inf, nan, -inf}, {-3.0f, -3.0f, -2.0f, -2.0f}};
  for (int64_t n : {33, 1000, 1027}) {  // long rows: the maximum, tied, in every lane and block position
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t v = 0; v < n; ++v) row[size_t(v)] = float(int64_t(std::sin(double(v) * 0.91) * 40.0));
    rows.push_back(row);
  }
  for (const std::vector<float>& row : rows) {
    size_t best = 0;
    for (size_t v = 1; v < row.size(); ++v)
      if (row[v] > row[best]) best = v;
    SamplingOptions o{.temperature = 0, .top_k = 0, .top_p = 1.0, .seed = 1};
    Rng rng = sampling_rng(1);
    SamplingScratch scratch;
    EXPECT_EQ(sample_token(row.data(), int64_t(row.size()), o, rng, scratch), int32_t(best))
        << "a row of " << row.size() << " logits";
  }
}

// Rows sampled together: each row's token and generator state are sample_token's alone, whatever the mix of
// whole-distribution rows (several lanes' worth), greedy and filtered ones.
TEST(Sampling, RowsSampledTogetherAsEachAlone) {
  const int64_t V = 1027, n = 21;
  std::vector<float> logits(static_cast<size_t>(n * V));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i) * 0.013) * 9.0 + double(i % 7));
  std::vector<SamplingOptions> opts(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    SamplingOptions& o = opts[size_t(i)];
    o.temperature = i % 5 == 3 ? 0.0 : 0.5 + 0.1 * double(i);
    o.top_k = i % 7 == 2 ? 20 : 0;
    o.top_p = i % 6 == 4 ? 0.9 : 1.0;
  }
  for (int round = 0; round < 20; ++round) {
    std::vector<Rng> together, alone;
    for (int64_t i = 0; i < n; ++i) {
      together.push_back(sampling_rng(uint64_t(round * 100 + i)));
      alone.push_back(together.back());
    }
    std::vector<const float*> rows;
    std::vector<const SamplingOptions*> options;
    std::vector<Rng*> rngs;
    for (int64_t i = 0; i < n; ++i) {
      rows.push_back(logits.data() + i * V);
      options.push_back(&opts[size_t(i)]);
      rngs.push_back(&together[size_t(i)]);
    }
    std::vector<int32_t> got(static_cast<size_t>(n));
    SamplingScratch scratch, scratch2;
    sample_tokens(n, rows.data(), V, options.data(), rngs.data(), got.data(), scratch);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(got[size_t(i)], sample_token(rows[size_t(i)], V, opts[size_t(i)], alone[size_t(i)], scratch2))
          << "round " << round << ", row " << i;
      EXPECT_EQ(together[size_t(i)].next_u64(), alone[size_t(i)].next_u64()) << "round " << round << ", row " << i;
    }
  }
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
