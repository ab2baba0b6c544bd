// Document masking (model/batch.h, data.document_masking): a window packing
// several documents gives every document the logits and parameter gradients
// it has when run alone, through attention, both CCA convolutions, the
// delayed value stream and RoPE; without masking it does not.
//
// Tolerance: float32, the same arithmetic in another batch shape (GEMM
// blocking, sums over other rows), so logits within 2e-5 of their largest
// magnitude and per tensor ||g_packed - sum g_alone|| <= 1e-4 ||g|| + 1e-7.
// A leak across a boundary gives logit differences of 1e-2 and more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "zaya/core/rng.h"
#include "zaya/dist/comm.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

// B windows of S tokens, each cut into documents at `starts` (ascending from 0).
struct Packed {
  int64_t batch = 0, seq = 0;
  std::vector<std::vector<int32_t>> starts;
  std::vector<int32_t> ids, targets, doc_pos;

  Packed(int64_t S, std::vector<std::vector<int32_t>> st, int64_t vocab) : batch(int64_t(st.size())), seq(S) {
    starts = std::move(st);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0, cur = 0; t < S; ++t) {
        if (std::find(starts[b].begin(), starts[b].end(), int32_t(t)) != starts[b].end()) cur = t;
        ids.push_back(int32_t(philox4x32(31, uint64_t(b), uint64_t(t))[0] % uint32_t(vocab)));
        targets.push_back(int32_t(philox4x32(32, uint64_t(b), uint64_t(t))[0] % uint32_t(vocab)));
        doc_pos.push_back(int32_t(t - cur));
      }
  }
  // Document n of window b: its first row and its length.
  int64_t first(int64_t b, size_t n) const { return starts[b][n]; }
  int64_t length(int64_t b, size_t n) const {
    return (n + 1 < starts[b].size() ? starts[b][n + 1] : seq) - starts[b][n];
  }
};

struct Pass {
  std::vector<float> logits, grads;
};

// Forward + backward of B x S tokens (the sum of the token losses); doc_pos null: no masking.
Pass run(const ZayaModel& model, int64_t B, int64_t S, const int32_t* ids, const int32_t* targets,
         const int32_t* doc_pos, Comm* cp = nullptr) {
  const ZayaConfig& c = model.config();
  ModelWorkspace ws(c, B, S, true, nullptr, cp);
  Pass r;
  r.grads.assign(size_t(model.params().total_floats()), 0.0f);
  ModelWeights g = bind_weights(c, model.params(), r.grads.data());
  model_forward(model, ws, ids, targets, B, S, {}, doc_pos);
  r.logits.assign(ws.logits(), ws.logits() + ws.rows() * c.vocab_size);
  model_backward(model, ws, g, 1.0f, 1.0f, {});
  return r;
}

ZayaModel& perturbed(ZayaModel& model) {
  model.init(13);
  float* p = model.param_data();  // move every parameter off its init so each one matters
  for (int64_t i = 0; i < model.params().total_floats(); ++i) p[i] += 0.05f * normal01(83, 1, uint64_t(i));
  return model;
}

// Largest |packed - alone| over the documents' logits, and the largest |alone|.
struct LogitGap {
  double err = 0, scale = 0;
};
LogitGap logit_gap(const Packed& w, const std::vector<float>& packed, const std::vector<std::vector<float>>& alone,
                   int64_t V) {
  LogitGap gap;
  size_t k = 0;
  for (int64_t b = 0; b < w.batch; ++b)
    for (size_t n = 0; n < w.starts[b].size(); ++n, ++k)
      for (int64_t i = 0; i < w.length(b, n) * V; ++i) {
        const double want = alone[k][size_t(i)];
        gap.err = std::max(gap.err, std::fabs(double(packed[size_t((b * w.seq + w.first(b, n)) * V + i)]) - want));
        gap.scale = std::max(gap.scale, std::fabs(want));
      }
  return gap;
}

void check_packed_equals_alone(const ZayaConfig& c) {
  ZayaModel model(c);
  perturbed(model);
  // Three documents in window 0 (one of two tokens), three in window 1 (one of one token, first).
  const Packed w(24, {{0, 9, 11}, {0, 1, 20}}, c.real_vocab_size);
  const int64_t V = c.vocab_size;
  std::vector<std::vector<float>> alone_logits;
  std::vector<double> alone_grads(size_t(model.params().total_floats()), 0.0);
  for (int64_t b = 0; b < w.batch; ++b)
    for (size_t n = 0; n < w.starts[b].size(); ++n) {
      const int64_t t0 = b * w.seq + w.first(b, n), len = w.length(b, n);
      Pass r = run(model, 1, len, w.ids.data() + t0, w.targets.data() + t0, nullptr);
      alone_logits.push_back(r.logits);
      for (size_t i = 0; i < r.grads.size(); ++i) alone_grads[i] += r.grads[i];
    }
  const Pass packed = run(model, w.batch, w.seq, w.ids.data(), w.targets.data(), w.doc_pos.data());
  const LogitGap gap = logit_gap(w, packed.logits, alone_logits, V);
  EXPECT_LE(gap.err, 2e-5 * gap.scale) << "logits of the packed window";
  int checked = 0;
  for (const ParamEntry& e : model.params().entries()) {
    double diff = 0, norm = 0;
    for (int64_t i = e.offset; i < e.offset + e.numel; ++i) {
      const double d = double(packed.grads[size_t(i)]) - alone_grads[size_t(i)];
      diff += d * d;
      norm += alone_grads[size_t(i)] * alone_grads[size_t(i)];
    }
    EXPECT_LE(std::sqrt(diff), 1e-4 * std::sqrt(norm) + 1e-7) << e.name;
    checked += norm > 0;
  }
  EXPECT_GT(checked, 50);
  // Without masking the later documents see the earlier ones: far from equal.
  const Pass leaky = run(model, w.batch, w.seq, w.ids.data(), w.targets.data(), nullptr);
  EXPECT_GT(logit_gap(w, leaky.logits, alone_logits, V).err, 1e-2 * gap.scale);
}

TEST(DocumentMasking, PackedWindowMatchesEachDocumentAlone) { check_packed_equals_alone(testing::model_test_config()); }

// Sliding-window blocks (spec §12) on the even blocks, with their own RoPE base.
TEST(DocumentMasking, PackedWindowMatchesEachDocumentAloneWithSlidingWindow) {
  ZayaConfig c = testing::model_test_config();
  c.sliding_window = 4;
  c.sliding_blocks = sliding_block_pattern("even", c.num_blocks, "test");
  c.sliding_rope_theta = 500;
  check_packed_equals_alone(c);
}

// Convolution kernels other than 2/2 (cca_time0/1 = 3/4: five rows of history,
// so documents of one and two tokens mask several taps of both convolutions).
TEST(DocumentMasking, PackedWindowMatchesEachDocumentAloneWithOtherKernelSizes) {
  ZayaConfig c = testing::model_test_config();
  c.conv_kernel0 = 3;
  c.conv_kernel1 = 4;
  check_packed_equals_alone(c);
  c.conv_kernel0 = 1;
  c.conv_kernel1 = 3;
  check_packed_equals_alone(c);
}

// Only the masking matters, not the cut: one document per window is the
// unmasked model exactly.
TEST(DocumentMasking, OneDocumentPerWindowIsTheUnmaskedModel) {
  const ZayaConfig c = testing::model_test_config();
  ZayaModel model(c);
  perturbed(model);
  const Packed w(16, {{0}, {0}}, c.real_vocab_size);
  const Pass masked = run(model, w.batch, w.seq, w.ids.data(), w.targets.data(), w.doc_pos.data());
  const Pass plain = run(model, w.batch, w.seq, w.ids.data(), w.targets.data(), nullptr);
  EXPECT_EQ(masked.logits, plain.logits);
  EXPECT_EQ(masked.grads, plain.grads);
}

// The context-parallel path on a group of one rank (two chunks of 10): a
// document across the chunk boundary, one starting exactly at it, one inside
// the second chunk; tests/mpi/context_parallel_test.cc checks 2 to 4 ranks.
TEST(DocumentMasking, ContextParallelPathOnOneRankMatchesPlainPath) {
  const ZayaConfig c = testing::model_test_config();
  ZayaModel model(c);
  perturbed(model);
  const Packed w(20, {{0, 4, 13}, {0, 10, 11, 19}}, c.real_vocab_size);
  auto self = make_self_comm();
  const Pass plain = run(model, w.batch, w.seq, w.ids.data(), w.targets.data(), w.doc_pos.data());
  const Pass split = run(model, w.batch, w.seq, w.ids.data(), w.targets.data(), w.doc_pos.data(), self.get());
  // One rank holds chunks 0 and 1 in order: the same rows.
  for (size_t i = 0; i < plain.logits.size(); ++i) ASSERT_NEAR(split.logits[i], plain.logits[i], 1e-5) << i;
  for (const ParamEntry& e : model.params().entries()) {
    double diff = 0, norm = 0;
    for (int64_t i = e.offset; i < e.offset + e.numel; ++i) {
      const double d = double(split.grads[size_t(i)]) - plain.grads[size_t(i)];
      diff += d * d;
      norm += double(plain.grads[size_t(i)]) * plain.grads[size_t(i)];
    }
    EXPECT_LE(std::sqrt(diff), 1e-5 * std::sqrt(norm) + 1e-8) << e.name;
  }
}

TEST(DocumentMasking, RejectsPositionsThatDoNotFollowTheTokens) {
  const ZayaConfig c = testing::model_test_config();
  ZayaModel model(c);
  model.init(1);
  ModelWorkspace ws(c, 1, 4, false);
  const std::vector<int32_t> ids = {1, 2, 3, 4}, bad = {0, 1, 3, 4};
  try {
    model_forward(model, ws, ids.data(), nullptr, 1, 4, {}, bad.data());
    FAIL() << "accepted document positions that skip one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("document position 3 at position 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace zaya
