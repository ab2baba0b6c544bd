// Requests with one prompt admitted together share its prefill
// (GeneratorOptions::share_prompts): each fork's tokens, log-probabilities,
// routing records and finish reasons equal those it gets when every request
// prefills its own prompt, bit for bit, on f32 and bf16 weights and with
// sliding-window blocks; the prefill is counted once; generate() itself fails
// if any KV page is still referenced once every request has finished. (At
// these widths the engine's prefill gives a row the same bits whatever else
// the step holds, so the comparison can be exact; at `tiny`'s it does not, for
// unforked requests either: docs/rl.md, Speed.)
#include <gtest/gtest.h>

#include "zaya/infer/generator.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::random_tokens;
using testing::same_bits;

// Three prompts (one within a page, one ending inside its second page, one of
// exactly two pages) with `group` samples each, own seeds; one sample asks for
// no tokens, one stops on an id, and the first of the second prompt's (the one
// the others fork from) ends at its first token.
std::vector<GenerationRequest> grouped_requests(const ZayaConfig& c, int64_t group) {
  std::vector<GenerationRequest> out;
  const int64_t lengths[] = {5, 21, 32};
  for (int p = 0; p < 3; ++p) {
    const std::vector<int32_t> prompt = random_tokens(lengths[p], c.real_vocab_size, 40 + p);
    for (int64_t g = 0; g < group; ++g) {
      GenerationRequest r;
      r.prompt = prompt;
      r.max_new_tokens = 9 + g;
      r.sampling.temperature = 1.0;
      r.sampling.top_k = 0;
      r.sampling.top_p = 1.0;
      r.sampling.seed = uint64_t(500 + out.size());
      out.push_back(r);
    }
  }
  out[1].max_new_tokens = 0;
  out[2].stop_ids = {7, 11, 13, 17, 19};
  out[size_t(group)].max_new_tokens = 1;
  return out;
}

void expect_forks_equal_unforked(const InferModel& im, bool bf16_activations, const std::string& what) {
  const std::vector<GenerationRequest> reqs = grouped_requests(im.config(), 4);
  int64_t all_prompts = 0;
  for (const GenerationRequest& r : reqs) all_prompts += int64_t(r.prompt.size());
  // Every request at once (the rollout's shape), and 5 slots with 16-token steps (forks join a leader
  // admitted in an earlier round of admission, slots are reused, prompts are chunked).
  for (const auto& [batch, step] : {std::pair<int64_t, int64_t>{12, 256}, {5, 16}}) {
    GeneratorOptions o;
    o.max_batch = batch;
    o.step_tokens = step;
    o.bf16_activations = bf16_activations;
    o.logprobs = true;
    o.routing = true;
    GeneratorOptions alone = o;
    alone.share_prompts = false;
    GenerationStats st_shared, st_alone;
    const auto shared = generate(im, reqs, o, {}, {}, &st_shared);
    const auto unshared = generate(im, reqs, alone, {}, {}, &st_alone);
    const std::string where = what + ", batch " + std::to_string(batch) + ", step " + std::to_string(step);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(shared[i].tokens, unshared[i].tokens) << where << ", request " << i;
      EXPECT_TRUE(same_bits(shared[i].logprobs, unshared[i].logprobs)) << where << ", request " << i;
      EXPECT_EQ(shared[i].routing, unshared[i].routing) << where << ", request " << i;
      EXPECT_EQ(shared[i].finish, unshared[i].finish) << where << ", request " << i;
      EXPECT_EQ(int64_t(shared[i].logprobs.size()), int64_t(shared[i].tokens.size()));
    }
    EXPECT_EQ(shared[1].finish, FinishReason::kLength);
    EXPECT_TRUE(shared[1].tokens.empty());
    EXPECT_EQ(shared[4].tokens.size(), 1u) << where;  // the leader of the second prompt ended at once
    EXPECT_EQ(st_alone.prompt_tokens, all_prompts) << where;
    EXPECT_EQ(st_alone.shared_prompt_tokens, 0) << where;
    EXPECT_EQ(st_shared.prompt_tokens + st_shared.shared_prompt_tokens, all_prompts) << where;
    EXPECT_EQ(st_shared.generated_tokens, st_alone.generated_tokens) << where;
    if (batch >= int64_t(reqs.size())) {
      // All admitted at once: each prompt is prefilled once (request 1 asks for no tokens: it prefills nothing
      // either way, but it is counted as its own prompt since it never forks).
      EXPECT_EQ(st_shared.prompt_tokens, 5 + 5 + 21 + 32) << where;
    } else {
      EXPECT_GT(st_shared.shared_prompt_tokens, 0) << where;
    }
  }
}

TEST(GeneratorFork, ForksEqualUnforkedF32) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 61);
  auto im = InferModel::from_model(*model, "f32");
  expect_forks_equal_unforked(*im, false, "f32");
}

TEST(GeneratorFork, ForksEqualUnforkedBf16) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 62);
  auto im = InferModel::from_model(*model, "bf16");
  expect_forks_equal_unforked(*im, true, "bf16");
}

// Blocks 0 and 2 slide with a window of 6: the 21- and 32-token prompts release pages before they fork.
TEST(GeneratorFork, ForksEqualUnforkedSliding) {
  ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 63);
  c.sliding_window = 6;
  c.sliding_blocks = {0, 2};
  c.sliding_rope_theta = 10000;
  auto im = InferModel::from_model(*model, c, "f32");
  expect_forks_equal_unforked(*im, false, "sliding");
}

}  // namespace
}  // namespace zaya
