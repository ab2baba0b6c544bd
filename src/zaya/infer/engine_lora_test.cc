// Several LoRA adapters in one batch (StepChunk::lora, step_lora.h): each
// sequence of a batch that mixes three adapters and the base gets exactly the
// logits it gets decoded alone with its adapter, bit for bit where every
// product takes the decode kernels (at most kMatvecMaxTokens rows: every
// row's sums in a fixed order), and within float rounding where a long mixed
// prefill takes a GEMM whose blocking depends on the row count. A chunk's
// adapter gives the bits of the same adapter set on the model (`--lora DIR`).
#include <gtest/gtest.h>

#include <cstring>

#include "zaya/infer/engine.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

using testing::logits_error;
using testing::random_tokens;
using testing::trained_adapter;

struct AdaptedSeq {
  const LoraAdapters* lora = nullptr;
  int64_t prompt = 0;  // tokens of the first chunk; then one token per step
};

// Logits [steps, V] of each sequence: its prompt as one chunk (logits at its
// last token), then one token per step (teacher-forced from `ids`); every
// sequence in one step when `together`, else each alone in slot 0.
std::vector<std::vector<float>> run_adapted(InferenceEngine& engine, const std::vector<AdaptedSeq>& seqs,
                                            const std::vector<int32_t>& ids, int64_t decode_steps, bool together) {
  const int64_t V = engine.config().vocab_size;
  std::vector<std::vector<float>> out(seqs.size());
  const auto step = [&](const std::vector<size_t>& which, bool first) {
    std::vector<StepChunk> chunks;
    for (size_t i : which) {
      const int32_t slot = together ? int32_t(i) : 0;
      const int64_t at = first ? 0 : engine.length(slot);
      chunks.push_back({slot, ids.data() + at, first ? seqs[i].prompt : 1, LogitsWanted::kLast, false, seqs[i].lora});
    }
    engine.step(chunks);
    EXPECT_EQ(engine.logit_rows(), int64_t(which.size()));
    for (int64_t r = 0; r < engine.logit_rows(); ++r) {
      std::vector<float>& o = out[which[size_t(engine.logit_row_chunk(r))]];
      o.resize(o.size() + size_t(V));
      engine.logits(r, r + 1, o.data() + o.size() - size_t(V));
    }
  };
  if (together) {
    std::vector<size_t> all(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      all[i] = i;
      engine.reset(int32_t(i));
    }
    for (int64_t s = 0; s <= decode_steps; ++s) step(all, s == 0);
  } else {
    for (size_t i = 0; i < seqs.size(); ++i) {
      engine.reset(0);
      for (int64_t s = 0; s <= decode_steps; ++s) step({i}, s == 0);
    }
  }
  return out;
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0);
}

TEST(EngineLora, MixedAdaptersInOneBatchGiveEachSequenceItsAloneBits) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 31);
  auto im = InferModel::from_model(*model);
  const std::vector<LoraTarget> attention = LoraConfig().targets;
  // Three adapters of different targets and ranks: attention only; every target (router and experts too); rank 8.
  auto a = trained_adapter(c, 3, attention);
  auto b = trained_adapter(c, 4, all_lora_targets());
  auto d = trained_adapter(c, 5, all_lora_targets(), 8);
  // One token stream for every sequence: a row given another sequence's adapter would show.
  const std::vector<int32_t> ids = random_tokens(40, c.real_vocab_size, 32);
  EngineOptions o;
  o.max_sequences = 5;
  o.max_context = 40;
  o.max_step_tokens = 64;
  InferenceEngine engine(*im, o);
  const int64_t V = c.vocab_size;
  // Prompts of 14 rows in all: the mixed prefill takes the decode kernels too.
  const std::vector<AdaptedSeq> small = {{a.get(), 3}, {b.get(), 4}, {nullptr, 2}, {d.get(), 3}, {b.get(), 2}};
  const std::vector<std::vector<float>> mixed = run_adapted(engine, small, ids, 8, true);
  const std::vector<std::vector<float>> alone = run_adapted(engine, small, ids, 8, false);
  std::vector<AdaptedSeq> base = small;
  for (AdaptedSeq& s : base) s.lora = nullptr;
  const std::vector<std::vector<float>> base_alone = run_adapted(engine, base, ids, 8, false);
  for (size_t i = 0; i < small.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "sequence " << i);
    ASSERT_EQ(mixed[i].size(), size_t(9 * V));
    EXPECT_TRUE(bits_equal(mixed[i], alone[i]))
        << "differs by " << logits_error(mixed[i].data(), alone[i].data(), 9, V, c.real_vocab_size);
    if (small[i].lora != nullptr) {  // the adapter matters: the test would be vacuous otherwise
      EXPECT_GT(logits_error(alone[i].data(), base_alone[i].data(), 9, V, c.real_vocab_size), 1e-3);
    }
  }
  // A chunk's adapter is the model's own adapter (`--lora DIR`) bit for bit.
  auto with_b = InferModel::from_model(*model);
  with_b->set_lora(trained_adapter(c, 4, all_lora_targets()));
  InferenceEngine engine_b(*with_b, o);
  const std::vector<std::vector<float>> model_b = run_adapted(engine_b, {{nullptr, 4}}, ids, 8, false);
  EXPECT_TRUE(bits_equal(model_b[0], alone[1]));

  // A long mixed prefill (49 rows: GEMMs) stays within float rounding of each sequence alone.
  const std::vector<AdaptedSeq> large = {{a.get(), 20}, {nullptr, 9}, {d.get(), 13}, {b.get(), 7}};
  const std::vector<std::vector<float>> mixed_large = run_adapted(engine, large, ids, 4, true);
  const std::vector<std::vector<float>> alone_large = run_adapted(engine, large, ids, 4, false);
  for (size_t i = 0; i < large.size(); ++i)
    EXPECT_LT(logits_error(mixed_large[i].data(), alone_large[i].data(), 5, V, c.real_vocab_size), 2e-5)
        << "sequence " << i;
}

// An adapter made for another model is refused by the step, naming the chunk, before anything changes.
TEST(EngineLora, RefusesAChunkWhoseAdapterDoesNotFit) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 33);
  auto im = InferModel::from_model(*model);
  ZayaConfig wider = c;
  wider.hidden = 2 * c.hidden;
  auto other = trained_adapter(wider, 3, LoraConfig().targets);
  EngineOptions o;
  o.max_context = 8;
  InferenceEngine engine(*im, o);
  const std::vector<int32_t> ids = random_tokens(4, c.real_vocab_size, 34);
  StepChunk ch{0, ids.data(), 4, LogitsWanted::kLast, false, other.get()};
  try {
    engine.step({&ch, 1});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chunk 0: its LoRA adapter does not fit"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine.length(0), 0);
}

}  // namespace
}  // namespace zaya
