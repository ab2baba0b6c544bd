// run_rollout's samples (rollout.h): each ends at the first token whose
// decoded text holds a stop string (or at its token limit), and its text is
// the decoded tokens cut before the first stop string, whether the rollout
// decoded it at the end, kept the text its stop check decoded, or took one
// the screen remembered from an earlier call.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/data/test_util.h"
#include "zaya/infer/test_util.h"
#include "zaya/rl/rollout.h"

namespace zaya {
namespace {

TEST(Rollout, SamplesEndAtTheFirstStopStringAndKeepTheirText) {
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const ZayaConfig c = testing::small_test_config();
  const std::unique_ptr<ZayaModel> model = testing::random_model(c, 5);
  const std::unique_ptr<InferModel> im = InferModel::from_model(*model, "f32");
  const int64_t V = std::min<int64_t>(c.real_vocab_size, tok.vocab_size());
  std::vector<RlPrompt> prompts(3);
  for (size_t p = 0; p < prompts.size(); ++p)
    for (int64_t i = 0; i < 4 + int64_t(p); ++i)
      prompts[p].ids.push_back(int32_t(philox4x32(7, p, uint64_t(i))[0] % uint64_t(V)));
  std::vector<const RlPrompt*> step = {&prompts[0], &prompts[1], &prompts[2]};
  RolloutSettings s;
  s.sampling = {1.0, 0, 1.0, 0};
  s.max_new_tokens = 10;
  s.bf16_activations = false;
  int64_t at_stop = 0, at_limit = 0;
  for (const std::vector<std::string>& stops :
       std::vector<std::vector<std::string>>{{"e"}, {"th", "a"}, {"s", "o"}, {"zzzz"}}) {
    s.stop_strings = stops;
    StopScreen screen(tok, stops);  // kept from call to call, as a run keeps it: its remembered texts are used
    std::vector<std::string> first_texts;
    for (uint64_t seed : {1, 50, 1}) {
      const std::vector<RolloutSample> samples = run_rollout(*im, tok, step, 4, s, seed, nullptr, nullptr, &screen);
      std::vector<std::string> texts;
      for (const RolloutSample& r : samples) texts.push_back(r.text);
      if (seed == 1 && first_texts.empty()) first_texts = texts;
      if (seed == 1) {
        EXPECT_EQ(texts, first_texts);  // the same samples again, from the remembered texts
      }
      ASSERT_EQ(samples.size(), 12u);
      for (const RolloutSample& r : samples) {
        ASSERT_FALSE(r.tokens.empty());
        EXPECT_EQ(r.text, cut_at_stop(tok.decode(r.tokens), stops));
        const std::vector<int32_t> before(r.tokens.begin(), r.tokens.end() - 1);
        EXPECT_FALSE(completes_stop(tok, before, stops));  // it ended at the first such token
        if (completes_stop(tok, r.tokens, stops)) {
          ++at_stop;
        } else {
          EXPECT_EQ(int64_t(r.tokens.size()), s.max_new_tokens);
          ++at_limit;
        }
      }
    }
  }
  EXPECT_GT(at_stop, 10);  // both ends were taken
  EXPECT_GT(at_limit, 10);
}

}  // namespace
}  // namespace zaya
