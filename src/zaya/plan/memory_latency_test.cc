#include <gtest/gtest.h>

#include "zaya/plan/builtin_profiles.h"
#include "zaya/plan/latency_model.h"
#include "zaya/plan/memory_model.h"
#include "zaya/plan/moe_tradeoff.h"

namespace zaya {
namespace {

TEST(MemoryModel, ShardsOptimizerStateAndScalesActivations) {
  const ZayaConfig c = preset_config("zaya1-base");
  TrainLayout L;
  L.micro_batch = 1;
  L.seq_len = 4096;
  L.dtype = "bf16";
  const MemoryPrediction one = predict_memory(c, L);
  L.world = 64;
  const MemoryPrediction many = predict_memory(c, L);
  EXPECT_LT(many.optimizer, one.optimizer / 8);
  EXPECT_EQ(many.weights, one.weights);
  EXPECT_NEAR(one.weights, one.params_held * 2, 1);  // bf16 copy
  L.micro_batch = 2;
  EXPECT_NEAR(predict_memory(c, L).activations, 2 * many.activations, 1);
  // Context parallelism: 1/cp of the tokens' activations and logits per rank,
  // plus one layer's whole-sequence K/V buffers.
  L.micro_batch = 1;
  L.cp = 4;
  const MemoryPrediction cp = predict_memory(c, L);
  const double kv = 6.0 * 4096 * double(c.kv_width()) * 4;
  EXPECT_NEAR(cp.activations, many.activations / 4 + kv, 1);
  EXPECT_NEAR(cp.logits, many.logits / 4, 1);
  EXPECT_EQ(cp.optimizer, many.optimizer);  // dense over the world, experts over dp x cp: the same shards
}

TEST(LatencyModel, CcaCompressesTheKvCacheAndDecodeIsBandwidthBound) {
  const GemmModel g(*find_builtin_profile("mi300x-pollara"));
  const ZayaConfig c = preset_config("zaya1-base");
  InferenceLayout il;
  il.batch = 1;
  il.context = 32768;
  const LatencyPrediction r = predict_latency(c, il, g);
  // K and V at kv_width (256) against 2 x hidden (4096) per token and layer:
  // 8x, less the tiny conv state.
  EXPECT_NEAR(r.kv_bytes_uncompressed / r.kv_bytes, double(c.hidden) / double(c.kv_width()), 0.05);
  EXPECT_NEAR(r.experts_touched, 1.0, 1e-12);  // top-1 at batch 1
  EXPECT_TRUE(r.decode_memory_bound);
  il.batch = 256;
  const LatencyPrediction big = predict_latency(c, il, g);
  EXPECT_NEAR(big.experts_touched, double(c.experts), 1e-3);
  EXPECT_GT(big.decode_tokens_per_second, r.decode_tokens_per_second);
  il.context = 1024;
  il.batch = 1;
  const LatencyPrediction short_ctx = predict_latency(c, il, g);
  EXPECT_LT(short_ctx.prefill_seconds, r.prefill_seconds);
}

TEST(MoeTradeoff, HoldsTotalExpertWidthFixed) {
  const GemmModel g(*find_builtin_profile("h200"));
  const ZayaConfig c = preset_config("zaya1-base");
  TrainLayout L;
  L.micro_batch = 1;
  L.seq_len = 4096;
  L.dtype = "bf16";
  InferenceLayout il;
  const std::vector<MoeTradeoffRow> rows = moe_tradeoff(c, L, il, g);
  ASSERT_GE(rows.size(), 6u);
  int bases = 0;
  for (const MoeTradeoffRow& r : rows) {
    EXPECT_EQ(r.config.experts * r.config.expert_ffn, c.experts * c.expert_ffn);
    EXPECT_GT(r.train_tokens_per_second, 0);
    EXPECT_GT(r.decode_seconds, 0);
    bases += r.is_base;
  }
  // Top-1 rows: narrower experts (more of them) mean fewer active parameters.
  int64_t last_e = 0, last_active = 0;
  for (const MoeTradeoffRow& r : rows) {
    if (r.config.top_k != 1) continue;
    if (last_e > 0) {
      EXPECT_GT(r.config.experts, last_e);
      EXPECT_LT(r.active_params, last_active);
    }
    last_e = r.config.experts;
    last_active = r.active_params;
  }
  EXPECT_EQ(bases, 1);
}

}  // namespace
}  // namespace zaya
