// The cached decoder against the full-sequence forward pass: prefill then
// token-by-token decode, ragged batches of sequences with different prompt
// lengths, chunked prefill, forked slots, memory-mapped bf16 and f32 weights
// from sharded Hugging Face directories, and the PyTorch golden logits.
#include "zaya/infer/engine.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "zaya/core/huge_pages.h"
#include "zaya/core/test_util.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/infer/test_util.h"
#include "zaya/io/safetensors_file.h"

namespace zaya {
namespace {

using testing::logits_error;
using testing::random_tokens;
using testing::reference_logits;
using testing::step_logits;
using testing::trained_adapter;

// Prefill `prefill` tokens of `ids` in one step, then decode the rest one token
// per step; returns the logits of every position [S, V].
std::vector<float> prefill_then_decode(InferenceEngine& engine, int32_t slot, const std::vector<int32_t>& ids,
                                       int64_t prefill) {
  const int64_t V = engine.config().vocab_size, S = int64_t(ids.size());
  std::vector<float> out(S * V);
  engine.reset(slot);
  StepChunk first{slot, ids.data(), prefill, LogitsWanted::kAll};
  engine.step({&first, 1});
  engine.logits(0, prefill, out.data());
  for (int64_t t = prefill; t < S; ++t) {
    StepChunk one{slot, ids.data() + t, 1, LogitsWanted::kLast};
    engine.step({&one, 1});
    EXPECT_EQ(engine.logit_rows(), 1);
    EXPECT_EQ(engine.logit_row_position(0), t);
    engine.logits(0, 1, out.data() + t * V);
  }
  EXPECT_EQ(engine.length(slot), S);
  return out;
}

TEST(Engine, PrefillThenDecodeMatchesFullSequence) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 11);
  auto im = InferModel::from_model(*model);
  EXPECT_EQ(im->matrix_dtype(), "f32");
  const std::vector<int32_t> ids = random_tokens(40, c.real_vocab_size, 5);
  const std::vector<float> ref = reference_logits(*model, ids);
  EngineOptions o;
  o.max_context = 64;
  InferenceEngine engine(*im, o);
  // Every split point, including a one-token prefill and a whole-sequence prefill
  // (a long prefill takes the sgemm attention path, a short one the decode path).
  for (int64_t prefill : {1, 2, 3, 5, 17, 40}) {
    const std::vector<float> got = prefill_then_decode(engine, 0, ids, prefill);
    EXPECT_LT(logits_error(got.data(), ref.data(), 40, c.vocab_size, c.real_vocab_size), 2e-5) << "prefill " << prefill;
  }
}

// int8 weights (Q8_0 blocks) for attention, experts and the tied LM head: the
// router and convolutions become bf16, decode reads fewer bytes, prefill
// and decode agree with each other, and the logits stay close to f32's.
// The int8 products also round their activations to int8 blocks
// (ops/matvec_q8.h): an error per value of at most half the block's scale,
// the same bound as the weights' own rounding, so the two together stay of
// the same order (sqrt 2 for independent rounding errors). Measured on this
// model: 0.0053 with float activations (the kernel before), 0.0089 with int8
// ones; the bound 0.03 holds both with a margin for other seeds and compilers.
TEST(Engine, Int8WeightsStayCloseToF32) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 13);
  auto f32 = InferModel::from_model(*model);
  auto i8 = InferModel::from_model(*model, "int8");
  EXPECT_EQ(i8->matrix_dtype(), "int8+bf16");
  const InferWeights& w = i8->weights();
  EXPECT_EQ(w.attn[0].q.type, WeightType::kI8);
  EXPECT_EQ(w.attn[1].o.type, WeightType::kI8);
  EXPECT_EQ(w.moe[2].fc1[3].type, WeightType::kI8);
  EXPECT_EQ(w.moe[0].down.type, WeightType::kBF16);
  EXPECT_EQ(w.moe[0].mlp4.type, WeightType::kBF16);
  EXPECT_EQ(w.attn[0].conv_b.type, WeightType::kBF16);
  EXPECT_EQ(w.embed.type, WeightType::kI8);  // the tied LM head is int8 too; the lookup dequantizes a row
  EXPECT_EQ(w.lm_head.data, w.embed.data);
  // fc2's rows of 48 are no whole Q8_0 blocks of 32: that matrix stays bf16.
  EXPECT_EQ(w.moe[2].fc2[3].type, WeightType::kBF16);
  EXPECT_LT(i8->weight_bytes().per_expert * 2, f32->weight_bytes().per_expert);
  const std::vector<int32_t> ids = random_tokens(24, c.real_vocab_size, 6);
  const std::vector<float> ref = reference_logits(*model, ids);
  EngineOptions o;
  o.max_context = 32;
  o.bf16_activations = false;  // the bf16 matrices on the exact kernel: prefill and decode compute the same
  InferenceEngine engine(*i8, o);
  const std::vector<float> whole = prefill_then_decode(engine, 0, ids, 24);
  const std::vector<float> split = prefill_then_decode(engine, 0, ids, 3);
  EXPECT_LT(logits_error(split.data(), whole.data(), 24, c.vocab_size, c.real_vocab_size), 2e-5);
  const double err = logits_error(whole.data(), ref.data(), 24, c.vocab_size, c.real_vocab_size);
  EXPECT_LT(err, 0.03);
  EXPECT_GT(err, 1e-6);  // the weights really changed
}

// The KV cache in bf16 (engine.h) where the matrices are bf16 or int8 and
// bf16_activations is on; f32 for an f32 model or with bf16_activations off
// (--exact). Pages take half the bytes. On an int8 model (whose products run
// the same kernel for any step size) prefill and decode still agree at every
// split, since the step's keys and values are rounded before anything reads
// them; a forked slot (copy: the partial page copied in bf16) continues
// exactly as its source; and the logits stay within a few bf16 roundings of
// the f32 cache's.
TEST(Engine, Bf16KvCacheOnBf16AndInt8Models) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 19);
  auto f32 = InferModel::from_model(*model);
  auto b16 = InferModel::from_model(*model, "bf16");
  auto i8 = InferModel::from_model(*model, "int8");
  EngineOptions o;
  o.max_sequences = 2;
  o.max_context = 32;
  EngineOptions exact = o;
  exact.bf16_activations = false;
  EXPECT_FALSE(InferenceEngine(*f32, o).kv_bf16());
  EXPECT_TRUE(InferenceEngine(*b16, o).kv_bf16());
  EXPECT_FALSE(InferenceEngine(*b16, exact).kv_bf16());
  InferenceEngine engine(*i8, o), reference(*i8, exact);
  ASSERT_TRUE(engine.kv_bf16());
  ASSERT_FALSE(reference.kv_bf16());
  EXPECT_EQ(2 * engine.page_bytes(0), reference.page_bytes(0));
  // Steps of at most 16 rows: every product on the matvec kernel in both engines.
  const int64_t S = 24, V = c.vocab_size;
  const std::vector<int32_t> ids = random_tokens(S, c.real_vocab_size, 11);
  const std::vector<float> f32_cache = prefill_then_decode(reference, 0, ids, 16);
  const std::vector<float> whole = prefill_then_decode(engine, 0, ids, 16);
  for (int64_t prefill : {1, 3}) {
    const std::vector<float> split = prefill_then_decode(engine, 0, ids, prefill);
    EXPECT_LT(logits_error(split.data(), whole.data(), S, V, c.real_vocab_size), 2e-5) << "prefill " << prefill;
  }
  // bf16 keeps 8 significant bits: each cached value is off by at most 2^-9 of
  // itself, which moves the attention outputs (and through the residual
  // stream the logits) by a small multiple of that.
  const double err = logits_error(whole.data(), f32_cache.data(), S, V, c.real_vocab_size);
  std::printf("bf16 KV cache vs f32: max logit error %.3g of the largest logit\n", err);
  EXPECT_LT(err, 4.0 / 512);
  EXPECT_GT(err, 1e-7);  // the cache really is bf16
  // Fork after 5 tokens (a partial page) and continue both slots with the same tokens.
  engine.reset(0);
  StepChunk first{0, ids.data(), 5, LogitsWanted::kNone};
  engine.step({&first, 1});
  engine.copy(0, 1);
  for (int64_t t = 5; t < 12; ++t) {
    StepChunk both[2] = {{0, ids.data() + t, 1, LogitsWanted::kLast}, {1, ids.data() + t, 1, LogitsWanted::kLast}};
    engine.step(both);
    const std::vector<float> rows = step_logits(engine);
    ASSERT_EQ(std::memcmp(rows.data(), rows.data() + V, sizeof(float) * V), 0) << "position " << t;
  }
}

// Sliding-window blocks (spec §12): the training model's forward with a window
// of 3 on the even blocks and its own RoPE base there is what the decoder
// computes, prefill then decode, across the window boundary and past a wrapped
// ring; and it differs from the full-attention model's.
TEST(Engine, SlidingWindowMatchesTheTrainingForward) {
  ZayaConfig c = testing::small_test_config();
  c.sliding_window = 3;
  c.sliding_blocks = sliding_block_pattern("even", c.num_blocks, "test");
  c.sliding_rope_theta = 700;
  auto model = testing::random_model(c, 12);
  auto im = InferModel::from_model(*model);
  const std::vector<int32_t> ids = random_tokens(30, c.real_vocab_size, 6);
  const std::vector<float> ref = reference_logits(*model, ids);
  EngineOptions o;
  o.max_context = 64;
  InferenceEngine engine(*im, o);
  for (int64_t prefill : {1, 2, 4, 30}) {
    const std::vector<float> got = prefill_then_decode(engine, 0, ids, prefill);
    EXPECT_LT(logits_error(got.data(), ref.data(), 30, c.vocab_size, c.real_vocab_size), 2e-5) << "prefill " << prefill;
  }
  ZayaConfig full = c;
  full.sliding_window = 0;
  full.sliding_blocks.clear();
  auto full_model = testing::random_model(full, 12);
  const std::vector<float> full_ref = reference_logits(*full_model, ids);
  EXPECT_GT(logits_error(full_ref.data(), ref.data(), 30, c.vocab_size, c.real_vocab_size), 1e-3);
}

// The decoder with an untied head, plain merges (scale_residual_merge = false)
// and float32 RoPE angles equals the training forward of the same model.
TEST(Engine, UntiedHeadPlainMergesAndF32RopeMatchTheTrainingForward) {
  for (int variant = 0; variant < 3; ++variant) {
    ZayaConfig c = testing::small_test_config();
    c.tie_word_embeddings = variant == 1;
    c.scale_residual_merge = variant == 0;
    c.rope_precision = variant == 2 ? RopePrecision::kF32 : RopePrecision::kF64;
    auto model = testing::random_model(c, 13);
    auto im = InferModel::from_model(*model);
    const std::vector<int32_t> ids = random_tokens(20, c.real_vocab_size, 7);
    const std::vector<float> ref = reference_logits(*model, ids);
    EngineOptions o;
    o.max_context = 32;
    InferenceEngine engine(*im, o);
    for (int64_t prefill : {1, 5, 20}) {
      const std::vector<float> got = prefill_then_decode(engine, 0, ids, prefill);
      EXPECT_LT(logits_error(got.data(), ref.data(), 20, c.vocab_size, c.real_vocab_size), 2e-5)
          << "variant " << variant << ", prefill " << prefill;
    }
  }
}

// Convolution kernel sizes other than ZAYA1's 2/2 (cca_time0 / cca_time1): the
// decoder's conv state of (k0 - 1) + (k1 - 1) rows per slot, across prefill /
// decode splits, chunked prefill, a ragged step of two sequences and a forked
// slot, equals the training forward. 1/1 keeps no conv state at all.
TEST(Engine, OtherConvolutionKernelSizesMatchTheTrainingForward) {
  for (const auto& [k0, k1] : {std::pair{3, 4}, std::pair{4, 1}, std::pair{1, 3}, std::pair{1, 1}}) {
    SCOPED_TRACE(::testing::Message() << "cca_time " << k0 << "/" << k1);
    ZayaConfig c = testing::small_test_config();
    c.conv_kernel0 = k0;
    c.conv_kernel1 = k1;
    auto model = testing::random_model(c, 15);
    auto im = InferModel::from_model(*model);
    const int64_t V = c.vocab_size, S = 24;
    const std::vector<int32_t> ids = random_tokens(S, c.real_vocab_size, 9);
    const std::vector<int32_t> other = random_tokens(S, c.real_vocab_size, 10);
    const std::vector<float> ref = reference_logits(*model, ids), ref_other = reference_logits(*model, other);
    EngineOptions o;
    o.max_sequences = 3;
    o.max_context = 32;
    InferenceEngine engine(*im, o);
    EXPECT_EQ(engine.state_bytes_per_slot(),
              int64_t(sizeof(float)) * c.num_blocks *
                  (2 * 32 * c.kv_width() + (k0 + k1 - 2) * c.conv_channels() + c.kv_width() / 2));
    for (int64_t prefill : {1, 2, 5, 24}) {
      const std::vector<float> got = prefill_then_decode(engine, 0, ids, prefill);
      EXPECT_LT(logits_error(got.data(), ref.data(), S, V, c.real_vocab_size), 2e-5) << "prefill " << prefill;
    }
    // Two sequences per step in chunks of 2 and 1 (shorter than the conv state when k0 + k1 - 2 > 2),
    // then the first forked and all three continued in one ragged step.
    engine.reset(0);
    engine.reset(1);
    std::vector<float> got(S * V), got_other(S * V), got_fork(S * V);
    for (int64_t i = 0; i < 8; ++i) {
      StepChunk step[2] = {{0, ids.data() + 2 * i, 2, LogitsWanted::kAll},
                           {1, other.data() + i, 1, LogitsWanted::kAll}};
      engine.step(step);
      engine.logits(0, 2, got.data() + 2 * i * V);
      engine.logits(2, 3, got_other.data() + i * V);
    }
    engine.copy(0, 2);
    StepChunk rest[3] = {{0, ids.data() + 16, 8, LogitsWanted::kAll},
                         {1, other.data() + 8, 16, LogitsWanted::kAll},
                         {2, ids.data() + 16, 1, LogitsWanted::kAll}};
    engine.step(rest);
    engine.logits(0, 8, got.data() + 16 * V);
    engine.logits(8, 24, got_other.data() + 8 * V);
    engine.logits(24, 25, got_fork.data() + 16 * V);
    EXPECT_LT(logits_error(got.data(), ref.data(), S, V, c.real_vocab_size), 2e-5);
    EXPECT_LT(logits_error(got_other.data(), ref_other.data(), S, V, c.real_vocab_size), 2e-5);
    EXPECT_LT(logits_error(got_fork.data() + 16 * V, ref.data() + 16 * V, 1, V, c.real_vocab_size), 2e-5);
  }
}

// A LoRA adapter applied unmerged by the decoder (InferModel::set_lora) gives
// the training forward's logits with the same adapter (model/lora.h), prefill
// then decode; beside int8 base matrices (which it cannot be merged into) it
// stays as close to that as int8 alone stays to f32. For the attention
// targets, and for every target (router matrices and experts too).
TEST(Engine, UnmergedLoraAdapterMatchesTheTrainingForward) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 14);
  const std::vector<int32_t> ids = random_tokens(24, c.real_vocab_size, 8);
  const std::vector<float> base_ref = reference_logits(*model, ids);
  const std::vector<LoraTarget> attention = LoraConfig().targets;
  std::unique_ptr<LoraAdapters> adapter = trained_adapter(c, 3, attention);
  for (const std::vector<LoraTarget>& targets : {attention, all_lora_targets()}) {
    SCOPED_TRACE(::testing::Message() << targets.size() << " targets");
    adapter = trained_adapter(c, 3, targets);
    model->set_lora(adapter.get());
    ModelWorkspace ws(c, 1, 24, false);
    ws.enable_lora(c, adapter->config());
    model_forward(*model, ws, ids.data(), nullptr, 1, 24, {});
    model->set_lora(nullptr);
    const std::vector<float> ref(ws.logits(), ws.logits() + 24 * c.vocab_size);
    ASSERT_GT(logits_error(ref.data(), base_ref.data(), 24, c.vocab_size, c.real_vocab_size), 1e-2)
        << "the adapter does not change the logits: the test would be vacuous";
    EngineOptions o;
    o.max_context = 32;
    for (const char* dtype : {"f32", "int8"}) {
      auto im = InferModel::from_model(*model, dtype == std::string("int8") ? "int8" : "auto");
      im->set_lora(trained_adapter(c, 3, targets));
      ASSERT_NE(im->lora(), nullptr);
      InferenceEngine engine(*im, o);
      for (int64_t prefill : {1, 24}) {
        const std::vector<float> got = prefill_then_decode(engine, 0, ids, prefill);
        const double err = logits_error(got.data(), ref.data(), 24, c.vocab_size, c.real_vocab_size);
        EXPECT_LT(err, dtype == std::string("f32") ? 2e-5 : 0.03) << dtype << " prefill " << prefill;
      }
    }
  }
  auto other = InferModel::from_model(*model);
  ZayaConfig wider = c;
  wider.hidden = 2 * c.hidden;
  EXPECT_THROW(other->set_lora(std::make_unique<LoraAdapters>(wider, adapter->config())), Error);
  ZayaConfig wider_experts = c;  // only the experts' width differs: an expert adapter would not fit
  wider_experts.expert_ffn = 2 * c.expert_ffn;
  EXPECT_THROW(other->set_lora(std::make_unique<LoraAdapters>(wider_experts, adapter->config())), Error);
}

// Three sequences of different prompt lengths in one ragged prefill step, then
// decoded together (one token each per step); a fourth joins mid-way
// (continuous batching); one finishes early. Each must equal its own
// full-sequence reference.
TEST(Engine, RaggedBatchesMatchFullSequence) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 12);
  auto im = InferModel::from_model(*model);
  const int64_t V = c.vocab_size;
  std::vector<std::vector<int32_t>> seqs;
  const std::vector<int64_t> lengths = {30, 21, 26, 18}, prompts = {3, 9, 1, 6};
  for (size_t i = 0; i < lengths.size(); ++i) seqs.push_back(random_tokens(lengths[i], c.real_vocab_size, 20 + i));
  EngineOptions o;
  o.max_sequences = 4;
  o.max_context = 32;
  o.max_step_tokens = 24;
  InferenceEngine engine(*im, o);
  std::vector<std::vector<float>> got(seqs.size());
  std::vector<int64_t> done(seqs.size(), 0);  // tokens fed per sequence
  for (size_t i = 0; i < seqs.size(); ++i) got[i].resize(lengths[i] * V);
  for (int step = 0; step < 64; ++step) {
    std::vector<StepChunk> chunks;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (i == 3 && step < 5) continue;  // joins later
      if (done[i] >= lengths[i]) continue;
      const int64_t n = done[i] == 0 ? prompts[i] : 1;
      chunks.push_back({int32_t(i), seqs[i].data() + done[i], n, LogitsWanted::kAll});
    }
    if (chunks.empty()) break;
    engine.step(chunks);
    for (int64_t r = 0; r < engine.logit_rows(); ++r) {
      const int32_t i = chunks[engine.logit_row_chunk(r)].slot;
      engine.logits(r, r + 1, got[i].data() + engine.logit_row_position(r) * V);
    }
    for (const StepChunk& ch : chunks) done[ch.slot] += ch.count;
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    ASSERT_EQ(done[i], lengths[i]);
    const std::vector<float> ref = reference_logits(*model, seqs[i]);
    EXPECT_LT(logits_error(got[i].data(), ref.data(), lengths[i], V, c.real_vocab_size), 2e-5) << "sequence " << i;
  }
}

// A prompt fed in chunks of several sizes (chunked prefill across steps, so
// the conv state, the delayed value and the cache cross chunk boundaries)
// gives the same logits as one prefill.
TEST(Engine, ChunkedPrefillMatchesFullSequence) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 13);
  auto im = InferModel::from_model(*model);
  const std::vector<int32_t> ids = random_tokens(50, c.real_vocab_size, 6);
  const std::vector<float> ref = reference_logits(*model, ids);
  EngineOptions o;
  o.max_context = 50;
  InferenceEngine engine(*im, o);
  const int64_t V = c.vocab_size;
  for (int64_t chunk : {2, 7, 13}) {
    engine.reset(0);
    std::vector<float> got(50 * V);
    for (int64_t t = 0; t < 50; t += chunk) {
      const int64_t n = std::min<int64_t>(chunk, 50 - t);
      StepChunk ch{0, ids.data() + t, n, LogitsWanted::kAll};
      engine.step({&ch, 1});
      engine.logits(0, n, got.data() + t * V);
    }
    EXPECT_LT(logits_error(got.data(), ref.data(), 50, V, c.real_vocab_size), 2e-5) << "chunk " << chunk;
  }
}

// copy() forks a sequence: continuing the fork equals continuing the original.
TEST(Engine, CopiedSlotContinuesIdentically) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 14);
  auto im = InferModel::from_model(*model);
  const std::vector<int32_t> ids = random_tokens(20, c.real_vocab_size, 8);
  const std::vector<float> ref = reference_logits(*model, ids);
  EngineOptions o;
  o.max_sequences = 3;
  o.max_context = 20;
  InferenceEngine engine(*im, o);
  StepChunk prefix{0, ids.data(), 12, LogitsWanted::kNone};
  engine.step({&prefix, 1});
  EXPECT_EQ(engine.logit_rows(), 0);
  engine.copy(0, 2);
  EXPECT_EQ(engine.length(2), 12);
  StepChunk rest[2] = {{2, ids.data() + 12, 8, LogitsWanted::kAll}, {0, ids.data() + 12, 3, LogitsWanted::kAll}};
  engine.step(rest);
  std::vector<float> got = step_logits(engine);
  const int64_t V = c.vocab_size;
  EXPECT_LT(logits_error(got.data(), ref.data() + 12 * V, 8, V, c.real_vocab_size), 2e-5);
  EXPECT_LT(logits_error(got.data() + 8 * V, ref.data() + 12 * V, 3, V, c.real_vocab_size), 2e-5);
}

// The paged KV cache: pages of 1, 3 or 16 positions give the same bits as one
// page holding the whole context (the former contiguous per-slot cache), for
// token-by-token decode and for prefills long enough for the sgemm path, on
// full attention and with sliding blocks (W = 3, pages leaving the window).
TEST(Engine, PagedCacheGivesTheSameBitsForAnyPageSize) {
  for (const bool slide : {false, true}) {
    ZayaConfig c = testing::small_test_config();
    if (slide) {
      c.sliding_window = 3;
      c.sliding_blocks = sliding_block_pattern("even", c.num_blocks, "test");
      c.sliding_rope_theta = 700;
    }
    auto model = testing::random_model(c, 18);
    auto im = InferModel::from_model(*model);
    const std::vector<int32_t> ids = random_tokens(40, c.real_vocab_size, 19);
    EngineOptions o;
    o.max_context = 40;
    o.max_step_tokens = 40;
    o.page_tokens = 40;
    InferenceEngine whole(*im, o);
    for (int64_t prefill : {1, 17, 40}) {
      const std::vector<float> ref = prefill_then_decode(whole, 0, ids, prefill);
      for (int64_t page : {1, 3, 16}) {
        o.page_tokens = page;
        InferenceEngine paged(*im, o);
        const std::vector<float> got = prefill_then_decode(paged, 0, ids, prefill);
        EXPECT_EQ(std::memcmp(got.data(), ref.data(), sizeof(float) * got.size()), 0)
            << (slide ? "sliding, " : "") << "page " << page << ", prefill " << prefill;
      }
    }
  }
}

// Snapshots share pages: two sequences started from one prefix reference its
// pages (reference count 3 with the snapshot), write only pages of their own,
// and give the bits each gives alone (the same steps from an empty slot);
// in one ragged step together they match the alone runs closely. Every
// reference count returns to zero when the slots are reset and the snapshot
// released. A partial page is copied on copy(), never shared.
TEST(Engine, SharedPrefixPagesAreReferencedNotCopied) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 20);
  auto im = InferModel::from_model(*model);
  const int64_t V = c.vocab_size;
  const std::vector<int32_t> prefix = random_tokens(12, c.real_vocab_size, 21);
  const std::vector<int32_t> a = random_tokens(6, c.real_vocab_size, 22), b = random_tokens(5, c.real_vocab_size, 23);
  EngineOptions o;
  o.max_sequences = 3;
  o.max_context = 32;
  o.page_tokens = 4;
  InferenceEngine engine(*im, o);
  const int64_t pool = engine.pool_pages(0);
  EXPECT_EQ(pool, 3 * 8);
  auto alone = [&](const std::vector<int32_t>& rest) {
    engine.reset(0);
    StepChunk p{0, prefix.data(), 12, LogitsWanted::kNone};
    engine.step({&p, 1});
    StepChunk r{0, rest.data(), int64_t(rest.size()), LogitsWanted::kAll};
    engine.step({&r, 1});
    std::vector<float> out = step_logits(engine);
    engine.reset(0);
    return out;
  };
  const std::vector<float> ref_a = alone(a), ref_b = alone(b);
  EXPECT_EQ(engine.free_pages(0), pool);
  StepChunk p{0, prefix.data(), 12, LogitsWanted::kNone};
  engine.step({&p, 1});
  InferenceEngine::Snapshot snap = engine.share(0);
  engine.reset(0);
  EXPECT_EQ(engine.free_pages(0), pool - 3);  // the snapshot's 3 pages, nothing else
  engine.start_from(snap, 1);
  engine.start_from(snap, 2);
  EXPECT_EQ(engine.length(1), 12);
  for (int32_t page : snap.pages[0]) EXPECT_EQ(engine.page_refs(0, page), 3);
  EXPECT_EQ(engine.free_pages(0), pool - 3);  // shared, not copied
  StepChunk ra{1, a.data(), 6, LogitsWanted::kAll}, rb{2, b.data(), 5, LogitsWanted::kAll};
  engine.step({&ra, 1});
  const std::vector<float> got_a = step_logits(engine);
  engine.step({&rb, 1});
  const std::vector<float> got_b = step_logits(engine);
  EXPECT_EQ(std::memcmp(got_a.data(), ref_a.data(), sizeof(float) * got_a.size()), 0);
  EXPECT_EQ(std::memcmp(got_b.data(), ref_b.data(), sizeof(float) * got_b.size()), 0);
  EXPECT_EQ(engine.pages_held(1), std::vector<int64_t>{5});  // 18 tokens: 3 shared + 2 own
  EXPECT_EQ(engine.free_pages(0), pool - 3 - 2 - 2);
  for (int32_t page : snap.pages[0]) EXPECT_EQ(engine.page_refs(0, page), 3);
  // Both again in one ragged step (other rows in the products: close, not equal).
  engine.start_from(snap, 1);
  engine.start_from(snap, 2);
  StepChunk both[2] = {{1, a.data(), 6, LogitsWanted::kAll}, {2, b.data(), 5, LogitsWanted::kAll}};
  engine.step(both);
  const std::vector<float> got = step_logits(engine);
  EXPECT_LT(logits_error(got.data(), ref_a.data(), 6, V, c.real_vocab_size), 2e-5);
  EXPECT_LT(logits_error(got.data() + 6 * V, ref_b.data(), 5, V, c.real_vocab_size), 2e-5);
  // copy() at 18 tokens: the 4 full pages shared, the partial fifth copied.
  engine.copy(1, 0);
  EXPECT_EQ(engine.page_refs(0, snap.pages[0][0]), 4);
  EXPECT_EQ(engine.free_pages(0), pool - 3 - 2 - 2 - 1);
  engine.reset(0);
  engine.reset(1);
  engine.reset(2);
  EXPECT_EQ(engine.free_pages(0), pool - 3);
  engine.release(snap);
  EXPECT_EQ(engine.free_pages(0), pool);
  for (int32_t page = 0; page < pool; ++page) ASSERT_EQ(engine.page_refs(0, page), 0) << page;
}

// A pool smaller than the slots at full context: a step that needs more pages
// than are free fails before it changes anything, and so does a fork.
TEST(Engine, FullPoolRefusesAStepCleanly) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 24);
  auto im = InferModel::from_model(*model);
  EngineOptions o;
  o.max_sequences = 2;
  o.max_context = 32;
  o.page_tokens = 4;
  InferenceEngine probe(*im, o);
  o.kv_pool_bytes = 3 * probe.page_bytes(0);
  InferenceEngine engine(*im, o);
  EXPECT_EQ(engine.pool_pages(0), 3);
  const std::vector<int32_t> ids = random_tokens(16, c.real_vocab_size, 25);
  StepChunk ten{0, ids.data(), 10, LogitsWanted::kLast};
  engine.step({&ten, 1});
  EXPECT_EQ(engine.free_pages(0), 0);
  StepChunk more{1, ids.data(), 1, LogitsWanted::kLast};
  testing::expect_error([&] { engine.step({&more, 1}); }, "the KV pool is full");
  EXPECT_EQ(engine.length(1), 0);
  testing::expect_error([&] { engine.copy(0, 1); }, "the KV pool is full");
  StepChunk two{0, ids.data() + 10, 2, LogitsWanted::kLast};  // into the partial third page: no new page
  engine.step({&two, 1});
  EXPECT_EQ(engine.length(0), 12);
}

// Weights written as a sharded Hugging Face directory in bf16 and in f32, then
// memory-mapped: bf16 matrices are used in place (never widened) without
// InferLoadOptions::huge_pages, and decode equals the full-sequence forward
// of the same weights; with it (the default) they are copied into huge pages
// and give the same logits bit for bit.
TEST(Engine, MappedShardedCheckpointsMatchFullSequence) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 15);
  const std::vector<int32_t> ids = random_tokens(24, c.real_vocab_size, 9);
  for (const std::string dtype : {"bf16", "f32"}) {
    testing::TempDir dir;
    HfSaveOptions save;
    save.dtype = dtype;
    save.max_shard_bytes = 64 << 10;  // many shards + model.safetensors.index.json
    save_hf_model(*model, dir.path(), save);
    ASSERT_TRUE(std::filesystem::exists(dir.file("model.safetensors.index.json")));
    auto reference = load_hf_model(dir.path());  // widened to f32: the same values
    const std::vector<float> ref = reference_logits(*reference, ids);
    InferLoadOptions mapped;
    mapped.huge_pages = false;
    auto im = InferModel::load(dir.path(), mapped);
    EXPECT_EQ(im->matrix_dtype(), dtype);
    // Every matrix except the repacked grouped conv comes straight from the mapping.
    EXPECT_EQ(im->mapped_matrices(), 1 + c.num_blocks * (5 + 4 + 2 * c.experts)) << dtype;
    EngineOptions o;
    o.max_context = 24;
    o.bf16_activations = false;  // exact f32 activations for the comparison
    InferenceEngine engine(*im, o);
    const std::vector<float> got = prefill_then_decode(engine, 0, ids, 7);
    EXPECT_LT(logits_error(got.data(), ref.data(), 24, c.vocab_size, c.real_vocab_size), 2e-5) << dtype;

    auto huge = InferModel::load(dir.path());
    EXPECT_EQ(huge->matrix_dtype(), dtype);
    const std::string thp = transparent_huge_pages_mode();
    const char* env = std::getenv("ZAYA_HUGE_PAGES");
    if (!thp.empty() && thp != "never" && !(env != nullptr && std::string(env) == "0")) {
      EXPECT_EQ(huge->mapped_matrices(), 0) << dtype;  // all copied, the files unmapped
    }
    InferenceEngine huge_engine(*huge, o);
    const std::vector<float> huge_got = prefill_then_decode(huge_engine, 0, ids, 7);
    ASSERT_EQ(huge_got.size(), got.size());
    EXPECT_EQ(std::memcmp(huge_got.data(), got.data(), got.size() * sizeof(float)), 0) << dtype;
  }
}

// bf16 weights with the bf16 GEMM prefill (activations rounded to bf16, as in
// bf16 PyTorch inference): close to the reference, not equal.
TEST(Engine, Bf16GemmPrefillIsClose) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 16);
  const std::vector<int32_t> ids = random_tokens(60, c.real_vocab_size, 10);
  auto im = InferModel::from_model(*model, "bf16");
  EXPECT_EQ(im->matrix_dtype(), "bf16");
  testing::TempDir dir;
  HfSaveOptions save;
  save.dtype = "bf16";
  save_hf_model(*model, dir.path(), save);
  const std::vector<float> ref = reference_logits(*load_hf_model(dir.path()), ids);
  EngineOptions o;
  o.max_context = 60;
  o.max_step_tokens = 64;
  InferenceEngine engine(*im, o);
  const std::vector<float> got = prefill_then_decode(engine, 0, ids, 50);
  const double err = logits_error(got.data(), ref.data(), 60, c.vocab_size, c.real_vocab_size);
  EXPECT_LT(err, 3e-2);
  std::printf("bf16 GEMM prefill: max logit error %.3g of the largest logit\n", err);
}

// Against PyTorch (tests/data/golden, float64 reference): both golden
// sequences as one ragged batch, 4-token prefills then decode.
TEST(Engine, MatchesGoldenPyTorchLogits) {
  const std::string dir = std::string(ZAYA_TEST_DATA_DIR) + "/golden";
  auto im = InferModel::load(dir);
  SafetensorsFile golden = SafetensorsFile::open(dir + "/golden.safetensors");
  const ZayaConfig& c = im->config();
  const int64_t B = 2, S = 9, V = c.vocab_size;
  std::vector<int32_t> ids(B * S);
  golden.read_i32("input_ids", ids.data(), {B, S});
  std::vector<float> ref(B * S * V), got(B * S * V);
  golden.read_f32("logits", ref.data(), {B, S, V});
  EngineOptions o;
  o.max_sequences = 2;
  o.max_context = S;
  InferenceEngine engine(*im, o);
  StepChunk prefill[2] = {{0, ids.data(), 4, LogitsWanted::kAll}, {1, ids.data() + S, 4, LogitsWanted::kAll}};
  engine.step(prefill);
  for (int64_t r = 0; r < 8; ++r) engine.logits(r, r + 1, got.data() + ((r / 4) * S + r % 4) * V);
  for (int64_t t = 4; t < S; ++t) {
    StepChunk step[2] = {{0, ids.data() + t, 1, LogitsWanted::kLast}, {1, ids.data() + S + t, 1, LogitsWanted::kLast}};
    engine.step(step);
    engine.logits(0, 1, got.data() + t * V);
    engine.logits(1, 2, got.data() + (S + t) * V);
  }
  // All V columns: padding rows are part of the reference too.
  EXPECT_LT(logits_error(got.data(), ref.data(), B * S, V, V), 1e-5);
}

TEST(Engine, RejectsBadSteps) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 17);
  auto im = InferModel::from_model(*model);
  EngineOptions o;
  o.max_sequences = 2;
  o.max_context = 10;
  o.max_step_tokens = 6;
  InferenceEngine engine(*im, o);
  const std::vector<int32_t> ids = random_tokens(10, c.real_vocab_size, 1);
  StepChunk too_long{0, ids.data(), 7, LogitsWanted::kLast};
  testing::expect_error([&] { engine.step({&too_long, 1}); }, "exceeds the step capacity 6");
  StepChunk twice[2] = {{1, ids.data(), 1, LogitsWanted::kLast}, {1, ids.data(), 1, LogitsWanted::kLast}};
  testing::expect_error([&] { engine.step(twice); }, "appears twice");
  const int32_t bad = int32_t(c.vocab_size);
  StepChunk oov{0, &bad, 1, LogitsWanted::kLast};
  testing::expect_error([&] { engine.step({&oov, 1}); }, "outside the vocabulary");
  StepChunk six{0, ids.data(), 6, LogitsWanted::kLast};
  engine.step({&six, 1});
  StepChunk five{0, ids.data(), 5, LogitsWanted::kLast};
  testing::expect_error([&] { engine.step({&five, 1}); }, "beyond the context length 10");
  EXPECT_EQ(engine.length(0), 6);  // a rejected step changes nothing
  o.max_context = 1000;
  testing::expect_error([&] { InferenceEngine e(*im, o); }, "max_position_embeddings");
}

}  // namespace
}  // namespace zaya
