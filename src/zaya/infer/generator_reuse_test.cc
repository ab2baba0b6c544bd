// Generator (generator.h): one engine kept from call to call gives each call
// the results of a fresh generate() bit for bit (tokens, log-probabilities,
// routing records, finish reasons), reads the weights each call is given (an
// RL rollout after an update samples from the new weights), and is rebuilt
// only when a call does not fit it.
#include <gtest/gtest.h>

#include <cstring>

#include "zaya/infer/generator.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::random_tokens;

// Each of `groups` prompts `group` times (the forks of prompt sharing), sampled, with log-probs and routing.
std::vector<GenerationRequest> rollout_like(const ZayaConfig& c, int64_t groups, int64_t group, int64_t prompt_len,
                                            int64_t max_new, uint64_t seed) {
  std::vector<GenerationRequest> reqs;
  for (int64_t p = 0; p < groups; ++p) {
    const std::vector<int32_t> prompt = random_tokens(prompt_len + p, c.real_vocab_size, seed + uint64_t(p));
    for (int64_t g = 0; g < group; ++g) {
      GenerationRequest r;
      r.prompt = prompt;
      r.max_new_tokens = max_new;
      r.sampling.temperature = 1.0;
      r.sampling.top_k = 0;
      r.sampling.top_p = 1.0;
      r.sampling.seed = seed + uint64_t(reqs.size());
      reqs.push_back(r);
    }
  }
  return reqs;
}

GeneratorOptions rollout_options(int64_t batch) {
  GeneratorOptions o;
  o.max_batch = batch;
  o.logprobs = true;
  o.routing = true;
  return o;
}

void expect_same(const std::vector<GenerationResult>& got, const std::vector<GenerationResult>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].tokens, want[k].tokens) << "request " << k;
    EXPECT_EQ(got[k].finish, want[k].finish) << "request " << k;
    EXPECT_EQ(got[k].routing, want[k].routing) << "request " << k;
    ASSERT_EQ(got[k].logprobs.size(), want[k].logprobs.size()) << "request " << k;
    EXPECT_EQ(std::memcmp(got[k].logprobs.data(), want[k].logprobs.data(), sizeof(float) * got[k].logprobs.size()), 0)
        << "request " << k << ": log-probabilities differ in some bit";
  }
}

TEST(GeneratorReuse, EachCallEqualsAFreshGenerateAndReadsTheWeightsItIsGiven) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 41);
  Generator gen;
  const std::vector<GenerationRequest> first = rollout_like(c, 3, 4, 6, 10, 7);
  std::vector<GenerationResult> before;
  {
    auto im = InferModel::from_model(*model);
    before = gen.run(*im, first, rollout_options(12));
    expect_same(before, generate(*im, first, rollout_options(12)));
  }
  // An update in place (as the trainer's optimizer step), then the decoder built again over the same arena.
  float* w = model->param_data();
  for (int64_t i = 0; i < model->params().total_floats(); ++i) w[i] *= 1.25f;
  auto im = InferModel::from_model(*model);
  const std::vector<GenerationResult> after = gen.run(*im, first, rollout_options(12));
  expect_same(after, generate(*im, first, rollout_options(12)));
  bool differs = false;  // the new weights were read: some log-probability moved
  for (size_t k = 0; k < after.size(); ++k)
    differs = differs || after[k].logprobs.empty() || before[k].logprobs.empty() ||
              after[k].logprobs[0] != before[k].logprobs[0];
  EXPECT_TRUE(differs);
  // Shorter prompts (a shorter context): the same engine runs them, and its finish rule is the call's context.
  const std::vector<GenerationRequest> shorter = rollout_like(c, 3, 4, 2, 8, 9);
  expect_same(gen.run(*im, shorter, rollout_options(12)), generate(*im, shorter, rollout_options(12)));
  GeneratorOptions capped = rollout_options(12);
  capped.max_context = 7;  // the prompts of 2..4 tokens end at the cap (FinishReason::kContext)
  const std::vector<GenerationResult> at_cap = gen.run(*im, shorter, capped);
  expect_same(at_cap, generate(*im, shorter, capped));
  EXPECT_EQ(at_cap[0].finish, FinishReason::kContext);
  EXPECT_EQ(gen.engines_built(), 1);
  // Another batch size does not fit: a new engine.
  expect_same(gen.run(*im, first, rollout_options(5)), generate(*im, first, rollout_options(5)));
  EXPECT_EQ(gen.engines_built(), 2);
}

}  // namespace
}  // namespace zaya
