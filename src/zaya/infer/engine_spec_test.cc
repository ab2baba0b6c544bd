// Speculative verification in the engine (engine.h, StepChunk::speculative;
// keep_draft): a chunk [last, draft] gives each row the bits a one-token step
// gives it, and cutting it back to any kept prefix leaves the slot exactly as
// a run that never saw the rest: the same small state (conv columns, delayed
// value), pages held, free pages and reference counts, and the same bits at
// every later step; on sliding blocks across the window boundary too, and on a
// slot started from a shared prefix snapshot.
#include <gtest/gtest.h>

#include <cstring>

#include "zaya/infer/engine.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::random_tokens;
using testing::same_bits;
using testing::step_logits;

// Feeds tokens one per step (plain decode) into `slot`; returns each step's logits.
std::vector<float> decode_each(InferenceEngine& e, int32_t slot, const std::vector<int32_t>& ids) {
  std::vector<float> out;
  for (const int32_t& t : ids) {
    StepChunk ch{slot, &t, 1, LogitsWanted::kLast};
    e.step({&ch, 1});
    const std::vector<float> l = step_logits(e);
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

// One engine speculates and keeps `keep` of the chunk; the other decodes only the kept tokens.
// Pages of one token, so that share() can read the small state at any length.
void expect_rollback_exact(const InferModel& im, int64_t draft_len, uint64_t seed) {
  const ZayaConfig& c = im.config();
  EngineOptions o;
  o.max_sequences = 2;
  o.max_context = 64;
  o.page_tokens = 1;
  const std::vector<int32_t> prompt = random_tokens(9, c.real_vocab_size, seed);
  const std::vector<int32_t> chunk = random_tokens(1 + draft_len, c.real_vocab_size, seed + 1);
  const std::vector<int32_t> after = random_tokens(12, c.real_vocab_size, seed + 2);
  for (int64_t keep = 0; keep <= 1 + draft_len; ++keep) {
    InferenceEngine spec(im, o), plain(im, o);
    for (InferenceEngine* e : {&spec, &plain}) {
      StepChunk p{1, prompt.data(), int64_t(prompt.size()), LogitsWanted::kNone};
      e->step({&p, 1});
    }
    const int64_t past = spec.length(1);
    StepChunk sc{1, chunk.data(), 1 + draft_len, LogitsWanted::kAll, true};
    spec.step({&sc, 1});
    const std::vector<float> rows = step_logits(spec);
    ASSERT_TRUE(spec.drafting(1));
    spec.keep_draft(1, past + keep);
    EXPECT_FALSE(spec.drafting(1));
    // Each row of the verification step has the bits of the one-token step at its position.
    const std::vector<float> kept_rows =
        decode_each(plain, 1, std::vector<int32_t>(chunk.begin(), chunk.begin() + keep));
    EXPECT_TRUE(same_bits(std::vector<float>(rows.begin(), rows.begin() + keep * c.vocab_size), kept_rows))
        << "draft " << draft_len << " keep " << keep;
    EXPECT_EQ(spec.length(1), plain.length(1));
    EXPECT_EQ(spec.pages_held(1), plain.pages_held(1));
    for (int64_t k = 0; k < spec.kv_kinds(); ++k) EXPECT_EQ(spec.free_pages(k), plain.free_pages(k));
    if (spec.length(1) > 0) {
      InferenceEngine::Snapshot a = spec.share(1), b = plain.share(1);
      EXPECT_TRUE(same_bits(a.small, b.small)) << "conv state / delayed value, keep " << keep;
      spec.release(a);
      plain.release(b);
    }
    // Later steps see the same cache and state: the same bits.
    EXPECT_TRUE(same_bits(decode_each(spec, 1, after), decode_each(plain, 1, after)))
        << "draft " << draft_len << " keep " << keep;
    for (int64_t k = 0; k < spec.kv_kinds(); ++k) EXPECT_EQ(spec.free_pages(k), plain.free_pages(k));
  }
}

TEST(EngineSpec, RollbackEqualsARunThatNeverDrafted) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 41);
  auto f32 = InferModel::from_model(*model);
  auto b16 = InferModel::from_model(*model, "bf16");
  auto i8 = InferModel::from_model(*model, "int8");
  for (int64_t draft : {1, 4, 7}) expect_rollback_exact(*f32, draft, 100 + uint64_t(draft));
  expect_rollback_exact(*b16, 5, 200);
  expect_rollback_exact(*i8, 5, 300);
}

// Sliding blocks (W = 6, pages of 2): the chunk's keys are all written and the
// window's releases wait for keep_draft; after it, decoding far past the window
// gives the plain run's bits with the same pages.
TEST(EngineSpec, RollbackOnSlidingBlocks) {
  ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 42);
  c.sliding_window = 6;
  c.sliding_blocks = {0, 2};
  c.sliding_rope_theta = 500;
  auto im = InferModel::from_model(*model, c);
  EngineOptions o;
  o.max_context = 64;
  o.page_tokens = 2;
  const std::vector<int32_t> prompt = random_tokens(11, c.real_vocab_size, 5);
  const std::vector<int32_t> chunk = random_tokens(5, c.real_vocab_size, 6);
  const std::vector<int32_t> after = random_tokens(20, c.real_vocab_size, 7);
  for (int64_t keep : {1, 3, 5}) {
    InferenceEngine spec(*im, o), plain(*im, o);
    for (InferenceEngine* e : {&spec, &plain}) {
      StepChunk p{0, prompt.data(), int64_t(prompt.size()), LogitsWanted::kNone};
      e->step({&p, 1});
    }
    StepChunk sc{0, chunk.data(), 5, LogitsWanted::kAll, true};
    spec.step({&sc, 1});
    spec.keep_draft(0, 11 + keep);
    decode_each(plain, 0, std::vector<int32_t>(chunk.begin(), chunk.begin() + keep));
    EXPECT_EQ(spec.pages_held(0), plain.pages_held(0)) << keep;
    EXPECT_TRUE(same_bits(decode_each(spec, 0, after), decode_each(plain, 0, after))) << keep;
    EXPECT_EQ(spec.pages_held(0), plain.pages_held(0)) << keep;
    for (int64_t k = 0; k < spec.kv_kinds(); ++k) EXPECT_EQ(spec.free_pages(k), plain.free_pages(k));
  }
  // A speculative chunk must fit the window's pages.
  InferenceEngine e(*im, o);
  const std::vector<int32_t> long_chunk = random_tokens(6, c.real_vocab_size, 8);
  StepChunk bad{0, long_chunk.data(), 6, LogitsWanted::kAll, true};
  testing::expect_error([&] { e.step({&bad, 1}); }, "exceeds the sliding window");
}

// A slot started from a prefix snapshot speculates past it and is cut back:
// the snapshot's pages keep their reference counts, the draft's pages go back.
TEST(EngineSpec, RollbackLeavesSharedPrefixPagesAlone) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 43);
  auto im = InferModel::from_model(*model);
  EngineOptions o;
  o.max_sequences = 2;
  o.max_context = 32;
  o.page_tokens = 4;
  InferenceEngine e(*im, o);
  const int64_t pool = e.pool_pages(0);
  const std::vector<int32_t> prefix = random_tokens(8, c.real_vocab_size, 9);
  StepChunk p{0, prefix.data(), 8, LogitsWanted::kNone};
  e.step({&p, 1});
  InferenceEngine::Snapshot snap = e.share(0);
  e.reset(0);
  e.start_from(snap, 1);
  const std::vector<int32_t> chunk = random_tokens(7, c.real_vocab_size, 10);
  StepChunk sc{1, chunk.data(), 7, LogitsWanted::kAll, true};
  e.step({&sc, 1});
  EXPECT_EQ(e.free_pages(0), pool - 2 - 2);  // 15 tokens: the 2 shared pages and 2 of its own
  for (int32_t page : snap.pages[0]) EXPECT_EQ(e.page_refs(0, page), 2);
  // A slot with an unsettled draft cannot step, be copied or snapshotted.
  testing::expect_error([&] { e.step({&sc, 1}); }, "keep_draft");
  testing::expect_error([&] { e.copy(1, 0); }, "keep_draft");
  testing::expect_error([&] { e.keep_draft(1, 7); }, "can keep 8..15 tokens");
  e.keep_draft(1, 9);
  EXPECT_EQ(e.length(1), 9);
  EXPECT_EQ(e.free_pages(0), pool - 2 - 1);
  for (int32_t page : snap.pages[0]) EXPECT_EQ(e.page_refs(0, page), 2);
  testing::expect_error([&] { e.keep_draft(1, 9); }, "holds no speculative chunk");
  e.reset(1);
  e.release(snap);
  EXPECT_EQ(e.free_pages(0), pool);
}

}  // namespace
}  // namespace zaya
