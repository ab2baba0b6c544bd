// The step numerics on their own (no files, no job) and the job's step loop.
#include "zaya/train/step_numerics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "zaya/core/test_util.h"
#include "zaya/dist/comm.h"
#include "zaya/train/phase_controller.h"
#include "zaya/train/train_job.h"

namespace zaya {
namespace {

TrainConfig synthetic_config(int64_t micro_batch, int64_t grad_accum, const std::string& extra = "") {
  return parse_train_config(
      "[model]\npreset = \"tiny\"\nnum_blocks = 2\nvocab_size = 512\n[data]\ndir = \"-\"\n"
      "[train]\nseq_len = 32\nsteps = 4\n" +
          extra,
      "test.toml",
      {"train.micro_batch=" + std::to_string(micro_batch), "train.grad_accum=" + std::to_string(grad_accum),
       "schedule.warmup_steps=0"});
}

TrainJobOptions quiet() {
  TrainJobOptions o;
  o.synthetic_data = true;
  o.quiet = true;
  o.write_outputs = false;
  o.peak_gflops = 100;  // skip the measurement
  return o;
}

// One process's numerics over synthetic data.
struct Numerics {
  TrainConfig config;
  ProcessMesh mesh{make_self_comm(), 1};
  PhaseController data;
  StepNumerics numerics;
  explicit Numerics(TrainConfig c) : config(std::move(c)), data(config, 1, true), numerics(config, mesh) {}
};

// Gradient accumulation: 2 micro-batches of 4 give the gradient of one batch
// of 8 (same tokens, mean over all of them), up to float32 summation order.
TEST(StepNumerics, GradientAccumulationMatchesOneLargeBatch) {
  Numerics one(synthetic_config(8, 1)), two(synthetic_config(4, 2));
  StepResult r1, r2;
  one.numerics.compute_gradients(one.data.train_data(), r1);
  two.numerics.compute_gradients(two.data.train_data(), r2);
  EXPECT_NEAR(r1.loss, r2.loss, 1e-5 * std::fabs(r1.loss));
  EXPECT_EQ(r1.tokens, r2.tokens);
  const int64_t n = one.numerics.model().params().total_floats();
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) {
    worst = std::max(worst, double(std::fabs(one.numerics.gradients()[i] - two.numerics.gradients()[i])));
    scale = std::max(scale, double(std::fabs(one.numerics.gradients()[i])));
  }
  EXPECT_GT(scale, 0.0);
  EXPECT_LT(worst / scale, 1e-4);
}

// The step loop allocates nothing on the heap once warm (our code; oneDNN's
// own scratch buffers are C allocations outside this count).
TEST(TrainJob, StepLoopDoesNotAllocate) {
  TrainJob t(synthetic_config(4, 2, "[moe]\nswitch_aux_coeff = 0.01\nz_loss_coeff = 0.001\n"), quiet());
  t.train_step();  // warm-up: lazily built primitives, first-touch of buffers
  t.train_step();
  const long before = testing::allocation_count();
  for (int i = 0; i < 2; ++i) t.train_step();
  EXPECT_EQ(testing::allocation_count() - before, 0);
}

// With document masking (data.document_masking) the document positions have
// their own buffer, sized with the workspace: still nothing allocated.
TEST(TrainJob, DocumentMaskingStepLoopDoesNotAllocate) {
  TrainConfig c = synthetic_config(4, 2);
  c.data.document_masking = true;
  TrainJob t(c, quiet());
  t.train_step();
  t.train_step();
  const long before = testing::allocation_count();
  for (int i = 0; i < 2; ++i) t.train_step();
  EXPECT_EQ(testing::allocation_count() - before, 0);
}

// The same step loop with bf16 GEMMs: the weight copies and the conversion
// scratch are preallocated, so it allocates nothing either.
TEST(TrainJob, Bf16StepLoopDoesNotAllocate) {
  TrainJob t(synthetic_config(4, 2, "precision = \"bf16\"\n"), quiet());
  ASSERT_TRUE(t.numerics().bf16_gemms());
  t.train_step();
  t.train_step();
  const long before = testing::allocation_count();
  for (int i = 0; i < 2; ++i) t.train_step();
  EXPECT_EQ(testing::allocation_count() - before, 0);
}

// bf16 training is bit-reproducible at a fixed thread count: two runs of the
// same config end with the same parameters bit for bit, and not with the
// float32 run's (the precision is really applied), after updates that
// refreshed the bf16 weight copies.
TEST(StepNumerics, Bf16TrainingIsBitwiseDeterministic) {
  auto train = [](const std::string& precision) {
    Numerics n(synthetic_config(4, 2, "precision = \"" + precision + "\"\n"));
    std::vector<double> losses;
    for (int step = 0; step < 3; ++step) {
      StepResult r;
      n.numerics.compute_gradients(n.data.train_data(), r);
      n.numerics.reduce_totals(r);
      n.numerics.update(r, 1.0, true);
      losses.push_back(r.loss);
    }
    const float* p = n.numerics.model().param_data();
    return std::make_pair(losses, std::vector<float>(p, p + n.numerics.model().params().total_floats()));
  };
  const auto a = train("bf16"), b = train("bf16"), f = train("f32");
  EXPECT_EQ(a.first, b.first);
  EXPECT_TRUE(a.second == b.second) << "bf16 parameters differ between identical runs";
  EXPECT_NE(a.first, f.first);
  EXPECT_FALSE(a.second == f.second);
  EXPECT_NEAR(a.first.back(), f.first.back(), 0.05 * f.first.back());
}

}  // namespace
}  // namespace zaya
