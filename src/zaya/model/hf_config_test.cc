// config.json in the legacy keys: our own round trip, and keys that would
// change the computation refused by name rather than ignored (spec §11).
#include "zaya/model/hf_config.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

TEST(HfConfig, RefusesKeysThatWouldChangeTheComputation) {
  const nlohmann::json base = config_to_hf_json(preset_config("tiny"), "float32");
  EXPECT_NO_THROW(config_from_hf_json(base, "config.json"));
  const std::vector<std::pair<const char*, nlohmann::json>> changed = {
      {"tie_word_embeddings", false}, {"scale_residual_merge", false},
      {"gated_linear_unit", false},   {"activation_func", "gelu"},
      {"normalization", "LayerNorm"}, {"add_bias_linear", true},
      {"lm_head_bias", true},         {"clamp_temp", true},
      {"use_sliding_window", true},   {"residual_in_fp32", false}};
  for (const auto& [key, value] : changed) {
    nlohmann::json j = base;
    j[key] = value;
    testing::expect_error([&] { config_from_hf_json(j, "config.json"); },
                          std::string("config.json: \"") + key + "\" = " + value.dump() + " is invalid");
  }
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
