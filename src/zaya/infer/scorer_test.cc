// Log-likelihood scoring, perplexity windows and multiple-choice evaluation
// against log-softmax of the full-sequence forward pass.
#include "zaya/infer/scorer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "zaya/data/test_util.h"
#include "zaya/infer/multiple_choice.h"
#include "zaya/infer/perplexity.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::random_tokens;
using testing::reference_logits;

// log p(seq[i] | seq[:i]) for i in [from, n), from the reference forward.
std::vector<double> reference_logprobs(const ZayaModel& model, const std::vector<int32_t>& seq) {
  const ZayaConfig& c = model.config();
  const std::vector<float> logits = reference_logits(model, seq);
  std::vector<double> lp(seq.size(), 0.0);
  for (size_t i = 1; i < seq.size(); ++i)
    lp[i] = target_logprob(logits.data() + (i - 1) * c.vocab_size, c.real_vocab_size, seq[i]).logprob;
  return lp;
}

TEST(Scorer, TokenLogprobIsLogSoftmax) {
  const float logits[4] = {1.0f, 3.0f, 2.0f, 100.0f};  // the last column is padding
  const TargetLogprob a = target_logprob(logits, 3, 1);
  const double lse = std::log(std::exp(1.0) + std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(a.logprob, 3.0 - lse, 1e-12);
  EXPECT_TRUE(a.greedy);
  EXPECT_FALSE(target_logprob(logits, 3, 2).greedy);
}

// Groups with shared prefixes and 1..4 continuations, through 3 slots and
// 5-token steps (several rounds, chunked prefixes and continuations).
TEST(Scorer, SharedPrefixScoresMatchReference) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 31);
  auto im = InferModel::from_model(*model);
  std::vector<ScoreGroup> groups;
  for (int g = 0; g < 4; ++g) {
    ScoreGroup gr;
    gr.prefix = random_tokens(1 + 4 * g, c.real_vocab_size, 50 + g);
    for (int k = 0; k <= g % 4; ++k)
      gr.continuations.push_back(random_tokens(1 + 3 * k, c.real_vocab_size, 60 + 10 * g + k));
    groups.push_back(gr);
  }
  ScorerOptions o;
  o.max_batch = 3;
  o.step_tokens = 5;
  const auto scores = score_groups(*im, groups, o);
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t k = 0; k < groups[g].continuations.size(); ++k) {
      std::vector<int32_t> seq = groups[g].prefix;
      seq.insert(seq.end(), groups[g].continuations[k].begin(), groups[g].continuations[k].end());
      const std::vector<double> lp = reference_logprobs(*model, seq);
      double want = 0;
      for (size_t i = groups[g].prefix.size(); i < seq.size(); ++i) want += lp[i];
      EXPECT_NEAR(scores[g][k].logprob, want, 1e-4 * (1 + std::fabs(want))) << g << "/" << k;
      EXPECT_EQ(scores[g][k].tokens, int64_t(groups[g].continuations[k].size()));
    }
}

// Counted-token masks: only the counted tokens' log p is summed, counted and
// judged greedy; the others are still context for the tokens after them.
TEST(Scorer, CountedTokensAloneAreScored) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 33);
  auto im = InferModel::from_model(*model);
  std::vector<ScoreGroup> groups;
  for (int g = 0; g < 3; ++g) {
    ScoreGroup gr;
    gr.prefix = random_tokens(2 + 3 * g, c.real_vocab_size, 90 + g);
    for (int k = 0; k < 2; ++k) {
      gr.continuations.push_back(random_tokens(5 + 2 * k + g, c.real_vocab_size, 95 + 10 * g + k));
      std::vector<uint8_t> counted(gr.continuations.back().size(), 0);
      for (size_t t = 0; t < counted.size(); ++t) counted[t] = uint8_t((t + size_t(g + k)) % 3 != 0);
      if (g == 2 && k == 1) std::fill(counted.begin(), counted.end(), uint8_t{0});  // nothing counts
      gr.counted.push_back(counted);
    }
    groups.push_back(gr);
  }
  ScorerOptions o;
  o.max_batch = 3;
  o.step_tokens = 4;
  o.bf16_activations = false;
  const auto scores = score_groups(*im, groups, o);
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t k = 0; k < groups[g].continuations.size(); ++k) {
      std::vector<int32_t> seq = groups[g].prefix;
      seq.insert(seq.end(), groups[g].continuations[k].begin(), groups[g].continuations[k].end());
      const std::vector<double> lp = reference_logprobs(*model, seq);
      double want = 0;
      int64_t counted = 0;
      for (size_t t = 0; t < groups[g].counted[k].size(); ++t)
        if (groups[g].counted[k][t]) {
          want += lp[groups[g].prefix.size() + t];
          ++counted;
        }
      EXPECT_NEAR(scores[g][k].logprob, want, 1e-4 * (1 + std::fabs(want))) << g << "/" << k;
      EXPECT_EQ(scores[g][k].tokens, counted) << g << "/" << k;
    }
  EXPECT_EQ(scores[2][1].tokens, 0);
  EXPECT_EQ(scores[2][1].logprob, 0.0);
  EXPECT_TRUE(scores[2][1].greedy);

  // greedy judges the counted tokens only: the model's own greedy choice
  // after a prefix, then a token it did not choose, which counts or not.
  ScoreGroup gr;
  gr.prefix = random_tokens(4, c.real_vocab_size, 120);
  const std::vector<float> logits = reference_logits(*model, gr.prefix);
  const float* last = logits.data() + (gr.prefix.size() - 1) * size_t(c.vocab_size);
  const int32_t best = int32_t(std::max_element(last, last + c.real_vocab_size) - last);
  // `other`: a token that is not the argmax after prefix + best.
  std::vector<int32_t> seq = gr.prefix;
  seq.push_back(best);
  const std::vector<float> next = reference_logits(*model, seq);
  const float* row = next.data() + (seq.size() - 1) * size_t(c.vocab_size);
  const int32_t other = std::max_element(row, row + c.real_vocab_size) - row == 0 ? 1 : 0;
  gr.continuations = {{best, other}, {best, other}};
  gr.counted = {{1, 0}, {1, 1}};
  const auto s = score_groups(*im, {gr}, o);
  EXPECT_TRUE(s[0][0].greedy);
  EXPECT_FALSE(s[0][1].greedy);

  gr.counted = {{1, 0}};
  testing::expect_error([&] { score_groups(*im, {gr}, o); }, "1 counted-token masks for 2 continuations");
  gr.counted = {{1, 0}, {1}};
  testing::expect_error([&] { score_groups(*im, {gr}, o); },
                        "continuation 1 has 2 tokens but a counted-token mask of 1");
}

TEST(Perplexity, WindowsScoreEveryTokenOnce) {
  std::vector<int32_t> doc(23);
  for (int i = 0; i < 23; ++i) doc[i] = i;
  for (auto [context, stride] : {std::pair{8, 7}, {8, 3}, {23, 22}, {30, 5}, {2, 1}, {5, 1}}) {
    std::vector<int> count(23, 0);
    for (const ScoreGroup& g : perplexity_windows(doc, context, stride)) {
      ASSERT_FALSE(g.prefix.empty());
      ASSERT_LE(int64_t(g.prefix.size() + g.continuations[0].size()), context);
      for (int32_t t : g.continuations[0]) ++count[t];
      // Windows are contiguous slices of the document.
      EXPECT_EQ(g.continuations[0].front(), g.prefix.back() + 1);
    }
    EXPECT_EQ(count[0], 0);
    for (int i = 1; i < 23; ++i) EXPECT_EQ(count[i], 1) << "context " << context << " stride " << stride << " i " << i;
  }
  EXPECT_TRUE(perplexity_windows({5}, 8, 7).empty());
  testing::expect_error([&] { perplexity_windows(doc, 8, 8); }, "stride 8 is invalid; allowed: 1..7");
}

// With a loss mask the windows are the unmasked ones (same prefixes, same
// targets), each selected target counted exactly once, target 0 never, and a
// window with nothing selected left out.
TEST(Perplexity, MaskedWindowsCountEachSelectedTargetOnce) {
  std::vector<int32_t> doc(23);
  for (int i = 0; i < 23; ++i) doc[i] = i;
  std::vector<uint8_t> mask(23, 0);
  for (int i : {0, 1, 2, 9, 10, 11, 12, 20, 22}) mask[i] = 1;
  for (auto [context, stride] : {std::pair{8, 7}, {8, 3}, {30, 5}, {2, 1}}) {
    const std::vector<ScoreGroup> all = perplexity_windows(doc, context, stride);
    const std::vector<ScoreGroup> masked = perplexity_windows(doc, mask, context, stride);
    std::vector<int> count(23, 0);
    size_t a = 0;
    for (const ScoreGroup& g : masked) {
      while (a < all.size() && all[a].prefix != g.prefix) ++a;  // the same window, in order
      ASSERT_LT(a, all.size());
      EXPECT_EQ(g.continuations, all[a].continuations);
      ASSERT_EQ(g.counted.size(), 1u);
      ASSERT_EQ(g.counted[0].size(), g.continuations[0].size());
      int counted = 0;
      for (size_t j = 0; j < g.counted[0].size(); ++j) {
        const int32_t t = g.continuations[0][j];
        EXPECT_EQ(g.counted[0][j], mask[t]) << t;
        count[t] += g.counted[0][j];
        counted += g.counted[0][j];
      }
      EXPECT_GT(counted, 0) << "a window with nothing selected was kept";
    }
    EXPECT_EQ(count[0], 0);
    for (int i = 1; i < 23; ++i) EXPECT_EQ(count[i], mask[i]) << "context " << context << " stride " << stride;
    if (context == 8 && stride == 3) {
      EXPECT_LT(masked.size(), all.size());
    }
  }
  testing::expect_error([&] { perplexity_windows(doc, std::vector<uint8_t>(5, 1), 8, 7); },
                        "a loss mask of 5 tokens for a document of 23");
}

// Documents shorter than the window: the summed loss equals the training
// forward's cross-entropy; a longer one with overlapping windows scores each token once.
TEST(Perplexity, MatchesTrainingCrossEntropy) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 32);
  auto im = InferModel::from_model(*model);
  std::vector<std::vector<int32_t>> docs = {
      random_tokens(30, c.real_vocab_size, 1), random_tokens(12, c.real_vocab_size, 2), {7}};
  double want = 0;
  for (const auto& d : docs) {
    if (d.size() < 2) continue;
    const int64_t S = int64_t(d.size());
    ModelWorkspace ws(c, 1, S, false);
    std::vector<int32_t> targets(S, -1);
    for (int64_t t = 0; t + 1 < S; ++t) targets[t] = d[t + 1];
    want += model_forward(*model, ws, d.data(), targets.data(), 1, S, {}).xent_sum;
  }
  PerplexityOptions o;
  o.context = 32;
  const PerplexityResult r = perplexity(*im, docs, o);
  EXPECT_EQ(r.documents, 2);
  EXPECT_EQ(r.tokens, 29 + 11);
  EXPECT_NEAR(r.nll, want, 1e-4 * want);
  EXPECT_NEAR(r.perplexity(), std::exp(want / 40), 1e-3 * r.perplexity());
  o.context = 10;
  o.stride = 4;
  const PerplexityResult w = perplexity(*im, docs, o);
  EXPECT_EQ(w.tokens, 40);
  EXPECT_GT(w.windows, 2);
}

TEST(MultipleChoice, ReadsTextAndIdItemsLikeTheHarness) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  testing::TempDir dir;
  const std::string path = dir.write("mc.jsonl",
                                     "{\"context\": \"And God said \", \"choices\": [\"unto Moses\", \"x\"], "
                                     "\"gold\": 0, \"id\": \"a\"}\n"
                                     "\n"
                                     "{\"context_ids\": [2, 10], \"choices_ids\": [[11, 12], [13]], \"gold\": 1}\n");
  const auto items = read_mc_items(path, &tok, 512);
  ASSERT_EQ(items.size(), 2u);
  // The context's trailing space moved to the choice; the choice tokens are the
  // tail of encode(context + choice).
  std::vector<int32_t> ctx = tok.encode("And God said");
  std::vector<int32_t> whole = tok.encode("And God said unto Moses");
  EXPECT_EQ(items[0].context.front(), tok.bos_id());
  EXPECT_EQ(std::vector<int32_t>(items[0].context.begin() + 1, items[0].context.end()), ctx);
  EXPECT_EQ(items[0].choices[0], std::vector<int32_t>(whole.begin() + int64_t(ctx.size()), whole.end()));
  EXPECT_EQ(items[0].choice_length[0], 10.0);  // characters of "unto Moses"
  EXPECT_EQ(items[0].id, "a");
  EXPECT_EQ(items[1].context, (std::vector<int32_t>{2, 10}));
  EXPECT_EQ(items[1].choice_length[0], 2.0);  // tokens
  EXPECT_EQ(items[1].gold, 1);
}

TEST(MultipleChoice, RejectsMalformedItems) {
  testing::TempDir dir;
  auto error_for = [&](const std::string& line) {
    const std::string p = dir.write("bad.jsonl", line + "\n");
    return testing::error_of([&] { read_mc_items(p, nullptr, 100); });
  };
  EXPECT_NE(error_for("{\"context_ids\": [2], \"choices_ids\": [[3]]}").find("bad.jsonl:1: \"gold\""),
            std::string::npos);
  EXPECT_NE(error_for("{\"context_ids\": [2], \"choices_ids\": [[3]], \"gold\": 1}").find("\"gold\" = 1 is invalid"),
            std::string::npos);
  EXPECT_NE(error_for("{\"context_ids\": [2], \"choices_ids\": [[300]], \"gold\": 0}").find("not a token id"),
            std::string::npos);
  EXPECT_NE(error_for("{\"context_ids\": [2], \"choices_ids\": [[3]], \"gold\": 0, \"lable\": 1}")
                .find("unknown key \"lable\""),
            std::string::npos);
  EXPECT_NE(error_for("{\"context\": \"a\", \"choices\": [\"b\"], \"gold\": 0}").find("need a tokenizer"),
            std::string::npos);
  EXPECT_NE(error_for("{\"context_ids\": [2], \"choices_ids\": [[]], \"gold\": 0}").find("is empty"),
            std::string::npos);
  EXPECT_NE(error_for("[1, 2]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(error_for("{oops").find("invalid JSON"), std::string::npos);
}

// acc and acc_norm follow the choices' summed and per-length log-likelihoods.
TEST(MultipleChoice, AccuracyFollowsLogLikelihoods) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 33);
  auto im = InferModel::from_model(*model);
  std::vector<McItem> items;
  for (int i = 0; i < 6; ++i) {
    McItem it;
    it.context = random_tokens(3 + i, c.real_vocab_size, 70 + i);
    for (int k = 0; k < 3; ++k) {
      it.choices.push_back(random_tokens(1 + (i + k) % 3, c.real_vocab_size, 80 + 3 * i + k));
      it.choice_length.push_back(double(it.choices.back().size()));
    }
    it.gold = i % 3;
    items.push_back(it);
  }
  const McSummary s = evaluate_multiple_choice(*im, items, ScorerOptions{});
  double hits = 0, hits_norm = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<double> lp, norm;
    for (size_t k = 0; k < 3; ++k) {
      std::vector<int32_t> seq = items[i].context;
      seq.insert(seq.end(), items[i].choices[k].begin(), items[i].choices[k].end());
      const std::vector<double> ref = reference_logprobs(*model, seq);
      double sum = 0;
      for (size_t t = items[i].context.size(); t < seq.size(); ++t) sum += ref[t];
      lp.push_back(sum);
      norm.push_back(sum / items[i].choice_length[k]);
      EXPECT_NEAR(s.per_item[i].logprob[k], sum, 1e-4 * (1 + std::fabs(sum)));
    }
    hits += argmax_first(lp) == items[i].gold;
    hits_norm += argmax_first(norm) == items[i].gold;
  }
  EXPECT_DOUBLE_EQ(s.acc, hits / 6);
  EXPECT_DOUBLE_EQ(s.acc_norm, hits_norm / 6);
  EXPECT_NEAR(s.acc_stderr, std::sqrt(s.acc * (1 - s.acc) / 5), 1e-12);
}

}  // namespace
}  // namespace zaya
