#include "zaya/data/mixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/data/shard_writer.h"
#include "zaya/data/test_util.h"

namespace zaya {
namespace {

using testing::TempDir;

// A shard whose token at stream position p is base + p (so a window tells
// which dataset it came from), in documents of 10 tokens.
ShardReader numbered_shard(const TempDir& dir, const std::string& name, int32_t base, int32_t num_tokens) {
  const std::string prefix = dir.file(name);
  ShardWriter w(prefix, 1u << 20);
  std::vector<int32_t> doc;
  for (int32_t p = 0; p < num_tokens; ++p) {
    doc.push_back(base + p);
    if (doc.size() == 10) {
      w.add_document(doc);
      doc.clear();
    }
  }
  w.add_document(doc);
  w.finish();
  return ShardReader::open(prefix);
}

struct Shards {
  TempDir dir;
  ShardReader a = numbered_shard(dir, "a", 0, 200);        // 24 windows of 8
  ShardReader b = numbered_shard(dir, "b", 100000, 90);    // 11 windows of 8: wraps epochs quickly
  ShardReader c = numbered_shard(dir, "c", 200000, 1000);  // 124 windows of 8
  std::vector<const ShardReader*> all() const { return {&a, &b, &c}; }
};

// The sequences of `draws` global batches of `total`, as seen by a rank keeping `first`..`first + batch - 1`.
std::vector<int32_t> draw(MixtureSampler& m, int draws, int64_t batch, int64_t first, int64_t total) {
  const int64_t seq = m.seq();
  std::vector<int32_t> out, in(batch * seq), tgt(batch * seq);
  for (int i = 0; i < draws; ++i) {
    m.next_slice(in.data(), tgt.data(), batch, seq, first, total);
    for (int64_t t = 0; t < batch * seq; ++t) EXPECT_EQ(tgt[t], in[t] + 1);  // next-token targets
    out.insert(out.end(), in.begin(), in.end());
  }
  return out;
}

// Document masking: every sequence's tokens come with their positions inside
// their documents (10 tokens each; the window's first token starts one).
TEST(Mixture, DocumentPositionsFollowEachSequencesDataset) {
  Shards s;
  MixtureSampler m(s.all(), {1.0, 1.0, 1.0}, 8, 42, 0);
  const int64_t seq = 8, batch = 3;
  std::vector<int32_t> in(batch * seq), tgt(batch * seq), doc(batch * seq, -1);
  int restarts = 0;
  for (int i = 0; i < 20; ++i) {
    m.next_slice(in.data(), tgt.data(), batch, seq, 1, 5, doc.data());
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t) {
        const int32_t p = in[b * seq + t] % 100000, p0 = in[b * seq] % 100000;
        EXPECT_EQ(doc[b * seq + t], std::min(p - p0, p % 10)) << "token " << in[b * seq + t];
        restarts += t > 0 && doc[b * seq + t] == 0;
      }
  }
  EXPECT_GT(restarts, 0);
}

TEST(Mixture, ProportionsFollowTheWeights) {
  Shards s;
  MixtureSampler m(s.all(), {1.0, 2.0, 7.0}, 8, 42, 0);
  const int n = 50000;
  std::vector<int> count(3, 0);
  for (int i = 0; i < n; ++i) ++count[m.dataset_of(uint64_t(i))];
  EXPECT_NEAR(count[0] / double(n), 0.1, 0.01);
  EXPECT_NEAR(count[1] / double(n), 0.2, 0.01);
  EXPECT_NEAR(count[2] / double(n), 0.7, 0.01);
  // The drawn windows come from the chosen dataset.
  std::vector<int32_t> ids = draw(m, 20, 4, 0, 4);
  for (size_t i = 0; i < 80; ++i) {
    const size_t k = m.dataset_of(i);
    EXPECT_EQ(ids[i * 8] / 100000, int32_t(k)) << "sequence " << i;
  }
}

TEST(Mixture, DeterministicAndSlicedLikeOneDraw) {
  Shards s;
  MixtureSampler one(s.all(), {1, 1, 1}, 8, 7, 3), again(s.all(), {1, 1, 1}, 8, 7, 3);
  const std::vector<int32_t> full = draw(one, 10, 6, 0, 6);
  EXPECT_EQ(draw(again, 10, 6, 0, 6), full);
  // Three ranks keeping two sequences each see the single process's batches.
  std::vector<std::vector<int32_t>> ranks;
  for (int r = 0; r < 3; ++r) {
    MixtureSampler m(s.all(), {1, 1, 1}, 8, 7, 3);
    ranks.push_back(draw(m, 10, 2, 2 * r, 6));
  }
  for (int d = 0; d < 10; ++d)
    for (int r = 0; r < 3; ++r)
      for (int t = 0; t < 16; ++t) ASSERT_EQ(ranks[r][d * 16 + t], full[d * 48 + r * 16 + t]);
  // Another stream (phase) or seed chooses differently.
  MixtureSampler other_stream(s.all(), {1, 1, 1}, 8, 7, 4), other_seed(s.all(), {1, 1, 1}, 8, 8, 3);
  int same_stream = 0, same_seed = 0;
  for (uint64_t i = 0; i < 300; ++i) {
    same_stream += one.dataset_of(i) == other_stream.dataset_of(i);
    same_seed += one.dataset_of(i) == other_seed.dataset_of(i);
  }
  EXPECT_LT(same_stream, 150);
  EXPECT_LT(same_seed, 150);
}

TEST(Mixture, StateRoundTripAndReplay) {
  Shards s;
  MixtureSampler m(s.all(), {3, 5, 1}, 8, 11, 1);
  draw(m, 7, 5, 0, 5);  // 35 sequences: dataset b (11 windows) wraps into its next epoch
  const MixtureState saved = m.state();
  EXPECT_EQ(saved.position, 35u);
  ASSERT_EQ(saved.datasets.size(), 3u);
  EXPECT_GT(saved.datasets[1].epoch, 0u);
  // Replaying the choices gives the same state.
  const MixtureState replayed = m.state_at(35);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(replayed.datasets[k].seed, saved.datasets[k].seed);
    EXPECT_EQ(replayed.datasets[k].epoch, saved.datasets[k].epoch) << k;
    EXPECT_EQ(replayed.datasets[k].index, saved.datasets[k].index) << k;
  }
  const std::vector<int32_t> next = draw(m, 6, 5, 0, 5);
  MixtureSampler restored(s.all(), {3, 5, 1}, 8, 11, 1);
  restored.set_state(saved);
  EXPECT_EQ(draw(restored, 6, 5, 0, 5), next);
  MixtureSampler from_replay(s.all(), {3, 5, 1}, 8, 11, 1);
  from_replay.set_state(from_replay.state_at(35));
  EXPECT_EQ(draw(from_replay, 6, 5, 0, 5), next);
}

TEST(Mixture, Errors) {
  Shards s;
  EXPECT_NE(testing::error_of([&] {
              MixtureSampler(s.all(), {1, 0, 1}, 8, 1, 0);
            }).find("weight 0 is invalid"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] {
              MixtureSampler(s.all(), {1, 1}, 8, 1, 0);
            }).find("one weight per dataset"),
            std::string::npos);
  MixtureSampler m(s.all(), {1, 1, 1}, 8, 1, 0);
  MixtureState wrong;
  wrong.datasets.resize(2);
  EXPECT_NE(testing::error_of([&] { m.set_state(wrong); }).find("3"), std::string::npos);
  std::vector<int32_t> in(16), tgt(16);
  EXPECT_NE(testing::error_of([&] { m.next_slice(in.data(), tgt.data(), 1, 16, 0, 1); }).find("sequence length"),
            std::string::npos);
}

}  // namespace
}  // namespace zaya
