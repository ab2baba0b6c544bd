// The step numerics on their own (no files, no job) and the job's step loop.
#include "zaya/train/step_numerics.h"
#include "zaya/core/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "zaya/core/test_util.h"
#include "zaya/dist/comm.h"
#include "zaya/ops/matmul_bf16.h"
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

// Rows of the synthetic source with some targets dropped by a fixed pattern,
// and after every `real` rows `pad` rows whose targets are all -1 (a loss
// mask: the batch source of fine-tuning data).
class MaskedSource : public BatchSource {
 public:
  MaskedSource(int64_t vocab, uint64_t seed, int64_t real, int64_t pad) : inner_(vocab, seed), real_(real), pad_(pad) {}
  void next(int32_t* ids, int32_t* targets, int64_t batch, int64_t seq, int, int, int32_t* doc_pos = nullptr) override {
    ZAYA_CHECK(doc_pos == nullptr, "this test source has no document positions");
    for (int64_t b = 0; b < batch; ++b, ++row_) {
      int32_t* i = ids + b * seq;
      int32_t* t = targets + b * seq;
      if (row_ % (real_ + pad_) < real_) {
        inner_.next(i, t, 1, seq);
        const int64_t k = inner_.state().index;
        for (int64_t p = 0; p < seq; ++p)
          if ((p + k) % 3 == 0) t[p] = -1;
      } else {
        std::fill_n(i, seq, 7);
        std::fill_n(t, seq, -1);
      }
    }
  }
  SamplerState state() const override { return {0, 0, uint64_t(row_)}; }
  void set_state(const SamplerState&) override {}
  bool loss_masked() const override { return true; }

 private:
  SyntheticBatchSource inner_;
  int64_t real_, pad_, row_ = 0;
};

// The loss normaliser: with a loss mask the loss is the mean over the targets
// that count in the whole step, so rows (or a whole micro-batch) without a
// target change neither the loss nor the gradients, and the loss equals the
// model's own cross-entropy sum over its target count. (Normalising by every
// position of the batch halves the loss and gradients of the padded runs.)
TEST(StepNumerics, LossIsAMeanOverTheTargetsTheMaskSelects) {
  struct Case {
    int64_t micro_batch, grad_accum, pad;
  };
  std::vector<std::vector<float>> grads;
  std::vector<double> losses;
  std::vector<int64_t> counts;
  for (const Case c : {Case{4, 1, 0}, Case{8, 1, 4}, Case{4, 2, 4}}) {
    Numerics n(synthetic_config(c.micro_batch, c.grad_accum));
    MaskedSource data(512, 9, 4, c.pad);
    StepResult r;
    n.numerics.compute_gradients(data, r);
    n.numerics.reduce_totals(r);
    EXPECT_EQ(r.tokens, 4 * 32 * (c.pad > 0 ? 2 : 1));
    if (c.pad == 0) {
      // The model's own sum and count over the same rows.
      MaskedSource again(512, 9, 4, 0);
      std::vector<int32_t> ids(4 * 32), targets(4 * 32);
      again.next(ids.data(), targets.data(), 4, 32, 0, 1);
      ModelWorkspace ws(n.config.model, 4, 32, false);
      const LossParts parts = model_forward(n.numerics.model(), ws, ids.data(), targets.data(), 4, 32, {});
      EXPECT_EQ(r.loss_tokens, parts.xent_tokens);
      EXPECT_LT(parts.xent_tokens, 4 * 32);
      EXPECT_NEAR(r.loss, parts.xent_sum / double(parts.xent_tokens), 1e-6 * r.loss);
    }
    losses.push_back(r.loss);
    counts.push_back(r.loss_tokens);
    const float* g = n.numerics.gradients();
    grads.emplace_back(g, g + n.numerics.model().params().total_floats());
  }
  for (size_t k = 1; k < grads.size(); ++k) {
    EXPECT_EQ(counts[k], counts[0]);
    EXPECT_NEAR(losses[k], losses[0], 1e-5 * losses[0]) << "case " << k;
    double worst = 0, scale = 0;
    for (size_t i = 0; i < grads[0].size(); ++i) {
      worst = std::max(worst, double(std::fabs(grads[k][i] - grads[0][i])));
      scale = std::max(scale, double(std::fabs(grads[0][i])));
    }
    EXPECT_GT(scale, 0.0);
    EXPECT_LT(worst / scale, 1e-4) << "case " << k;
  }
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

// Activation recomputation keeps the step loop free of allocations too (the
// shared activations, the discarded routing statistics: all preallocated).
TEST(TrainJob, RecomputedStepLoopDoesNotAllocate) {
  for (const std::string extra : {"recompute = \"attention\"\n", "recompute = \"moe\"\n", "recompute = \"full\"\n",
                                  "recompute = \"full\"\nprecision = \"bf16\"\n"}) {
    TrainJob t(synthetic_config(4, 2, extra + "[moe]\nswitch_aux_coeff = 0.01\nz_loss_coeff = 0.001\n"), quiet());
    EXPECT_NE(t.numerics().recompute(), Recompute::kNone);
    t.train_step();
    t.train_step();
    const long before = testing::allocation_count();
    for (int i = 0; i < 2; ++i) t.train_step();
    EXPECT_EQ(testing::allocation_count() - before, 0) << extra;
  }
}

// A LoRA run on every target kind (router matrices and experts too), with
// recomputation, on a frozen bf16 base, or with dropout on the attention and
// router adapters: the adapters' buffers are preallocated, nothing allocated.
TEST(TrainJob, LoraStepLoopDoesNotAllocate) {
  const std::string every =
      "[lora]\nrank = 4\ntargets = [\"q_proj\", \"o_proj\", \"mlp.gate.down_proj\", \"mlp.gate.router_mlp.fc1\", "
      "\"mlp.gate.router_mlp.fc2\", \"mlp.gate.router_mlp.out_proj\", \"mlp.experts.gate_up_proj\", "
      "\"mlp.experts.down_proj\"]\n";
  const std::string router_dropout =
      "[lora]\nrank = 4\ndropout = 0.1\ntargets = [\"k_proj\", \"mlp.gate.down_proj\", "
      "\"mlp.gate.router_mlp.out_proj\"]\n";
  for (const std::string& extra : {every, "recompute = \"full\"\n" + every, "precision = \"bf16\"\n" + every,
                                   "recompute = \"moe\"\n" + router_dropout}) {
    TrainJob t(synthetic_config(4, 2, extra), quiet());
    ASSERT_NE(t.numerics().lora(), nullptr);
    t.train_step();
    t.train_step();
    const long before = testing::allocation_count();
    for (int i = 0; i < 2; ++i) t.train_step();
    EXPECT_EQ(testing::allocation_count() - before, 0) << extra;
  }
}

// `steps` accepted optimizer steps; the loss and router loss of each.
std::vector<double> accepted_steps(Numerics& n, int steps) {
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    StepResult r;
    n.numerics.compute_gradients(n.data.train_data(), r);
    n.numerics.reduce_totals(r);
    n.numerics.update(r, 1.0, true);
    losses.push_back(r.loss);
    losses.push_back(r.router_loss);
  }
  return losses;
}

// Training with recomputation is training without it, bit for bit: the same
// losses and, after updates that moved the balancing biases (routing counted
// once per micro-batch), the same parameters; with a smaller workspace.
TEST(StepNumerics, RecomputationTrainsBitwiseLikeNone) {
  auto train = [](const std::string& recompute, int64_t* bytes) {
    Numerics n(synthetic_config(
        4, 2, "recompute = \"" + recompute + "\"\n[moe]\nswitch_aux_coeff = 0.01\nz_loss_coeff = 0.001\n"));
    *bytes = n.numerics.workspace_bytes();
    const std::vector<double> losses = accepted_steps(n, 3);
    std::vector<float> state(n.numerics.model().param_data(),
                             n.numerics.model().param_data() + n.numerics.model().params().total_floats());
    for (const float* b : n.numerics.model().balancing_biases())
      state.insert(state.end(), b, b + n.numerics.model().config().router_slots());
    return std::make_pair(losses, state);
  };
  int64_t none_bytes = 0;
  const auto none = train("none", &none_bytes);
  for (const std::string r : {"attention", "moe", "full"}) {
    int64_t bytes = 0;
    const auto got = train(r, &bytes);
    EXPECT_EQ(got.first, none.first) << r;
    EXPECT_TRUE(got.second == none.second) << "parameters or balancing biases differ from none's: " << r;
    EXPECT_LT(bytes, none_bytes) << r;
  }
}

// train.loss_chunk (model/model.h): one chunk of every row (4 x 32 = 128)
// trains bit for bit as all logits at once; chunks of 48 rows (the last one
// 32) train the same to rounding, in a smaller workspace. In float32, with
// bf16 GEMMs, and in a LoRA run (a frozen head: no head gradient).
TEST(StepNumerics, LossChunkTrainsLikeAllLogitsAtOnce) {
  auto train = [](const std::string& extra, int64_t* bytes) {
    Numerics n(synthetic_config(4, 2, extra));
    *bytes = n.numerics.workspace_bytes();
    const std::vector<double> losses = accepted_steps(n, 3);
    const ZayaModel& m = n.numerics.model();
    std::vector<float> params(m.param_data(), m.param_data() + m.params().total_floats());
    return std::make_pair(losses, params);
  };
  for (const std::string extra : {"", "precision = \"bf16\"\n", "[lora]\nrank = 4\n"}) {
    int64_t all_bytes = 0, one_bytes = 0, chunked_bytes = 0;
    const auto all = train(extra, &all_bytes);
    const auto one = train("loss_chunk = 128\n" + extra, &one_bytes);
    EXPECT_EQ(one.first, all.first) << extra;
    EXPECT_TRUE(one.second == all.second) << "parameters differ with one chunk of every row: " << extra;
    EXPECT_EQ(one_bytes, all_bytes) << extra;
    const auto chunked = train("loss_chunk = 48\n" + extra, &chunked_bytes);
    for (size_t i = 0; i < all.first.size(); ++i)  // each step's loss and router loss
      EXPECT_NEAR(chunked.first[i], all.first[i], 1e-4 * std::fabs(all.first[i])) << extra << ", value " << i;
    EXPECT_EQ(all_bytes - chunked_bytes, (128 - 48) * 512 * int64_t(sizeof(float))) << extra;
  }
}

TEST(TrainJob, LossChunkStepLoopDoesNotAllocate) {
  for (const std::string extra : {"loss_chunk = 48\n", "loss_chunk = 48\nprecision = \"bf16\"\n"}) {
    TrainJob t(synthetic_config(4, 2, extra), quiet());
    t.train_step();
    t.train_step();
    const long before = testing::allocation_count();
    for (int i = 0; i < 2; ++i) t.train_step();
    EXPECT_EQ(testing::allocation_count() - before, 0) << extra;
  }
}

// On one rank the accepted update zeroes the gradients and writes the bf16
// weight copy in its own pass (Optimizer's UpdateExtras): after it the
// gradients are zero and the copy is bf16 of the new parameters. A rejected
// update reads nothing, so the next step zeroes the gradients itself: its
// gradients equal those of a step after which nothing was updated either.
TEST(StepNumerics, UpdateLeavesZeroGradientsAndACurrentBf16CopyAndARejectedStepStillStartsFromZero) {
  Numerics n(synthetic_config(4, 1, "precision = \"bf16\"\n"));
  const int64_t floats = n.numerics.model().params().total_floats();
  StepResult r;
  n.numerics.compute_gradients(n.data.train_data(), r);
  n.numerics.reduce_totals(r);
  n.numerics.update(r, 1.0, true);
  const float* g = n.numerics.gradients();
  EXPECT_TRUE(std::all_of(g, g + floats, [](float x) { return x == 0.0f; }));
  std::vector<uint16_t> expected(floats);
  convert_to_bf16(expected.data(), n.numerics.model().param_data(), floats);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), n.numerics.model().bf16_weight_data()));

  auto second_gradients = [](bool reject_first) {
    Numerics m(synthetic_config(4, 1, "precision = \"bf16\"\n"));
    StepResult first;
    m.numerics.compute_gradients(m.data.train_data(), first);
    m.numerics.reduce_totals(first);
    if (reject_first) m.numerics.update(first, 1.0, false);
    StepResult second;
    m.numerics.compute_gradients(m.data.train_data(), second);
    const float* grads = m.numerics.gradients();
    return std::vector<float>(grads, grads + m.numerics.model().params().total_floats());
  };
  EXPECT_TRUE(second_gradients(true) == second_gradients(false))
      << "a rejected step's gradients were added to the next step's";
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
