#include "zaya/infer/token_logprobs.h"

#include <gtest/gtest.h>

#include <cmath>

namespace zaya {
namespace {

TEST(TokenLogprobs, LogSoftmaxOfChosenAndTopIds) {
  const float logits[] = {1.0f, 3.0f, 2.0f, 3.0f, -1.0f};
  double z = 0;
  for (float l : logits) z += std::exp(double(l));
  const TokenLogprobs lp = token_logprobs(logits, 5, 2, 3);
  EXPECT_NEAR(lp.chosen, 2.0 - std::log(z), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // a tie: the lower id first
  EXPECT_EQ(lp.top[1].first, 3);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_NEAR(lp.top[2].second, lp.chosen, 1e-7);
  // Ids beyond `vocab` (padding rows) are not part of the distribution.
  EXPECT_NEAR(token_logprobs(logits, 2, 0, 0).chosen, 1.0 - std::log(std::exp(1.0) + std::exp(3.0)), 1e-6);
  EXPECT_TRUE(token_logprobs(logits, 5, 0, 0).top.empty());
}

}  // namespace
}  // namespace zaya
