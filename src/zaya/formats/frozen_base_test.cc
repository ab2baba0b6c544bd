// A frozen bf16 base (model/frozen_base.h, ParamStorage::kFrozenBf16): loaded
// from a bf16 checkpoint in either layout it computes bitwise what a float32
// master holding the same (bf16-representable) values with its bf16 copy
// computes, losses, logits and LoRA gradients, while holding only the small
// tensors in float32 and no base gradients.
#include "zaya/model/frozen_base.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "zaya/core/bf16.h"
#include "zaya/core/rng.h"
#include "zaya/core/test_util.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/formats/model_directory.h"
#include "zaya/model/lora.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

constexpr int64_t kFrozenB = 2, kFrozenS = 8;

// A bf16 checkpoint of a randomly initialised model (biases away from zero, so
// the routing depends on them) in `layout`.
void write_bf16_checkpoint(const ZayaConfig& c, const std::string& dir, DirectoryLayout layout) {
  ZayaModel model(c);
  model.init(3);
  for (float* b : model.balancing_biases())
    for (int64_t i = 0; i < c.experts; ++i) b[i] = 0.01f * float(i);
  HfSaveOptions options;
  options.dtype = "bf16";
  save_model_directory(c, complete_model_tensors(model), dir, layout, options);
}

struct FrozenPass {
  LossParts loss;
  std::vector<float> logits, adapter_grads;
};

// Forward and backward with LoRA adapters (the attention targets with dropout
// on, or every target: router matrices and experts too, without dropout), the
// base's gradients formed (`base_grads`) or not (null views).
FrozenPass run(ZayaModel& model, bool base_grads, bool every_target = false) {
  const ZayaConfig& c = model.config();
  LoraConfig lc;
  lc.enabled = true;
  lc.rank = 4;
  lc.alpha = 8;
  lc.dropout = every_target ? 0.0 : 0.2;
  if (every_target) lc.targets = all_lora_targets();
  LoraAdapters adapters(c, lc);
  adapters.init(5);
  for (const auto& e : adapters.entries()) {  // the factor init() leaves at zero, drawn too
    const bool expert = lora_is_expert(e.target);
    float* p = adapters.data() + (expert ? e.a_offset : e.b_offset);
    const int64_t n = expert ? e.a_floats(lc.rank) : e.b_floats(lc.rank);
    for (int64_t i = 0; i < n; ++i) p[i] = 0.2f * normal01(5, 7 + uint64_t(e.b_offset), uint64_t(i));
  }
  model.set_lora(&adapters);
  ModelWorkspace ws(c, kFrozenB, kFrozenS, true);
  ws.reserve_bf16_gemms();
  ws.enable_lora(c, lc);
  ws.set_lora_dropout(true, 9, 2);
  std::vector<int32_t> ids(kFrozenB * kFrozenS), targets(kFrozenB * kFrozenS);
  for (int64_t i = 0; i < kFrozenB * kFrozenS; ++i) {
    ids[size_t(i)] = int32_t((i * 37 + 5) % c.real_vocab_size);
    targets[size_t(i)] = int32_t((i * 11 + 3) % c.real_vocab_size);
  }
  MoeLossOptions loss;
  loss.switch_aux_coeff = 0.01f;
  loss.z_loss_coeff = 0.001f;
  FrozenPass p;
  p.loss = model_forward(model, ws, ids.data(), targets.data(), kFrozenB, kFrozenS, loss);
  p.logits.assign(ws.logits(), ws.logits() + ws.rows() * c.vocab_size);
  std::vector<float> base(base_grads ? size_t(model.params().total_floats()) : 0, 0.0f);
  p.adapter_grads.assign(size_t(adapters.total_floats()), 0.0f);
  const LoraViews gv = adapters.bind(p.adapter_grads.data());
  model_backward(model, ws, bind_weights(c, model.params(), base_grads ? base.data() : nullptr),
                 1.0f / float(kFrozenB * kFrozenS), 0.5f, loss, nullptr, &gv);
  model.set_lora(nullptr);
  return p;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

TEST(FrozenBase, Bf16CheckpointGivesTheLossesLogitsAndAdapterGradientsOfTheF32MasterBitwise) {
  ZayaConfig c = testing::model_test_config();
  c.scale_residual_merge = true;
  for (DirectoryLayout layout : {DirectoryLayout::kLegacy, DirectoryLayout::kNative}) {
    SCOPED_TRACE(directory_layout_name(layout));
    testing::TempDir dir;
    write_bf16_checkpoint(c, dir.path(), layout);
    // Today's path: the float32 master (bf16-representable values) and its bf16 copy; base gradients formed.
    ZayaModel master(c);
    load_model_directory_weights(master, dir.path());
    master.enable_bf16_gemms();
    const FrozenPass want = run(master, true);
    // The frozen base: bf16 arena filled from the file, the small tensors float32; no base gradients.
    ZayaModel frozen(c, {}, ParamStorage::kFrozenBf16);
    load_model_directory_weights(frozen, dir.path());
    frozen.enable_bf16_gemms();
    const FrozenPass got = run(frozen, false);
    EXPECT_EQ(want.loss.xent_sum, got.loss.xent_sum);
    EXPECT_EQ(want.loss.router_loss, got.loss.router_loss);
    EXPECT_TRUE(same_bits(want.logits, got.logits));
    EXPECT_TRUE(same_bits(want.adapter_grads, got.adapter_grads));
    // Every target kind (the experts' fc1 / fc2 held in bf16 only, the router's matrices float32 beside bf16).
    const FrozenPass want_all = run(master, true, true), got_all = run(frozen, false, true);
    EXPECT_EQ(want_all.loss.xent_sum, got_all.loss.xent_sum);
    EXPECT_TRUE(same_bits(want_all.logits, got_all.logits));
    EXPECT_TRUE(same_bits(want_all.adapter_grads, got_all.adapter_grads));
    EXPECT_FALSE(same_bits(want.logits, want_all.logits));
    // Every tensor reads back as the master's.
    for (const ParamEntry& e : frozen.params().entries()) {
      std::vector<float> a(size_t(e.numel)), b(size_t(e.numel));
      master.read_param(e, a.data());
      frozen.read_param(e, b.data());
      EXPECT_TRUE(same_bits(a, b)) << e.name;
    }
    // Memory: bf16 for everything, float32 only for the small tensors' pages.
    int64_t small = 0;
    for (const ParamEntry& e : frozen.params().entries())
      if (!bf16_only_role(e.role)) small += 4 * e.numel;
    EXPECT_EQ(frozen.bf16_param_bytes(), 2 * frozen.params().total_floats());
    EXPECT_GE(frozen.f32_param_bytes(), small);
    EXPECT_LT(frozen.f32_param_bytes(), master.f32_param_bytes());
    // The comparison can fail: one bf16 step on one o_proj weight changes the loss and the gradients.
    const ParamEntry& o = frozen.params().at("model.layers.0.self_attn.o_proj.weight");
    std::vector<float> w(size_t(o.numel));
    frozen.read_param(o, w.data());
    w[3] = bf16_to_float(uint16_t(float_to_bf16(w[3]) + 1));
    frozen.set_param(o, w.data());
    const FrozenPass perturbed = run(frozen, false);
    EXPECT_NE(want.loss.xent_sum, perturbed.loss.xent_sum);
    EXPECT_FALSE(same_bits(want.adapter_grads, perturbed.adapter_grads));
  }
}

TEST(FrozenBase, RandomInitIsTheMastersInitRoundedToBf16) {
  const ZayaConfig c = testing::model_test_config();
  ZayaModel master(c);
  master.init(11);
  ZayaModel frozen(c, {}, ParamStorage::kFrozenBf16);
  frozen.init(11);
  for (const ParamEntry& e : frozen.params().entries()) {
    std::vector<float> a(size_t(e.numel)), b(size_t(e.numel));
    master.read_param(e, a.data());
    frozen.read_param(e, b.data());
    if (bf16_only_role(e.role))
      for (float& v : a) v = bf16_to_float(float_to_bf16(v));
    EXPECT_TRUE(same_bits(a, b)) << e.name;
  }
}

}  // namespace
}  // namespace zaya
