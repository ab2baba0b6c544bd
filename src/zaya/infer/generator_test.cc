// Generation with the cached decoder: identical tokens to the full-sequence
// generator, batching that does not change any request's text, stop ids,
// cancellation, limits, padding ids that are never sampled, and the reported rates.
#include "zaya/infer/generator.h"

#include <gtest/gtest.h>

#include "zaya/infer/full_sequence.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::random_tokens;

TEST(Generator, SameTokensAsFullSequenceGenerator) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 21);
  auto im = InferModel::from_model(*model);
  const std::vector<int32_t> prompt = random_tokens(7, c.real_vocab_size, 1);
  for (double temperature : {0.0, 0.9}) {
    GenerateOptions full;
    full.max_new_tokens = 25;
    full.sampling.temperature = temperature;
    full.sampling.top_k = 50;
    full.sampling.top_p = 0.9;
    full.sampling.seed = 5;
    const std::vector<int32_t> want = generate_full_sequence(*model, prompt, full);
    GenerationRequest r;
    r.prompt = prompt;
    r.max_new_tokens = 25;
    r.sampling = full.sampling;
    const auto got = generate(*im, {r}, GeneratorOptions{});
    EXPECT_EQ(got[0].tokens, want) << "temperature " << temperature;
    EXPECT_EQ(got[0].finish, FinishReason::kLength);
  }
}

// Five requests (different prompt lengths, seeds and limits) through two slots
// with 8-token steps: chunked prefill, continuous batching, slots reused. Each
// request's tokens equal those it gets alone.
TEST(Generator, BatchingDoesNotChangeAnyRequest) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 22);
  auto im = InferModel::from_model(*model);
  std::vector<GenerationRequest> reqs;
  const int64_t prompt_lengths[] = {3, 19, 1, 11, 6}, limits[] = {9, 4, 12, 0, 7};
  for (int i = 0; i < 5; ++i) {
    GenerationRequest r;
    r.prompt = random_tokens(prompt_lengths[i], c.real_vocab_size, 30 + i);
    r.max_new_tokens = limits[i];
    r.sampling.temperature = 1.0;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0;
    r.sampling.seed = uint64_t(100 + i);
    reqs.push_back(r);
  }
  GeneratorOptions batched;
  batched.max_batch = 2;
  batched.step_tokens = 8;
  std::vector<size_t> finish_order;
  GenerationStats st;
  const auto together = generate(
      *im, reqs, batched, {}, [&](size_t i, const GenerationResult&) { finish_order.push_back(i); }, &st);
  ASSERT_EQ(finish_order.size(), 5u);
  EXPECT_EQ(st.prompt_tokens, 3 + 19 + 1 + 11 + 6);
  EXPECT_EQ(st.generated_tokens, 9 + 4 + 12 + 0 + 7);
  for (size_t i = 0; i < reqs.size(); ++i) {
    GeneratorOptions alone;
    alone.step_tokens = 8;
    const auto single = generate(*im, {reqs[i]}, alone);
    EXPECT_EQ(together[i].tokens, single[0].tokens) << "request " << i;
    EXPECT_EQ(int64_t(together[i].tokens.size()), limits[i]);
  }
}

TEST(Generator, StopsOnStopIdsCallbacksAndContext) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 23);
  auto im = InferModel::from_model(*model);
  GenerationRequest r;
  r.prompt = random_tokens(4, c.real_vocab_size, 2);
  r.max_new_tokens = 30;
  r.sampling.temperature = 0;
  const std::vector<int32_t> free_run = generate(*im, {r}, GeneratorOptions{})[0].tokens;
  ASSERT_EQ(free_run.size(), 30u);
  // Stop on the 6th token's id (the first time it appears): the stop id is kept.
  r.stop_ids = {free_run[5]};
  const auto stopped = generate(*im, {r}, GeneratorOptions{})[0];
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  const size_t first = std::find(free_run.begin(), free_run.end(), free_run[5]) - free_run.begin();
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(free_run.begin(), free_run.begin() + first + 1));
  // The callback cancels after 3 tokens.
  r.stop_ids.clear();
  int seen = 0;
  const auto cancelled = generate(*im, {r}, GeneratorOptions{}, [&](size_t, int32_t) { return ++seen < 3; })[0];
  EXPECT_EQ(cancelled.finish, FinishReason::kCancelled);
  EXPECT_EQ(cancelled.tokens.size(), 3u);
  // A context of 10 tokens: 4 prompt tokens leave room for 7 generated (the last is never fed).
  GeneratorOptions small;
  small.max_context = 10;
  const auto ctx = generate(*im, {r}, small)[0];
  EXPECT_EQ(ctx.finish, FinishReason::kContext);
  EXPECT_EQ(ctx.tokens, std::vector<int32_t>(free_run.begin(), free_run.begin() + 7));
}

// The padded rows of the vocabulary get the largest logits; they are still never sampled.
TEST(Generator, NeverSamplesPaddingIds) {
  ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 24);
  float* embed = model->param_data() + model->params().at("model.embed_tokens.weight").offset;
  for (int64_t v = c.real_vocab_size; v < c.vocab_size; ++v)
    for (int64_t i = 0; i < c.hidden; ++i) embed[v * c.hidden + i] = 50.0f * float(1 + (i % 3));
  auto im = InferModel::from_model(*model);
  GenerationRequest r;
  r.prompt = random_tokens(3, c.real_vocab_size, 3);
  r.max_new_tokens = 40;
  r.sampling.temperature = 2.0;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0;
  GeneratorOptions o;
  o.sample_vocab = 250;  // a tokenizer smaller than the model's real vocabulary
  const std::vector<GenerationResult> out = generate(*im, {r}, o);
  ASSERT_EQ(out[0].tokens.size(), 40u);
  for (int32_t id : out[0].tokens) EXPECT_LT(id, 250);
}

TEST(Generator, StatsRates) {
  GenerationStats st;
  EXPECT_EQ(st.prefill_tokens_per_second(), 0);  // nothing timed
  EXPECT_EQ(st.decode_ms_per_step(), 0);
  EXPECT_EQ(st.decode_tokens_per_second(), 0);
  st.prompt_tokens = 300;
  st.prefill_seconds = 1.5;
  st.decode_steps = 40;
  st.decode_tokens = 160;
  st.decode_seconds = 2;
  EXPECT_DOUBLE_EQ(st.prefill_tokens_per_second(), 200);
  EXPECT_DOUBLE_EQ(st.decode_ms_per_step(), 50);
  EXPECT_DOUBLE_EQ(st.decode_tokens_per_second(), 80);
}

TEST(Generator, RejectsBadRequests) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 25);
  auto im = InferModel::from_model(*model);
  GenerationRequest r;
  testing::expect_error([&] { generate(*im, {r}, GeneratorOptions{}); }, "request 0: the prompt is empty");
  r.prompt = {int32_t(c.vocab_size)};
  testing::expect_error([&] { generate(*im, {r}, GeneratorOptions{}); }, "outside the vocabulary");
  r.prompt = random_tokens(c.max_position, c.real_vocab_size, 1);
  testing::expect_error([&] { generate(*im, {r}, GeneratorOptions{}); }, "leaves no room");
  r.prompt = {5};
  r.sampling.top_p = 0;
  testing::expect_error([&] { generate(*im, {r}, GeneratorOptions{}); }, "--top-p");
}

// Why a request cannot run, without running it; generate() refuses the same.
TEST(Generator, RequestErrorsSayWhy) {
  const ZayaConfig c = testing::small_test_config();  // max_position 128, vocab 320
  GenerationRequest r;
  r.prompt = {2, 5, 7};
  EXPECT_EQ(generation_request_error(r, c), "");
  EXPECT_EQ(generation_request_error(r, c, 4), "");
  EXPECT_EQ(generation_request_error(r, c, 3), "the prompt (3 tokens) leaves no room under --max-context (3)");
  r.max_new_tokens = -2;
  EXPECT_EQ(generation_request_error(r, c), "max_new_tokens -2 is negative; allowed: >= 0");
  r.max_new_tokens = 0;
  r.sampling.top_k = -1;
  EXPECT_EQ(generation_request_error(r, c), "--top-k -1 is invalid; allowed: >= 0 (0 disables)");
  r.sampling.top_k = 0;
  r.prompt = random_tokens(c.max_position, c.real_vocab_size, 1);
  EXPECT_EQ(generation_request_error(r, c),
            "the prompt (128 tokens) leaves no room under max_position_embeddings (128)");
  r.prompt = {2, -1};
  EXPECT_EQ(generation_request_error(r, c), "prompt token -1 at position 1 is outside the vocabulary 0..319");
  r.prompt.clear();
  EXPECT_EQ(generation_request_error(r, c), "the prompt is empty (it needs at least the BOS token)");

  auto model = testing::random_model(c, 26);
  auto im = InferModel::from_model(*model);
  r.prompt = {2, 5, 7};
  GeneratorOptions capped;
  capped.max_context = 3;
  testing::expect_error([&] { generate(*im, {r}, capped); },
                        "request 0: the prompt (3 tokens) leaves no room under --max-context (3)");
  // The stats say which context limit the engine held.
  r.max_new_tokens = 4;
  GenerationStats st;
  generate(*im, {r}, GeneratorOptions{}, {}, {}, &st);
  EXPECT_EQ(st.context, 3 + 4);
  capped.max_context = 5;
  generate(*im, {r}, capped, {}, {}, &st);
  EXPECT_EQ(st.context, 5);
}

}  // namespace
}  // namespace zaya
