// Model directories in both layouts: a ZAYA1-74B-preview-shaped config.json at
// small width imports in either spelling, and its weights round-trip legacy ->
// native -> legacy bit for bit; tensor counts of each layout; the
// init_from check's differences.
#include "zaya/formats/model_directory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "zaya/core/test_util.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/layout_counts.h"
#include "zaya/formats/native_config.h"
#include "zaya/formats/quantized_experts.h"
#include "zaya/io/json_file.h"
#include "zaya/io/safetensors_dir.h"

namespace zaya {
namespace {

using json = nlohmann::json;

// The hub's native config.json of ZAYA1-74B-preview, at hidden 64 with 4 blocks and a window of 4 keys.
json small_74b_native_config() {
  return {{"architectures", {"ZayaForCausalLM"}},
          {"model_type", "zaya"},
          {"vocab_size", 256},
          {"hidden_size", 64},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 8},
          {"hidden_act", "silu"},
          {"max_position_embeddings", 512},
          {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", true},
          {"residual_in_fp32", true},
          {"rope_scaling", false},
          {"rope_type", "default"},
          {"rope_parameters",
           {{"hybrid", {{"rope_type", "default"}, {"rope_theta", 5e6}, {"partial_rotary_factor", 0.5}}},
            {"hybrid_sliding", {{"rope_type", "default"}, {"rope_theta", 1e4}}}}},
          {"layer_types", {"hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"}},
          {"sliding_window", 4},
          {"moe_intermediate_size", 64},
          {"num_experts_per_tok", 1},
          {"num_experts", 3},
          {"router_hidden_size", 16},
          {"bos_token_id", 2},
          {"eos_token_id", {106, 1}},
          {"pad_token_id", 0},
          {"transformers_version", "5.0.0"},
          {"dtype", "bfloat16"}};
}

struct Arenas {
  Arenas(const ZayaConfig& c) : params(c, true), buffers(c, false) {
    p.resize(size_t(params.total_floats()));
    b.resize(size_t(buffers.total_floats()));
  }
  std::vector<NamedTensor> tensors() const {
    std::vector<NamedTensor> out;
    for (const ParamEntry& e : params.entries()) out.push_back({e.name, e.shape, p.data() + e.offset, false});
    for (const ParamEntry& e : buffers.entries()) out.push_back({e.name, e.shape, b.data() + e.offset, true});
    return out;
  }
  void load(const std::string& dir, const ZayaConfig& c) {
    load_model_directory_tensors(dir, c, params, p.data(), buffers, b.data());
  }
  bool same_bits(const Arenas& o) const {
    return std::memcmp(p.data(), o.p.data(), p.size() * 4) == 0 && std::memcmp(b.data(), o.b.data(), b.size() * 4) == 0;
  }
  ParamTable params, buffers;
  std::vector<float> p, b;
};

TEST(ModelDirectory, Small74bConfigImportsInBothLayouts) {
  testing::TempDir dir;
  dir.write("config.json", small_74b_native_config().dump(2));
  bool native = false;
  const ZayaConfig c = read_model_directory_config(dir.path(), &native);
  EXPECT_TRUE(native);
  EXPECT_EQ(c.sliding_window, 4);
  EXPECT_EQ(c.sliding_blocks, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(c.rope_theta, 5e6);
  EXPECT_EQ(c.sliding_rope_theta, 1e4);
  EXPECT_EQ(c.rope_theta_of(1), 5e6);
  EXPECT_EQ(c.rope_theta_of(2), 1e4);
  EXPECT_EQ(c.eos_token_id, 106);
  EXPECT_EQ(c.stop_token_ids(), (std::vector<int64_t>{106, 1}));
  EXPECT_TRUE(c.fits_zaya_branch());  // 4 x 8 = 64 / 2
  EXPECT_EQ(describe_sliding_blocks(c), "blocks 0, 2");
  EXPECT_EQ(describe_sliding_blocks(preset_config("zaya1-74b")), "every even block (0, 2, ..., 58)");
  // The legacy spelling: swa_layers 3 (earlier tokens) on the even attention half-layers.
  testing::TempDir legacy;
  const json lj = config_to_hf_json(c, "bfloat16");
  EXPECT_EQ(lj["swa_layers"], json({3, 0, 0, 0, 3, 0, 0, 0}));
  legacy.write("config.json", lj.dump(2));
  EXPECT_TRUE(model_differences(read_model_directory_config(legacy.path(), &native), c).empty());
  EXPECT_FALSE(native);
}

TEST(ModelDirectory, WeightsRoundTripLegacyNativeLegacyBitExactly) {
  const ZayaConfig c = native_config_from_json(small_74b_native_config(), "74b");
  Arenas original(c);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : original.p) v = dist(rng);
  for (float& v : original.b) v = dist(rng);
  testing::TempDir legacy, native, legacy2;
  save_hf_tensors(c, original.tensors(), legacy.path());
  Arenas from_legacy(c);
  from_legacy.load(legacy.path(), c);
  EXPECT_TRUE(from_legacy.same_bits(original));
  save_native_tensors(c, from_legacy.tensors(), native.path());
  // The native directory holds the published native names, experts stacked [E, ...].
  const SafetensorsDir st = SafetensorsDir::open(native.path());
  EXPECT_EQ(int64_t(st.names().size()), layout_tensor_counts(c).native);
  EXPECT_EQ(st.info("model.layers.1.mlp.experts.gate_up_proj").shape, (std::vector<int64_t>{3, 128, 64}));
  Arenas from_native(c);
  from_native.load(native.path(), c);
  EXPECT_TRUE(from_native.same_bits(original));
  save_hf_tensors(c, from_native.tensors(), legacy2.path());
  Arenas again(c);
  again.load(legacy2.path(), c);
  EXPECT_TRUE(again.same_bits(original));
  // The native config.json written beside the weights reads back as the same model.
  EXPECT_TRUE(model_differences(read_model_directory_config(native.path()), c).empty());

  // bf16: rounded once, then stable through native and back.
  HfSaveOptions bf16;
  bf16.dtype = "bf16";
  testing::TempDir lb, nb;
  save_hf_tensors(c, original.tensors(), lb.path(), bf16);
  Arenas rounded(c), through(c);
  rounded.load(lb.path(), c);
  save_native_tensors(c, rounded.tensors(), nb.path(), bf16);
  through.load(nb.path(), c);
  EXPECT_TRUE(through.same_bits(rounded));
  EXPECT_FALSE(rounded.same_bits(original));
}

// Convolution kernels of 3 and 4 taps (cca_time0 / cca_time1): the conv
// tensors [C, 1, 3] and [C, d, 4] travel legacy -> native -> legacy bit for bit,
// and both layouts' config.json carry the sizes.
// `ckpt export --experts fp8` (save_native_tensors with experts "fp8"): the routed experts as compressed-tensors'
// float-quantized channel FP8 (weight F8_E4M3 [E, rows, cols], weight_scale F32 [E, rows, 1], no float tensor),
// the config's quantization_config read back as that format; loaded (dequantized) and exported again, every tensor's
// bytes are the first export's: zaya -> export -> zaya load is exact in the quantized values.
TEST(ModelDirectory, Fp8ExpertsExportLoadsAndReexportsBitExactly) {
  const ZayaConfig c = native_config_from_json(small_74b_native_config(), "74b");
  Arenas original(c);
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : original.p) v = dist(rng);
  for (float& v : original.b) v = dist(rng);
  HfSaveOptions fp8;
  fp8.experts = "fp8";
  testing::TempDir first, second;
  save_native_tensors(c, original.tensors(), first.path(), fp8);
  const SafetensorsDir st = SafetensorsDir::open(first.path());
  const std::string up = "model.layers.1.mlp.experts.gate_up_proj";
  EXPECT_FALSE(st.has(up));
  EXPECT_EQ(st.info(up + ".weight").dtype, SafetensorsDtype::kF8E4M3);
  EXPECT_EQ(st.info(up + ".weight").shape, (std::vector<int64_t>{3, 128, 64}));
  EXPECT_EQ(st.info(up + ".weight_scale").dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(st.info(up + ".weight_scale").shape, (std::vector<int64_t>{3, 128, 1}));
  const std::string config_path = first.path() + "/config.json";
  EXPECT_EQ(parse_expert_quant(read_json_file(config_path), config_path).format, ExpertQuantFormat::kFp8Channel);
  Arenas loaded(c);
  loaded.load(first.path(), c);
  EXPECT_FALSE(loaded.same_bits(original));  // the experts moved to FP8 values
  save_native_tensors(c, loaded.tensors(), second.path(), fp8);
  const SafetensorsDir st2 = SafetensorsDir::open(second.path());
  ASSERT_EQ(st2.names(), st.names());
  int quantized = 0;
  for (const std::string& name : st.names()) {
    const auto a = st.bytes(name), b = st2.bytes(name);
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << name;
    quantized += st.info(name).dtype == SafetensorsDtype::kF8E4M3;
  }
  EXPECT_EQ(quantized, 2 * c.num_blocks);
}

TEST(ModelDirectory, OtherConvolutionKernelSizesRoundTripInBothLayouts) {
  ZayaConfig c = native_config_from_json(small_74b_native_config(), "74b");
  c.conv_kernel0 = 3;
  c.conv_kernel1 = 4;
  Arenas original(c);
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : original.p) v = dist(rng);
  for (float& v : original.b) v = dist(rng);
  testing::TempDir legacy, native, legacy2;
  save_hf_tensors(c, original.tensors(), legacy.path());
  EXPECT_EQ(SafetensorsDir::open(legacy.path()).info("model.layers.0.self_attn.qkv.conv_qk.1.weight").shape,
            (std::vector<int64_t>{c.conv_channels(), c.head_dim, 4}));
  bool is_native = true;
  const ZayaConfig from_legacy_json = read_model_directory_config(legacy.path(), &is_native);
  EXPECT_FALSE(is_native);
  EXPECT_EQ(from_legacy_json.conv_kernel0, 3);
  EXPECT_EQ(from_legacy_json.conv_kernel1, 4);
  Arenas from_legacy(c);
  from_legacy.load(legacy.path(), c);
  EXPECT_TRUE(from_legacy.same_bits(original));
  save_native_tensors(c, from_legacy.tensors(), native.path());
  EXPECT_EQ(
      SafetensorsDir::open(native.path()).info("model.layers.0.self_attn.qkv_proj.conv_qk_depthwise.weight").shape,
      (std::vector<int64_t>{c.conv_channels(), 1, 3}));
  EXPECT_TRUE(model_differences(read_model_directory_config(native.path()), c).empty());
  Arenas from_native(c);
  from_native.load(native.path(), c);
  EXPECT_TRUE(from_native.same_bits(original));
  save_hf_tensors(c, from_native.tensors(), legacy2.path());
  Arenas again(c);
  again.load(legacy2.path(), c);
  EXPECT_TRUE(again.same_bits(original));
  // A 2/2 model does not load these weights: the shapes differ and the load says so.
  const ZayaConfig two = native_config_from_json(small_74b_native_config(), "74b");
  Arenas wrong(two);
  EXPECT_THROW(wrong.load(legacy.path(), two), Error);
}

// An untied head travels as lm_head.weight in both layouts, bit for bit; a
// tied config ignores a stray lm_head.weight, and an untied config whose
// directory lacks it is refused naming the tensor.
TEST(ModelDirectory, UntiedHeadRoundTripsInBothLayouts) {
  ZayaConfig c = native_config_from_json(small_74b_native_config(), "74b");
  c.tie_word_embeddings = false;
  Arenas original(c);
  ASSERT_NE(original.params.find("lm_head.weight"), nullptr);
  std::mt19937 rng(8);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& v : original.p) v = dist(rng);
  for (float& v : original.b) v = dist(rng);
  testing::TempDir legacy, native;
  save_hf_tensors(c, original.tensors(), legacy.path());
  save_native_tensors(c, original.tensors(), native.path());
  EXPECT_TRUE(SafetensorsDir::open(native.path()).has("lm_head.weight"));
  for (const std::string& dir : {legacy.path(), native.path()}) {
    EXPECT_TRUE(model_differences(read_model_directory_config(dir), c).empty()) << dir;
    Arenas back(c);
    back.load(dir, c);
    EXPECT_TRUE(back.same_bits(original)) << dir;
  }
  // The tied config of the same directory: an extra lm_head.weight is accepted only when tied.
  ZayaConfig tied = c;
  tied.tie_word_embeddings = true;
  Arenas t(tied);
  EXPECT_NO_THROW(t.load(native.path(), tied));
  // An untied config whose directory lacks the head.
  testing::TempDir lacking;
  ZayaConfig no_head = c;
  no_head.tie_word_embeddings = true;
  Arenas h(no_head);
  save_native_tensors(no_head, h.tensors(), lacking.path());
  Arenas u(c);
  testing::expect_error([&] { u.load(lacking.path(), c); }, "missing tensor 'lm_head.weight'");
}

TEST(ModelDirectory, StrictAboutTensors) {
  const ZayaConfig c = native_config_from_json(small_74b_native_config(), "74b");
  Arenas a(c);
  testing::TempDir native;
  save_native_tensors(c, a.tensors(), native.path());
  // Weights of one layout under the other's config.json: the first tensor looked up is missing.
  native.write("config.json", config_to_hf_json(c, "float32").dump());
  testing::expect_error([&] { a.load(native.path(), c); }, "the checkpoint does not match config.json");
  testing::TempDir bad;
  std::vector<NamedTensor> no_expert;
  for (const NamedTensor& t : a.tensors())
    if (t.name != "model.layers.3.zaya_block.experts.local_experts.2.linear_fc2.weight") no_expert.push_back(t);
  testing::expect_error([&] { save_native_tensors(c, no_expert, bad.path()); },
                        "every expert is needed to write the native layout");
}

// Counts from the tensor table: the published 2,483 / 1,283 (ZAYA1-base, 8B) and 4,683 / 1,923 (74B-preview);
// GGUF: per block 15 attention + 14 MoE + balancing biases + gate, up, down stacked; 6 globals; block 0 lacks 3.
TEST(ModelDirectory, TensorCountsOfEachLayout) {
  const LayoutTensorCounts base = layout_tensor_counts(preset_config("zaya1-8b"));
  EXPECT_EQ(base.legacy, 2483);
  EXPECT_EQ(base.native, 1283);
  EXPECT_EQ(base.gguf, 1323);
  const LayoutTensorCounts big = layout_tensor_counts(preset_config("zaya1-74b"));
  EXPECT_EQ(big.legacy, 4683);
  EXPECT_EQ(big.native, 1923);
  EXPECT_EQ(big.gguf, 1983);
}

TEST(ModelDirectory, DifferencesNameEachKeyWithBothValues) {
  ZayaConfig a = preset_config("tiny"), b = a;
  EXPECT_TRUE(model_differences(a, b).empty());
  b.hidden = 256;
  b.sliding_window = 4;
  b.sliding_blocks = {0, 2};
  EXPECT_EQ(model_differences(a, b), (std::vector<std::string>{"hidden_size: 128 vs 256", "sliding_window: 0 vs 4",
                                                               "sliding_blocks: [] vs [0, 2]"}));
}

TEST(ModelDirectory, TinyAndSmallLoadInTheZayaBranch) {
  for (const std::string& name : preset_names()) EXPECT_TRUE(preset_config(name).fits_zaya_branch()) << name;
  ZayaConfig c = preset_config("tiny");
  c.q_heads = 4;  // 4 x 32 = 128 = hidden: the old tiny
  EXPECT_FALSE(c.fits_zaya_branch());
  EXPECT_NE(zaya_branch_note(c).find("query latent 4 x 32 = 128 is not hidden_size / 2 = 64"), std::string::npos);
  EXPECT_EQ(zaya_branch_note(preset_config("tiny")), "");
}

}  // namespace
}  // namespace zaya
