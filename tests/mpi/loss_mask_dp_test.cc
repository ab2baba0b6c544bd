// The loss normaliser under data parallelism (train/step_numerics.h): with a
// loss mask, the loss of a step is the mean over the targets that count in the
// whole global batch, counted over every rank, so W ranks of B sequences give
// the loss, target count and gradient norm of one process that takes all W x B
// sequences. The mask is uneven across ranks (rank 0's sequences keep half of
// their targets, the others a fifth, one sequence none): normalising by each
// rank's own count, or by every position, gives another loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tests/mpi/mpi_test_env.h"
#include "zaya/core/error.h"
#include "zaya/dist/mesh.h"
#include "zaya/train/batch_source.h"
#include "zaya/train/step_numerics.h"
#include "zaya/train/train_config.h"

namespace zaya {
namespace {

using testing::world;

constexpr int64_t kBatch = 2, kSeq = 32;

// The synthetic source (global sequence g is the same on any layout) with a
// mask that depends on g: sequences 0 .. kBatch - 1 keep every other target,
// sequence kBatch keeps none, the rest keep a fifth.
class MaskedGlobalSource : public BatchSource {
 public:
  explicit MaskedGlobalSource(uint64_t seed) : inner_(512, seed) {}
  void next(int32_t* ids, int32_t* targets, int64_t batch, int64_t seq, int rank, int ranks,
            int32_t* doc_pos) override {
    ZAYA_CHECK(doc_pos == nullptr, "this test source has no document positions");
    const int64_t before = int64_t(inner_.state().index);
    inner_.next(ids, targets, batch, seq, rank, ranks);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t g = before + rank * batch + b;
      for (int64_t p = 0; p < seq; ++p) {
        const bool keep = g < kBatch ? p % 2 == 0 : g == kBatch ? false : (g + p) % 5 == 0;
        if (!keep) targets[b * seq + p] = -1;
      }
    }
  }
  SamplerState state() const override { return inner_.state(); }
  void set_state(const SamplerState& s) override { inner_.set_state(s); }
  bool loss_masked() const override { return true; }

 private:
  SyntheticBatchSource inner_;
};

TrainConfig config_for(int64_t micro_batch) {
  return parse_train_config(
      "[model]\npreset = \"tiny\"\nnum_blocks = 2\nvocab_size = 512\n[data]\ndir = \"-\"\n"
      "[train]\nseq_len = 32\nsteps = 4\n",
      "test.toml", {"train.micro_batch=" + std::to_string(micro_batch), "schedule.warmup_steps=0"});
}

TEST(LossMaskDataParallel, LossIsTheMeanOverTheGlobalBatchsSelectedTargets) {
  const int W = world().size();
  const TrainConfig dp_config = config_for(kBatch), one_config = config_for(kBatch * W);
  ProcessMesh dp_mesh(world().split(0, world().rank(), "loss_mask_dp"), 1);
  ProcessMesh one_mesh(make_self_comm(), 1);
  StepNumerics dp(dp_config, dp_mesh), one(one_config, one_mesh);
  ASSERT_EQ(dp_mesh.data_ranks(), W);

  for (int step = 0; step < 2; ++step) {  // the second step draws other sequences (other counts)
    MaskedGlobalSource dp_data(5), one_data(5);
    dp_data.set_state({5, 0, uint64_t(step * kBatch * W)});
    one_data.set_state({5, 0, uint64_t(step * kBatch * W)});
    StepResult rd, r1;
    dp.compute_gradients(dp_data, rd);
    dp.reduce_totals(rd);
    one.compute_gradients(one_data, r1);
    one.reduce_totals(r1);
    EXPECT_EQ(rd.tokens, kBatch * kSeq * W);
    EXPECT_EQ(rd.loss_tokens, r1.loss_tokens);
    EXPECT_LT(rd.loss_tokens, rd.tokens / 2);
    EXPECT_NEAR(rd.loss, r1.loss, 1e-5 * r1.loss) << "step " << step << ", " << W << " ranks";
    EXPECT_NEAR(rd.grad_norm, r1.grad_norm, 1e-4 * r1.grad_norm) << "step " << step << ", " << W << " ranks";
    if (world().rank() == 0)
      std::printf(
          "[loss mask, %d ranks, step %d] %lld of %lld targets count: loss %.7f (one process %.7f), "
          "gradient norm %.6f (%.6f)\n",
          W, step, (long long)rd.loss_tokens, (long long)rd.tokens, rd.loss, r1.loss, rd.grad_norm, r1.grad_norm);
  }
}

}  // namespace
}  // namespace zaya
