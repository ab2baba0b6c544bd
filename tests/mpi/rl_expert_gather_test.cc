// The rollout decoder's weights under expert parallelism (rl/expert_gather.h):
// each rank of an ep group holds its experts (as the trainer does, changed
// from their initial values by a rank-specific amount), and gather_experts
// gives every rank the whole model bit for bit: the dense tensors, the
// buffers and every rank's experts, each at its own name. Checked against one
// model that holds every expert with the same values, in float32 and in a
// frozen bf16 base's storage. ep = 2 on an even world, else 1 (a copy).
// A tensor taken from the wrong rank or at the wrong offset differs by O(1).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/mpi/mpi_test_env.h"
#include "zaya/rl/expert_gather.h"

namespace zaya {
namespace {

using testing::world;

// An expert's tensors moved off their initial values by the global expert index (so a rank's copy is its own).
void move_experts(ZayaModel& m) {
  std::vector<float> v;
  for (const ParamEntry& e : m.params().entries()) {
    if (e.expert < 0) continue;
    v.resize(size_t(e.numel));
    m.read_param(e, v.data());
    for (int64_t i = 0; i < e.numel; ++i) v[size_t(i)] += 0.25f * float(e.expert + 1);
    m.set_param(e, v.data());
  }
}

TEST(RlExpertGather, EveryRankGetsTheWholeModel) {
  const int W = world().size(), ep = W % 2 == 0 ? 2 : 1;
  std::unique_ptr<Comm> group = world().split(world().rank() / ep, world().rank() % ep, "rl_gather_ep");
  ZayaConfig c = preset_config("tiny");
  c.num_blocks = 2;
  c.vocab_size = c.real_vocab_size = 512;
  const int64_t local = c.experts / ep;
  for (ParamStorage storage : {ParamStorage::kF32, ParamStorage::kFrozenBf16}) {
    SCOPED_TRACE(storage == ParamStorage::kF32 ? "float32" : "frozen bf16");
    ZayaModel mine(c, ExpertRange{group->rank() * local, local}, storage), whole(c, ExpertRange{}, storage);
    mine.init(7);
    whole.init(7);
    move_experts(mine);
    move_experts(whole);
    mine.buffer_data()[0] = whole.buffer_data()[0] = 0.5f;  // a trained balancing bias
    std::unique_ptr<ZayaModel> full = full_model_like(mine);
    gather_experts(mine, *group, *full);
    ASSERT_EQ(full->params().total_floats(), whole.params().total_floats());
    int64_t experts = 0;
    std::vector<float> got, want;
    for (const ParamEntry& e : whole.params().entries()) {
      got.resize(size_t(e.numel));
      want.resize(size_t(e.numel));
      full->read_param(full->params().at(e.name), got.data());
      whole.read_param(e, want.data());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * size_t(e.numel)), 0) << e.name;
      experts += e.expert >= 0 ? 1 : 0;
    }
    EXPECT_GT(experts, 0);
    EXPECT_EQ(
        std::memcmp(full->buffer_data(), whole.buffer_data(), sizeof(float) * size_t(whole.buffers().total_floats())),
        0);
  }
}

}  // namespace
}  // namespace zaya
