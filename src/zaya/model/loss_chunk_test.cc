// train.loss_chunk (model/model.h, ModelWorkspace): the LM head and the
// cross-entropy a chunk of rows at a time, the head's backward formed in the
// forward while each chunk's logits exist. One chunk of every row is the same
// computation as keeping all logits, bit for bit; smaller chunks sum the
// head's weight gradient over the chunks, so they agree to rounding; the
// workspace holds one chunk of logits, as scratch; misuse is an internal error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

constexpr int64_t kBatch = 2, kSeq = 16, kRows = kBatch * kSeq;

struct ChunkedRun {
  std::vector<LossParts> parts;   // per micro-batch
  std::vector<float> token_loss;  // of the last forward
  std::vector<float> grads;       // accumulated over the micro-batches
};

std::vector<int32_t> chunk_test_tokens(uint64_t stream, int micro, int64_t vocab) {
  std::vector<int32_t> out(kRows);
  for (int64_t i = 0; i < kRows; ++i) out[i] = int32_t(philox4x32(stream, uint64_t(micro), uint64_t(i))[0] % vocab);
  return out;
}

// Two micro-batches into one gradient, as a training step does; some targets
// are -1 (no loss there).
ChunkedRun run_chunked(const ZayaConfig& c, int64_t loss_chunk, bool bf16) {
  ZayaModel model(c);
  model.init(5);
  float* p = model.param_data();
  const int64_t n = model.params().total_floats();
  for (int64_t i = 0; i < n; ++i) p[i] += 0.05f * normal01(81, 1, uint64_t(i));
  if (bf16) model.enable_bf16_gemms();
  ModelWorkspace ws(c, kBatch, kSeq, true, nullptr, nullptr, Recompute::kNone, {}, loss_chunk);
  EXPECT_EQ(ws.loss_chunk(), loss_chunk);
  ChunkedRun out;
  out.grads.assign(size_t(n), 0.0f);
  const ModelWeights g = bind_weights(c, model.params(), out.grads.data());
  const MoeLossOptions loss{0.01f, 0.001f};
  const float xent_scale = 1.0f / float(2 * kRows);
  for (int micro = 0; micro < 2; ++micro) {
    const std::vector<int32_t> ids = chunk_test_tokens(3, micro, c.real_vocab_size);
    std::vector<int32_t> targets = chunk_test_tokens(4, micro, c.real_vocab_size);
    for (int64_t i = 0; i < kRows; i += 7) targets[size_t(i)] = -1;
    const HeadGradient head{g.lm_head_VD, xent_scale};
    out.parts.push_back(model_forward(model, ws, ids.data(), targets.data(), kBatch, kSeq, loss, nullptr,
                                      loss_chunk > 0 ? &head : nullptr));
    model_backward(model, ws, g, xent_scale, 0.5f, loss);
  }
  out.token_loss.assign(ws.token_loss(), ws.token_loss() + kRows);
  return out;
}

void expect_chunked_bits(const ChunkedRun& want, const ChunkedRun& got, const std::string& what) {
  ASSERT_EQ(want.parts.size(), got.parts.size());
  for (size_t i = 0; i < want.parts.size(); ++i) {
    EXPECT_EQ(want.parts[i].xent_sum, got.parts[i].xent_sum) << what;
    EXPECT_EQ(want.parts[i].xent_tokens, got.parts[i].xent_tokens) << what;
  }
  EXPECT_EQ(0, std::memcmp(want.token_loss.data(), got.token_loss.data(), sizeof(float) * kRows)) << what;
  ASSERT_EQ(want.grads.size(), got.grads.size());
  EXPECT_EQ(0, std::memcmp(want.grads.data(), got.grads.data(), sizeof(float) * want.grads.size()))
      << "gradients differ: " << what;
}

// Every parameter tensor's gradient within `tolerance` of its largest
// magnitude, and the losses within 1e-5 relative.
void expect_chunked_close(const ZayaConfig& c, const ChunkedRun& want, const ChunkedRun& got, double tolerance,
                          const std::string& what) {
  for (size_t i = 0; i < want.parts.size(); ++i) {
    EXPECT_NEAR(got.parts[i].xent_sum, want.parts[i].xent_sum, 1e-5 * std::abs(want.parts[i].xent_sum)) << what;
    EXPECT_EQ(got.parts[i].xent_tokens, want.parts[i].xent_tokens) << what;
  }
  const ParamTable table(c, true);
  int64_t differing = 0;
  for (const ParamEntry& e : table.entries()) {
    double largest = 0, worst = 0;
    for (int64_t i = e.offset; i < e.offset + e.numel; ++i) {
      largest = std::max(largest, double(std::abs(want.grads[size_t(i)])));
      worst = std::max(worst, double(std::abs(want.grads[size_t(i)] - got.grads[size_t(i)])));
      differing += want.grads[size_t(i)] != got.grads[size_t(i)];
    }
    EXPECT_LE(worst, tolerance * largest) << what << ", " << e.name;
  }
  // Chunks really ran: the head's gradient is summed in another order.
  EXPECT_GT(differing, 0) << what;
}

TEST(LossChunk, OneChunkOfEveryRowGivesTheBitsOfAllLogitsAtOnce) {
  for (bool bf16 : {false, true}) {
    ZayaConfig c = testing::model_test_config();
    for (bool tied : {true, false}) {
      c.tie_word_embeddings = tied;
      const ChunkedRun all = run_chunked(c, 0, bf16);
      const std::string what = std::string(bf16 ? "bf16" : "f32") + (tied ? ", tied" : ", untied");
      expect_chunked_bits(all, run_chunked(c, kRows, bf16), what + ", chunk = rows");
      expect_chunked_bits(all, run_chunked(c, kRows + 9, bf16), what + ", chunk > rows");
    }
  }
}

TEST(LossChunk, SmallerChunksGiveTheGradientsOfAllLogitsAtOnceToRounding) {
  ZayaConfig c = testing::model_test_config();
  for (bool tied : {true, false}) {
    c.tie_word_embeddings = tied;
    const std::string what = tied ? "tied" : "untied";
    const ChunkedRun all = run_chunked(c, 0, false);
    // 5 does not divide the 32 rows: the last chunk has 2.
    for (int64_t chunk : {1, 5, 16}) expect_chunked_close(c, all, run_chunked(c, chunk, false), 1e-5, what + ", f32");
    // bf16 operands: a gradient that moves by rounding noise can round the other way downstream.
    const ChunkedRun all_bf16 = run_chunked(c, 0, true);
    expect_chunked_close(c, all_bf16, run_chunked(c, 5, true), 2e-2, what + ", bf16");
  }
}

TEST(LossChunk, TheWorkspaceHoldsOneChunkOfLogits) {
  const ZayaConfig c = testing::model_test_config();
  auto bytes = [&](int64_t chunk) {
    return ModelWorkspace(c, kBatch, kSeq, true, nullptr, nullptr, Recompute::kNone, {}, chunk).bytes();
  };
  const int64_t all = bytes(0);
  for (int64_t chunk : {1, 5, 31})
    EXPECT_EQ(all - bytes(chunk), (kRows - chunk) * c.vocab_size * int64_t(sizeof(float))) << chunk;
  EXPECT_EQ(bytes(kRows), all);
  EXPECT_EQ(bytes(kRows + 100), all);
  // Those logits are scratch: none of them is kept for the backward.
  auto kept = [&](int64_t chunk) {
    return ModelWorkspace(c, kBatch, kSeq, true, nullptr, nullptr, Recompute::kNone, {}, chunk).activation_bytes();
  };
  EXPECT_EQ(kept(0) - kept(5), kRows * c.vocab_size * int64_t(sizeof(float)));
}

template <typename F>
void expect_chunk_error(F&& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; wanted: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(LossChunk, MisuseIsAnInternalErrorNamingWhatIsMissing) {
  const ZayaConfig c = testing::model_test_config();
  expect_chunk_error([&] { ModelWorkspace(c, kBatch, kSeq, true, nullptr, nullptr, Recompute::kNone, {}, -1); },
                     "the loss chunk (-1 rows) must be >= 0");
  ZayaModel model(c);
  model.init(5);
  std::vector<float> grads(size_t(model.params().total_floats()), 0.0f);
  const ModelWeights g = bind_weights(c, model.params(), grads.data());
  const std::vector<int32_t> ids = chunk_test_tokens(3, 0, c.real_vocab_size),
                             targets = chunk_test_tokens(4, 0, c.real_vocab_size);
  ModelWorkspace ws(c, kBatch, kSeq, true, nullptr, nullptr, Recompute::kNone, {}, 8);
  expect_chunk_error([&] { ws.logits(); }, "keeps no logits of every row");
  expect_chunk_error([&] { model_forward(model, ws, ids.data(), nullptr, kBatch, kSeq, {}); },
                     "its forward needs targets");
  // A forward without the head's gradient (evaluation) cannot be followed by a backward.
  model_forward(model, ws, ids.data(), targets.data(), kBatch, kSeq, {});
  expect_chunk_error([&] { model_backward(model, ws, g, 0.5f, 1.0f, {}); }, "it needs this backward's HeadGradient");
  // Nor one whose scale differs from the backward's.
  const HeadGradient head{g.lm_head_VD, 0.25f};
  model_forward(model, ws, ids.data(), targets.data(), kBatch, kSeq, {}, nullptr, &head);
  expect_chunk_error([&] { model_backward(model, ws, g, 0.5f, 1.0f, {}); }, "it needs this backward's HeadGradient");
  // All logits at once: no head gradient in the forward.
  ModelWorkspace whole(c, kBatch, kSeq, true);
  expect_chunk_error([&] { model_forward(model, whole, ids.data(), targets.data(), kBatch, kSeq, {}, nullptr, &head); },
                     "only a training workspace with a loss chunk");
}

}  // namespace
}  // namespace zaya
