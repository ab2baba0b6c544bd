// config.json in both Hugging Face layouts: every preset written and read back
// gives the same ZayaConfig; the sliding-window keys with the upstream
// semantics (spec §12); the keys the hub configs really carry.
#include "zaya/formats/native_config.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"
#include "zaya/formats/hf_config.h"

namespace zaya {
namespace {

using json = nlohmann::json;

void expect_same(const ZayaConfig& a, const ZayaConfig& b, const std::string& what) {
  EXPECT_TRUE(model_differences(a, b).empty()) << what << ": " << ::testing::PrintToString(model_differences(a, b));
  EXPECT_EQ(a.sliding_rope_theta, b.sliding_rope_theta) << what;
  EXPECT_EQ(a.bos_token_id, b.bos_token_id) << what;
  EXPECT_EQ(a.eos_token_id, b.eos_token_id) << what;
  EXPECT_EQ(a.pad_token_id, b.pad_token_id) << what;
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids) << what;
}

TEST(ModelConfigJson, EveryPresetRoundTripsInBothLayouts) {
  for (const std::string& name : preset_names()) {
    ZayaConfig c = preset_config(name);
    expect_same(config_from_hf_json(config_to_hf_json(c, "bfloat16"), "legacy"), c, name + " legacy");
    const json native = config_to_native_json(c, "bfloat16");
    EXPECT_TRUE(is_native_zaya_config(native)) << name;
    expect_same(native_config_from_json(native, "native"), c, name + " native");
    c.eos_token_ids = {c.eos_token_id, 1};  // an eos list survives both
    expect_same(config_from_hf_json(config_to_hf_json(c, "float32"), "legacy"), c, name + " legacy, eos list");
    expect_same(native_config_from_json(config_to_native_json(c, "float32"), "native"), c, name + " native, eos list");
  }
}

TEST(ModelConfigJson, LegacySwaLayersCountEarlierTokens) {
  const ZayaConfig c = preset_config("zaya1-74b");
  const json j = config_to_hf_json(c, "bfloat16");
  ASSERT_EQ(j["swa_layers"].size(), 120u);
  EXPECT_EQ(j["swa_layers"][0], 4096);  // W = 4097 keys, the query included
  EXPECT_EQ(j["swa_layers"][1], 0);     // a MoE half-layer
  EXPECT_EQ(j["swa_layers"][2], 0);     // block 1 attends to the whole prefix
  EXPECT_EQ(j["swa_layers"][4], 4096);
  EXPECT_EQ(j["swa_rotary_base"], 1e4);
  EXPECT_FALSE(config_to_hf_json(preset_config("zaya1-8b"), "bfloat16").contains("swa_layers"));

  json small = config_to_hf_json(preset_config("tiny"), "float32");
  small["swa_layers"] = {3, 0, 0, 0, 3, 0, 3, 0};
  small["swa_rotary_base"] = 2e4;
  const ZayaConfig r = config_from_hf_json(small, "c.json");
  EXPECT_EQ(r.sliding_window, 4);
  EXPECT_EQ(r.sliding_blocks, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(r.sliding_rope_theta, 2e4);
  small["swa_layers"] = {3, 0, 0, 0, 3, 0, 3};
  testing::expect_error([&] { config_from_hf_json(small, "c.json"); }, "a list of 8 integers, one per zaya_layers");
  small["swa_layers"] = {3, 2, 0, 0, 0, 0, 0, 0};
  testing::expect_error([&] { config_from_hf_json(small, "c.json"); },
                        "\"swa_layers\"[1] = 2 is invalid; allowed: 0 on a MoE half-layer");
  small["swa_layers"] = {3, 0, 5, 0, 0, 0, 0, 0};
  testing::expect_error([&] { config_from_hf_json(small, "c.json"); }, "different windows (3 and 5)");
  ZayaConfig one = preset_config("tiny");
  one.sliding_window = 1;
  one.sliding_blocks = {0};
  testing::expect_error([&] { config_to_hf_json(one, "float32"); }, "cannot be written as legacy swa_layers");
}

TEST(ModelConfigJson, KeysOfTheHubConfigs) {
  // ZAYA1-base: num_hidden_layers 120 next to 80 zaya_layers entries; rope_scaling false; residual_in_fp32 true.
  json base = config_to_hf_json(preset_config("zaya1-base"), "bfloat16");
  base["num_hidden_layers"] = 120;
  base["rope_scaling"] = false;
  base["residual_in_fp32"] = true;
  base["eos_token_id"] = {1, 106};
  const ZayaConfig b = config_from_hf_json(base, "base.json");
  EXPECT_EQ(b.num_blocks, 40);
  EXPECT_EQ(b.eos_token_id, 1);
  EXPECT_EQ(b.eos_token_ids, (std::vector<int64_t>{1, 106}));
  base["residual_in_fp32"] = false;
  testing::expect_error([&] { config_from_hf_json(base, "base.json"); },
                        "base.json: \"residual_in_fp32\" = false is invalid; expected true");
  base["residual_in_fp32"] = true;
  base["swa_window_size"] = 3;
  testing::expect_error([&] { config_from_hf_json(base, "base.json"); }, "unknown config key \"swa_window_size\"");

  json n = config_to_native_json(preset_config("zaya1-8b"), "bfloat16");
  n["rope_type"] = "default";  // the stray top-level key of the hub file
  n["rope_scaling"] = false;
  n["residual_in_fp32"] = true;
  EXPECT_EQ(native_config_from_json(n, "8b.json").rope_theta, 5e6);
  n["residual_in_fp32"] = false;
  testing::expect_error([&] { native_config_from_json(n, "8b.json"); }, "\"residual_in_fp32\" = false is invalid");
  n["residual_in_fp32"] = true;
  n["rope_parameters"]["hybrid"]["rope_type"] = "yarn";
  testing::expect_error([&] { native_config_from_json(n, "8b.json"); },
                        "\"rope_parameters.hybrid.rope_type\" = \"yarn\" is invalid");
  n["rope_parameters"]["hybrid"]["rope_type"] = "default";
  n["rope_parameters"]["global"] = json::object();
  testing::expect_error([&] { native_config_from_json(n, "8b.json"); }, "unknown layer type \"global\"");
}

// Zyphra/ZAYA1-8B's released config.json (the native layout; its values, layer list written out by the loop):
// rms_norm_eps 1e-5 and no router epsilon of its own, so transformers' router norm uses 1e-5, and the native skip
// rule. The zaya1-8b preset is exactly what it reads as, and its native export carries none of zaya's own keys.
TEST(ModelConfigJson, TheZaya18bPresetIsTheReleasedNativeConfig) {
  json hub = {{"architectures", {"ZayaForCausalLM"}},
              {"attention_bias", false},
              {"attention_dropout", 0.0},
              {"bos_token_id", 2},
              {"cca_time0", 2},
              {"cca_time1", 2},
              {"dtype", "bfloat16"},
              {"eos_token_id", 106},
              {"head_dim", 128},
              {"hidden_act", "silu"},
              {"hidden_size", 2048},
              {"initializer_range", 0.02},
              {"lm_head_bias", false},
              {"max_position_embeddings", 131072},
              {"model_type", "zaya"},
              {"moe_intermediate_size", 2048},
              {"num_attention_heads", 8},
              {"num_experts", 16},
              {"num_experts_per_tok", 1},
              {"num_hidden_layers", 40},
              {"num_key_value_heads", 2},
              {"output_router_logits", false},
              {"pad_token_id", 0},
              {"partial_rotary_factor", 0.5},
              {"rms_norm_eps", 1e-5},
              {"rope_parameters",
               {{"hybrid", {{"partial_rotary_factor", 0.5}, {"rope_theta", 5000000}, {"rope_type", "default"}}},
                {"hybrid_sliding", {{"partial_rotary_factor", 0.5}, {"rope_theta", 10000.0}, {"rope_type", "default"}}},
                {"rope_type", "default"}}},
              {"router_hidden_size", 256},
              {"sliding_window", nullptr},
              {"tie_word_embeddings", true},
              {"use_cache", true},
              {"vocab_size", 262272}};
  hub["layer_types"] = json::array();
  for (int i = 0; i < 40; ++i) hub["layer_types"].push_back("hybrid");
  ZayaConfig released = native_config_from_json(hub, "ZAYA1-8B/config.json");
  EXPECT_EQ(released.real_vocab_size, 262272);  // the file does not say: all rows; its tokenizer has 262144
  released.real_vocab_size = 262144;
  const ZayaConfig preset = preset_config("zaya1-8b");
  expect_same(released, preset, "ZAYA1-8B/config.json against preset zaya1-8b");
  EXPECT_EQ(released.router_norm_eps, 1e-5);
  EXPECT_EQ(preset.router_norm_eps, 1e-5);
  EXPECT_TRUE(released.skip_output_zero);
  EXPECT_TRUE(preset.skip_output_zero);
  const json native = config_to_native_json(preset, "bfloat16");
  EXPECT_FALSE(native.contains("zaya_router_norm_eps"));
  EXPECT_FALSE(native.contains("zaya_skip_output_zero"));
  // The legacy layout records the native rule in zaya's own key; the legacy router epsilon is the default 1e-6.
  const json legacy = config_to_hf_json(preset, "bfloat16");
  EXPECT_EQ(legacy.value("zaya_skip_output_zero", false), true);
  EXPECT_EQ(legacy.value("zaya_router_norm_eps", 0.0), 1e-5);
  expect_same(config_from_hf_json(legacy, "legacy"), preset, "zaya1-8b legacy");
  // A legacy-rule model exported natively keeps its rule in zaya's key; a native file without the key has the
  // native rule.
  ZayaConfig tiny = preset_config("tiny");
  EXPECT_FALSE(tiny.skip_output_zero);
  json t = config_to_native_json(tiny, "float32");
  EXPECT_EQ(t.value("zaya_skip_output_zero", true), false);
  EXPECT_FALSE(native_config_from_json(t, "t.json").skip_output_zero);
  t.erase("zaya_skip_output_zero");
  EXPECT_TRUE(native_config_from_json(t, "t.json").skip_output_zero);
}

TEST(ModelConfigJson, NativeSlidingLayers) {
  json j = config_to_native_json(preset_config("tiny"), "float32");
  j["layer_types"] = {"hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"};
  testing::expect_error([&] { native_config_from_json(j, "n.json"); },
                        "\"layer_types\" has hybrid_sliding layers but \"sliding_window\" is missing or null");
  j["sliding_window"] = 4;
  ZayaConfig c = native_config_from_json(j, "n.json");
  EXPECT_EQ(c.sliding_window, 4);  // W counts the query itself: no + 1 here
  EXPECT_EQ(c.sliding_blocks, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(c.sliding_rope_theta, 1e4);  // the upstream default of hybrid_sliding
  j["rope_parameters"]["hybrid_sliding"] = {{"rope_type", "default"}, {"rope_theta", 5e4}};
  c = native_config_from_json(j, "n.json");
  EXPECT_EQ(c.sliding_rope_theta, 5e4);
  EXPECT_EQ(c.rope_theta, preset_config("tiny").rope_theta);
  j["rope_parameters"]["hybrid_sliding"]["partial_rotary_factor"] = 0.25;
  testing::expect_error([&] { native_config_from_json(j, "n.json"); }, "zaya.cpp needs one rotary width");
  j["rope_parameters"]["hybrid_sliding"].erase("partial_rotary_factor");
  j["layer_types"][1] = "sliding";
  testing::expect_error([&] { native_config_from_json(j, "n.json"); },
                        "\"layer_types\"[1] = \"sliding\" is invalid; allowed: \"hybrid\", \"hybrid_sliding\" (or");
  // The legacy spelling of the same model reads to the same config (W = swa_layers + 1).
  j["layer_types"][1] = "hybrid";
  c = native_config_from_json(j, "n.json");
  expect_same(config_from_hf_json(config_to_hf_json(c, "float32"), "legacy"), c, "legacy of native");
  EXPECT_EQ(config_to_hf_json(c, "float32")["swa_layers"][0], 3);
}

TEST(ModelConfigJson, NativeLayerTypesOfAnEarlierUpstreamRevision) {
  // full_attention / sliding_attention, in layer_types and as rope_parameters' keys, read as hybrid /
  // hybrid_sliding: the same config as the current spelling.
  json j = config_to_native_json(preset_config("tiny"), "float32");
  j["layer_types"] = {"hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"};
  j["sliding_window"] = 4;
  j["rope_parameters"]["hybrid_sliding"] = {{"rope_type", "default"}, {"rope_theta", 5e4}};
  const ZayaConfig want = native_config_from_json(j, "n.json");
  json old = j;
  old["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  old["rope_parameters"] = {{"full_attention", j["rope_parameters"]["hybrid"]},
                            {"sliding_attention", j["rope_parameters"]["hybrid_sliding"]}};
  const ZayaConfig c = native_config_from_json(old, "old.json");
  expect_same(c, want, "full_attention / sliding_attention");
  EXPECT_EQ(c.sliding_blocks, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(c.sliding_rope_theta, 5e4);
  // Written back in the current spelling.
  EXPECT_EQ(config_to_native_json(c, "float32")["layer_types"][0], "hybrid_sliding");
  old["rope_parameters"]["hybrid"] = j["rope_parameters"]["hybrid"];
  testing::expect_error([&] { native_config_from_json(old, "old.json"); },
                        "has both \"full_attention\" and \"hybrid\" (two spellings of one layer type)");
}

TEST(ModelConfigJson, NativeLayoutRefusesWhatItCannotSpell) {
  ZayaConfig c = preset_config("tiny");
  c.top_k = 2;
  testing::expect_error([&] { config_to_native_json(c, "float32"); }, "top_k = 2 (the native layout routes top-1)");
}

}  // namespace
}  // namespace zaya
