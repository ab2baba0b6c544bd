// The ZayaConfig field table (config_fields.h): every row, changed alone, survives each format that spells it
// (TOML [model], legacy and native config.json, GGUF metadata) and is what model_differences names.

#include "zaya/model/config_fields.h"

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <functional>
#include <map>
#include <set>

#include "zaya/formats/gguf_zaya_map.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/native_config.h"
#include "zaya/io/gguf_writer.h"
#include "zaya/model/config_toml.h"

namespace zaya {
namespace {

// tiny with two sliding blocks, so that the sliding fields are written by every format.
ZayaConfig base_config() {
  ZayaConfig c = preset_config("tiny");
  c.sliding_window = 9;
  c.sliding_blocks = {0, 2};
  return c;
}

// One valid change per field. A row without an entry here fails the test below: a new field gets a round trip.
const std::map<std::string, std::function<void(ZayaConfig&)>>& changes() {
  static const std::map<std::string, std::function<void(ZayaConfig&)>> m = {
      {"hidden", [](ZayaConfig& c) { c.hidden = 256; }},
      {"num_blocks", [](ZayaConfig& c) { c.num_blocks = 6; }},
      {"vocab_size", [](ZayaConfig& c) { c.vocab_size = 8192; }},
      {"real_vocab_size", [](ZayaConfig& c) { c.real_vocab_size = 4000; }},
      {"q_heads", [](ZayaConfig& c) { c.q_heads = 4; }},
      {"kv_heads", [](ZayaConfig& c) { c.kv_heads = 1; }},
      {"head_dim", [](ZayaConfig& c) { c.head_dim = 64; }},
      {"rope_theta", [](ZayaConfig& c) { c.rope_theta = 123456.5; }},
      {"partial_rotary_factor", [](ZayaConfig& c) { c.partial_rotary_factor = 0.25; }},
      {"max_position", [](ZayaConfig& c) { c.max_position = 2048; }},
      {"experts", [](ZayaConfig& c) { c.experts = 8; }},
      {"expert_ffn", [](ZayaConfig& c) { c.expert_ffn = 96; }},
      {"router_hidden", [](ZayaConfig& c) { c.router_hidden = 48; }},
      {"top_k", [](ZayaConfig& c) { c.top_k = 2; }},
      {"use_skip", [](ZayaConfig& c) { c.use_skip = false; }},
      {"use_eda", [](ZayaConfig& c) { c.use_eda = false; }},
      {"skip_output_zero", [](ZayaConfig& c) { c.skip_output_zero = true; }},
      {"norm_eps", [](ZayaConfig& c) { c.norm_eps = 3e-6; }},
      {"router_norm_eps", [](ZayaConfig& c) { c.router_norm_eps = 2e-5; }},
      {"rope_precision", [](ZayaConfig& c) { c.rope_precision = RopePrecision::kF32; }},
      {"scale_residual_merge", [](ZayaConfig& c) { c.scale_residual_merge = false; }},
      {"tie_word_embeddings", [](ZayaConfig& c) { c.tie_word_embeddings = false; }},
      {"conv_kernel0", [](ZayaConfig& c) { c.conv_kernel0 = 3; }},
      {"conv_kernel1", [](ZayaConfig& c) { c.conv_kernel1 = 4; }},
      {"sliding_window", [](ZayaConfig& c) { c.sliding_window = 17; }},
      {"sliding_blocks",
       [](ZayaConfig& c) {
         c.sliding_blocks = {1, 2, 3};
       }},
      {"sliding_rope_theta", [](ZayaConfig& c) { c.sliding_rope_theta = 5000; }},
      {"bos_token_id", [](ZayaConfig& c) { c.bos_token_id = 5; }},
      {"eos_token_id", [](ZayaConfig& c) { c.eos_token_id = 6; }},
      {"pad_token_id", [](ZayaConfig& c) { c.pad_token_id = 7; }},
      {"eos_token_ids",
       [](ZayaConfig& c) {
         c.eos_token_ids = {1, 106};
       }},
  };
  return m;
}

bool same(const ZayaConfig& a, const ZayaConfig& b) {
  for (const ConfigField& f : zaya_config_fields())
    if (!config_field_equal(f, a, b)) return false;
  return true;
}

std::string differing(const ZayaConfig& a, const ZayaConfig& b) {
  std::string out;
  for (const ConfigField& f : zaya_config_fields())
    if (!config_field_equal(f, a, b))
      out += fmt::format(" {}: {} vs {}", f.member, config_field_text(f, a), config_field_text(f, b));
  return out;
}

ZayaConfig through_gguf(const ZayaConfig& c) {
  GgufWriter w;
  write_zaya_gguf_metadata(c, {}, w);
  GgufMetadata m("meta");
  for (const auto& kv : w.metadata().entries()) m.add(kv.key, kv.value);
  return zaya_config_from_gguf(m);
}

ZayaConfig through_toml(const ZayaConfig& c) {
  const toml::table t = toml::parse(model_table_to_toml("tiny", c));
  ModelTable back = parse_model_table(t["model"].as_table(), "config.toml");
  // The token ids are not [model] keys: they come from the tokenizer.
  back.config.bos_token_id = c.bos_token_id;
  back.config.eos_token_id = c.eos_token_id;
  back.config.pad_token_id = c.pad_token_id;
  back.config.eos_token_ids = c.eos_token_ids;
  return back.config;
}

TEST(ConfigFields, EveryRowSurvivesEveryFormatThatSpellsIt) {
  std::set<std::string> members;
  for (const ConfigField& f : zaya_config_fields()) {
    SCOPED_TRACE(f.member);
    EXPECT_TRUE(members.insert(f.member).second);
    ASSERT_TRUE(changes().count(f.member)) << "give the new field a change in changes()";
    ZayaConfig c = base_config();
    changes().at(f.member)(c);
    ASSERT_NO_THROW(c.validate("test"));
    ASSERT_FALSE(config_field_equal(f, c, base_config())) << "the change must change the field";
    if (f.toml != nullptr) {
      EXPECT_TRUE(same(through_toml(c), c)) << differing(through_toml(c), c);
    }
    const ZayaConfig legacy = config_from_hf_json(config_to_hf_json(c, "float32"), "legacy");
    EXPECT_TRUE(same(legacy, c)) << differing(legacy, c);
    if (f.native.form != JsonForm::kNone && native_layout_problem(c).empty()) {
      const ZayaConfig native = native_config_from_json(config_to_native_json(c, "float32"), "native");
      // The native layout's router norm is rms_norm_eps (spec §8.2): the base's legacy value travels as our key.
      EXPECT_TRUE(same(native, c)) << differing(native, c);
    }
    if (f.gguf.form != GgufForm::kNone) {
      EXPECT_TRUE(same(through_gguf(c), c)) << differing(through_gguf(c), c);
    }
    // The diff names the field by its [model] key, or not at all.
    const std::vector<std::string> diff = model_differences(base_config(), c);
    if (f.diff == DiffRule::kNever) {
      EXPECT_TRUE(diff.empty());
    } else {
      EXPECT_EQ(diff, (std::vector<std::string>{fmt::format("{}: {} vs {}", f.toml, config_field_text(f, base_config()),
                                                            config_field_text(f, c))}));
    }
  }
  EXPECT_EQ(members.size(), changes().size());
}

// Keys are declared once: no two rows share a [model] key or a GGUF slot (the sliding-window keys share one on
// purpose: they are written together).
TEST(ConfigFields, KeysAndSlotsAreUnique) {
  std::set<std::string> toml_keys;
  std::map<int, int> slots;
  for (const ConfigField& f : zaya_config_fields()) {
    if (f.toml != nullptr) {
      EXPECT_TRUE(toml_keys.insert(f.toml).second) << f.toml;
    }
    if (f.gguf.form != GgufForm::kNone) ++slots[f.gguf.slot];
  }
  for (auto [slot, n] : slots) EXPECT_EQ(n, slot == 27 ? 3 : 1) << "GGUF slot " << slot;
}

}  // namespace
}  // namespace zaya
