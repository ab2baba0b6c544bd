// zaya eval's runs: each input scored as the perplexity and multiple-choice
// calls score it, with the document limits applied and the time measured.
#include "zaya/infer/evaluation.h"

#include <gtest/gtest.h>

#include "zaya/data/shard_writer.h"
#include "zaya/data/test_util.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::random_tokens;

ZayaConfig eval_config() {
  ZayaConfig c = testing::small_test_config();
  c.vocab_size = 512;
  c.real_vocab_size = 400;  // the test tokenizer's pieces
  return c;
}

PerplexityOptions small_windows() {
  PerplexityOptions o;
  o.context = 24;
  return o;
}

TEST(Evaluation, TextPerplexityScoresTheFilesDocuments) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  auto model = testing::random_model(eval_config(), 71);
  auto im = InferModel::from_model(*model);
  testing::TempDir dir;
  const std::string path = dir.write("t.txt", "In the beginning God created.\n\nAnd the earth.\n\nAnd God said.\n");
  const DocumentLimits two{2, 0};
  const PerplexityRun run = text_perplexity(*im, tok, path, two, small_windows());
  int64_t bytes = 0;
  const PerplexityResult want = perplexity(*im, text_documents(path, tok, 2, 0, &bytes), small_windows());
  EXPECT_EQ(run.result.documents, 2);
  EXPECT_EQ(run.result.tokens, want.tokens);
  EXPECT_DOUBLE_EQ(run.result.nll, want.nll);
  EXPECT_EQ(run.bytes, bytes);
  EXPECT_GT(run.seconds, 0);
  EXPECT_DOUBLE_EQ(run.tokens_per_second(), double(run.result.tokens) / run.seconds);
}

TEST(Evaluation, ShardPerplexityHonoursTheTokenLimit) {
  const ZayaConfig c = eval_config();
  auto model = testing::random_model(c, 72);
  auto im = InferModel::from_model(*model);
  testing::TempDir dir;
  std::vector<std::vector<int32_t>> docs;
  {
    ShardWriter w(dir.file("val"), uint32_t(c.real_vocab_size));
    for (int d = 0; d < 4; ++d) {
      docs.push_back(random_tokens(10 + 5 * d, c.real_vocab_size, 80 + d));
      w.add_document(docs.back());
    }
    w.finish();
  }
  // Documents are added until 20 tokens are reached: the first two (10 + 15).
  const PerplexityRun run = shard_perplexity(*im, dir.file("val"), DocumentLimits{0, 20}, small_windows());
  const PerplexityResult want = perplexity(*im, {docs[0], docs[1]}, small_windows());
  EXPECT_EQ(run.result.documents, 2);
  EXPECT_EQ(run.result.tokens, 9 + 14);
  EXPECT_DOUBLE_EQ(run.result.nll, want.nll);
  EXPECT_EQ(run.bytes, 0);
  EXPECT_GT(run.seconds, 0);
}

TEST(Evaluation, MultipleChoiceFileScoresItsItems) {
  const ZayaConfig c = eval_config();
  auto model = testing::random_model(c, 73);
  auto im = InferModel::from_model(*model);
  testing::TempDir dir;
  const std::string path =
      dir.write("mc.jsonl",
                "{\"context_ids\": [2, 10], \"choices_ids\": [[11, 12], [13]], \"gold\": 1}\n"
                "{\"context_ids\": [2, 20, 21], \"choices_ids\": [[22], [23], [24]], \"gold\": 0}\n"
                "{\"context_ids\": [2], \"choices_ids\": [[30], [31]], \"gold\": 0}\n");
  const MultipleChoiceRun run = multiple_choice_file(*im, nullptr, path, 2, ScorerOptions{});
  ASSERT_EQ(run.items.size(), 2u);
  const McSummary want = evaluate_multiple_choice(*im, read_mc_items(path, nullptr, c.vocab_size, 2), ScorerOptions{});
  EXPECT_EQ(run.summary.items, 2);
  EXPECT_DOUBLE_EQ(run.summary.acc, want.acc);
  EXPECT_DOUBLE_EQ(run.summary.acc_norm, want.acc_norm);
  ASSERT_EQ(run.summary.per_item.size(), 2u);
  EXPECT_EQ(run.summary.per_item[1].logprob, want.per_item[1].logprob);
  EXPECT_GT(run.seconds, 0);
}

}  // namespace
}  // namespace zaya
