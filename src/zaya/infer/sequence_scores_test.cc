// zaya score's numbers: the cached decoder's mean losses equal the
// full-sequence forward's, and the logits file holds every logit.
#include "zaya/infer/sequence_scores.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::random_tokens;

TEST(SequenceScores, CachedLossesEqualTheFullSequenceForward) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 61);
  auto im = InferModel::from_model(*model);
  const std::vector<std::vector<int32_t>> seqs = {random_tokens(9, c.real_vocab_size, 1),
                                                  random_tokens(2, c.real_vocab_size, 2),
                                                  random_tokens(40, c.real_vocab_size, 3)};
  const std::vector<SequenceScore> want = score_sequences(*model, seqs, false);
  const std::vector<SequenceScore> got = score_sequences_cached(*im, seqs, "ids.json");
  ASSERT_EQ(got.size(), seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, int64_t(seqs[i].size()) - 1);
    EXPECT_NEAR(got[i].mean_loss, want[i].mean_loss, 1e-4 * want[i].mean_loss) << "sequence " << i;
  }
  EXPECT_EQ(testing::error_of([&] {
              score_sequences_cached(*im, {seqs[0], {5}}, "ids.json");
            }),
            "ids.json: sequence 1 has 1 tokens; scoring needs at least 2");
}

TEST(SequenceScores, LogitsFileHoldsEveryLogit) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 62);
  const std::vector<std::vector<int32_t>> seqs = {random_tokens(3, c.real_vocab_size, 4),
                                                  random_tokens(5, c.real_vocab_size, 5)};
  const std::vector<SequenceScore> scores = score_sequences(*model, seqs, true);
  testing::TempDir dir;
  write_logits_json(dir.file("logits.json"), scores, c.real_vocab_size);
  const nlohmann::json j = nlohmann::json::parse(testing::read_file(dir.file("logits.json")));
  ASSERT_EQ(j.size(), 2u);
  for (size_t i = 0; i < seqs.size(); ++i) {
    ASSERT_EQ(j[i].size(), seqs[i].size());
    for (size_t t = 0; t < seqs[i].size(); ++t) {
      ASSERT_EQ(j[i][t].size(), size_t(c.real_vocab_size));
      for (int64_t v = 0; v < c.real_vocab_size; v += 37) {
        const float want = scores[i].logits[t * c.real_vocab_size + v];
        EXPECT_NEAR(j[i][t][v].get<double>(), want, 1e-6 * (1 + std::fabs(want)));
      }
    }
  }
  EXPECT_NE(testing::error_of([&] {
              write_logits_json(dir.file("x.json"), score_sequences(*model, seqs, false), c.real_vocab_size);
            }).find("sequence 0 has 0 logits"),
            std::string::npos);
}

}  // namespace
}  // namespace zaya
