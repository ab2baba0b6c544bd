// The tensor table: every role declared once, the three name maps agree with
// the parameter table, and the counts of the published checkpoints.
#include "zaya/model/tensor_table.h"

#include <gtest/gtest.h>

#include <set>

#include "zaya/core/error.h"
#include "zaya/formats/gguf_zaya_map.h"
#include "zaya/model/params.h"

namespace zaya {
namespace {

std::vector<const ParamEntry*> all_entries(const ParamTable& params, const ParamTable& buffers) {
  std::vector<const ParamEntry*> out;
  for (const ParamTable* t : {&params, &buffers})
    for (const ParamEntry& e : t->entries()) out.push_back(&e);
  return out;
}

TEST(TensorTable, EveryRoleIsDeclaredOnceWithDistinctNames) {
  std::set<int> roles;
  std::set<std::string> legacy, native, gguf;
  for (const TensorDecl& d : tensor_decls()) {
    EXPECT_TRUE(roles.insert(int(d.role)).second) << d.legacy;
    // Names are unique within a scope (the same suffix may serve two scopes: input_norm.weight).
    const std::string scope = std::to_string(int(d.scope)) + "/";
    EXPECT_TRUE(legacy.insert(scope + d.legacy).second) << d.legacy;
    EXPECT_TRUE(native.insert(scope + d.native).second) << d.native;
    EXPECT_TRUE(gguf.insert(scope + d.gguf).second) << d.gguf;
  }
  EXPECT_EQ(roles.size(), size_t(TensorRole::kExpertFc2) + 1);
}

// The published tensor counts (spec §6.1, §6.3, §12): ZAYA1-base and ZAYA1-8B
// 2,483 legacy / 1,283 native (experts stacked), ZAYA1-74B-preview 4,683 /
// 1,923; every legacy name maps to exactly one native place.
void expect_published_counts(const std::string& preset, size_t legacy_count, size_t native_count) {
  const ZayaConfig c = preset_config(preset);
  const ParamTable params(c, true), buffers(c, false);
  std::set<std::pair<std::string, int64_t>> places;
  std::set<std::string> native;
  for (const ParamEntry* e : all_entries(params, buffers)) {
    places.insert({native_tensor_ref(e->role, e->half_layer, e->expert, c).name,
                   native_tensor_ref(e->role, e->half_layer, e->expert, c).expert});
    native.insert(native_tensor_ref(e->role, e->half_layer, e->expert, c).name);
  }
  EXPECT_EQ(places.size(), legacy_count) << preset;
  EXPECT_EQ(native.size(), native_count) << preset;
}

TEST(TensorTable, PublishedCountsOfTheReleasedModels) {
  expect_published_counts("zaya1-base", 2483, 1283);
  expect_published_counts("zaya1-8b", 2483, 1283);
  expect_published_counts("zaya1-74b", 4683, 1923);
}

TEST(TensorTable, NativeNamesOfZaya1Base) {
  const ZayaConfig c = preset_config("zaya1-base");
  const ParamTable params(c, true), buffers(c, false);
  std::set<std::pair<std::string, int64_t>> places;
  std::set<std::string> native;
  for (const ParamEntry* e : all_entries(params, buffers)) {
    const NativeTensorRef r = native_tensor_ref(e->role, e->half_layer, e->expert, c);
    EXPECT_TRUE(places.insert({r.name, r.expert}).second) << e->name << " -> " << r.name;
    EXPECT_EQ(r.expert >= 0, e->expert >= 0) << e->name;
    native.insert(r.name);
    EXPECT_EQ(legacy_tensor_name(e->role, e->half_layer, e->expert), e->name);
  }
  EXPECT_EQ(places.size(), 2483u);
  EXPECT_EQ(native.size(), 1283u);
  // The lookup by legacy name agrees with the entry's.
  const ParamEntry& fc1 = params.at("model.layers.5.zaya_block.experts.local_experts.11.linear_fc1.weight");
  EXPECT_EQ(native_tensor_for(fc1.name, c).name, "model.layers.2.mlp.experts.gate_up_proj");
  EXPECT_EQ(native_tensor_for(fc1.name, c).expert, 11);
  EXPECT_THROW(native_tensor_for("model.layers.5.nothing", c), Error);
}

TEST(TensorTable, ShapesAndPresenceFollowTheConfig) {
  ZayaConfig c = preset_config("tiny");
  const ParamTable params(c, true);
  for (const ParamEntry& e : params.entries()) EXPECT_EQ(e.shape, tensor_shape(e.role, c)) << e.name;
  // No residual term at merge point 0, no EDA into the first MoE half-layer.
  EXPECT_EQ(params.find("model.layers.0.res_scale.residual_scale"), nullptr);
  EXPECT_NE(params.find("model.layers.2.res_scale.residual_scale"), nullptr);
  EXPECT_EQ(params.find("model.layers.1.zaya_block.router.router_states_scale"), nullptr);
  EXPECT_NE(params.find("model.layers.3.zaya_block.router.router_states_scale"), nullptr);
  c.use_eda = false;
  EXPECT_EQ(ParamTable(c, true).find("model.layers.3.zaya_block.router.router_states_scale"), nullptr);
}

// The GGUF map names each role by the table: blocks, merges, stacked experts.
TEST(TensorTable, GgufNames) {
  EXPECT_EQ(gguf_tensor_name(TensorRole::kAttnQ, 6), "blk.3.attn_q.weight");
  EXPECT_EQ(gguf_tensor_name(TensorRole::kMergeHiddenScale, 6), "blk.3.attn_merge_hs.weight");
  EXPECT_EQ(gguf_tensor_name(TensorRole::kMergeResidualBias, 7), "blk.3.ffn_merge_res.bias");
  EXPECT_EQ(gguf_tensor_name(TensorRole::kMergeHiddenBias, -1), "output_merge_hs.bias");
  EXPECT_EQ(gguf_tensor_name(TensorRole::kExpertFc1, 7, 0), "blk.3.ffn_gate_exps.weight");
  EXPECT_EQ(gguf_tensor_name(TensorRole::kExpertFc1, 7, 1), "blk.3.ffn_up_exps.weight");
  EXPECT_EQ(gguf_tensor_name(TensorRole::kBalancingBias, 7), "blk.3.exp_probs_b.bias");
  const ZayaConfig c = preset_config("tiny");
  std::set<std::string> names;
  for (const ZayaGgufTensor& t : zaya_gguf_tensor_map(c)) EXPECT_TRUE(names.insert(t.name).second) << t.name;
  // Per block: 15 attention tensors (norm, 4 merge, 10) + 14 dense MoE (norm, 4 merge, 9 router with EDA) +
  // balancing biases + 3 stacked expert tensors; block 0 lacks 2 merge tensors and the EDA scale; globals:
  // embedding, final norm, 4 final merge.
  EXPECT_EQ(int64_t(names.size()), 6 + c.num_blocks * (15 + 14 + 1 + 3) - 2 - 1);
}

}  // namespace
}  // namespace zaya
