// LoRA with router and expert targets under data and expert parallelism
// (train/step_numerics.h, docs/training.md "LoRA"): every rank holds every
// adapter; a rank forms the gradients of the adapters of the experts it holds
// (over the rows its ep group routes to them) and of its tokens' router and
// attention branches, and one all-reduce over the world completes them. So
// dp x ep ranks with micro-batches of B sequences give the adapter gradients
// of one process that takes the whole global batch (W x B sequences, the
// same ones: the synthetic source numbers sequences globally), for two
// global batches, with both factors of every adapter nonzero. ep = 2 on an
// even world (dp = W / 2), else ep = 1.
//
// Tolerance: the two sides add the same terms in other orders (the
// all-reduce, GEMMs over other row counts), so each adapter tensor agrees to
// float32 rounding: ||got - ref|| <= 1e-4 ||ref|| + 1e-7. Applying expert e's
// adapter to another expert's rows (a local instead of the global expert
// index) or dropping a rank's share moves whole experts' gradients by O(1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "tests/mpi/mpi_test_env.h"
#include "zaya/core/rng.h"
#include "zaya/dist/mesh.h"
#include "zaya/train/batch_source.h"
#include "zaya/train/step_numerics.h"
#include "zaya/train/train_config.h"

namespace zaya {
namespace {

using testing::world;

constexpr int64_t kLoraBatch = 2;

TrainConfig lora_config_for(int64_t micro_batch) {
  return parse_train_config(
      "[model]\npreset = \"tiny\"\nnum_blocks = 2\nvocab_size = 512\n[data]\ndir = \"-\"\n"
      "[train]\nseq_len = 16\nsteps = 4\n[optim]\nlr = 0.01\n"
      "[lora]\nrank = 4\nalpha = 8\ntargets = [\"q_proj\", \"o_proj\", \"mlp.gate.down_proj\", "
      "\"mlp.gate.router_mlp.fc1\", \"mlp.gate.router_mlp.fc2\", \"mlp.gate.router_mlp.out_proj\", "
      "\"mlp.experts.gate_up_proj\", \"mlp.experts.down_proj\"]\n",
      "test.toml", {"train.micro_batch=" + std::to_string(micro_batch), "schedule.warmup_steps=0"});
}

// Both factors of every adapter nonzero (a trained adapter), the same on every rank and side.
void randomize(LoraAdapters& a) {
  const int64_t r = a.config().rank;
  for (const auto& e : a.entries()) {
    const bool expert = lora_is_expert(e.target);  // init() drew B there, A elsewhere
    float* p = a.data() + (expert ? e.a_offset : e.b_offset);
    const int64_t n = expert ? e.a_floats(r) : e.b_floats(r);
    for (int64_t i = 0; i < n; ++i) p[i] = 0.2f * normal01(11, uint64_t(e.b_offset), uint64_t(i));
  }
}

TEST(LoraExpertParallel, AdapterGradientsAreThoseOfOneProcess) {
  const int W = world().size();
  const int ep = W % 2 == 0 ? 2 : 1;
  const TrainConfig mesh_config = lora_config_for(kLoraBatch), one_config = lora_config_for(kLoraBatch * W);
  ProcessMesh mesh(world().split(0, world().rank(), "lora_ep"), ep);
  ProcessMesh one_mesh(make_self_comm(), 1);
  StepNumerics dist(mesh_config, mesh), one(one_config, one_mesh);
  ASSERT_EQ(mesh.ep_size(), ep);
  ASSERT_EQ(dist.model().params().experts().count, one_config.model.experts / ep) << "each rank holds its experts";
  randomize(*dist.lora());
  randomize(*one.lora());
  const LoraAdapters& la = *dist.lora();
  ASSERT_EQ(la.total_floats(), one.lora()->total_floats());
  double worst = 0;
  for (int step = 0; step < 2; ++step) {  // two global batches; no update between them (lr 0)
    SyntheticBatchSource dist_data(512, 5), one_data(512, 5);
    dist_data.set_state({5, 0, uint64_t(step * kLoraBatch * W)});
    one_data.set_state({5, 0, uint64_t(step * kLoraBatch * W)});
    StepResult rd, r1;
    dist.compute_gradients(dist_data, rd);
    dist.reduce_totals(rd);
    one.compute_gradients(one_data, r1);
    one.reduce_totals(r1);
    EXPECT_NEAR(rd.loss, r1.loss, 1e-5 * r1.loss) << "step " << step;
    for (const ParamEntry& e : la.table().entries()) {
      const float* got = dist.lora_gradients() + e.offset;
      const float* ref = one.lora_gradients() + e.offset;
      double diff = 0, norm = 0;
      for (int64_t i = 0; i < e.numel; ++i) {
        diff += (double(got[i]) - double(ref[i])) * (double(got[i]) - double(ref[i]));
        norm += double(ref[i]) * double(ref[i]);
      }
      EXPECT_LE(std::sqrt(diff), 1e-4 * std::sqrt(norm) + 1e-7) << e.name << ", step " << step;
      EXPECT_GT(norm, 0.0) << e.name << ", step " << step << ": the check would be vacuous";
      if (norm > 0) worst = std::max(worst, std::sqrt(diff / norm));
    }
    dist.update(rd, 0.0, true);
    one.update(r1, 0.0, true);
  }
  if (world().rank() == 0)
    std::printf("[LoRA, %d ranks: dp %d x ep %d] worst relative difference of an adapter gradient: %.2e\n", W, W / ep,
                ep, worst);
}

}  // namespace
}  // namespace zaya
