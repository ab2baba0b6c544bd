#include "zaya/data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/data/permutation.h"
#include "zaya/data/shard_writer.h"
#include "zaya/data/test_util.h"

namespace zaya {
namespace {

using testing::TempDir;

// A shard whose token at stream position p is p, split into uneven documents.
ShardReader counting_shard(const TempDir& dir, int32_t num_tokens) {
  std::string prefix = dir.file("count");
  ShardWriter w(prefix, 1u << 20);
  std::vector<int32_t> doc;
  for (int32_t p = 0; p < num_tokens; ++p) {
    doc.push_back(p);
    if (doc.size() == static_cast<size_t>(3 + p % 7)) {
      w.add_document(doc);
      doc.clear();
    }
  }
  w.add_document(doc);
  w.finish();
  return ShardReader::open(prefix);
}

// Windows drawn by `batches` calls of next(), identified by their first token / seq.
std::vector<uint64_t> draw(TokenSampler& s, int batches, int64_t batch) {
  const int64_t seq = s.seq();
  std::vector<int32_t> in(batch * seq), tgt(batch * seq);
  std::vector<uint64_t> windows;
  for (int i = 0; i < batches; ++i) {
    s.next(in.data(), tgt.data(), batch, seq);
    for (int64_t b = 0; b < batch; ++b) windows.push_back(static_cast<uint64_t>(in[b * seq]) / seq);
  }
  return windows;
}

TEST(SamplerPermutation, IsABijection) {
  for (uint64_t n : {1, 2, 3, 5, 16, 17, 1000, 4097}) {
    FeistelPermutation p(n, 11, 0);
    std::vector<char> seen(n, 0);
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t j = p(i);
      ASSERT_LT(j, n);
      ASSERT_FALSE(seen[j]) << "n = " << n << ": " << j << " hit twice";
      seen[j] = 1;
    }
  }
  // Different streams (epochs) and seeds give different orders.
  FeistelPermutation a(1000, 11, 0), b(1000, 11, 1), c(1000, 12, 0);
  int same_b = 0, same_c = 0, fixed = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same_b += a(i) == b(i);
    same_c += a(i) == c(i);
    fixed += a(i) == i;
  }
  EXPECT_LT(same_b, 20);
  EXPECT_LT(same_c, 20);
  EXPECT_LT(fixed, 20);
  // Huge domains need no table.
  const uint64_t huge = (uint64_t{1} << 40) + 12345;
  FeistelPermutation h(huge, 3, 7);
  std::set<uint64_t> images;
  for (uint64_t i = 0; i < 1000; ++i) images.insert(h(huge - 1 - i));
  EXPECT_EQ(images.size(), 1000u);
  for (uint64_t x : images) EXPECT_LT(x, huge);
  EXPECT_EQ(h(5), FeistelPermutation(huge, 3, 7)(5));
}

TEST(Sampler, WindowsAreNextTokenPairs) {
  TempDir dir;
  ShardReader shard = counting_shard(dir, 103);
  TokenSampler s(shard, 4, SamplerOrder::kSequential);
  EXPECT_EQ(s.windows_per_epoch(), 25u);  // floor((103 - 1) / 4)
  std::vector<int32_t> in(4 * 3), tgt(4 * 3);
  s.next(in.data(), tgt.data(), 3, 4);
  for (int32_t i = 0; i < 12; ++i) {
    EXPECT_EQ(in[i], i);  // windows 0, 1, 2 start at 0, 4, 8
    EXPECT_EQ(tgt[i], i + 1);
  }
  std::vector<int32_t> wi(4), wt(4);
  s.window(24, wi.data(), wt.data());
  EXPECT_EQ(wi[0], 96);
  EXPECT_EQ(wt[3], 100);  // the last window ends at token 100; 101 and 102 are never used
  EXPECT_THROW(s.window(25, wi.data(), wt.data()), Error);
}

TEST(Sampler, EveryWindowOncePerEpoch) {
  TempDir dir;
  ShardReader shard = counting_shard(dir, 1000);
  TokenSampler s(shard, 8, SamplerOrder::kShuffled, 42);
  const uint64_t n = s.windows_per_epoch();
  ASSERT_EQ(n, 124u);
  // Batches of 5 do not divide 124: batches straddle the epoch boundaries.
  std::vector<uint64_t> w = draw(s, 3 * 124 / 5 + 1, 5);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<uint64_t> seen(w.begin() + epoch * n, w.begin() + (epoch + 1) * n);
    EXPECT_EQ(seen.size(), n) << "epoch " << epoch;
    EXPECT_EQ(*seen.rbegin(), n - 1);
  }
  EXPECT_NE(std::vector<uint64_t>(w.begin(), w.begin() + n), std::vector<uint64_t>(w.begin() + n, w.begin() + 2 * n));
  EXPECT_EQ(s.state().epoch, 3u);
  EXPECT_EQ(s.state().index, w.size() - 3 * n);
  for (uint64_t i = 0; i < n; ++i) EXPECT_EQ(w[i], s.window_at(0, i));
}

TEST(Sampler, ResumeGivesTheSameBatches) {
  TempDir dir;
  ShardReader shard = counting_shard(dir, 500);
  TokenSampler full(shard, 16, SamplerOrder::kShuffled, 9);  // 31 windows per epoch
  std::vector<uint64_t> expected = draw(full, 10, 7);        // crosses two epoch boundaries

  TokenSampler first(shard, 16, SamplerOrder::kShuffled, 9);
  std::vector<uint64_t> got = draw(first, 4, 7);
  SamplerState saved = first.state();
  EXPECT_EQ(saved.seed, 9u);

  TokenSampler resumed(shard, 16, SamplerOrder::kShuffled, 12345);  // the state carries the seed
  resumed.set_state(saved);
  std::vector<uint64_t> rest = draw(resumed, 6, 7);
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(got, expected);

  // Another seed gives another order.
  TokenSampler other(shard, 16, SamplerOrder::kShuffled, 10);
  EXPECT_NE(draw(other, 10, 7), expected);

  SamplerState bad{9, 0, 32};
  EXPECT_THROW(resumed.set_state(bad), Error);
}

TEST(Sampler, SequentialModeIsRepeatable) {
  TempDir dir;
  ShardReader shard = counting_shard(dir, 200);
  TokenSampler s(shard, 10, SamplerOrder::kSequential, 77);  // 19 windows
  std::vector<uint64_t> w = draw(s, 5, 4);
  for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(w[i], i % 19);
  EXPECT_EQ(s.state().epoch, 1u);
  s.reset();
  EXPECT_EQ(draw(s, 5, 4), w);
}

TEST(Sampler, Errors) {
  TempDir dir;
  ShardReader shard = counting_shard(dir, 9);
  EXPECT_THROW(TokenSampler(shard, 9, SamplerOrder::kShuffled), Error);  // needs 10 tokens
  EXPECT_THROW(TokenSampler(shard, 0, SamplerOrder::kShuffled), Error);
  TokenSampler s(shard, 8, SamplerOrder::kShuffled);
  EXPECT_EQ(s.windows_per_epoch(), 1u);
  std::vector<int32_t> in(16), tgt(16);
  EXPECT_THROW(s.next(in.data(), tgt.data(), 2, 4), Error);  // wrong seq
  s.next(in.data(), tgt.data(), 2, 8);                       // the single window, twice
  EXPECT_EQ(in[0], 0);
  EXPECT_EQ(in[8], 0);
  try {
    TokenSampler(shard, 20, SamplerOrder::kSequential);
    ADD_FAILURE() << "expected zaya::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("count.idx: shard has 9 tokens, too few for one window of sequence "
                                         "length 20 (needs 21 tokens)"),
              std::string::npos)
        << e.what();
  }
}

// Tokens 0 .. num_tokens - 1 in documents of 3 to 9 tokens (counting_shard's
// condition never holds: it writes one document).
ShardReader short_documents_shard(const TempDir& dir, int32_t num_tokens) {
  std::string prefix = dir.file("short");
  ShardWriter w(prefix, 1u << 20);
  std::vector<int32_t> doc;
  for (int32_t p = 0, n = 0; p < num_tokens; ++p) {
    doc.push_back(p);
    if (doc.size() == static_cast<size_t>(3 + n % 7)) {
      w.add_document(doc);
      doc.clear();
      ++n;
    }
  }
  w.add_document(doc);
  w.finish();
  return ShardReader::open(prefix);
}

// document_starts lists the input positions where a document begins, the
// same as the documents' offsets inside the window; document_positions gives
// each token's offset from the last of them, and next_slice hands those out per window.
TEST(Sampler, DocumentStartsPerWindow) {
  TempDir dir;
  ShardReader shard = short_documents_shard(dir, 500);
  const int64_t seq = 16;
  TokenSampler s(shard, seq, SamplerOrder::kShuffled, 4);
  const std::vector<uint64_t>& o = shard.offsets();
  size_t packed = 0;
  for (uint64_t w = 0; w < s.windows_per_epoch(); ++w) {
    std::vector<int32_t> starts;
    s.document_starts(w, starts);
    std::vector<int32_t> want = {0};
    for (uint64_t off : o)
      if (off > w * seq && off < (w + 1) * seq) want.push_back(static_cast<int32_t>(off - w * seq));
    EXPECT_EQ(starts, want) << "window " << w;
    std::vector<int32_t> pos(seq, -1);
    s.document_positions(w, pos.data());
    for (int64_t p = 0; p < seq; ++p) {
      const int32_t first = *(std::upper_bound(want.begin(), want.end(), static_cast<int32_t>(p)) - 1);
      EXPECT_EQ(pos[p], p - first) << "window " << w << " position " << p;
    }
    packed += want.size() > 1;
  }
  EXPECT_GT(packed, 0u);  // some window holds more than one document
  std::vector<int32_t> in(3 * seq), tg(3 * seq), doc(3 * seq, -1);
  s.next_slice(in.data(), tg.data(), 3, seq, 2, 5, doc.data());
  for (int b = 0; b < 3; ++b) {
    std::vector<int32_t> starts;
    s.document_starts(static_cast<uint64_t>(in[b * seq]) / seq, starts);
    for (int64_t p = 0; p < seq; ++p) {
      const int32_t first = *(std::upper_bound(starts.begin(), starts.end(), static_cast<int32_t>(p)) - 1);
      EXPECT_EQ(doc[b * seq + p], p - first) << "window " << b << " position " << p;
    }
  }
}

}  // namespace
}  // namespace zaya
