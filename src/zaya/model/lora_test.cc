// LoRA on the whole model (model/lora.h): unmerged adapters give the logits
// of the merged weights, the adapters' gradients through the model agree with
// finite differences, dropout is reproducible, and the PEFT files round-trip
// with clear errors for what does not fit.
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
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_file.h"
#include "zaya/io/safetensors_writer.h"
#include "zaya/model/lora_peft.h"
#include "zaya/model/model.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

constexpr int64_t kB = 2, kS = 8;

LoraConfig lora_config(double dropout = 0) {
  LoraConfig l;
  l.enabled = true;
  l.rank = 4;
  l.alpha = 8;
  l.dropout = dropout;
  return l;
}

// Adapters with A from init and a nonzero B (a trained adapter).
void randomize(LoraAdapters& a, uint64_t seed) {
  a.init(seed);
  for (const auto& e : a.entries())
    for (int64_t i = 0; i < e.slot.out * a.config().rank; ++i)
      a.data()[e.b_offset + i] = 0.2f * normal01(seed, 7 + uint64_t(e.b_offset), uint64_t(i));
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
  EXPECT_EQ(peft_lora_a_name(c, 1, LoraTarget::kO), "base_model.model.model.layers.1.self_attn.o_proj.lora_A.weight");
  EXPECT_EQ(peft_lora_b_name(c, 1, LoraTarget::kK),
            "base_model.model.model.layers.1.self_attn.qkv_proj.k_proj.lora_B.weight");
  try {
    parse_lora_target("v_proj", "run.toml: [lora] targets");
    FAIL() << "v_proj was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run.toml: [lora] targets: LoRA target 'v_proj' is not supported; allowed: "
                                         "q_proj, k_proj, v_proj_current, v_proj_delayed, o_proj"),
              std::string::npos)
        << e.what();
  }
}

TEST(Lora, InitIsPeftsKaimingUniformAndZeroB) {
  const ZayaConfig c = testing::model_test_config();
  LoraAdapters a(c, lora_config());
  a.init(3);
  const auto& e = a.entries().front();
  const float* A = a.data() + e.a_offset;
  const float bound = 1.0f / std::sqrt(float(e.slot.in));
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < a.config().rank * e.slot.in; ++i) {
    lo = std::min(lo, A[i]);
    hi = std::max(hi, A[i]);
  }
  EXPECT_LE(hi, bound);
  EXPECT_GE(lo, -bound);
  EXPECT_GT(hi, 0.8f * bound);
  EXPECT_LT(lo, -0.8f * bound);
  for (int64_t i = 0; i < e.slot.out * a.config().rank; ++i) ASSERT_EQ(a.data()[e.b_offset + i], 0.0f);
}

TEST(Lora, UnmergedLogitsEqualTheMergedModels) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  ZayaModel base(c), merged(c);
  base.init(1);
  merged.init(1);
  LoraAdapters adapters(c, lora_config());
  randomize(adapters, 5);
  base.set_lora(&adapters);
  ModelWorkspace ws(c, kB, kS, false), ws_merged(c, kB, kS, false);
  ws.enable_lora(c, adapters.config().rank);
  model_forward(base, ws, batch.ids.data(), nullptr, kB, kS, {});
  merge_lora(adapters, merged.weights());
  model_forward(merged, ws_merged, batch.ids.data(), nullptr, kB, kS, {});
  // The adapters change the logits, and the merged model reproduces them.
  ZayaModel plain(c);
  plain.init(1);
  ModelWorkspace ws_plain(c, kB, kS, false);
  model_forward(plain, ws_plain, batch.ids.data(), nullptr, kB, kS, {});
  double diff = 0, change = 0, scale = 0;
  for (int64_t i = 0; i < kB * kS * c.vocab_size; ++i) {
    diff = std::max(diff, double(std::fabs(ws.logits()[i] - ws_merged.logits()[i])));
    change = std::max(change, double(std::fabs(ws.logits()[i] - ws_plain.logits()[i])));
    scale = std::max(scale, double(std::fabs(ws.logits()[i])));
  }
  EXPECT_LT(diff, 1e-4 * scale);
  EXPECT_GT(change, 1e-2 * scale) << "the adapters did not change the logits: the test would be vacuous";
}

TEST(Lora, AdapterGradientsThroughTheModelMatchFiniteDifferences) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  ZayaModel model(c);
  model.init(1);
  LoraAdapters adapters(c, lora_config());
  randomize(adapters, 5);
  model.set_lora(&adapters);
  ModelWorkspace ws(c, kB, kS, true);
  ws.enable_lora(c, adapters.config().rank);
  const float xent_scale = 1.0f / float(kB * kS);
  auto loss = [&] {
    return model_forward(model, ws, batch.ids.data(), batch.targets.data(), kB, kS, {}).xent_sum * xent_scale;
  };
  loss();
  Arena grads(size_t(model.params().total_floats()));
  grads.zero();
  const ModelWeights g = bind_weights(c, model.params(), grads.data());
  std::vector<float> lora_grads(size_t(adapters.total_floats()), 0.0f);
  const LoraViews gv = adapters.bind(lora_grads.data());
  model_backward(model, ws, g, xent_scale, 0.0f, {}, nullptr, &gv);
  // The largest gradients of A and of B over every adapter, by central differences in float.
  std::vector<int64_t> order(lora_grads.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t x, int64_t y) { return std::fabs(lora_grads[x]) > std::fabs(lora_grads[y]); });
  ASSERT_GT(std::fabs(lora_grads[order[0]]), 1e-3f);
  int checked_a = 0, checked_b = 0;
  for (int64_t i : order) {
    bool is_a = false;
    for (const auto& e : adapters.entries()) is_a |= i >= e.a_offset && i < e.b_offset;
    if ((is_a ? checked_a : checked_b) >= 4) continue;
    (is_a ? checked_a : checked_b)++;
    float& p = adapters.data()[i];
    const float saved = p, h = 1e-2f;
    p = saved + h;
    const double up = loss();
    p = saved - h;
    const double down = loss();
    p = saved;
    const double numeric = (up - down) / (2 * h);
    EXPECT_NEAR(lora_grads[i], numeric, 2e-2 * std::fabs(numeric) + 2e-4) << (is_a ? "A" : "B") << " element " << i;
    if (checked_a >= 4 && checked_b >= 4) break;
  }
  EXPECT_EQ(checked_a, 4);
  EXPECT_EQ(checked_b, 4);
}

TEST(Lora, DropoutIsReproducibleAndDependsOnThePass) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  ZayaModel model(c);
  model.init(1);
  LoraAdapters adapters(c, lora_config(0.4));
  randomize(adapters, 5);
  model.set_lora(&adapters);
  ModelWorkspace ws(c, kB, kS, true);
  ws.enable_lora(c, adapters.config().rank);
  auto loss = [&](bool on, uint64_t pass) {
    ws.set_lora_dropout(on, 9, pass);
    return model_forward(model, ws, batch.ids.data(), batch.targets.data(), kB, kS, {}).xent_sum;
  };
  EXPECT_EQ(loss(true, 3), loss(true, 3));
  EXPECT_NE(loss(true, 3), loss(true, 4));
  EXPECT_NE(loss(true, 3), loss(false, 3));
  EXPECT_EQ(loss(false, 3), loss(false, 4));
}

// Recomputed attention blocks rerun their adapters, dropout included: the
// gradients of the base and of the adapters are those of "none" bit for bit.
TEST(Lora, RecomputationGivesTheGradientsOfNoneBitwise) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  auto grads_of = [&](Recompute r) {
    ZayaModel model(c);
    model.init(1);
    LoraAdapters adapters(c, lora_config(0.3));
    randomize(adapters, 5);
    model.set_lora(&adapters);
    ModelWorkspace ws(c, kB, kS, true, nullptr, nullptr, r);
    ws.enable_lora(c, adapters.config().rank);
    ws.set_lora_dropout(true, 9, 2);
    model_forward(model, ws, batch.ids.data(), batch.targets.data(), kB, kS, {});
    std::vector<float> all(size_t(model.params().total_floats() + adapters.total_floats()), 0.0f);
    const ModelWeights g = bind_weights(c, model.params(), all.data());
    const LoraViews gv = adapters.bind(all.data() + model.params().total_floats());
    model_backward(model, ws, g, 1.0f / float(kB * kS), 0.0f, {}, nullptr, &gv);
    return all;
  };
  const std::vector<float> none = grads_of(Recompute::kNone);
  for (Recompute r : {Recompute::kAttention, Recompute::kFull}) {
    const std::vector<float> got = grads_of(r);
    ASSERT_EQ(none.size(), got.size());
    EXPECT_EQ(0, std::memcmp(none.data(), got.data(), sizeof(float) * none.size())) << recompute_name(r);
  }
}

// A frozen base (null gradient views, model/weights.h) gets no weight
// gradients, and the adapters' gradients are bitwise those of a backward that
// also forms every base gradient (f32 and bf16 GEMMs, with and without
// recomputation, with dropout).
TEST(Lora, FrozenBaseViewsGiveTheSameAdapterGradientsBitwise) {
  const ZayaConfig c = testing::model_test_config();
  Batch batch;
  auto adapter_grads = [&](bool frozen, bool bf16, Recompute r) {
    ZayaModel model(c);
    model.init(1);
    if (bf16) model.enable_bf16_gemms();
    LoraAdapters adapters(c, lora_config(0.3));
    randomize(adapters, 5);
    model.set_lora(&adapters);
    ModelWorkspace ws(c, kB, kS, true, nullptr, nullptr, r);
    ws.enable_lora(c, adapters.config().rank);
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
  for (bool bf16 : {false, true})
    for (Recompute r : {Recompute::kNone, Recompute::kFull}) {
      const std::vector<float> full = adapter_grads(false, bf16, r);
      const std::vector<float> frozen = adapter_grads(true, bf16, r);
      EXPECT_GT(std::count_if(frozen.begin(), frozen.end(), [](float v) { return v != 0.0f; }), 0);
      EXPECT_EQ(0, std::memcmp(full.data(), frozen.data(), sizeof(float) * full.size()))
          << (bf16 ? "bf16 " : "f32 ") << recompute_name(r);
    }
}

class LoraPeft : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() /
            ("zaya_lora_peft_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string error_of(const ZayaConfig& c) {
    try {
      read_peft_adapter(dir_, c);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string dir_;
};

TEST_F(LoraPeft, RoundTripsWithPeftsConfigAndNames) {
  const ZayaConfig c = testing::model_test_config();
  LoraConfig lc = lora_config(0.05);
  lc.targets = {LoraTarget::kQ, LoraTarget::kO};
  LoraAdapters a(c, lc);
  randomize(a, 2);
  write_peft_adapter(dir_, a, "Zyphra/ZAYA1-test");
  const nlohmann::json j = read_json_file(dir_ + "/adapter_config.json");
  EXPECT_EQ(j.at("peft_type"), "LORA");
  EXPECT_EQ(j.at("r"), 4);
  EXPECT_EQ(j.at("lora_alpha"), 8.0);
  EXPECT_EQ(j.at("lora_dropout"), 0.05);
  EXPECT_EQ(j.at("target_modules"), nlohmann::json::array({"q_proj", "o_proj"}));
  EXPECT_EQ(j.at("base_model_name_or_path"), "Zyphra/ZAYA1-test");
  const SafetensorsFile st = SafetensorsFile::open(dir_ + "/adapter_model.safetensors");
  EXPECT_EQ(st.names().size(), size_t(2 * 2 * c.num_blocks));
  EXPECT_EQ(st.info("base_model.model.model.layers.2.self_attn.qkv_proj.q_proj.lora_A.weight").shape,
            (std::vector<int64_t>{4, c.hidden}));
  EXPECT_EQ(st.info("base_model.model.model.layers.2.self_attn.o_proj.lora_B.weight").shape,
            (std::vector<int64_t>{c.hidden, 4}));
  auto back = read_peft_adapter(dir_, c);
  EXPECT_EQ(back->config().rank, 4);
  EXPECT_EQ(back->config().targets, lc.targets);
  ASSERT_EQ(back->total_floats(), a.total_floats());
  EXPECT_TRUE(std::equal(a.data(), a.data() + a.total_floats(), back->data()));
}

TEST_F(LoraPeft, ErrorsNameTheFileTensorAndWhatIsExpected) {
  const ZayaConfig c = testing::model_test_config();
  LoraAdapters a(c, lora_config());
  randomize(a, 2);
  write_peft_adapter(dir_, a, "base");
  // A model with more layers expects tensors this adapter does not have.
  ZayaConfig deeper = c;
  deeper.num_blocks = 4;
  EXPECT_NE(error_of(deeper).find("adapter_model.safetensors: tensor "
                                  "'base_model.model.model.layers.3.self_attn.qkv_proj.q_proj.lora_A.weight' is "
                                  "missing (expected shape [4, 32]"),
            std::string::npos)
      << error_of(deeper);
  // A wider model: the shapes differ.
  ZayaConfig wider = c;
  wider.hidden = 48;
  EXPECT_NE(error_of(wider).find("q_proj.lora_A.weight"), std::string::npos) << error_of(wider);
  // A shallower model: extra tensors.
  ZayaConfig shallower = c;
  shallower.num_blocks = 2;
  EXPECT_NE(error_of(shallower).find("unexpected tensor 'base_model.model.model.layers.2."), std::string::npos)
      << error_of(shallower);
  // What PEFT can express but zaya does not apply.
  nlohmann::json j = read_json_file(dir_ + "/adapter_config.json");
  j["use_dora"] = true;
  write_file_atomic(dir_ + "/adapter_config.json", j.dump());
  EXPECT_NE(error_of(c).find("adapter_config.json"), std::string::npos) << error_of(c);
  EXPECT_NE(error_of(c).find("use_dora"), std::string::npos) << error_of(c);
  j["use_dora"] = false;
  j["target_modules"] = {"q_proj", "gate_proj"};
  write_file_atomic(dir_ + "/adapter_config.json", j.dump());
  EXPECT_NE(error_of(c).find("LoRA target 'gate_proj' is not supported; allowed: q_proj, k_proj"), std::string::npos)
      << error_of(c);
}

}  // namespace
}  // namespace zaya
