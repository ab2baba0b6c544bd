// rl.sample_with_trainer (rl/trainer_sampler.h, docs/rl.md "Parity"): the
// rollout's log-probability of every sampled token equals, bit for bit, the
// one the trainer's forward of the finished rows gives it (the old policy of
// the loss), in float32 and with bf16 GEMMs, over several micro-batches with
// padding rows; the samples stop at their token limit, a stop id, or a stop
// string. Under expert parallelism (a MicroBatchAgreement) the forwards a
// rank runs for the other ranks of its group, after its own samples ended,
// change none of its samples.
#include "zaya/rl/trainer_sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "zaya/data/test_util.h"
#include "zaya/infer/test_util.h"
#include "zaya/rl/rl_batch.h"

namespace zaya {
namespace {

constexpr int64_t kSamplerMicro = 4, kSamplerAccum = 2, kSamplerSeq = 20, kSamplerGroup = 2;

struct Parity {
  int64_t targets = 0, differ = 0;
  std::vector<RolloutSample> samples;
};

Parity trainer_sampled_parity(bool bf16, const RolloutSettings& settings, const MicroBatchAgreement& agree = {},
                              int64_t* forwards = nullptr) {
  const ZayaConfig c = testing::small_test_config();
  const std::unique_ptr<ZayaModel> model = testing::random_model(c, 4);
  if (bf16) model->enable_bf16_gemms();
  ModelWorkspace ws(c, kSamplerMicro, kSamplerSeq, true);
  if (bf16) ws.reserve_bf16_gemms();
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  std::vector<RlPrompt> prompts(3);
  for (size_t p = 0; p < prompts.size(); ++p)
    for (size_t i = 0; i < 4 + 3 * p; ++i)
      prompts[p].ids.push_back(int32_t(philox4x32(8, p, i)[0] % c.real_vocab_size));
  std::vector<const RlPrompt*> ps;
  for (const RlPrompt& p : prompts) ps.push_back(&p);
  const RowsForward forward = [&](int64_t, const int32_t* ids) {
    if (forwards != nullptr) ++*forwards;
    model_forward(*model, ws, ids, nullptr, kSamplerMicro, kSamplerSeq, {});
    return static_cast<const float*>(ws.logits());
  };
  Parity out;
  out.samples =
      sample_with_trainer(forward, {kSamplerMicro, kSamplerSeq, kSamplerAccum, c.vocab_size, c.real_vocab_size}, tok,
                          ps, kSamplerGroup, settings, 11, nullptr, agree);
  RolloutBatches rows(kSamplerMicro, kSamplerSeq, kSamplerAccum);
  rows.fill(out.samples, std::vector<float>(out.samples.size(), 1.0f));
  // The old policy: the trainer's forward of the finished rows, with their targets.
  for (int64_t a = 0; a < kSamplerAccum; ++a) {
    const int64_t at = a * kSamplerMicro * kSamplerSeq;
    model_forward(*model, ws, rows.ids() + at, rows.targets() + at, kSamplerMicro, kSamplerSeq, {});
    for (int64_t t = 0; t < kSamplerMicro * kSamplerSeq; ++t) {
      if (rows.targets()[at + t] < 0) continue;
      const float train = -ws.token_loss()[t], rollout = rows.decoder_logprobs()[at + t];
      ++out.targets;
      out.differ += std::memcmp(&train, &rollout, sizeof(float)) != 0;
    }
  }
  return out;
}

TEST(TrainerSampler, RolloutLogprobsAreTheTrainersBitForBit) {
  RolloutSettings s;
  s.sampling = {1.0, 0, 1.0, 0};
  s.max_new_tokens = 9;
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "f32");
    const Parity p = trainer_sampled_parity(bf16, s);
    ASSERT_EQ(p.samples.size(), size_t(3 * kSamplerGroup));
    for (const RolloutSample& x : p.samples) EXPECT_EQ(x.tokens.size(), 9u);
    EXPECT_EQ(p.targets, 9 * 3 * kSamplerGroup);
    EXPECT_EQ(p.differ, 0) << "of " << p.targets;
  }
}

TEST(TrainerSampler, StopsAtStopIdsAndStrings) {
  RolloutSettings s;
  s.sampling = {1.0, 0, 1.0, 0};
  s.max_new_tokens = 9;
  const Parity free = trainer_sampled_parity(false, s);
  // A stop id: the first sample's third token (the other rows' tokens do not change).
  RolloutSettings by_id = s;
  by_id.stop_ids = {free.samples[0].tokens[2]};
  const Parity id = trainer_sampled_parity(false, by_id);
  EXPECT_LE(id.samples[0].tokens.size(), 3u);
  EXPECT_EQ(id.samples[0].tokens.back(), by_id.stop_ids[0]);
  EXPECT_EQ(id.differ, 0);
  // A stop string: the second sample's first token's text; the sample ends there and its text is cut before it.
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  RolloutSettings by_text = s;
  by_text.stop_strings = {tok.decode({free.samples[1].tokens[0]})};
  ASSERT_FALSE(by_text.stop_strings[0].empty());
  const Parity text = trainer_sampled_parity(false, by_text);
  EXPECT_EQ(text.samples[1].tokens.size(), 1u);
  EXPECT_EQ(text.samples[1].text, "");
  EXPECT_EQ(text.differ, 0);
}

TEST(TrainerSampler, ForwardsRunForTheGroupChangeNoSample) {
  RolloutSettings s;
  s.sampling = {1.0, 0, 1.0, 0};
  s.max_new_tokens = 9;
  int64_t alone = 0;
  const Parity free = trainer_sampled_parity(false, s, {}, &alone);
  s.stop_ids = {free.samples[0].tokens[2]};  // this rank's samples end at different tokens
  const Parity own = trainer_sampled_parity(false, s, {}, &alone);
  // Another rank of the ep group has a sample growing in every micro-batch for 12 rounds (longer than any here).
  int64_t rounds = 0, forwards = 0;
  const MicroBatchAgreement peer = [&](std::vector<uint8_t>& busy) {
    ASSERT_EQ(busy.size(), size_t(kSamplerAccum));
    if (rounds++ < 12) std::fill(busy.begin(), busy.end(), uint8_t(1));
  };
  const Parity grouped = trainer_sampled_parity(false, s, peer, &forwards);
  EXPECT_EQ(forwards, 12 * kSamplerAccum) << "every micro-batch each round, until the peer is done";
  EXPECT_EQ(rounds, 13) << "the sampling ends when no rank of the group has a sample growing";
  ASSERT_EQ(grouped.samples.size(), own.samples.size());
  EXPECT_LE(own.samples[0].tokens.size(), 3u);
  for (size_t j = 0; j < own.samples.size(); ++j) {
    EXPECT_EQ(grouped.samples[j].tokens, own.samples[j].tokens) << "sample " << j;
    EXPECT_EQ(grouped.samples[j].logprobs, own.samples[j].logprobs) << "sample " << j;
  }
  EXPECT_EQ(grouped.differ, 0);
}

}  // namespace
}  // namespace zaya
