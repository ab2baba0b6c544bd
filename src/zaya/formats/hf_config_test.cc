// config.json in the legacy keys: our own round trip, and keys that would
// change the computation refused by name rather than ignored (spec §11).
#include "zaya/formats/hf_config.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"
#include "zaya/formats/native_config.h"

namespace zaya {
namespace {

TEST(HfConfig, RefusesKeysThatWouldChangeTheComputation) {
  const nlohmann::json base = config_to_hf_json(preset_config("tiny"), "float32");
  EXPECT_NO_THROW(config_from_hf_json(base, "config.json"));
  const std::vector<std::pair<const char*, nlohmann::json>> changed = {
      {"gated_linear_unit", false}, {"activation_func", "gelu"}, {"normalization", "LayerNorm"},
      {"add_bias_linear", true},    {"lm_head_bias", true},      {"clamp_temp", true},
      {"use_sliding_window", true}, {"residual_in_fp32", false}, {"zaya_rope_precision", "f16"}};
  for (const auto& [key, value] : changed) {
    nlohmann::json j = base;
    j[key] = value;
    testing::expect_error([&] { config_from_hf_json(j, "config.json"); },
                          std::string("config.json: \"") + key + "\" = " + value.dump() + " is invalid");
  }
}

// What the reference supports and zaya.cpp now computes too (spec §11): an
// untied head and plain residual merges; and our zaya_rope_precision, written
// only for float32 RoPE. Each reads back from both layouts' config.json.
TEST(HfConfig, UntiedHeadPlainMergesAndRopePrecisionRoundTrip) {
  ZayaConfig c = preset_config("tiny");
  nlohmann::json j = config_to_hf_json(c, "float32");
  EXPECT_EQ(j["tie_word_embeddings"], true);
  EXPECT_EQ(j["scale_residual_merge"], true);
  EXPECT_FALSE(j.contains("zaya_rope_precision"));
  EXPECT_EQ(config_from_hf_json(j, "c").rope_precision, RopePrecision::kF64);
  c.tie_word_embeddings = false;
  c.scale_residual_merge = false;
  c.rope_precision = RopePrecision::kF32;
  j = config_to_hf_json(c, "float32");
  EXPECT_EQ(j["tie_word_embeddings"], false);
  EXPECT_EQ(j["scale_residual_merge"], false);
  EXPECT_EQ(j["zaya_rope_precision"], "f32");
  const ZayaConfig back = config_from_hf_json(j, "c");
  EXPECT_FALSE(back.tie_word_embeddings);
  EXPECT_FALSE(back.scale_residual_merge);
  EXPECT_EQ(back.rope_precision, RopePrecision::kF32);
  EXPECT_TRUE(model_differences(back, c).empty());
  j["zaya_rope_precision"] = "f64";
  EXPECT_EQ(config_from_hf_json(j, "c").rope_precision, RopePrecision::kF64);
  // The native layout: the head and the precision, not plain merges (its layers always scale them).
  ZayaConfig n = preset_config("zaya1-8b");
  n.tie_word_embeddings = false;
  n.rope_precision = RopePrecision::kF32;
  const nlohmann::json nj = config_to_native_json(n, "float32");
  EXPECT_EQ(nj["tie_word_embeddings"], false);
  EXPECT_EQ(nj["zaya_rope_precision"], "f32");
  const ZayaConfig nback = native_config_from_json(nj, "native");
  EXPECT_FALSE(nback.tie_word_embeddings);
  EXPECT_EQ(nback.rope_precision, RopePrecision::kF32);
  n.scale_residual_merge = false;
  EXPECT_NE(native_layout_problem(n).find("scale_residual_merge = false"), std::string::npos);
}

TEST(HfConfig, RouterNormEpsilonOfTheReference) {
  nlohmann::json j = config_to_hf_json(preset_config("tiny"), "float32");
  j.erase("zaya_router_norm_eps");
  EXPECT_EQ(config_from_hf_json(j, "c").router_norm_eps, 1e-6);  // the zaya branch's fallback
  j["layernorm_epsilon"] = 1e-5;
  EXPECT_EQ(config_from_hf_json(j, "c").router_norm_eps, 1e-5);  // read when present
  j["zaya_router_norm_eps"] = 3e-6;
  EXPECT_EQ(config_from_hf_json(j, "c").router_norm_eps, 3e-6);  // ours wins
}

}  // namespace
}  // namespace zaya
