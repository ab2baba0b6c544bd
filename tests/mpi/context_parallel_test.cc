// Context parallelism (issue [cp]): a cp group computing one batch gives the
// loss, logits and parameter gradients of a single rank computing it whole.
// Run on 2, 3 and 4 ranks: every cp size dividing the world is checked, with
// the world split into world / cp groups.
//
// Tolerance: float32 sums run in another order (dK/dV and weight gradients
// are summed over ranks), so per tensor ||g_cp - g_1|| <= 1e-4 ||g_1|| + 1e-7
// (measured: at most 1.3e-5 relative) and losses / logits within 1e-5
// relative. A wrong halo, offset or mask gives errors of 1e-3 and more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "tests/mpi/mpi_test_env.h"
#include "zaya/core/rng.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

using testing::world;

struct Result {
  LossParts loss;
  std::vector<float> grads;
};

// One forward + backward of ids/targets (B x S) with the loss mean over all B*S
// tokens; doc_pos: document masking (null: none).
Result forward_backward(const ZayaModel& model, ModelWorkspace& ws, const std::vector<int32_t>& ids,
                        const std::vector<int32_t>& targets, int64_t B, int64_t S, const int32_t* doc_pos) {
  Result r;
  r.grads.assign(size_t(model.params().total_floats()), 0.0f);
  ModelWeights g = bind_weights(model.config(), model.params(), r.grads.data());
  r.loss = model_forward(model, ws, ids.data(), targets.data(), B, S, {}, doc_pos);
  model_backward(model, ws, g, 1.0f / float(B * S), 1.0f, {});
  return r;
}

// window > 0: sliding-window attention (spec §12) on the even blocks, with their own RoPE base.
// k0, k1: the convolutions' taps (cca_time0 / cca_time1), a halo of max(1, k0 + k1 - 2) rows.
// masked: document masking, with documents that begin in one chunk and run into
// the next, one starting at a chunk's first row and one at its second.
void check_cp_matches_single_rank(int cp_size, int64_t B, int64_t S, int64_t window = 0, int64_t k0 = 2, int64_t k1 = 2,
                                  bool masked = false) {
  Comm& w = world();
  auto cp = w.split(w.rank() / cp_size, w.rank() % cp_size, "cp");
  ZayaConfig c = testing::model_test_config();
  c.max_position = S;
  c.conv_kernel0 = k0;
  c.conv_kernel1 = k1;
  if (window > 0) {
    c.sliding_window = window;
    c.sliding_blocks = sliding_block_pattern("even", c.num_blocks, "test");
    c.sliding_rope_theta = 500;
  }
  ZayaModel model(c);
  model.init(11);
  float* p = model.param_data();  // move every parameter off its init so each one matters
  for (int64_t i = 0; i < model.params().total_floats(); ++i) p[i] += 0.05f * normal01(21, 2, uint64_t(i));
  std::vector<int32_t> ids(B * S), targets(B * S);
  const uint64_t group = uint64_t(w.rank() / cp_size);  // each cp group its own batch
  for (int64_t i = 0; i < B * S; ++i) {
    ids[i] = int32_t(philox4x32(7, group, uint64_t(i))[0] % uint32_t(c.real_vocab_size));
    targets[i] = int32_t(philox4x32(8, group, uint64_t(i))[0] % uint32_t(c.real_vocab_size));
  }
  std::vector<int32_t> doc(B * S);
  const int64_t chunk = S / (2 * cp_size);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0, cur = 0; t < S; ++t) {
      const int64_t shift = (t + b * (chunk - 1)) % S;  // sequence b: the starts shifted
      if (shift % (2 * chunk) == 3 || (t > 0 && t % (3 * chunk) == 0) || t == chunk + 1) cur = t;
      doc[b * S + t] = int32_t(t - cur);
    }
  const int32_t* doc_pos = masked ? doc.data() : nullptr;
  ModelWorkspace whole(c, B, S, true);
  ModelWorkspace split(c, B, S, true, nullptr, cp.get());
  ASSERT_EQ(split.cp_size(), cp_size);
  // Logits: this rank's rows are its two chunks of each sequence.
  model_forward(model, whole, ids.data(), targets.data(), B, S, {}, doc_pos);
  model_forward(model, split, ids.data(), targets.data(), B, S, {}, doc_pos);
  const ContextParallel layout = make_context_parallel(*cp, S);
  const int64_t L = layout.local_seq(), V = c.vocab_size;
  ASSERT_EQ(split.rows(), B * L);
  std::vector<int32_t> pos(L);
  cp_local_positions(layout, pos.data());
  double max_err = 0, max_abs = 0;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t v = 0; v < c.real_vocab_size; ++v) {
        const float want = whole.logits()[(b * S + pos[l]) * V + v];
        max_err = std::max(max_err, double(std::fabs(split.logits()[(b * L + l) * V + v] - want)));
        max_abs = std::max(max_abs, double(std::fabs(want)));
      }
  EXPECT_LE(max_err, 1e-5 * max_abs + 1e-6) << "logits, cp " << cp_size;

  Result ref = forward_backward(model, whole, ids, targets, B, S, doc_pos);
  Result got = forward_backward(model, split, ids, targets, B, S, doc_pos);
  double sums[2] = {got.loss.xent_sum, double(got.loss.xent_tokens)};
  cp->all_reduce(sums, sums, 2, DType::kF64, ReduceOp::kSum);
  EXPECT_EQ(int64_t(sums[1]), ref.loss.xent_tokens);
  EXPECT_NEAR(sums[0], ref.loss.xent_sum, 1e-5 * std::fabs(ref.loss.xent_sum)) << "cp " << cp_size;
  cp->all_reduce(got.grads.data(), got.grads.data(), got.grads.size(), DType::kF32, ReduceOp::kSum);
  int checked = 0;
  double worst = 0;
  for (const ParamEntry& e : model.params().entries()) {
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < e.numel; ++i) {
      const double d = double(got.grads[e.offset + i]) - ref.grads[e.offset + i];
      diff += d * d;
      norm += double(ref.grads[e.offset + i]) * ref.grads[e.offset + i];
    }
    EXPECT_LE(std::sqrt(diff), 1e-4 * std::sqrt(norm) + 1e-7) << e.name << " (cp " << cp_size << ")";
    checked += norm > 0;
    if (norm > 0) worst = std::max(worst, std::sqrt(diff / norm));
  }
  EXPECT_GT(checked, 50);
  if (world().rank() == 0)
    std::printf(
        "cp %d, B %lld x S %lld, window %lld, taps %lld/%lld%s: worst relative gradient difference %.2e, "
        "logits %.2e\n",
        cp_size, (long long)B, (long long)S, (long long)window, (long long)k0, (long long)k1,
        masked ? ", document masking" : "", worst, max_err / max_abs);
}

TEST(ContextParallel, LossAndGradientsMatchOneRank) {
  const int n = world().size();
  for (int cp = 2; cp <= n; ++cp) {
    if (n % cp != 0) continue;
    check_cp_matches_single_rank(cp, 2, 12 * cp);  // chunks of 6 tokens
    check_cp_matches_single_rank(cp, 1, 4 * cp);   // the shortest: 2 tokens per chunk
  }
}

// Sliding windows shorter than a chunk (each key range lies within one or two
// chunks), across a chunk boundary, of one token, and as long as the sequence.
TEST(ContextParallel, SlidingWindowMatchesOneRank) {
  const int n = world().size();
  for (int cp = 2; cp <= n; ++cp) {
    if (n % cp != 0) continue;
    for (int64_t window : {1, 3, 8, 12 * cp})
      check_cp_matches_single_rank(cp, 2, 12 * cp, window);  // chunks of 6 tokens
  }
}

// Convolution kernels other than 2/2: 3/4 reads 5 rows before a chunk (chunks
// of 6 and of exactly 5 tokens), 1/2 one row, 1/1 only the value shift's row.
TEST(ContextParallel, OtherConvolutionKernelSizesMatchOneRank) {
  const int n = world().size();
  for (int cp = 2; cp <= n; ++cp) {
    if (n % cp != 0) continue;
    check_cp_matches_single_rank(cp, 2, 12 * cp, 0, 3, 4);  // chunks of 6 tokens
    check_cp_matches_single_rank(cp, 1, 10 * cp, 0, 3, 4);  // chunks of 5: the halo is a whole chunk
    check_cp_matches_single_rank(cp, 2, 12 * cp, 0, 1, 2);
    check_cp_matches_single_rank(cp, 1, 4 * cp, 0, 1, 1);
  }
}

// Document masking (data.document_masking): the gathered keys and the halo
// rows honour document starts in other chunks, with and without a window.
TEST(ContextParallel, DocumentMaskingMatchesOneRank) {
  const int n = world().size();
  for (int cp = 2; cp <= n; ++cp) {
    if (n % cp != 0) continue;
    for (int64_t window : {0, 3, 8}) check_cp_matches_single_rank(cp, 2, 12 * cp, window, 2, 2, true);
    check_cp_matches_single_rank(cp, 2, 12 * cp, 0, 3, 4, true);  // k taps: halos of 5 rows
  }
}

}  // namespace
}  // namespace zaya
