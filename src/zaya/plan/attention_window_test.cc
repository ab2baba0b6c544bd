// The planner on sliding-window blocks (spec §12), against counts written out
// by hand: the 74B's attention FLOPs at 32K tokens, the attention GEMMs timed
// at the window, and a KV cache that stops growing past W on sliding blocks.
#include "zaya/plan/attention_window.h"

#include <gtest/gtest.h>

#include "zaya/model/model.h"
#include "zaya/plan/builtin_profiles.h"
#include "zaya/plan/latency_model.h"
#include "zaya/plan/step_model.h"

namespace zaya {
namespace {

ZayaConfig without_window(ZayaConfig c) {
  c.sliding_window = 0;
  c.sliding_blocks.clear();
  return c;
}

TEST(AttentionWindow, KeysAttendedByLoop) {
  for (int64_t S : {1, 5, 100})
    for (int64_t W : {0, 1, 3, 100, 1000}) {
      double keys = 0;
      for (int64_t i = 0; i < S; ++i) keys += double(W > 0 ? std::min(W, i + 1) : i + 1);
      EXPECT_EQ(attended_keys(S, W), keys) << S << " " << W;
    }
}

// ZAYA1-74B: 30 of 60 blocks slide with W = 4097. At S = 32768 each of them
// attends to W (W + 1) / 2 + (S - W) W pairs instead of S (S + 1) / 2.
TEST(AttentionWindow, The74BsAttentionFlopsAt32KCountTheWindow) {
  const ZayaConfig c = preset_config("zaya1-74b");
  ASSERT_EQ(c.sliding_window, 4097);
  ASSERT_EQ(c.sliding_blocks.size(), 30u);
  const double S = 32768, W = 4097, Q = double(c.q_width()), routed = 60.0 * 32768 * double(c.top_k);
  const double saved_per_block = 4 * Q * (S * (S + 1) / 2 - (W * (W + 1) / 2 + (S - W) * W));
  const double full = model_forward_flops(without_window(c), 1, 32768, routed);
  EXPECT_NEAR(windowed_forward_flops(c, 1, 32768, routed), full - 30 * saved_per_block, full * 1e-12);
  EXPECT_EQ(windowed_forward_flops(without_window(c), 1, 32768, routed), full);
  EXPECT_GT(30 * saved_per_block, 0.15 * full);  // at 32K the windows save a sixth of the forward FLOPs

  // The step model counts the same FLOPs and times half the attention GEMMs at the window's keys.
  const GemmModel g(*find_builtin_profile("mi300x-pollara"));
  TrainLayout L;
  L.micro_batch = 1;
  L.seq_len = 32768;
  L.dtype = "bf16";
  const StepPrediction with = predict_step(c, L, g), without = predict_step(without_window(c), L, g);
  EXPECT_NEAR(without.model_flops_per_rank - with.model_flops_per_rank, 3 * 30 * saved_per_block, full * 1e-9);
  EXPECT_LT(with.step, without.step);
  bool found = false;
  for (const GemmTime& t : with.gemms)
    if (t.gemm.name == "attn.scores.sliding" && t.gemm.phase == "fwd") {
      found = true;
      // Mean over the 512 query blocks of min(64 (j + 1), W + 63): 4160 for all but the first 65.
      double sum = 0;
      for (int j = 0; j < 512; ++j) sum += std::min(64.0 * (j + 1), W + 63);
      EXPECT_EQ(t.gemm.shape.n, int64_t(sum / 512 + 0.5));
      EXPECT_EQ(t.gemm.count, 30.0 * c.q_heads * 512);
    }
  EXPECT_TRUE(found);
}

// Decode: a sliding block holds a ring of W - 1 tokens, so past W the KV cache
// grows only on the 30 full blocks; below W on all 60.
TEST(AttentionWindow, KvCacheStopsGrowingPastTheWindowOnSlidingBlocks) {
  const ZayaConfig c = preset_config("zaya1-74b");
  const GemmModel g(*find_builtin_profile("mi300x-pollara"));
  InferenceLayout il;
  il.batch = 2;
  il.dtype = "bf16";
  auto kv = [&](const ZayaConfig& cfg, int64_t context) {
    il.context = context;
    return predict_latency(cfg, il, g).kv_bytes;
  };
  const double per_token_layer = 2 * 2.0 * double(c.kv_width()) * 2;  // k and v, bf16, batch 2
  EXPECT_NEAR(kv(c, 2000) - kv(c, 1000), 1000 * 60 * per_token_layer, 1);
  EXPECT_NEAR(kv(c, 4096 + 2000) - kv(c, 4096 + 1000), 1000 * 30 * per_token_layer, 1);
  EXPECT_NEAR(kv(without_window(c), 32768) - kv(c, 32768), (32768 - 4096) * 30 * per_token_layer, 1);
  il.context = 32768;
  EXPECT_LT(predict_latency(c, il, g).decode_seconds, predict_latency(without_window(c), il, g).decode_seconds);
  EXPECT_EQ(kv_cache_tokens(c, 10), 600);
  EXPECT_EQ(decode_attended_keys(c, 10000), 30 * 10001 + 30 * 4097);
}

}  // namespace
}  // namespace zaya
