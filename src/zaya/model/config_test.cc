// Presets and the [model] table: the released models' shapes (spec §12) and
// sliding-window settings as a training config writes them.
#include "zaya/model/config.h"

#include <gtest/gtest.h>

#include <toml++/toml.h>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"
#include "zaya/model/config_toml.h"
#include "zaya/model/conv_taps.h"
#include "zaya/model/params.h"

namespace zaya {
namespace {

int64_t total_params(const ZayaConfig& c) { return ParamTable(c, true).total_floats(); }

ZayaConfig parse(const std::string& text) {
  const toml::table root = toml::parse(text, std::string("t.toml"));
  const ZayaConfig c = parse_model_table(root["model"].as_table(), "t.toml").config;
  c.validate("t.toml");
  return c;
}

TEST(Config, ReleasedPresets) {
  const ZayaConfig base = preset_config("zaya1-base"), b8 = preset_config("zaya1-8b");
  EXPECT_EQ(b8.rope_theta, 5e6);
  EXPECT_EQ(b8.max_position, 131072);
  EXPECT_EQ(b8.eos_token_id, 106);
  EXPECT_EQ(total_params(b8), total_params(base));
  EXPECT_FALSE(b8.has_sliding());

  const ZayaConfig b74 = preset_config("zaya1-74b");
  b74.validate("preset zaya1-74b");
  EXPECT_EQ(b74.q_width(), b74.hidden / 2);  // the zaya branch's rule (spec §11)
  EXPECT_EQ(b74.router_slots(), 25);
  // About 74.8B parameters (spec §12).
  EXPECT_NEAR(double(total_params(b74)) / 1e9, 74.8, 0.1);
  ASSERT_EQ(b74.sliding_blocks.size(), 30u);
  EXPECT_TRUE(b74.is_sliding(0));
  EXPECT_FALSE(b74.is_sliding(1));
  EXPECT_TRUE(b74.is_sliding(58));
  EXPECT_EQ(b74.window_of(2), 4097);
  EXPECT_EQ(b74.window_of(3), 0);
  EXPECT_EQ(b74.rope_theta_of(0), 1e4);
  EXPECT_EQ(b74.rope_theta_of(1), 5e6);
  for (const std::string& name : preset_names()) preset_config(name).validate("preset " + name);
}

TEST(Config, SlidingWindowInTheModelTable) {
  // A window alone slides the even blocks.
  ZayaConfig c = parse("[model]\npreset = \"tiny\"\nsliding_window = 3\n");
  EXPECT_EQ(c.sliding_window, 3);
  EXPECT_EQ(c.sliding_blocks, (std::vector<int64_t>{0, 2}));
  c = parse("[model]\npreset = \"tiny\"\nsliding_window = 5\nsliding_blocks = \"all\"\n");
  EXPECT_EQ(c.sliding_blocks, (std::vector<int64_t>{0, 1, 2, 3}));
  c = parse("[model]\npreset = \"tiny\"\nsliding_window = 5\nsliding_blocks = [1, 3]\nsliding_rope_theta = 500\n");
  EXPECT_EQ(c.sliding_blocks, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c.rope_theta_of(1), 500);
  EXPECT_EQ(c.rope_theta_of(0), c.rope_theta);
  // The 74B's pattern follows num_blocks when a smaller copy is configured.
  c = parse("[model]\npreset = \"zaya1-74b\"\nnum_blocks = 3\n");
  EXPECT_EQ(c.sliding_blocks, (std::vector<int64_t>{0, 2}));
  c = parse("[model]\npreset = \"zaya1-74b\"\nsliding_window = 0\n");
  EXPECT_FALSE(c.has_sliding());
  EXPECT_TRUE(c.sliding_blocks.empty());
  // The table a checkpoint stores reads back the same.
  ZayaConfig w = preset_config("tiny");
  w.sliding_window = 7;
  w.sliding_blocks = {1};
  w.sliding_rope_theta = 1234;
  const ZayaConfig r = parse(model_table_to_toml("tiny", w));
  EXPECT_EQ(r.sliding_window, 7);
  EXPECT_EQ(r.sliding_blocks, w.sliding_blocks);
  EXPECT_EQ(r.sliding_rope_theta, 1234);
  EXPECT_FALSE(parse(model_table_to_toml("tiny", preset_config("tiny"))).has_sliding());
}

TEST(Config, RopePrecisionKey) {
  EXPECT_EQ(parse("[model]\n").rope_precision, RopePrecision::kF64);
  EXPECT_EQ(parse("[model]\nrope_precision = \"f32\"\n").rope_precision, RopePrecision::kF32);
  ZayaConfig w = preset_config("tiny");
  w.rope_precision = RopePrecision::kF32;
  EXPECT_EQ(parse(model_table_to_toml("tiny", w)).rope_precision, RopePrecision::kF32);
  EXPECT_EQ(parse(model_table_to_toml("tiny", preset_config("tiny"))).rope_precision, RopePrecision::kF64);
  testing::expect_error([] { parse("[model]\nrope_precision = \"bf16\"\n"); },
                        "model.rope_precision = 'bf16' is invalid; allowed: one of: f32, f64");
}

// The CCA convolutions' kernel sizes (cca_time0 / cca_time1): any 1..64 taps in
// a training config and in validate(), refused by name otherwise; ZAYA1's 2/2
// by default; the table a checkpoint stores keeps them.
TEST(Config, ConvolutionKernelSizes) {
  const ZayaConfig d = parse("[model]\n");
  EXPECT_EQ(d.conv_kernel0, 2);
  EXPECT_EQ(d.conv_kernel1, 2);
  const ZayaConfig c = parse("[model]\ncca_time0 = 3\ncca_time1 = 4\n");
  EXPECT_EQ(c.conv_kernel0, 3);
  EXPECT_EQ(c.conv_kernel1, 4);
  EXPECT_EQ(conv_history(c), 5);
  EXPECT_EQ(conv_halo_rows(c), 5);
  const ZayaConfig r = parse(model_table_to_toml("tiny", c));
  EXPECT_EQ(r.conv_kernel0, 3);
  EXPECT_EQ(r.conv_kernel1, 4);
  const ZayaConfig one = parse("[model]\ncca_time0 = 1\ncca_time1 = 1\n");
  EXPECT_EQ(conv_history(one), 0);
  EXPECT_EQ(conv_halo_rows(one), 1);  // the value shift still reads one row
  testing::expect_error([] { parse("[model]\ncca_time0 = 0\n"); }, "model.cca_time0 = 0 is invalid");
  testing::expect_error([] { parse("[model]\ncca_time1 = 65\n"); }, "model.cca_time1 = 65 is invalid");
  ZayaConfig bad = preset_config("tiny");
  bad.conv_kernel0 = 0;
  testing::expect_error([&] { bad.validate("config.json"); },
                        "config.json: cca_time0 = 0 is invalid; allowed: 1..64 (depthwise convolution taps; ZAYA1: 2)");
  bad.conv_kernel0 = 2;
  bad.conv_kernel1 = 100;
  testing::expect_error([&] { bad.validate("config.json"); },
                        "config.json: cca_time1 = 100 is invalid; allowed: 1..64 (grouped convolution taps; ZAYA1: 2)");
}

TEST(Config, BadSlidingSettingsAreNamed) {
  testing::expect_error([] { parse("[model]\nsliding_window = 3\nsliding_blocks = \"odd\"\n"); },
                        "model.sliding_blocks = 'odd' is invalid; allowed: one of: even, all, none");
  testing::expect_error([] { parse("[model]\nsliding_window = 3\nsliding_blocks = [0, 9]\n"); },
                        "model.sliding_blocks = [ 0, 9 ] is invalid; allowed: a list of integers in 0..3");
  testing::expect_error([] { parse("[model]\nsliding_blocks = [1]\n"); },
                        "sliding_blocks names 1 block(s) but sliding_window is 0");
  testing::expect_error([] { parse("[model]\nsliding_window = 3\nsliding_blocks = [2, 1]\n"); },
                        "sliding_blocks entry = 1 is invalid; allowed: block indices in increasing order");
  testing::expect_error([] { parse("[model]\nsliding_window = -1\n"); }, "model.sliding_window = -1 is invalid");
}

}  // namespace
}  // namespace zaya
