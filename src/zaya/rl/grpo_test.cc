// GRPO's maths: group-normalised advantages (with and without the std
// division), the per-token weights of the clipped loss against a finite
// difference of the loss itself, the clip fraction, and the KL term's weight.
#include "zaya/rl/grpo.h"

#include <gtest/gtest.h>

#include <cmath>

namespace zaya {
namespace {

TEST(Grpo, AdvantagesAreCentredPerGroupAndOptionallyScaled) {
  const std::vector<double> r = {1, 0, 0, 1, 2, 2, 2, 2};
  const std::vector<float> a = group_advantages(r, 4, true);
  EXPECT_NEAR(a[0], 0.5 / (0.5 + 1e-4), 1e-6);
  EXPECT_NEAR(a[1], -0.5 / (0.5 + 1e-4), 1e-6);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(a[size_t(i)], 0.0f);  // equal rewards: no signal
  const std::vector<float> b = group_advantages(r, 4, false);
  EXPECT_FLOAT_EQ(b[0], 0.5f);
  EXPECT_FLOAT_EQ(b[1], -0.5f);
}

// The loss of one token as grpo.h writes it.
double token_loss(double logp, double old, double ref, double adv, double clip, double beta) {
  const double ratio = std::exp(logp - old);
  const double d = ref - logp;
  return -std::min(ratio * adv, std::clamp(ratio, 1 - clip, 1 + clip) * adv) + beta * (std::exp(d) - d - 1);
}

TEST(Grpo, WeightsAreTheNegatedLossGradientPerToken) {
  // dL/dlogp = -w: checked by central differences at ratios inside and outside the clip range, both signs.
  const std::vector<float> logp = {-1.0f, -0.5f, -2.0f, -0.3f, -1.2f, -0.7f};
  const std::vector<float> old = {-1.0f, -0.9f, -1.5f, -0.3f, -1.0f, -0.8f};
  const std::vector<float> ref = {-1.1f, -0.6f, -1.9f, -0.5f, -1.0f, -0.7f};
  const std::vector<float> adv = {1.0f, 1.0f, -1.0f, 0.7f, -0.5f, 2.0f};
  const std::vector<int32_t> targets = {5, 6, 7, -1, 3, 2};
  const double clip = 0.2, beta = 0.3;
  std::vector<float> w(6);
  PolicyStats s;
  policy_token_weights(logp.data(), old.data(), ref.data(), adv.data(), targets.data(), 6, clip, beta, w.data(), s);
  EXPECT_EQ(w[3], 0.0f);  // no target
  EXPECT_EQ(s.tokens, 5.0);
  EXPECT_EQ(s.clipped, 2.0);  // token 1: ratio 1.49 > 1.2 with A > 0; token 2: ratio 0.61 < 0.8 with A < 0
  for (int t : {0, 1, 2, 4, 5}) {
    const double h = 1e-5, x = logp[size_t(t)];
    const double g = (token_loss(x + h, old[size_t(t)], ref[size_t(t)], adv[size_t(t)], clip, beta) -
                      token_loss(x - h, old[size_t(t)], ref[size_t(t)], adv[size_t(t)], clip, beta)) /
                     (2 * h);
    EXPECT_NEAR(-g, w[size_t(t)], 1e-5) << "token " << t;
  }
  double loss = 0;
  for (int t : {0, 1, 2, 4, 5})
    loss += token_loss(logp[size_t(t)], old[size_t(t)], ref[size_t(t)], adv[size_t(t)], clip, beta);
  EXPECT_NEAR(s.loss_sum, loss, 1e-6);
  EXPECT_NEAR(s.ratio_max, std::exp(0.4), 1e-6);
}

TEST(Grpo, OnPolicyRatioIsOneAndNothingIsClipped) {
  const std::vector<float> logp = {-1.0f, -0.5f}, adv = {1.0f, -1.0f};
  const std::vector<int32_t> targets = {1, 2};
  std::vector<float> w(2);
  PolicyStats s;
  policy_token_weights(logp.data(), logp.data(), nullptr, adv.data(), targets.data(), 2, 0.2, 0.0, w.data(), s);
  EXPECT_EQ(w[0], 1.0f);
  EXPECT_EQ(w[1], -1.0f);
  EXPECT_EQ(s.clipped, 0.0);
  EXPECT_EQ(s.ratio_min, 1.0);
  EXPECT_EQ(s.max_abs_shift, 0.0);
}

TEST(Grpo, RowEntropyOfUniformIsLogV) {
  const std::vector<float> z(16, 3.0f);
  EXPECT_NEAR(row_entropy(z.data(), 16), std::log(16.0), 1e-12);
}

}  // namespace
}  // namespace zaya
