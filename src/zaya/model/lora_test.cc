// LoRA on the whole model (model/lora.h): unmerged adapters give the logits
// of the merged weights, the adapters' gradients through the model agree with
// finite differences, and dropout is reproducible. The PEFT files:
// formats/lora_peft_test.cc.
#include "zaya/model/lora.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/rng.h"
#include "zaya/core/test_util.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_file.h"
#include "zaya/io/safetensors_writer.h"
#include "zaya/model/lora_test_util.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

using testing::kAttention;
using testing::kExperts;
using testing::kRouter;
using testing::lora_config;
using testing::randomize;

constexpr int64_t kB = 2, kS = 8;

// The target sets the model-level tests run on, named.
struct TargetSet {
  const char* name;
  std::vector<LoraTarget> targets;
};
std::vector<TargetSet> target_sets() {
  return {{"attention", kAttention}, {"router", kRouter}, {"experts", kExperts}, {"all", all_lora_targets()}};
}

struct Batch {
  std::vector<int32_t> ids, targets;
  Batch() : ids(kB * kS), targets(kB * kS) {
    for (int64_t i = 0; i < kB * kS; ++i) {
      ids[i] = int32_t((i * 37 + 5) % 90);
      targets[i] = int32_t((i * 11 + 3) % 90);
    }
  }
};

TEST(Lora, NamesAreTheNativeModulePathsPeftUses) {
  const ZayaConfig c = testing::model_test_config();
  EXPECT_EQ(lora_module_path(c, 2, LoraTarget::kQ), "model.layers.2.self_attn.qkv_proj.q_proj");
  EXPECT_EQ(lora_module_path(c, 0, LoraTarget::kVDelayed), "model.layers.0.self_attn.qkv_proj.v_proj_delayed");
  EXPECT_EQ(lora_module_path(c, 1, LoraTarget::kRouterDown), "model.layers.1.mlp.gate.down_proj");
  EXPECT_EQ(lora_module_path(c, 1, LoraTarget::kRouterFc1), "model.layers.1.mlp.gate.router_mlp.fc1");
  EXPECT_EQ(lora_module_path(c, 1, LoraTarget::kRouterFc2), "model.layers.1.mlp.gate.router_mlp.fc2");
  EXPECT_EQ(lora_module_path(c, 1, LoraTarget::kRouterOut), "model.layers.1.mlp.gate.router_mlp.out_proj");
  EXPECT_EQ(lora_module_path(c, 2, LoraTarget::kExpertGateUp), "model.layers.2.mlp.experts.gate_up_proj");
  EXPECT_EQ(lora_module_path(c, 2, LoraTarget::kExpertDown), "model.layers.2.mlp.experts.down_proj");
  EXPECT_EQ(peft_lora_a_name(c, 1, LoraTarget::kO), "base_model.model.model.layers.1.self_attn.o_proj.lora_A.weight");
  EXPECT_EQ(peft_lora_b_name(c, 1, LoraTarget::kK),
            "base_model.model.model.layers.1.self_attn.qkv_proj.k_proj.lora_B.weight");
  EXPECT_EQ(peft_lora_b_name(c, 0, LoraTarget::kRouterOut),
            "base_model.model.model.layers.0.mlp.gate.router_mlp.out_proj.lora_B.weight");
  for (LoraTarget t : all_lora_targets()) EXPECT_EQ(parse_lora_target(std::string(lora_target_name(t)), "x"), t);
  try {
    parse_lora_target("v_proj", "run.toml: [lora] targets");
    FAIL() << "v_proj was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run.toml: [lora] targets: LoRA target 'v_proj' is not supported; allowed: "
                                         "q_proj, k_proj, v_proj_current, v_proj_delayed, o_proj, mlp.gate.down_proj, "
                                         "mlp.gate.router_mlp.fc1, mlp.gate.router_mlp.fc2, "
                                         "mlp.gate.router_mlp.out_proj, mlp.experts.gate_up_proj, "
                                         "mlp.experts.down_proj"),
              std::string::npos)
        << e.what();
  }
  // PEFT's ParamWrapper has no dropout: expert targets refuse it, by name.
  try {
    LoraAdapters bad(c, lora_config(0.1, {LoraTarget::kQ, LoraTarget::kExpertDown}));
    FAIL() << "dropout with an expert target was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LoRA dropout 0.1 with expert targets"), std::string::npos) << e.what();
  }
}

TEST(Lora, InitIsPeftsKaimingUniformAndZeroB) {
  const ZayaConfig c = testing::model_test_config();
  LoraAdapters a(c, lora_config(0, all_lora_targets()));
  a.init(3);
  const int64_t r = a.config().rank;
  for (const auto& e : a.entries()) {
    SCOPED_TRACE(lora_target_name(e.target));
    // nn.Linear targets: PEFT's lora_A is A (fan_in = in), lora_B = B = 0. Expert
    // parameters: PEFT's lora_A is B transposed (fan_in = out), its lora_B = A = 0.
    const bool expert = lora_is_expert(e.target);
    const float* drawn = a.data() + (expert ? e.b_offset : e.a_offset);
    const float* zero = a.data() + (expert ? e.a_offset : e.b_offset);
    const int64_t n = expert ? e.b_floats(r) : e.a_floats(r), nz = expert ? e.a_floats(r) : e.b_floats(r);
    const float bound = 1.0f / std::sqrt(float(expert ? e.slot.out : e.slot.in));
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < n; ++i) {
      lo = std::min(lo, drawn[i]);
      hi = std::max(hi, drawn[i]);
    }
    EXPECT_LE(hi, bound);
    EXPECT_GE(lo, -bound);
    EXPECT_GT(hi, 0.7f * bound);
    EXPECT_LT(lo, -0.7f * bound);
    for (int64_t i = 0; i < nz; ++i) ASSERT_EQ(zero[i], 0.0f);
    EXPECT_EQ(e.experts, expert ? c.experts : 1);
  }
}

TEST(Lora, UnmergedLogitsEqualTheMergedModels) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  ZayaModel plain(c);
  plain.init(1);
  ModelWorkspace ws_plain(c, kB, kS, false);
  model_forward(plain, ws_plain, batch.ids.data(), nullptr, kB, kS, {});
  for (const TargetSet& set : target_sets()) {
    SCOPED_TRACE(set.name);
    ZayaModel base(c), merged(c);
    base.init(1);
    merged.init(1);
    LoraAdapters adapters(c, lora_config(0, set.targets));
    randomize(adapters, 5);
    base.set_lora(&adapters);
    ModelWorkspace ws(c, kB, kS, false), ws_merged(c, kB, kS, false);
    ws.enable_lora(c, adapters.config());
    model_forward(base, ws, batch.ids.data(), nullptr, kB, kS, {});
    merge_lora(adapters, merged.weights());
    model_forward(merged, ws_merged, batch.ids.data(), nullptr, kB, kS, {});
    // The adapters change the logits, and the merged model reproduces them.
    double diff = 0, change = 0, scale = 0;
    for (int64_t i = 0; i < kB * kS * c.vocab_size; ++i) {
      diff = std::max(diff, double(std::fabs(ws.logits()[i] - ws_merged.logits()[i])));
      change = std::max(change, double(std::fabs(ws.logits()[i] - ws_plain.logits()[i])));
      scale = std::max(scale, double(std::fabs(ws.logits()[i])));
    }
    EXPECT_LT(diff, 1e-4 * scale);
    // (The router's adapters act only through the routing and the gates: a smaller change.)
    EXPECT_GT(change, 2e-3 * scale) << "the adapters did not change the logits: the test would be vacuous";
  }
}

// Each target kind's adapter gradients through the whole model against
// central differences (float): of every adapter, the largest gradient of A and of B.
TEST(Lora, AdapterGradientsThroughTheModelMatchFiniteDifferences) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  for (const TargetSet& set : target_sets()) {
    if (std::string(set.name) == "all") continue;
    SCOPED_TRACE(set.name);
    ZayaModel model(c);
    model.init(1);
    LoraAdapters adapters(c, lora_config(0, set.targets));
    randomize(adapters, 5);
    model.set_lora(&adapters);
    ModelWorkspace ws(c, kB, kS, true);
    ws.enable_lora(c, adapters.config());
    // The cross-entropy and the router's z-loss (smooth in the logits): through the gates
    // alone the router adapters' gradients are too small for float differences.
    const float xent_scale = 1.0f / float(kB * kS);
    MoeLossOptions z;
    z.z_loss_coeff = 0.1f;
    // The routing of the last loss(): a perturbation that moves a token to another expert
    // crosses a step of the loss, where differences say nothing; such elements are skipped.
    std::vector<double> routing;
    auto loss = [&] {
      ws.reset_routing();
      const LossParts parts = model_forward(model, ws, batch.ids.data(), batch.targets.data(), kB, kS, z);
      routing.clear();
      for (const RoutingStats& r : ws.routing()) routing.insert(routing.end(), r.choices_N.begin(), r.choices_N.end());
      return parts.xent_sum * xent_scale + parts.router_loss;
    };
    loss();
    const std::vector<double> base_routing = routing;
    Arena grads(size_t(model.params().total_floats()));
    grads.zero();
    const ModelWeights g = bind_weights(c, model.params(), grads.data());
    std::vector<float> lora_grads(size_t(adapters.total_floats()), 0.0f);
    const LoraViews gv = adapters.bind(lora_grads.data());
    model_backward(model, ws, g, xent_scale, 1.0f, z, nullptr, &gv);
    // For every adapter (block, target) and each of its matrices: the element of the
    // largest gradient, or the next one when a perturbation reroutes a token.
    const int64_t r = adapters.config().rank;
    int checked = 0, skipped = 0;
    for (const auto& e : adapters.entries()) {
      for (const bool is_a : {true, false}) {
        const int64_t first = is_a ? e.a_offset : e.b_offset, n = is_a ? e.a_floats(r) : e.b_floats(r);
        std::vector<int64_t> order(static_cast<size_t>(n), 0);
        std::iota(order.begin(), order.end(), first);
        std::sort(order.begin(), order.end(),
                  [&](int64_t x, int64_t y) { return std::fabs(lora_grads[x]) > std::fabs(lora_grads[y]); });
        const std::string what =
            ::testing::PrintToString(e.block) + " " + std::string(lora_target_name(e.target)) + (is_a ? " A" : " B");
        bool done = false;
        for (size_t k = 0; k < 3 && !done; ++k) {
          const int64_t i = order[k];
          float& p = adapters.data()[i];
          const float saved = p, h = 1e-2f;
          p = saved + h;
          const double up = loss();
          bool same_routing = routing == base_routing;
          p = saved - h;
          const double down = loss();
          same_routing = same_routing && routing == base_routing;
          p = saved;
          if (!same_routing) {
            ++skipped;
            continue;
          }
          done = true;
          ++checked;
          const double numeric = (up - down) / (2 * h);
          EXPECT_GT(std::fabs(numeric), 1e-3) << what << ": a gradient this small would make the check vacuous";
          EXPECT_NEAR(lora_grads[i], numeric, 2e-2 * std::fabs(numeric) + 2e-4) << what << " element " << i - first;
        }
      }
    }
    EXPECT_GE(checked, int(adapters.entries().size()) * 2 - 2) << skipped << " perturbations rerouted a token";
  }
}

// Expert e's adapter acts on exactly the rows routed to e: the adapter of an
// expert no token chose gets a zero gradient, a chosen expert's a nonzero one
// (a misplaced branch, say expert 0's adapter on every expert's rows, fails).
TEST(Lora, ExpertAdaptersSeeOnlyTheirExpertsRows) {
  ZayaConfig c = testing::model_test_config();
  Batch batch;
  ZayaModel model(c);
  model.init(1);
  // Steer every token of layer 1 away from expert 2: a large negative balancing bias.
  model.balancing_biases()[1][2] = -100.0f;
  LoraAdapters adapters(c, lora_config(0, kExperts));
  randomize(adapters, 5);
  model.set_lora(&adapters);
  ModelWorkspace ws(c, kB, kS, true);
  ws.enable_lora(c, adapters.config());
  model_forward(model, ws, batch.ids.data(), batch.targets.data(), kB, kS, {});
  ASSERT_EQ(ws.routing()[1].choices_N[2], 0.0) << "expert 2 of layer 1 was chosen: the test would be vacuous";
  std::vector<float> lora_grads(size_t(adapters.total_floats()), 0.0f);
  const LoraViews gv = adapters.bind(lora_grads.data());
  model_backward(model, ws, bind_weights(c, model.params(), nullptr), 1.0f / float(kB * kS), 0.0f, {}, nullptr, &gv);
  const int64_t r = adapters.config().rank;
  for (const auto& e : adapters.entries()) {
    for (int64_t x = 0; x < c.experts; ++x) {
      const int64_t na = e.a_floats(r) / e.experts, nb = e.b_floats(r) / e.experts;
      double sum = 0;
      for (int64_t i = 0; i < na; ++i) sum += std::fabs(lora_grads[size_t(e.a_offset + x * na + i)]);
      for (int64_t i = 0; i < nb; ++i) sum += std::fabs(lora_grads[size_t(e.b_offset + x * nb + i)]);
      const bool chosen = ws.routing()[size_t(e.block)].choices_N[size_t(x)] > 0;
      if (chosen) {
        EXPECT_GT(sum, 0.0) << "block " << e.block << " expert " << x << " " << lora_target_name(e.target);
      } else {
        EXPECT_EQ(sum, 0.0) << "block " << e.block << " expert " << x << " " << lora_target_name(e.target);
      }
    }
  }
}

TEST(Lora, DropoutIsReproducibleAndDependsOnThePass) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  for (const std::vector<LoraTarget>& targets : {kAttention, kRouter}) {
    ZayaModel model(c);
    model.init(1);
    LoraAdapters adapters(c, lora_config(0.4, targets));
    randomize(adapters, 5);
    model.set_lora(&adapters);
    ModelWorkspace ws(c, kB, kS, true);
    ws.enable_lora(c, adapters.config());
    auto loss = [&](bool on, uint64_t pass) {
      ws.set_lora_dropout(on, 9, pass);
      return model_forward(model, ws, batch.ids.data(), batch.targets.data(), kB, kS, {}).xent_sum;
    };
    EXPECT_EQ(loss(true, 3), loss(true, 3));
    EXPECT_NE(loss(true, 3), loss(true, 4));
    EXPECT_NE(loss(true, 3), loss(false, 3));
    EXPECT_EQ(loss(false, 3), loss(false, 4));
  }
}

// Recomputed blocks rerun their adapters (attention, router, experts),
// dropout included: the gradients of the base and of the adapters are those
// of "none" bit for bit.
TEST(Lora, RecomputationGivesTheGradientsOfNoneBitwise) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  const LoraConfig configs[] = {lora_config(0.3), lora_config(0.3, kRouter), lora_config(0, all_lora_targets())};
  for (const LoraConfig& lc : configs) {
    SCOPED_TRACE(::testing::Message() << lc.targets.size() << " targets");
    auto grads_of = [&](Recompute r) {
      ZayaModel model(c);
      model.init(1);
      LoraAdapters adapters(c, lc);
      randomize(adapters, 5);
      model.set_lora(&adapters);
      ModelWorkspace ws(c, kB, kS, true, nullptr, nullptr, r);
      ws.enable_lora(c, adapters.config());
      ws.set_lora_dropout(true, 9, 2);
      model_forward(model, ws, batch.ids.data(), batch.targets.data(), kB, kS, {});
      std::vector<float> all(size_t(model.params().total_floats() + adapters.total_floats()), 0.0f);
      const ModelWeights g = bind_weights(c, model.params(), all.data());
      const LoraViews gv = adapters.bind(all.data() + model.params().total_floats());
      model_backward(model, ws, g, 1.0f / float(kB * kS), 0.0f, {}, nullptr, &gv);
      return all;
    };
    const std::vector<float> none = grads_of(Recompute::kNone);
    for (Recompute r : {Recompute::kAttention, Recompute::kMoe, Recompute::kFull}) {
      const std::vector<float> got = grads_of(r);
      ASSERT_EQ(none.size(), got.size());
      EXPECT_EQ(0, std::memcmp(none.data(), got.data(), sizeof(float) * none.size())) << recompute_name(r);
    }
  }
}

// A frozen base (null gradient views, model/weights.h) gets no weight
// gradients, and the adapters' gradients are bitwise those of a backward that
// also forms every base gradient (f32 and bf16 GEMMs, with and without
// recomputation, with dropout; every target kind).
TEST(Lora, FrozenBaseViewsGiveTheSameAdapterGradientsBitwise) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  auto adapter_grads = [&](const LoraConfig& lc, bool frozen, bool bf16, Recompute r) {
    ZayaModel model(c);
    model.init(1);
    if (bf16) model.enable_bf16_gemms();
    LoraAdapters adapters(c, lc);
    randomize(adapters, 5);
    model.set_lora(&adapters);
    ModelWorkspace ws(c, kB, kS, true, nullptr, nullptr, r);
    ws.enable_lora(c, adapters.config());
    ws.set_lora_dropout(true, 9, 2);
    model_forward(model, ws, batch.ids.data(), batch.targets.data(), kB, kS, {});
    std::vector<float> base(frozen ? 0 : size_t(model.params().total_floats()), 0.0f);
    std::vector<float> lora(size_t(adapters.total_floats()), 0.0f);
    const ModelWeights g = bind_weights(c, model.params(), frozen ? nullptr : base.data());
    const LoraViews gv = adapters.bind(lora.data());
    MoeLossOptions loss;
    loss.switch_aux_coeff = 0.01f;
    loss.z_loss_coeff = 0.001f;
    model_backward(model, ws, g, 1.0f / float(kB * kS), 0.5f, loss, nullptr, &gv);
    if (!frozen) {
      EXPECT_GT(std::count_if(base.begin(), base.end(), [](float v) { return v != 0.0f; }), 0);
    }
    return lora;
  };
  for (const LoraConfig& lc : {lora_config(0.3), lora_config(0, all_lora_targets())})
    for (bool bf16 : {false, true})
      for (Recompute r : {Recompute::kNone, Recompute::kFull}) {
        const std::vector<float> full = adapter_grads(lc, false, bf16, r);
        const std::vector<float> frozen = adapter_grads(lc, true, bf16, r);
        EXPECT_GT(std::count_if(frozen.begin(), frozen.end(), [](float v) { return v != 0.0f; }), 0);
        EXPECT_EQ(0, std::memcmp(full.data(), frozen.data(), sizeof(float) * full.size()))
            << lc.targets.size() << " targets, " << (bf16 ? "bf16 " : "f32 ") << recompute_name(r);
      }
}

// bf16 GEMMs with the inputs only GEMMs read kept in bf16 where no adapter
// reads them (bf16_kept_inputs): the adapters' gradients are the bits of a
// workspace that keeps every input in float32, for adapters on the
// attention projections (the experts' inputs kept), on o_proj and the router
// (both kinds kept) and on every target (none kept).
TEST(Lora, Bf16KeptInputsGiveTheSameAdapterGradientsBitwise) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  auto adapter_grads = [&](const LoraConfig& lc, Bf16KeptInputs kept) {
    ZayaModel model(c);
    model.init(1);
    model.enable_bf16_gemms();
    LoraAdapters adapters(c, lc);
    randomize(adapters, 5);
    model.set_lora(&adapters);
    ModelWorkspace ws(c, kB, kS, true, nullptr, nullptr, Recompute::kNone, kept);
    ws.reserve_bf16_gemms();
    ws.enable_lora(c, adapters.config());
    ws.set_lora_dropout(true, 9, 2);
    model_forward(model, ws, batch.ids.data(), batch.targets.data(), kB, kS, {});
    std::vector<float> lora(size_t(adapters.total_floats()), 0.0f);
    const ModelWeights g = bind_weights(c, model.params(), nullptr);
    const LoraViews gv = adapters.bind(lora.data());
    model_backward(model, ws, g, 1.0f / float(kB * kS), 0.5f, {}, nullptr, &gv);
    return lora;
  };
  const LoraConfig outside = lora_config(0.3, {LoraTarget::kO, LoraTarget::kRouterDown, LoraTarget::kRouterFc1});
  const LoraConfig attention = lora_config(0.3), every = lora_config(0, all_lora_targets());
  EXPECT_TRUE(bf16_kept_inputs(&outside).attention && bf16_kept_inputs(&outside).experts);
  EXPECT_TRUE(!bf16_kept_inputs(&attention).attention && bf16_kept_inputs(&attention).experts);
  EXPECT_FALSE(bf16_kept_inputs(&every).any());
  for (const LoraConfig* lc : {&outside, &attention}) {
    const std::vector<float> f32 = adapter_grads(*lc, Bf16KeptInputs{}),
                             kept = adapter_grads(*lc, bf16_kept_inputs(lc));
    EXPECT_GT(std::count_if(kept.begin(), kept.end(), [](float v) { return v != 0.0f; }), 0);
    EXPECT_EQ(0, std::memcmp(f32.data(), kept.data(), sizeof(float) * f32.size())) << lc->targets.size() << " targets";
  }
  // A workspace that keeps an input in bf16 refuses adapters that read it.
  ModelWorkspace ws(c, kB, kS, true, nullptr, nullptr, Recompute::kNone, bf16_kept_inputs(nullptr));
  testing::expect_error([&] { ws.enable_lora(c, attention); }, "read inputs this workspace keeps in bf16 only");
}

}  // namespace
}  // namespace zaya
