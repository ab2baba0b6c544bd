// The ZeRO-1 parameter all-gather in bf16 (parallel.zero_gather_dtype =
// "bf16", dist/zero.h): the updated shards travel as bf16 straight into the
// bf16 weight copy, and that copy is, on every rank and after every step, the
// rounding of what the float32 gather replicates. So a bf16 run with the bf16
// gather computes the run with the float32 gather bit for bit (losses,
// gradient norms, each rank's float32 master shard), while the GEMM weights
// cross the wire in half the bytes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "tests/mpi/mpi_test_env.h"
#include "zaya/core/bf16.h"
#include "zaya/dist/mesh.h"
#include "zaya/train/batch_source.h"
#include "zaya/train/step_numerics.h"
#include "zaya/train/train_config.h"

namespace zaya {
namespace {

using testing::world;

TrainConfig gather_config_for(const std::string& gather) {
  return parse_train_config(
      "[model]\npreset = \"tiny\"\nnum_blocks = 2\nvocab_size = 512\n[data]\ndir = \"-\"\n"
      "[train]\nseq_len = 32\nmicro_batch = 2\nsteps = 4\nprecision = \"bf16\"\n",
      "test.toml", {"schedule.warmup_steps=0", "optim.lr=0.01", "parallel.zero_gather_dtype=" + gather});
}

TEST(ZeroBf16Gather, FillsTheBf16CopyWithTheRoundedFloat32Gather) {
  const int W = world().size();
  const TrainConfig f32_config = gather_config_for("f32"), bf16_config = gather_config_for("bf16");
  ProcessMesh f32_mesh(world().split(0, world().rank(), "zero_f32_gather"), 1);
  ProcessMesh bf16_mesh(world().split(0, world().rank(), "zero_bf16_gather"), 1);
  StepNumerics a(f32_config, f32_mesh), b(bf16_config, bf16_mesh);
  ASSERT_TRUE(a.bf16_gemms() && b.bf16_gemms());
  ASSERT_FALSE(a.bf16_gather());
  ASSERT_TRUE(b.bf16_gather());
  const int64_t n = a.model().params().total_floats();
  std::vector<uint16_t> rounded(static_cast<size_t>(n));
  for (int step = 0; step < 3; ++step) {
    SyntheticBatchSource da(512, 5), db(512, 5);
    da.set_state({5, 0, uint64_t(step * 2 * W)});
    db.set_state({5, 0, uint64_t(step * 2 * W)});
    StepResult ra, rb;
    a.compute_gradients(da, ra);
    a.reduce_totals(ra);
    a.update(ra, 1.0, true);
    b.compute_gradients(db, rb);
    b.reduce_totals(rb);
    b.update(rb, 1.0, true);
    EXPECT_EQ(ra.loss, rb.loss) << "step " << step;
    EXPECT_EQ(ra.grad_norm, rb.grad_norm) << "step " << step;
    // a's parameters are whole on every rank: its copy is refreshed at the next step; b's is current now.
    const float* pa = a.model().param_data();
    for (int64_t i = 0; i < n; ++i) rounded[size_t(i)] = float_to_bf16(pa[i]);
    const uint16_t* copy = b.model().bf16_weights()->bf16;
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) differ += copy[i] != rounded[size_t(i)];
    EXPECT_EQ(differ, 0) << "of " << n << " bf16 weights, step " << step << ", rank " << world().rank();
    // The float32 master weights of each rank's own shard are those of the float32 gather.
    const float* pb = b.model().param_data();
    for (size_t e : b.optimizer().owned()) {
      const ParamEntry& t = b.model().params().entries()[e];
      EXPECT_EQ(0, std::memcmp(pa + t.offset, pb + t.offset, sizeof(float) * size_t(t.numel)))
          << t.name << ", step " << step << ", rank " << world().rank();
    }
    // The matrices (most of the bytes) travel in half the bytes: fewer on every
    // rank, under 0.6x over the world (a rank receiving the float32 embedding gains less).
    EXPECT_GT(ra.param_gather_bytes, 0);
    EXPECT_LT(rb.param_gather_bytes, ra.param_gather_bytes) << "rank " << world().rank();
    double bytes[2] = {double(ra.param_gather_bytes), double(rb.param_gather_bytes)};
    world().all_reduce(bytes, bytes, 2, DType::kF64, ReduceOp::kSum);
    EXPECT_LT(bytes[1], 0.6 * bytes[0]);
    if (step == 0 && world().rank() == 0)
      std::printf("[zero bf16 gather, %d ranks] rank 0 received %lld bytes (float32 gather: %lld)\n", W,
                  (long long)rb.param_gather_bytes, (long long)ra.param_gather_bytes);
  }
  // The float32 master weights made whole again are those of the float32 gather everywhere.
  b.gather_master_weights();
  EXPECT_EQ(0, std::memcmp(a.model().param_data(), b.model().param_data(), sizeof(float) * size_t(n)))
      << "rank " << world().rank();
}

}  // namespace
}  // namespace zaya
