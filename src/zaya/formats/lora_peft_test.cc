// LoRA adapters in PEFT's files (formats/lora_peft.h): PEFT's tensor names,
// the files round-trip, expert pairs give PEFT's delta exactly, PEFT's own
// names for router and expert targets are read, and clear errors for what does
// not fit.
#include "zaya/formats/lora_peft.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"
#include "zaya/io/atomic_file.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_file.h"
#include "zaya/io/safetensors_writer.h"
#include "zaya/model/lora_test_util.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

using testing::kExperts;
using testing::lora_config;
using testing::randomize;

// Expert parameters: one ParamWrapper per parameter on module mlp.experts, nested when both are targeted.
TEST(LoraPeftNames, ExpertPairsAreNestedWhenBothAreTargeted) {
  const ZayaConfig c = testing::model_test_config();
  const LoraConfig both = lora_config(0, kExperts), down = lora_config(0, {LoraTarget::kExpertDown});
  EXPECT_EQ(peft_tensor_name(c, both, 1, LoraTarget::kExpertGateUp, false),
            "base_model.model.model.layers.1.mlp.experts.base_layer.lora_A.weight");
  EXPECT_EQ(peft_tensor_name(c, both, 1, LoraTarget::kExpertDown, true),
            "base_model.model.model.layers.1.mlp.experts.lora_B.weight");
  EXPECT_EQ(peft_tensor_name(c, down, 1, LoraTarget::kExpertDown, false),
            "base_model.model.model.layers.1.mlp.experts.lora_A.weight");
  // nn.Linear targets: the adapters' own names (model/lora.h).
  EXPECT_EQ(peft_tensor_name(c, lora_config(), 1, LoraTarget::kO, false), peft_lora_a_name(c, 1, LoraTarget::kO));
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

// Every PEFT option that changes what an adapter computes and that zaya cannot apply is refused on reading, the
// message naming the file, the key, the value and what is allowed; the options' defaults (as PEFT 0.21 writes
// them) are accepted.
TEST_F(LoraPeft, RefusesEveryPeftOptionItCannotApplyByName) {
  const ZayaConfig c = testing::model_test_config();
  LoraAdapters a(c, lora_config(0, all_lora_targets()));
  randomize(a, 3);
  write_peft_adapter(dir_, a, "base");
  const nlohmann::json written = read_json_file(dir_ + "/adapter_config.json");
  nlohmann::json defaults = written;  // PEFT 0.21.2's LoraConfig().to_dict() values of these keys
  for (const char* key :
       {"exclude_modules", "trainable_token_indices", "layer_replication", "alora_invocation_tokens", "use_bdlora",
        "velora_config", "monteclora_config", "arrow_config", "kasa_config", "megatron_config", "modules_to_save"})
    defaults[key] = nullptr;
  defaults["lora_bias"] = false;
  defaults["use_qalora"] = false;
  defaults["loftq_config"] = nlohmann::json::object();
  defaults["peft_version"] = "0.21.2";
  write_file_atomic(dir_ + "/adapter_config.json", defaults.dump());
  EXPECT_NO_THROW(read_peft_adapter(dir_, c));
  const std::vector<std::pair<std::string, nlohmann::json>> refused = {
      {"use_dora", true},
      {"use_rslora", true},
      {"modules_to_save", {"lm_head"}},
      {"lora_dropout", 0.05},  // with expert targets (target_parameters)
      {"lora_bias", true},
      {"use_qalora", true},
      {"exclude_modules", {"o_proj"}},
      {"trainable_token_indices", {1, 2}},
      {"layer_replication", {{0, 1}}},
      {"alora_invocation_tokens", {5}},
      {"layers_to_transform", {0}},
      {"rank_pattern", {{"q_proj", 2}}},
      {"alpha_pattern", {{"q_proj", 2}}},
      {"fan_in_fan_out", true},
      {"bias", "all"},
      {"peft_type", "LOHA"},
      {"use_bdlora", {{"r", 2}}},
      {"arrow_config", {{"top_k", 2}}},
  };
  for (const auto& [key, value] : refused) {
    nlohmann::json j = defaults;
    j[key] = value;
    write_file_atomic(dir_ + "/adapter_config.json", j.dump());
    const std::string e = error_of(c);
    EXPECT_NE(e.find("adapter_config.json: \"" + key + "\" = "), std::string::npos) << key << ": " << e;
    EXPECT_NE(e.find("is invalid; expected "), std::string::npos) << key << ": " << e;
  }
}

// The expert pairs as PEFT 0.21's ParamWrapper reads them: for a stacked
// parameter W [E, d1, d2] (d1 out, d2 in; ZayaExperts is not `is_transposed`,
// so PEFT swaps its in and out features to the parameter's own) lora_A is
// [r E, d2] and lora_B [d1, r E], and PEFT forms the delta as
// einsum("o r e, e r i -> e o i", lora_B.reshape(d1, r, E),
// lora_A.reshape(E, r, d2)) * alpha / r. Computed here independently, by a
// plain loop over the saved tensors, it must be exactly what merge_lora adds
// to every expert's matrix (and the router's pairs are plain B A).
TEST_F(LoraPeft, ExpertPairsGivePeftsDeltaExactly) {
  const ZayaConfig c = testing::model_test_config();
  LoraAdapters a(c, lora_config(0, all_lora_targets()));
  randomize(a, 4);
  write_peft_adapter(dir_, a, "base");
  const nlohmann::json j = read_json_file(dir_ + "/adapter_config.json");
  EXPECT_EQ(j.at("target_modules"), nlohmann::json::array({"q_proj", "k_proj", "v_proj_current", "v_proj_delayed",
                                                           "o_proj", "mlp.gate.down_proj", "mlp.gate.router_mlp.fc1",
                                                           "mlp.gate.router_mlp.fc2", "mlp.gate.router_mlp.out_proj"}));
  EXPECT_EQ(j.at("target_parameters"), nlohmann::json::array({"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}));
  EXPECT_EQ(j.at("lora_dropout"), 0.0);
  ZayaModel base(c), merged(c);
  base.init(1);
  merged.init(1);
  merge_lora(a, merged.weights());
  const SafetensorsFile st = SafetensorsFile::open(dir_ + "/adapter_model.safetensors");
  const int64_t E = c.experts, r = 4, D = c.hidden, F = c.expert_ffn;
  const double scale = 8.0 / 4.0;
  auto tensor = [&](const std::string& name) {
    const SafetensorsTensorInfo& info = st.info(name);
    std::vector<float> v(size_t(info.shape[0] * info.shape[1]));
    st.read_f32(name, v.data(), info.shape);
    return std::make_pair(info.shape, v);
  };
  for (int64_t block = 0; block < c.num_blocks; ++block) {
    const std::string experts = "base_model.model.model.layers." + std::to_string(block) + ".mlp.experts";
    // gate_up_proj [E, 2F, D] under base_layer (the inner wrapper), down_proj [E, D, F] outside.
    struct Param {
      std::string prefix;
      int64_t d1, d2;
      const float *before, *after;
    };
    const Param params[] = {
        {experts + ".base_layer", 2 * F, D, base.weights().moe[block].fc1_E2FD, merged.weights().moe[block].fc1_E2FD},
        {experts, D, F, base.weights().moe[block].fc2_EDF, merged.weights().moe[block].fc2_EDF}};
    for (const Param& p : params) {
      const auto [a_shape, A] = tensor(p.prefix + ".lora_A.weight");
      const auto [b_shape, B] = tensor(p.prefix + ".lora_B.weight");
      ASSERT_EQ(a_shape, (std::vector<int64_t>{r * E, p.d2})) << p.prefix;
      ASSERT_EQ(b_shape, (std::vector<int64_t>{p.d1, r * E})) << p.prefix;
      double worst = 0, largest = 0;
      for (int64_t e = 0; e < E; ++e)
        for (int64_t o = 0; o < p.d1; ++o)
          for (int64_t i = 0; i < p.d2; ++i) {
            // "o r e, e r i -> e o i": lora_B[o, rr E + e] * lora_A[e r + rr, i].
            double delta = 0;
            for (int64_t rr = 0; rr < r; ++rr)
              delta += double(B[size_t(o * r * E + rr * E + e)]) * double(A[size_t((e * r + rr) * p.d2 + i)]);
            delta *= scale;
            const int64_t at = (e * p.d1 + o) * p.d2 + i;
            worst = std::max(worst, std::fabs(double(p.after[at]) - double(p.before[at]) - delta));
            largest = std::max(largest, std::fabs(delta));
          }
      EXPECT_LT(worst, 1e-6 * (1 + largest)) << p.prefix;
      EXPECT_GT(largest, 1e-2) << p.prefix << ": a zero delta would make the test vacuous";
    }
    // A router module: PEFT's lora.Linear delta B A.
    const std::string fc1 = "base_model.model.model.layers." + std::to_string(block) + ".mlp.gate.router_mlp.fc1";
    const auto [ra_shape, RA] = tensor(fc1 + ".lora_A.weight");
    const auto [rb_shape, RB] = tensor(fc1 + ".lora_B.weight");
    const int64_t R = c.router_hidden;
    ASSERT_EQ(ra_shape, (std::vector<int64_t>{r, R}));
    double worst = 0;
    for (int64_t o = 0; o < R; ++o)
      for (int64_t i = 0; i < R; ++i) {
        double delta = 0;
        for (int64_t rr = 0; rr < r; ++rr) delta += double(RB[size_t(o * r + rr)]) * double(RA[size_t(rr * R + i)]);
        const int64_t at = o * R + i;
        worst = std::max(worst, std::fabs(double(merged.weights().moe[block].mlp0_RR[at]) -
                                          double(base.weights().moe[block].mlp0_RR[at]) - scale * delta));
      }
    EXPECT_LT(worst, 1e-6);
  }
  // The files round-trip into the same adapters.
  auto back = read_peft_adapter(dir_, c);
  EXPECT_EQ(back->config().targets, all_lora_targets());
  ASSERT_EQ(back->total_floats(), a.total_floats());
  EXPECT_TRUE(std::equal(a.data(), a.data() + a.total_floats(), back->data()));
}

// What PEFT would write: one expert parameter alone sits outside any
// base_layer; suffixes in target_modules / target_parameters select as PEFT's
// matching does; a module that registers down_proj first nests the other
// way, which the shapes identify; dropout with target_parameters is refused.
TEST_F(LoraPeft, ReadsPeftsNamesForRouterAndExperts) {
  const ZayaConfig c = testing::model_test_config();
  {
    LoraAdapters a(c, lora_config(0, {LoraTarget::kRouterDown, LoraTarget::kExpertGateUp}));
    randomize(a, 6);
    write_peft_adapter(dir_, a, "base");
    const SafetensorsFile st = SafetensorsFile::open(dir_ + "/adapter_model.safetensors");
    EXPECT_TRUE(st.has("base_model.model.model.layers.0.mlp.experts.lora_A.weight"));
    EXPECT_TRUE(st.has("base_model.model.model.layers.0.mlp.gate.down_proj.lora_B.weight"));
    // PEFT users' spellings.
    nlohmann::json j = read_json_file(dir_ + "/adapter_config.json");
    j["target_modules"] = {"down_proj"};
    j["target_parameters"] = {"experts.gate_up_proj"};
    write_file_atomic(dir_ + "/adapter_config.json", j.dump());
    auto back = read_peft_adapter(dir_, c);
    EXPECT_EQ(back->config().targets, (std::vector<LoraTarget>{LoraTarget::kRouterDown, LoraTarget::kExpertGateUp}));
    EXPECT_TRUE(std::equal(a.data(), a.data() + a.total_floats(), back->data()));
    j["lora_dropout"] = 0.1;
    write_file_atomic(dir_ + "/adapter_config.json", j.dump());
    EXPECT_NE(error_of(c).find("\"lora_dropout\" = 0.1 is invalid"), std::string::npos) << error_of(c);
    j["lora_dropout"] = 0.0;
    j["target_parameters"] = {"gate_proj"};
    write_file_atomic(dir_ + "/adapter_config.json", j.dump());
    EXPECT_NE(error_of(c).find("\"target_parameters\": LoRA target 'gate_proj' is not supported; allowed: "
                               "mlp.experts.gate_up_proj, mlp.experts.down_proj"),
              std::string::npos)
        << error_of(c);
  }
  std::filesystem::remove_all(dir_);
  {
    // Both expert parameters, nested the other way round (down_proj inside): taken by their shapes.
    LoraAdapters a(c, lora_config(0, kExperts));
    randomize(a, 7);
    write_peft_adapter(dir_, a, "base");
    SafetensorsFile st = SafetensorsFile::open(dir_ + "/adapter_model.safetensors");
    SafetensorsWriter w;
    std::vector<std::vector<float>> keep;
    for (const std::string& name : st.names()) {
      const SafetensorsTensorInfo& info = st.info(name);
      keep.emplace_back(size_t(info.shape[0] * info.shape[1]));
      st.read_f32(name, keep.back().data(), info.shape);
      std::string swapped = name;
      const std::string inner = ".experts.base_layer.", outer = ".experts.";
      if (name.find(inner) != std::string::npos) {
        swapped.replace(name.find(inner), inner.size(), outer);
      } else {
        swapped.replace(name.find(outer), outer.size(), inner);
      }
      w.add_f32(swapped, info.shape, keep.back().data());
    }
    w.write(dir_ + "/adapter_model.safetensors");
    auto back = read_peft_adapter(dir_, c);
    EXPECT_TRUE(std::equal(a.data(), a.data() + a.total_floats(), back->data()));
  }
}

}  // namespace
}  // namespace zaya
