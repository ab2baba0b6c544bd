// The native 40-layer layout: config parsing, the legacy -> native tensor
// names of spec §6.3 (spelled out here, independently of the mapping code),
// and a native checkpoint (renamed tensors, stacked experts) giving the same
// logits as the legacy checkpoint of the same weights, including the native
// skip-expert semantics (output 0).
#include "zaya/formats/native_config.h"
#include "zaya/model/tensor_table.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "zaya/formats/hf_checkpoint.h"
#include "zaya/infer/engine.h"
#include "zaya/infer/test_util.h"
#include "zaya/io/safetensors_writer.h"

namespace zaya {
namespace {

using json = nlohmann::json;

json native_config(const ZayaConfig& c) {
  json layer_types = json::array();
  for (int64_t i = 0; i < c.num_blocks; ++i) layer_types.push_back("hybrid");
  return {{"architectures", {"ZayaForCausalLM"}},
          {"model_type", "zaya"},
          {"vocab_size", c.vocab_size},
          {"hidden_size", c.hidden},
          {"num_hidden_layers", c.num_blocks},
          {"num_attention_heads", c.q_heads},
          {"num_key_value_heads", c.kv_heads},
          {"head_dim", c.head_dim},
          {"hidden_act", "silu"},
          {"max_position_embeddings", c.max_position},
          {"rms_norm_eps", c.norm_eps},
          {"tie_word_embeddings", true},
          {"rope_parameters",
           {{"hybrid",
             {{"rope_type", "default"},
              {"rope_theta", c.rope_theta},
              {"partial_rotary_factor", c.partial_rotary_factor}}}}},
          {"rope_type", "default"},  // the stray key of the hub file
          {"sliding_window", nullptr},
          {"moe_intermediate_size", c.expert_ffn},
          {"num_experts_per_tok", 1},
          {"num_experts", c.experts},
          {"layer_types", layer_types},
          {"router_hidden_size", c.router_hidden},
          {"cca_time0", 2},
          {"cca_time1", 2},
          {"bos_token_id", c.bos_token_id},
          {"eos_token_id", json::array({c.eos_token_id, 106 % c.real_vocab_size})},
          {"pad_token_id", c.pad_token_id},
          {"zaya_real_vocab_size", c.real_vocab_size},
          {"transformers_version", "5.0.0"},
          {"dtype", "bfloat16"}};
}

// Writes `model` in the native layout: renamed tensors, experts stacked.
void save_native(const ZayaModel& model, const std::string& dir, std::vector<std::vector<float>>& keep) {
  const ZayaConfig& c = model.config();
  std::filesystem::create_directories(dir);
  SafetensorsWriter w;
  std::map<std::string, std::vector<std::pair<int64_t, const ParamEntry*>>> stacked;
  auto add = [&](const ParamEntry& e, const float* base) {
    const NativeTensorRef r = native_tensor_for(e.name, c);
    if (r.expert >= 0)
      stacked[r.name].emplace_back(r.expert, &e);
    else
      w.add_bf16(r.name, e.shape, base + e.offset);
  };
  for (const ParamEntry& e : model.params().entries()) add(e, model.param_data());
  for (const ParamEntry& e : model.buffers().entries()) add(e, model.buffer_data());
  for (auto& [name, parts] : stacked) {
    const ParamEntry& first = *parts[0].second;
    keep.emplace_back(c.experts * first.numel);
    for (const auto& [expert, e] : parts)
      std::copy(model.param_data() + e->offset, model.param_data() + e->offset + e->numel,
                keep.back().begin() + expert * e->numel);
    w.add_bf16(name, {c.experts, first.shape[0], first.shape[1]}, keep.back().data());
  }
  w.write(dir + "/model.safetensors");
  std::ofstream(dir + "/config.json") << native_config(c).dump(2);
}

TEST(NativeLayout, TensorNamesOfSpecSection63) {
  ZayaConfig c = preset_config("zaya1-base");
  auto is = [&](const std::string& legacy, const std::string& native, int64_t expert = -1) {
    const NativeTensorRef r = native_tensor_for(legacy, c);
    EXPECT_EQ(r.name, native) << legacy;
    EXPECT_EQ(r.expert, expert) << legacy;
  };
  is("model.embed_tokens.weight", "model.embed_tokens.weight");
  is("model.final_norm.weight", "model.norm.weight");
  is("model.res_scale.residual_bias", "model.layers.39.post_mlp_residual_scale.residual_bias");
  is("model.layers.0.res_scale.hidden_states_scale", "model.input_hidden_states_scale");
  is("model.layers.0.input_norm.weight", "model.layers.0.input_layernorm.weight");
  is("model.layers.7.input_norm.weight", "model.layers.3.post_attention_layernorm.weight");
  is("model.layers.7.res_scale.residual_scale", "model.layers.3.post_attention_residual_scale.residual_scale");
  is("model.layers.8.res_scale.hidden_states_bias", "model.layers.3.post_mlp_residual_scale.hidden_states_bias");
  is("model.layers.4.self_attn.qkv.linear_q.weight", "model.layers.2.self_attn.qkv_proj.q_proj.weight");
  is("model.layers.4.self_attn.qkv.val_proj2.weight", "model.layers.2.self_attn.qkv_proj.v_proj_delayed.weight");
  is("model.layers.4.self_attn.qkv.conv_qk.1.bias", "model.layers.2.self_attn.qkv_proj.conv_qk_grouped.bias");
  is("model.layers.4.self_attn.qkv.temp", "model.layers.2.self_attn.qk_norm.temp");
  is("model.layers.79.zaya_block.router.rmsnorm_eda.weight", "model.layers.39.mlp.gate.router_mlp.norm.weight");
  is("model.layers.3.zaya_block.router.router_mlp.4.weight", "model.layers.1.mlp.gate.router_mlp.out_proj.weight");
  is("model.layers.3.zaya_block.router.balancing_biases", "model.layers.1.mlp.gate.balancing_biases");
  is("model.layers.5.zaya_block.experts.local_experts.11.linear_fc1.weight", "model.layers.2.mlp.experts.gate_up_proj",
     11);
  is("model.layers.5.zaya_block.experts.local_experts.0.linear_fc2.weight", "model.layers.2.mlp.experts.down_proj", 0);
}

TEST(NativeLayout, ConfigParsing) {
  const ZayaConfig c = testing::small_test_config();
  json j = native_config(c);
  EXPECT_TRUE(is_native_zaya_config(j));
  const ZayaConfig p = native_config_from_json(j, "cfg");
  EXPECT_EQ(p.num_blocks, c.num_blocks);
  EXPECT_EQ(p.q_heads, c.q_heads);
  EXPECT_EQ(p.head_dim, c.head_dim);
  EXPECT_EQ(p.experts, c.experts);
  EXPECT_EQ(p.expert_ffn, c.expert_ffn);
  EXPECT_EQ(p.router_hidden, c.router_hidden);
  EXPECT_EQ(p.rope_theta, c.rope_theta);
  EXPECT_EQ(p.router_norm_eps, p.norm_eps);
  EXPECT_EQ(p.eos_token_id, c.eos_token_id);
  j["layer_types"][1] = "hybrid_sliding";  // sliding layers need their window (spec §12)
  testing::expect_error([&] { native_config_from_json(j, "cfg"); }, "\"sliding_window\" is missing or null");
  j = native_config(c);
  j["num_expert"] = 3;
  testing::expect_error([&] { native_config_from_json(j, "cfg"); }, "unknown config key \"num_expert\"");
  j = native_config(c);
  j["num_experts_per_tok"] = 2;
  testing::expect_error([&] { native_config_from_json(j, "cfg"); }, "\"num_experts_per_tok\" = 2 is invalid");
}

// Native and legacy checkpoints of the same weights give the same logits. The
// second case routes every token of the native model to the skip expert
// (output 0 there) and every token of the legacy model to expert 0 whose
// down projection is zero: both MoE outputs are 0.
TEST(NativeLayout, SameLogitsAsLegacyCheckpoint) {
  ZayaConfig c = testing::small_test_config();
  c.router_norm_eps = c.norm_eps;  // the native router norm uses rms_norm_eps
  const std::vector<int32_t> ids = testing::random_tokens(20, c.real_vocab_size, 4);
  for (bool all_skip : {false, true}) {
    auto legacy = testing::random_model(c, 51);
    auto native = testing::random_model(c, 51);
    for (size_t l = 0; l < legacy->balancing_biases().size(); ++l) {
      float* lb = legacy->balancing_biases()[l];
      float* nb = native->balancing_biases()[l];
      for (int64_t e = 0; e < c.router_slots(); ++e) lb[e] = nb[e] = e == c.skip_slot() ? -1.0f : 0.0f;
      if (all_skip) {
        lb[0] = 5.0f;
        nb[c.skip_slot()] = 5.0f;
        for (ZayaModel* m : {legacy.get(), native.get()}) {
          const ParamEntry& fc2 = m->params().at(legacy_tensor_name(TensorRole::kExpertFc2, int(2 * l + 1), 0));
          std::fill(m->param_data() + fc2.offset, m->param_data() + fc2.offset + fc2.numel, 0.0f);
        }
      }
    }
    testing::TempDir ldir, ndir;
    HfSaveOptions save;
    save.dtype = "bf16";
    save_hf_model(*legacy, ldir.path(), save);
    std::vector<std::vector<float>> keep;
    save_native(*native, ndir.path(), keep);
    InferLoadOptions in_place;
    in_place.huge_pages = false;
    auto lm = InferModel::load(ldir.path(), in_place);
    auto nm = InferModel::load(ndir.path(), in_place);
    EXPECT_STREQ(nm->layout(), "native");
    EXPECT_STREQ(lm->layout(), "legacy");
    // Stacked experts are sliced in place from the mapping, like every other matrix.
    EXPECT_EQ(nm->mapped_matrices(), lm->mapped_matrices());
    EngineOptions o;
    o.max_context = 20;
    o.bf16_activations = false;
    InferenceEngine le(*lm, o), ne(*nm, o);
    StepChunk ch{0, ids.data(), 20, LogitsWanted::kAll};
    le.step({&ch, 1});
    ne.step({&ch, 1});
    EXPECT_EQ(ne.last_stats().skip_choices, all_skip ? 20 * c.num_blocks : 0);
    const std::vector<float> a = testing::step_logits(le), b = testing::step_logits(ne);
    EXPECT_LT(testing::logits_error(b.data(), a.data(), 20, c.vocab_size, c.real_vocab_size), 1e-5)
        << (all_skip ? "all tokens skip" : "no skip");
    // The stacked experts' slices copied into huge pages (the default) give the mapped slices' logits bit for bit.
    auto nh = InferModel::load(ndir.path());
    InferenceEngine he(*nh, o);
    he.step({&ch, 1});
    EXPECT_EQ(testing::step_logits(he), b);
  }
}

}  // namespace
}  // namespace zaya
