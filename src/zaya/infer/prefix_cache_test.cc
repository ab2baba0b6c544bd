// The prefix cache on a real engine with pages of 4 tokens: the longest held
// prefix is used, nested snapshots share their first pages, eviction under a
// tiny pool is least recently used (those no sequence reads first) and never
// frees a page a running sequence references, and every page comes back.
#include "zaya/infer/prefix_cache.h"

#include <gtest/gtest.h>

#include <cstring>

#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::random_tokens;

TEST(PrefixCache, LongestPrefixSharedPagesAndLeastRecentlyUsedEviction) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 51);
  auto im = InferModel::from_model(*model);
  EngineOptions o;
  o.max_sequences = 2;
  o.max_context = 16;
  o.page_tokens = 4;
  InferenceEngine probe(*im, o);
  o.kv_pool_bytes = 6 * probe.page_bytes(0);  // six pages
  InferenceEngine engine(*im, o);
  ASSERT_EQ(engine.pool_pages(0), 6);
  const std::vector<int32_t> a = random_tokens(12, c.real_vocab_size, 52);
  std::vector<int32_t> b = random_tokens(12, c.real_vocab_size, 53);
  b[0] = (a[0] + 1) % int32_t(c.real_vocab_size);  // shares nothing with a
  auto feed = [&](int32_t slot, const std::vector<int32_t>& ids, int64_t from, int64_t n) {
    StepChunk ch{slot, ids.data() + from, n, LogitsWanted::kLast};
    engine.step({&ch, 1});
  };
  PrefixCache cache(engine);
  EXPECT_EQ(cache.start(a, 1), 0);
  // a[0, 4) and a[0, 8): two snapshots, two pages (the first shared).
  feed(0, a, 0, 3);
  EXPECT_FALSE(cache.insert(a, 0));  // not at a page boundary
  feed(0, a, 3, 1);
  EXPECT_TRUE(cache.insert(a, 0));
  EXPECT_FALSE(cache.insert(a, 0));  // held already
  feed(0, a, 4, 4);
  EXPECT_TRUE(cache.insert(a, 0));
  engine.reset(0);
  EXPECT_EQ(cache.pages(), std::vector<int64_t>{2});
  EXPECT_EQ(engine.free_pages(0), 4);
  // b alike.
  feed(0, b, 0, 4);
  EXPECT_TRUE(cache.insert(b, 0));
  feed(0, b, 4, 4);
  EXPECT_TRUE(cache.insert(b, 0));
  engine.reset(0);
  EXPECT_EQ(cache.size(), 4);
  EXPECT_EQ(engine.free_pages(0), 2);
  // A snapshot as long as the prompt leaves nothing to run: the shorter one is used.
  EXPECT_EQ(cache.start({a.begin(), a.begin() + 8}, 1), 4);
  // a itself starts from a[0, 8) (now the most recently used) in slot 1, which references its two pages.
  EXPECT_EQ(cache.start(a, 1), 8);
  EXPECT_EQ(engine.free_pages(0), 2);
  feed(1, a, 8, 4);  // slot 1's own third page
  EXPECT_EQ(engine.free_pages(0), 1);
  // b[0, 4) goes first (least recently used among those no sequence reads; it
  // frees nothing, b[0, 8) holds its page), then, for three free pages, b[0, 8).
  EXPECT_TRUE(cache.evict_one());
  EXPECT_EQ(cache.size(), 3);
  EXPECT_EQ(engine.free_pages(0), 1);
  EXPECT_TRUE(cache.make_room({3}));
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(engine.free_pages(0), 3);
  EXPECT_EQ(cache.start(b, 0), 0);  // b is gone
  EXPECT_EQ(cache.start(a, 0), 8);  // a is not
  engine.reset(0);
  // More than can ever be free: the snapshots slot 1 reads are evicted too, but their pages stay.
  EXPECT_FALSE(cache.make_room({6}));
  EXPECT_EQ(cache.size(), 0);
  EXPECT_EQ(cache.evictions(), 4);
  EXPECT_EQ(engine.free_pages(0), 3);
  EXPECT_EQ(engine.pages_held(1), std::vector<int64_t>{3});
  // Slot 1 still gives what a run from scratch gives.
  std::vector<float> shared(c.vocab_size), fresh(c.vocab_size);
  std::vector<int32_t> more = a;
  more.push_back(5);
  StepChunk one{1, more.data() + 12, 1, LogitsWanted::kLast};
  engine.step({&one, 1});
  engine.logits(0, 1, shared.data());
  EngineOptions fresh_options;
  fresh_options.max_context = 16;
  InferenceEngine scratch(*im, fresh_options);
  StepChunk whole{0, more.data(), 13, LogitsWanted::kLast};
  scratch.step({&whole, 1});
  scratch.logits(0, 1, fresh.data());
  EXPECT_LT(testing::logits_error(shared.data(), fresh.data(), 1, c.vocab_size, c.real_vocab_size), 2e-5);
  engine.reset(1);
  EXPECT_EQ(engine.free_pages(0), 6);
  for (int32_t page = 0; page < 6; ++page) EXPECT_EQ(engine.page_refs(0, page), 0);
}

// A state computed under one LoRA adapter is never another's (nor the base's):
// the snapshot is found only under the adapter it was taken with.
TEST(PrefixCache, SnapshotsAreKeptApartByAdapter) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 54);
  auto im = InferModel::from_model(*model);
  EngineOptions o;
  o.max_sequences = 2;
  o.max_context = 16;
  o.page_tokens = 4;
  InferenceEngine engine(*im, o);
  const std::vector<int32_t> a = random_tokens(12, c.real_vocab_size, 55);
  StepChunk ch{0, a.data(), 8, LogitsWanted::kLast};
  engine.step({&ch, 1});
  PrefixCache cache(engine);
  EXPECT_TRUE(cache.insert(a, 0, 7));
  EXPECT_TRUE(cache.insert(a, 0, 0));  // the same tokens under the base: a snapshot of its own
  EXPECT_FALSE(cache.insert(a, 0, 7));
  EXPECT_EQ(cache.start(a, 1, 8), 0);
  EXPECT_EQ(cache.start(a, 1, 7), 8);
  EXPECT_EQ(cache.start(a, 1, 0), 8);
}

}  // namespace
}  // namespace zaya
