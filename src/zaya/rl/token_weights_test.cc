// The hook GRPO's loss reaches the model through (ModelWorkspace::
// set_token_weights, cross_entropy_backward's row_scale_T): weights of 1 give
// the unweighted backward's bits, weights of 2 exactly twice its gradient, a
// weight of 0 on a row the gradient of that row masked out (target -1), and a
// negative weight the gradient of the negated loss; in f32 and bf16 GEMMs.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

constexpr int64_t kB = 2, kS = 12, kRows = kB * kS;

std::vector<int32_t> weights_test_tokens(uint64_t stream, int64_t vocab) {
  std::vector<int32_t> out(kRows);
  for (int64_t i = 0; i < kRows; ++i) out[size_t(i)] = int32_t(philox4x32(stream, 0, uint64_t(i))[0] % vocab);
  return out;
}

// The gradient of one forward + backward with these targets and weights (null: none).
std::vector<float> weighted_gradient(bool bf16, const std::vector<int32_t>& targets, const float* w) {
  const ZayaConfig c = testing::model_test_config();
  ZayaModel model(c);
  model.init(5);
  if (bf16) model.enable_bf16_gemms();
  ModelWorkspace ws(c, kB, kS, true);
  if (bf16) ws.reserve_bf16_gemms();
  std::vector<float> grads(size_t(model.params().total_floats()), 0.0f);
  const ModelWeights g = bind_weights(c, model.params(), grads.data());
  const std::vector<int32_t> ids = weights_test_tokens(3, c.real_vocab_size);
  model_forward(model, ws, ids.data(), targets.data(), kB, kS, {});
  ws.set_token_weights(w);
  model_backward(model, ws, g, 1.0f / float(kRows), 0.0f, {});
  return grads;
}

TEST(TokenWeights, ScaleEachRowOfTheCrossEntropyGradient) {
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "f32");
    const std::vector<int32_t> targets = weights_test_tokens(4, testing::model_test_config().real_vocab_size);
    const std::vector<float> plain = weighted_gradient(bf16, targets, nullptr);
    const std::vector<float> ones(kRows, 1.0f), twos(kRows, 2.0f), minus(kRows, -1.0f);
    const std::vector<float> g1 = weighted_gradient(bf16, targets, ones.data());
    EXPECT_EQ(std::memcmp(g1.data(), plain.data(), sizeof(float) * plain.size()), 0);
    const std::vector<float> g2 = weighted_gradient(bf16, targets, twos.data());
    const std::vector<float> gm = weighted_gradient(bf16, targets, minus.data());
    double norm = 0;
    for (size_t i = 0; i < plain.size(); ++i) {
      ASSERT_EQ(g2[i], 2.0f * plain[i]) << i;
      ASSERT_EQ(gm[i], -plain[i]) << i;
      norm += double(plain[i]) * plain[i];
    }
    EXPECT_GT(norm, 0.0);
    // A weight of 0 on every third row: the gradient of those targets masked out.
    std::vector<float> w(kRows, 1.0f);
    std::vector<int32_t> masked = targets;
    for (int64_t t = 0; t < kRows; t += 3) {
      w[size_t(t)] = 0.0f;
      masked[size_t(t)] = -1;
    }
    const std::vector<float> gz = weighted_gradient(bf16, targets, w.data());
    const std::vector<float> gmask = weighted_gradient(bf16, masked, nullptr);
    EXPECT_EQ(std::memcmp(gz.data(), gmask.data(), sizeof(float) * gz.size()), 0);
    EXPECT_NE(std::memcmp(gz.data(), plain.data(), sizeof(float) * gz.size()), 0);
  }
}

}  // namespace
}  // namespace zaya
