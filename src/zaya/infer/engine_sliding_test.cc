// The cached decoder on sliding-window blocks (spec §12): a window covering
// the context equals full attention bit for bit; W = 3 bounds what a position
// depends on exactly (query i sees keys i-2..i); chunked prefill, forked slots
// and token-by-token decode agree across the window boundary; each block's own
// RoPE base is used; only the pages of the window are held, and they are what
// the state and bandwidth counts hold.
// (Training does not build sliding models yet: the weights are a full-attention
// model's, run under a sliding config, InferModel::from_model(model, config).)
#include <gtest/gtest.h>

#include <cstring>

#include "zaya/infer/engine.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::logits_error;
using testing::random_tokens;

ZayaConfig sliding(ZayaConfig c, int64_t window, std::vector<int64_t> blocks, double theta) {
  c.sliding_window = window;
  c.sliding_blocks = std::move(blocks);
  c.sliding_rope_theta = theta;
  return c;
}

// Logits of every position, fed `chunk` tokens per step (1: token-by-token decode).
std::vector<float> run_chunks(InferenceEngine& engine, const std::vector<int32_t>& ids, int64_t chunk) {
  const int64_t V = engine.config().vocab_size, S = int64_t(ids.size());
  std::vector<float> out(S * V);
  engine.reset(0);
  for (int64_t t = 0; t < S; t += chunk) {
    const int64_t n = std::min(chunk, S - t);
    StepChunk ch{0, ids.data() + t, n, LogitsWanted::kAll};
    engine.step({&ch, 1});
    engine.logits(0, n, out.data() + t * V);
  }
  return out;
}

TEST(EngineSliding, WindowCoveringTheContextEqualsFullAttention) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 31);
  const std::vector<int32_t> ids = random_tokens(40, c.real_vocab_size, 3);
  EngineOptions o;
  o.max_context = 40;
  auto full = InferModel::from_model(*model);
  InferenceEngine ef(*full, o);
  const std::vector<float> ref = run_chunks(ef, ids, 1);
  // W = 40 (the last position sees all 40 keys: the ring of 39 has wrapped once) and W = 1000; same RoPE base.
  for (int64_t W : {40, 1000}) {
    auto im = InferModel::from_model(*model, sliding(c, W, {0, 1, 2}, c.rope_theta));
    InferenceEngine e(*im, o);
    const std::vector<float> got = run_chunks(e, ids, 1);
    // Every block slides (one kind of pages): positions 1..39 of 40, pages of 16, are the last 3 pages.
    EXPECT_EQ(e.pages_held(0), std::vector<int64_t>{3}) << "window " << W;
    EXPECT_EQ(std::memcmp(got.data(), ref.data(), sizeof(float) * got.size()), 0) << "window " << W;
    for (int64_t chunk : {7, 40}) {
      const std::vector<float> chunked = run_chunks(e, ids, chunk);
      EXPECT_LT(logits_error(chunked.data(), ref.data(), 40, c.vocab_size, c.real_vocab_size), 2e-5)
          << "window " << W << " chunk " << chunk;
    }
  }
  // The sliding blocks' own RoPE base is applied: another base changes the logits.
  auto other = InferModel::from_model(*model, sliding(c, 1000, {0, 2}, 500));
  InferenceEngine e(*other, o);
  const std::vector<float> got = run_chunks(e, ids, 1);
  EXPECT_GT(logits_error(got.data(), ref.data(), 40, c.vocab_size, c.real_vocab_size), 1e-3);
}

// One block (attention + MoE): the keys at j depend on tokens j-2..j (the two
// convolutions), the query at p on p-2..p. With W = 3 the logits at p depend
// on tokens p-4..p and on nothing earlier; full attention depends on all.
TEST(EngineSliding, WindowOfThreeBoundsTheDependencyExactly) {
  ZayaConfig c = testing::small_test_config();
  c.num_blocks = 1;
  auto model = testing::random_model(c, 32);
  EngineOptions o;
  o.max_context = 24;
  auto full = InferModel::from_model(*model);
  auto win = InferModel::from_model(*model, sliding(c, 3, {0}, 10000));
  InferenceEngine ef(*full, o), ew(*win, o);
  const std::vector<int32_t> ids = random_tokens(24, c.real_vocab_size, 4);
  const int64_t V = c.vocab_size, p = 20;
  const std::vector<float> base_w = run_chunks(ew, ids, 1), base_f = run_chunks(ef, ids, 1);
  auto changed_at = [&](int64_t pos) {
    std::vector<int32_t> x = ids;
    x[pos] = (x[pos] + 1) % int32_t(c.real_vocab_size);
    return x;
  };
  auto same_at_p = [&](const std::vector<float>& a, const std::vector<float>& b) {
    return std::memcmp(a.data() + p * V, b.data() + p * V, sizeof(float) * V) == 0;
  };
  for (int64_t pos : {int64_t(0), int64_t(9), p - 6, p - 5})
    EXPECT_TRUE(same_at_p(run_chunks(ew, changed_at(pos), 1), base_w)) << "token " << pos << " is outside the window";
  for (int64_t pos : {p - 4, p - 2, p})
    EXPECT_FALSE(same_at_p(run_chunks(ew, changed_at(pos), 1), base_w)) << "token " << pos << " is inside";
  EXPECT_FALSE(same_at_p(run_chunks(ef, changed_at(p - 5), 1), base_f));
  EXPECT_FALSE(same_at_p(run_chunks(ef, changed_at(0), 1), base_f));
}

// W = 3 on the even blocks of three (sliding and full layers mixed, two RoPE
// bases), pages of 4 positions: prefill in chunks of every size, and a slot
// forked once pages have left the window, give the token-by-token logits over
// 26 positions; the sliding pages that left the window are back in the pool.
TEST(EngineSliding, ChunkedPrefillAndForksEqualDecodeAcrossTheWindow) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 33);
  auto im = InferModel::from_model(*model, sliding(c, 3, {0, 2}, 700));
  const std::vector<int32_t> ids = random_tokens(26, c.real_vocab_size, 5);
  const int64_t V = c.vocab_size;
  EngineOptions o;
  o.max_sequences = 2;
  o.max_context = 26;
  o.max_step_tokens = 26;
  o.page_tokens = 4;
  InferenceEngine engine(*im, o);
  const std::vector<float> ref = run_chunks(engine, ids, 1);
  // Kind 0 slides (block 0 first uses it): positions 24, 25 in page 6; the full blocks hold all 7 pages.
  EXPECT_EQ(engine.pages_held(0), (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(engine.free_pages(0), engine.pool_pages(0) - 1);
  for (int64_t chunk : {2, 3, 4, 5, 7, 13, 26}) {
    const std::vector<float> got = run_chunks(engine, ids, chunk);
    EXPECT_LT(logits_error(got.data(), ref.data(), 26, V, c.real_vocab_size), 2e-5) << "chunk " << chunk;
  }
  engine.reset(0);
  StepChunk prefix{0, ids.data(), 11, LogitsWanted::kNone};
  engine.step({&prefix, 1});
  engine.copy(0, 1);
  // Both continue in one ragged step: the fork with 15 tokens (sgemm path), the original with 2.
  StepChunk rest[2] = {{1, ids.data() + 11, 15, LogitsWanted::kAll}, {0, ids.data() + 11, 2, LogitsWanted::kAll}};
  engine.step(rest);
  const std::vector<float> got = testing::step_logits(engine);
  EXPECT_LT(logits_error(got.data(), ref.data() + 11 * V, 15, V, c.real_vocab_size), 2e-5);
  EXPECT_LT(logits_error(got.data() + 15 * V, ref.data() + 11 * V, 2, V, c.real_vocab_size), 2e-5);
  engine.reset(0);
  engine.reset(1);
  for (int64_t k = 0; k < engine.kv_kinds(); ++k) EXPECT_EQ(engine.free_pages(k), engine.pool_pages(k));
}

// The state of a sliding block is the pages of its last W - 1 positions (at
// most twice as many while a step writes), and a decode step reads W keys
// there (what bench infer's roofline counts), at any context.
TEST(EngineSliding, StateAndBandwidthCountTheRing) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 34);
  EngineOptions o;
  o.max_context = 100;
  o.page_tokens = 4;
  auto full = InferModel::from_model(*model);
  auto win = InferModel::from_model(*model, sliding(c, 5, {0, 2}, 10000));
  InferenceEngine ef(*full, o), ew(*win, o);
  const int64_t kw = c.kv_width(), f = int64_t(sizeof(float));
  // Two sliding blocks: 100 positions full, 2 x (1 + 1) pages of 4 for W - 1 = 4.
  EXPECT_EQ(ew.max_pages(100), (std::vector<int64_t>{4, 25}));
  EXPECT_EQ(ef.state_bytes_per_slot() - ew.state_bytes_per_slot(), f * 2 * 2 * (100 - 16) * kw);
  const std::vector<int32_t> one = random_tokens(1, c.real_vocab_size, 6);
  for (int64_t L : {2, 60}) {
    ew.fill_synthetic(0, L, 9);
    ef.fill_synthetic(0, L, 9);
    StepChunk ch{0, one.data(), 1, LogitsWanted::kLast};
    ew.step({&ch, 1});
    ef.step({&ch, 1});
    EXPECT_EQ(ef.last_stats().kv_bytes, f * 2 * kw * 3 * (L + 1)) << L;
    EXPECT_EQ(ew.last_stats().kv_bytes, f * 2 * kw * (L + 1 + 2 * std::min<int64_t>(L + 1, 5))) << L;
    std::vector<float> logits(c.vocab_size);
    ew.logits(0, 1, logits.data());
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(EngineSliding, ConfigMayDifferOnlyInTheAttentionPattern) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 35);
  ZayaConfig wider = c;
  wider.expert_ffn = 64;
  testing::expect_error([&] { InferModel::from_model(*model, wider); }, "differs from the model's");
}

}  // namespace
}  // namespace zaya
