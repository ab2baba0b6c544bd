// The LoRA targets are the tensor table's LoRA column: LoraTarget numbers its
// rows in table order, their names are the column's values, and a target's
// slot is its matrix in the table (its rows of the fused q/k/v weight).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "zaya/model/lora.h"
#include "zaya/model/tensor_table.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

TEST(LoraTarget, MatchesTheTensorTablesLoraColumn) {
  // The enumeration's handles, each with the row it must be (a reordered or
  // missing row shifts the dropout streams and the initialisation).
  const std::pair<LoraTarget, TensorRole> want[] = {
      {LoraTarget::kQ, TensorRole::kAttnQ},
      {LoraTarget::kK, TensorRole::kAttnK},
      {LoraTarget::kVCurrent, TensorRole::kAttnVCurrent},
      {LoraTarget::kVDelayed, TensorRole::kAttnVDelayed},
      {LoraTarget::kO, TensorRole::kAttnOut},
      {LoraTarget::kRouterDown, TensorRole::kRouterDown},
      {LoraTarget::kRouterFc1, TensorRole::kRouterFc1},
      {LoraTarget::kRouterFc2, TensorRole::kRouterFc2},
      {LoraTarget::kRouterOut, TensorRole::kRouterOut},
      {LoraTarget::kExpertGateUp, TensorRole::kExpertFc1},
      {LoraTarget::kExpertDown, TensorRole::kExpertFc2},
  };
  ASSERT_EQ(lora_target_roles().size(), size_t(kLoraTargetCount));
  ASSERT_EQ(std::size(want), size_t(kLoraTargetCount));
  for (const auto& [target, role] : want) {
    EXPECT_EQ(lora_target_roles()[size_t(target)], role) << lora_target_name(target);
    EXPECT_EQ(lora_target_role(target), role);
    EXPECT_EQ(lora_target_name(target), std::string(tensor_decl(role).lora));
  }
  // Only matrices of a half-layer, each name once; the kinds follow the scope.
  std::set<std::string> names;
  for (const TensorDecl& d : tensor_decls()) {
    if (d.lora == nullptr) continue;
    EXPECT_EQ(d.kind, ParamKind::kMatrix) << d.lora;
    EXPECT_TRUE(names.insert(d.lora).second) << d.lora;
  }
  EXPECT_EQ(lora_target_kind(LoraTarget::kO), LoraTargetKind::kAttention);
  EXPECT_EQ(lora_target_kind(LoraTarget::kRouterOut), LoraTargetKind::kRouter);
  EXPECT_EQ(lora_target_kind(LoraTarget::kExpertGateUp), LoraTargetKind::kExpert);
  EXPECT_EQ(lora_target_names(),
            "q_proj, k_proj, v_proj_current, v_proj_delayed, o_proj, mlp.gate.down_proj, mlp.gate.router_mlp.fc1, "
            "mlp.gate.router_mlp.fc2, mlp.gate.router_mlp.out_proj, mlp.experts.gate_up_proj, mlp.experts.down_proj");
}

TEST(LoraTarget, SlotsAreTheTableShapesAndTheFusedRows) {
  const ZayaConfig c = testing::model_test_config();
  const int64_t D = c.hidden, Q = c.q_width(), K = c.kv_width(), R = c.router_hidden, F = c.expert_ffn;
  auto slot = [&](LoraTarget t) {
    const LoraSlot s = lora_slot(c, t);
    return std::vector<int64_t>{s.in, s.out, s.row_offset};
  };
  using V = std::vector<int64_t>;
  EXPECT_EQ(slot(LoraTarget::kQ), (V{D, Q, 0}));
  EXPECT_EQ(slot(LoraTarget::kK), (V{D, K, Q}));
  EXPECT_EQ(slot(LoraTarget::kVCurrent), (V{D, K / 2, Q + K}));
  EXPECT_EQ(slot(LoraTarget::kVDelayed), (V{D, K / 2, Q + K + K / 2}));
  EXPECT_EQ(slot(LoraTarget::kO), (V{Q, D, 0}));
  EXPECT_EQ(slot(LoraTarget::kRouterDown), (V{D, R, 0}));
  EXPECT_EQ(slot(LoraTarget::kRouterFc1), (V{R, R, 0}));
  EXPECT_EQ(slot(LoraTarget::kRouterFc2), (V{R, R, 0}));
  EXPECT_EQ(slot(LoraTarget::kRouterOut), (V{R, c.router_slots(), 0}));
  EXPECT_EQ(slot(LoraTarget::kExpertGateUp), (V{D, 2 * F, 0}));
  EXPECT_EQ(slot(LoraTarget::kExpertDown), (V{F, D, 0}));
}

}  // namespace
}  // namespace zaya
