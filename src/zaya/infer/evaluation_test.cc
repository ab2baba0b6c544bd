// zaya eval's runs: each input scored as the perplexity and multiple-choice
// calls score it, with the document limits applied and the time measured.
#include "zaya/infer/evaluation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "zaya/data/loss_mask.h"
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

// A shard written as `zaya data sft` writes one: PREFIX.{bin,idx} and the loss
// mask PREFIX.mask.
void write_masked_shard(const std::string& prefix, uint32_t vocab, const std::vector<std::vector<int32_t>>& docs,
                        const std::vector<std::vector<uint8_t>>& masks) {
  ShardWriter w(prefix, vocab);
  LossMaskWriter m(prefix);
  for (size_t d = 0; d < docs.size(); ++d) {
    w.add_document(docs[d]);
    m.add_document(docs[d], masks[d]);
  }
  m.prepare();
  m.commit();
  w.finish();
}

// log p(doc[t] | its context) for t in [1, n), the context being what the
// perplexity window that scores t holds before it; each token is its own
// request to the unmasked scorer.
std::vector<double> per_token_logprobs(const InferModel& im, const std::vector<int32_t>& doc,
                                       const PerplexityOptions& o) {
  std::vector<ScoreGroup> groups;
  for (const ScoreGroup& w : perplexity_windows(doc, o.context, o.stride)) {
    const std::vector<int32_t>& cont = w.continuations[0];
    for (size_t j = 0; j < cont.size(); ++j) {
      ScoreGroup g;
      g.prefix = w.prefix;
      g.prefix.insert(g.prefix.end(), cont.begin(), cont.begin() + std::ptrdiff_t(j));
      g.continuations = {{cont[j]}};
      groups.push_back(g);
    }
  }
  const auto scores = score_groups(im, groups, o.scorer);
  EXPECT_EQ(scores.size() + 1, doc.size());
  std::vector<double> lp(doc.size(), 0.0);
  for (size_t t = 1; t < doc.size(); ++t) lp[t] = scores[t - 1][0].logprob;
  return lp;
}

// A shard with a loss mask scores exactly the targets the mask selects (token
// t of a document counts when its bit is set, the sampler's rule; a
// document's first token is never a target), through windows shorter than
// the documents; --no-loss-mask scores every target.
TEST(Evaluation, ShardPerplexityScoresOnlyTheMaskedTargets) {
  const ZayaConfig c = eval_config();
  auto model = testing::random_model(c, 74);
  auto im = InferModel::from_model(*model);
  testing::TempDir dir;
  std::vector<std::vector<int32_t>> docs;
  std::vector<std::vector<uint8_t>> masks;
  for (int d = 0; d < 5; ++d) {
    docs.push_back(random_tokens(12 + 7 * d, c.real_vocab_size, 120 + d));
    // A prompt of 4 + d tokens that does not count, then an answer that does.
    masks.emplace_back(docs.back().size(), uint8_t{0});
    std::fill(masks.back().begin() + 4 + d, masks.back().end(), uint8_t{1});
  }
  masks[1][0] = 1;                                          // a selected first token: still never a target
  std::fill(masks[2].begin(), masks[2].end(), uint8_t{0});  // only the first token selected: nothing scored
  masks[2][0] = 1;
  masks[3][10] = 0;  // a hole in the answer
  write_masked_shard(dir.file("val"), uint32_t(c.real_vocab_size), docs, masks);

  PerplexityOptions o = small_windows();  // 24-token windows: the longer documents take several
  o.stride = 9;
  o.scorer.bf16_activations = false;
  const DocumentLimits all{0, 0};
  const PerplexityRun run = shard_perplexity(*im, dir.file("val"), all, o);

  double want = 0, want_full = 0;
  int64_t targets = 0, selected = 0, tokens = 0;
  for (size_t d = 0; d < docs.size(); ++d) {
    const std::vector<double> lp = per_token_logprobs(*im, docs[d], o);
    for (size_t t = 0; t < docs[d].size(); ++t) {
      selected += masks[d][t];
      want_full -= lp[t];
      if (t >= 1 && masks[d][t]) {
        want -= lp[t];
        ++targets;
      }
    }
    tokens += int64_t(docs[d].size());
  }
  EXPECT_EQ(run.result.documents, 5);
  EXPECT_EQ(run.result.tokens, targets);
  EXPECT_NEAR(run.result.nll, want, 1e-5 * want);
  EXPECT_EQ(run.loss_mask.path, loss_mask_path(dir.file("val")));
  EXPECT_TRUE(run.loss_mask.applied);
  EXPECT_EQ(run.loss_mask.selected, selected);
  EXPECT_EQ(run.loss_mask.tokens, tokens);

  // Without the mask: every target, a different loss, what perplexity() gives the bare documents.
  const PerplexityRun full = shard_perplexity(*im, dir.file("val"), all, o, false);
  const PerplexityResult bare = perplexity(*im, docs, o);
  EXPECT_EQ(full.result.tokens, tokens - 5);
  EXPECT_EQ(full.result.tokens, bare.tokens);
  EXPECT_DOUBLE_EQ(full.result.nll, bare.nll);
  EXPECT_NEAR(full.result.nll, want_full, 1e-5 * want_full);
  // The difference is the loss of the targets the mask drops (a random model: the means are close, not equal).
  EXPECT_GT(full.result.nll - run.result.nll, 0.5 * double(full.result.tokens - run.result.tokens));
  EXPECT_NE(full.result.mean_nll(), run.result.mean_nll());
  EXPECT_EQ(full.loss_mask.path, loss_mask_path(dir.file("val")));
  EXPECT_FALSE(full.loss_mask.applied);

  // The document limits apply to the masks too: the first two documents.
  const PerplexityRun two = shard_perplexity(*im, dir.file("val"), DocumentLimits{2, 0}, o);
  const int64_t want_two = int64_t(docs[0].size()) - 4 + int64_t(docs[1].size()) - 5;
  EXPECT_EQ(two.result.tokens, want_two);
  EXPECT_EQ(two.loss_mask.selected, want_two + 1);  // and document 1's selected first token
}

// A mask written for other tokens is refused by name, as training refuses it;
// --no-loss-mask does not read it.
TEST(Evaluation, ShardPerplexityRefusesAMaskOfAnotherShard) {
  const ZayaConfig c = eval_config();
  auto model = testing::random_model(c, 75);
  auto im = InferModel::from_model(*model);
  testing::TempDir dir;
  std::vector<std::vector<int32_t>> docs = {random_tokens(10, c.real_vocab_size, 130),
                                            random_tokens(14, c.real_vocab_size, 131)};
  const std::vector<std::vector<uint8_t>> masks = {std::vector<uint8_t>(10, 1), std::vector<uint8_t>(14, 1)};
  write_masked_shard(dir.file("val"), uint32_t(c.real_vocab_size), docs, masks);
  docs[1][3] = (docs[1][3] + 1) % int32_t(c.real_vocab_size);  // the same length, other tokens
  write_masked_shard(dir.file("other"), uint32_t(c.real_vocab_size), docs, masks);
  std::filesystem::copy_file(loss_mask_path(dir.file("other")), loss_mask_path(dir.file("val")),
                             std::filesystem::copy_options::overwrite_existing);
  testing::expect_data_error([&] { shard_perplexity(*im, dir.file("val"), DocumentLimits{}, small_windows()); },
                             {loss_mask_path(dir.file("val")), "token checksum", "another build of the shard"});
  const PerplexityRun run = shard_perplexity(*im, dir.file("val"), DocumentLimits{}, small_windows(), false);
  EXPECT_EQ(run.result.tokens, 9 + 13);
  EXPECT_FALSE(run.loss_mask.applied);
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
