// ZAYA <-> GGUF: the tensor mapping, metadata, round trips and bad files.

#include "zaya/formats/gguf_zaya.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <set>

#include "zaya/core/bf16.h"
#include "zaya/core/q8_0.h"
#include "zaya/core/test_util.h"
#include "zaya/formats/hf_config.h"
#include "zaya/model/params.h"
#include "zaya/model/test_config.h"

namespace zaya {
namespace {

using testing::TempDir;

ZayaConfig test_config() {
  ZayaConfig c = testing::model_test_config();
  c.norm_eps = 1e-5;  // not exact in float32: the _f64 twin must carry it
  c.router_norm_eps = 1e-6;
  return c;
}

void expect_failure(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  const std::string message = testing::error_of(f);
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << part << " in: " << message;
}

bool same_config(const ZayaConfig& a, const ZayaConfig& b) {
  return config_to_hf_json(a, "float32") == config_to_hf_json(b, "float32");
}

// A model with random weights everywhere (norms and biases included) and random balancing biases.
std::unique_ptr<ZayaModel> random_model(const ZayaConfig& c, uint32_t seed) {
  auto model = std::make_unique<ZayaModel>(c);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < model->params().total_floats(); ++i) model->param_data()[i] = dist(rng);
  for (int64_t i = 0; i < model->buffers().total_floats(); ++i) model->buffer_data()[i] = dist(rng);
  return model;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(GgufZaya, MappingOfZaya1Base) {
  const ZayaConfig c = preset_config("zaya1-base");
  const auto map = zaya_gguf_tensor_map(c);  // throws if any legacy element is unmapped or mapped twice
  std::set<std::string> names;
  for (const auto& t : map) {
    EXPECT_LE(t.name.size(), kGgufMaxWrittenTensorNameBytes) << t.name;
    EXPECT_LE(t.shape.size(), kGgufMaxDims) << t.name;
    EXPECT_TRUE(names.insert(t.name).second) << t.name;
  }
  // Per block: attention 15 (2 of the 4 merge tensors absent on block 0) + MoE 18 (the EDA scale absent
  // on block 0); global: token_embd, output_norm, output_merge x4.
  EXPECT_EQ(map.size(), 6u + 40u * (15 + 18) - 2 - 1);
  EXPECT_TRUE(names.count("blk.0.ffn_gate_exps.weight"));
  EXPECT_FALSE(names.count("blk.0.attn_merge_res.weight"));
  EXPECT_TRUE(names.count("blk.1.attn_merge_res.weight"));
  EXPECT_FALSE(names.count("blk.0.ffn_router_eda.weight"));
  EXPECT_TRUE(names.count("blk.39.ffn_router_eda.weight"));
  EXPECT_TRUE(names.count("blk.39.exp_probs_b.bias"));
  for (const auto& t : map) {
    if (t.name == "blk.7.ffn_down_exps.weight") {
      EXPECT_EQ(t.shape, (std::vector<int64_t>{16, 2048, 2048}));
    }
  }
}

// Also with an untied head (output.weight), plain merges (no *_merge_* tensors), float32 RoPE (metadata) and
// convolution kernels of 3/4 taps (metadata and the conv tensors' shapes).
class GgufZayaVariant : public ::testing::TestWithParam<int> {};

TEST_P(GgufZayaVariant, F32RoundTripIsBitExact) {
  TempDir dir;
  ZayaConfig c = test_config();
  if (GetParam() == 1) c.tie_word_embeddings = false;
  if (GetParam() == 2) {
    c.scale_residual_merge = false;
    c.rope_precision = RopePrecision::kF32;
  }
  if (GetParam() == 3) {  // convolution kernels of 3 and 4 taps (cca_time0 / cca_time1)
    c.conv_kernel0 = 3;
    c.conv_kernel1 = 4;
  }
  auto model = random_model(c, 1);
  const std::string path = dir.file("m.gguf");
  save_gguf_model(*model, path);

  const ZayaGgufContents back = read_zaya_gguf(path);
  EXPECT_TRUE(same_config(back.config, c));
  EXPECT_EQ(back.config.norm_eps, 1e-5);
  size_t checked = 0;
  for (const ZayaTensorData& t : back.tensors) {
    const ParamEntry* e = model->params().find(t.name);
    const float* want = e != nullptr ? model->param_data() + e->offset : nullptr;
    if (e == nullptr) {
      e = &model->buffers().at(t.name);
      want = model->buffer_data() + e->offset;
    }
    ASSERT_EQ(t.shape, e->shape) << t.name;
    ASSERT_EQ(std::memcmp(t.data.data(), want, t.data.size() * sizeof(float)), 0) << t.name;
    ++checked;
  }
  EXPECT_EQ(checked, model->params().entries().size() + model->buffers().entries().size());

  auto loaded = load_gguf_model(path);
  EXPECT_EQ(std::memcmp(loaded->param_data(), model->param_data(), model->params().total_floats() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(loaded->buffer_data(), model->buffer_data(), model->buffers().total_floats() * sizeof(float)),
            0);
  EXPECT_EQ(loaded->config().tie_word_embeddings, c.tie_word_embeddings);
  EXPECT_EQ(loaded->config().scale_residual_merge, c.scale_residual_merge);
  EXPECT_EQ(loaded->config().rope_precision, c.rope_precision);
  EXPECT_EQ(loaded->config().conv_kernel0, c.conv_kernel0);
  EXPECT_EQ(loaded->config().conv_kernel1, c.conv_kernel1);
  bool head = false, merges = false;
  for (const ZayaGgufTensor& t : zaya_gguf_tensor_map(c)) {
    head = head || t.name == "output.weight";
    merges = merges || t.name.find("_merge_") != std::string::npos;
  }
  EXPECT_EQ(head, !c.tie_word_embeddings);
  EXPECT_EQ(merges, c.scale_residual_merge);
}

INSTANTIATE_TEST_SUITE_P(TiedUntiedPlainKernels, GgufZayaVariant, ::testing::Values(0, 1, 2, 3));

TEST(GgufZaya, Bf16RoundTripRoundsMatricesAndKeepsVectors) {
  TempDir dir;
  const ZayaConfig c = test_config();
  auto model = random_model(c, 2);
  const std::string path = dir.file("m.gguf");
  GgufSaveOptions options;
  options.dtype = "bf16";
  options.name = "tiny zaya";
  save_gguf_model(*model, path, options);

  GgufFile raw = GgufFile::open(path);
  EXPECT_EQ(raw.metadata().get_string("general.name"), "tiny zaya");
  EXPECT_EQ(raw.metadata().get_u32("general.file_type"), 32u);
  EXPECT_EQ(raw.tensor("blk.0.attn_q.weight").type, GgmlType::kBF16);
  EXPECT_EQ(raw.tensor("blk.0.attn_norm.weight").type, GgmlType::kF32);
  EXPECT_EQ(raw.tensor("blk.2.exp_probs_b.bias").type, GgmlType::kF32);

  auto loaded = load_gguf_model(path);
  for (const ParamTable* table : {&model->params(), &model->buffers()}) {
    const bool is_buffer = table == &model->buffers();
    const float* want = is_buffer ? model->buffer_data() : model->param_data();
    const float* got = is_buffer ? loaded->buffer_data() : loaded->param_data();
    for (const ParamEntry& e : table->entries()) {
      const bool rounded = e.shape.size() > 1;
      for (int64_t i = 0; i < e.numel; ++i) {
        const float w = want[e.offset + i];
        ASSERT_EQ(bits(got[e.offset + i]), bits(rounded ? bf16_to_float(float_to_bf16(w)) : w)) << e.name << i;
      }
    }
  }
}

TEST(GgufZaya, ExpertsAreStackedGateUpDown) {
  TempDir dir;
  const ZayaConfig c = test_config();
  auto model = random_model(c, 3);
  const std::string path = dir.file("m.gguf");
  save_gguf_model(*model, path);
  GgufFile f = GgufFile::open(path);
  const int64_t E = c.experts, F = c.expert_ffn, D = c.hidden;
  ASSERT_EQ(f.tensor("blk.1.ffn_gate_exps.weight").dims, (std::vector<int64_t>{D, F, E}));  // ggml order
  std::vector<float> gate(E * F * D), up(E * F * D), down(E * D * F);
  f.read_f32("blk.1.ffn_gate_exps.weight", gate.data(), {E, F, D});
  f.read_f32("blk.1.ffn_up_exps.weight", up.data(), {E, F, D});
  f.read_f32("blk.1.ffn_down_exps.weight", down.data(), {E, D, F});
  for (int64_t e = 0; e < E; ++e) {
    const std::string x = "model.layers.3.zaya_block.experts.local_experts." + std::to_string(e);
    const float* fc1 = model->param_data() + model->params().at(x + ".linear_fc1.weight").offset;  // [2F, D]
    const float* fc2 = model->param_data() + model->params().at(x + ".linear_fc2.weight").offset;  // [D, F]
    for (int64_t r = 0; r < F; ++r)
      for (int64_t k = 0; k < D; ++k) {
        ASSERT_EQ(gate[(e * F + r) * D + k], fc1[r * D + k]);
        ASSERT_EQ(up[(e * F + r) * D + k], fc1[(F + r) * D + k]);
      }
    for (int64_t i = 0; i < D * F; ++i) ASSERT_EQ(down[e * D * F + i], fc2[i]);
  }
}

TEST(GgufZaya, StandardMetadataKeys) {
  TempDir dir;
  const ZayaConfig c = test_config();
  const std::string path = dir.file("m.gguf");
  save_gguf_model(*random_model(c, 4), path);
  const GgufFile file = GgufFile::open(path);
  const GgufMetadata& m = file.metadata();
  EXPECT_EQ(m.get_string("general.architecture"), "zaya");
  EXPECT_EQ(m.get_u32("general.alignment"), 32u);
  EXPECT_EQ(m.get_u32("zaya.block_count"), 3u);
  EXPECT_EQ(m.get_u32("zaya.embedding_length"), 32u);
  EXPECT_EQ(m.get_u32("zaya.context_length"), 64u);
  EXPECT_EQ(m.get_u32("zaya.attention.head_count"), 4u);
  EXPECT_EQ(m.get_u32("zaya.attention.head_count_kv"), 2u);
  EXPECT_EQ(m.get_u32("zaya.attention.key_length"), 8u);
  EXPECT_EQ(m.get_u32("zaya.rope.dimension_count"), 4u);
  EXPECT_EQ(m.get_float("zaya.rope.freq_base"), 10000.0);
  EXPECT_EQ(m.get_float("zaya.attention.layer_norm_rms_epsilon"), double(1e-5f));
  EXPECT_EQ(m.get_u32("zaya.expert_count"), 4u);
  EXPECT_EQ(m.get_u32("zaya.expert_used_count"), 1u);
  EXPECT_EQ(m.get_u32("zaya.expert_feed_forward_length"), 12u);
  EXPECT_EQ(m.get_u32("zaya.vocab_size"), 96u);
  EXPECT_EQ(m.get_u32("tokenizer.ggml.eos_token_id"), 1u);
}

TEST(GgufZaya, ConfigVariantsRoundTrip) {
  for (int variant = 0; variant < 4; ++variant) {
    ZayaConfig c = test_config();
    if (variant == 3) {  // sliding-window blocks (spec §12): window, pattern and RoPE base as metadata
      c.sliding_window = 3;
      c.sliding_blocks = {0};
      c.sliding_rope_theta = 12345.5;
    }
    if (variant == 0) c.use_skip = false;
    if (variant == 1) {
      c.use_eda = false;
      c.top_k = 2;
      c.partial_rotary_factor = 1.0;
    }
    if (variant == 2) {
      c.kv_heads = 4;
      c.rope_theta = 1e6;
      c.bos_token_id = 7;
    }
    GgufWriter w;
    write_zaya_gguf_metadata(c, {}, w);
    GgufMetadata m("meta");
    for (const auto& kv : w.metadata().entries()) m.add(kv.key, kv.value);
    EXPECT_TRUE(same_config(zaya_config_from_gguf(m), c)) << variant;
    EXPECT_EQ(zaya_config_from_gguf(m).sliding_blocks, c.sliding_blocks) << variant;
    EXPECT_EQ(m.has("zaya.attention.sliding_window"), variant == 3);
    EXPECT_NO_THROW(zaya_gguf_tensor_map(c));
  }
}

TEST(GgufZaya, WriteRejectsIncompleteOrForeignTensors) {
  TempDir dir;
  const ZayaConfig c = test_config();
  auto model = random_model(c, 5);
  std::vector<NamedTensor> tensors;
  for (const ParamEntry& e : model->params().entries())
    tensors.push_back({e.name, e.shape, model->param_data() + e.offset, false});
  for (const ParamEntry& e : model->buffers().entries())
    tensors.push_back({e.name, e.shape, model->buffer_data() + e.offset, true});
  const std::string path = dir.file("w.gguf");

  auto missing = tensors;
  missing.erase(missing.begin() + 3);
  expect_failure([&] { write_zaya_gguf(c, missing, path); }, {"w.gguf", tensors[3].name, "missing"});
  auto wrong = tensors;
  wrong[0].shape = {1, 2};
  expect_failure([&] { write_zaya_gguf(c, wrong, path); }, {"model.embed_tokens.weight", "shape [1, 2]"});
  auto extra = tensors;
  extra.push_back({"model.extra.weight", {1}, model->param_data(), false});
  expect_failure([&] { write_zaya_gguf(c, extra, path); }, {"unexpected tensor 'model.extra.weight'"});
  auto twice = tensors;
  twice.push_back(tensors[1]);
  expect_failure([&] { write_zaya_gguf(c, twice, path); }, {"given twice"});
  GgufSaveOptions q8;
  q8.dtype = "q8";
  expect_failure([&] { write_zaya_gguf(c, tensors, path, q8); }, {"dtype 'q8'"});
  EXPECT_FALSE(std::filesystem::exists(path));

  auto tied = tensors;  // a tied LM head is accepted and not written
  tied.push_back({"lm_head.weight", {c.vocab_size, c.hidden}, model->param_data(), false});
  write_zaya_gguf(c, tied, path);
  EXPECT_FALSE(GgufFile::open(path).has_tensor("output.weight"));
}

// Writes the GGUF of `model` with the metadata and tensor list edited by the callbacks.
void write_edited(const ZayaModel& model, const std::string& path,
                  const std::function<void(GgufWriter&)>& extra_metadata,
                  const std::function<bool(const ZayaGgufTensor&, GgufWriter&)>& replace_tensor) {
  const ZayaConfig& c = model.config();
  GgufWriter w;
  write_zaya_gguf_metadata(c, {}, w);
  extra_metadata(w);
  for (const ZayaGgufTensor& t : zaya_gguf_tensor_map(c)) {
    if (replace_tensor(t, w)) continue;
    std::vector<std::span<const float>> pieces;
    for (const auto& s : t.segments) {
      const ParamEntry* e = model.params().find(s.legacy_name);
      const float* base = e != nullptr ? model.param_data() : model.buffer_data();
      if (e == nullptr) e = &model.buffers().at(s.legacy_name);
      pieces.emplace_back(base + e->offset + s.first, size_t(s.count));
    }
    w.add_f32_pieces(t.name, t.shape, std::move(pieces));
  }
  w.write(path);
}

TEST(GgufZaya, ReadRejectsFilesThatDoNotMatchTheMapping) {
  TempDir dir;
  auto model = random_model(test_config(), 6);
  const std::string path = dir.file("r.gguf");
  auto no_metadata = [](GgufWriter&) {};
  auto keep = [](const ZayaGgufTensor&, GgufWriter&) { return false; };
  const std::vector<float> zeros(100000, 0.0f);

  write_edited(*model, path, no_metadata,
               [](const ZayaGgufTensor& t, GgufWriter&) { return t.name == "blk.1.attn_k.weight"; });
  expect_failure([&] { ZayaGgufFile::open(path); }, {"r.gguf", "tensor 'blk.1.attn_k.weight'", "is missing"});

  write_edited(*model, path, no_metadata, [&](const ZayaGgufTensor& t, GgufWriter& w) {
    if (t.name != "blk.0.attn_k.weight") return false;
    w.add_f32(t.name, {t.shape[1], t.shape[0]}, zeros.data());
    return true;
  });
  expect_failure([&] { ZayaGgufFile::open(path); }, {"'blk.0.attn_k.weight' has shape [32, 16]", "gives [16, 32]"});

  write_edited(*model, path, no_metadata, [&](const ZayaGgufTensor& t, GgufWriter& w) {
    if (t.name != "output_norm.weight") return false;
    w.add_raw(t.name, t.shape, GgmlType::kI32, zeros.data());
    return true;
  });
  expect_failure([&] { ZayaGgufFile::open(path); }, {"'output_norm.weight' has ggml type I32"});

  write_edited(*model, path, no_metadata, [&](const ZayaGgufTensor& t, GgufWriter& w) {
    if (t.name == "output_norm.weight") w.add_f32("output.weight", {4}, zeros.data());
    return false;
  });
  expect_failure([&] { ZayaGgufFile::open(path); }, {"unexpected tensor 'output.weight'"});

  write_edited(
      *model, path, [](GgufWriter& w) { w.set_u32("zaya.extra_key", 1); }, keep);
  EXPECT_NO_THROW(ZayaGgufFile::open(path));  // unknown keys are fine: GGUF metadata is extensible

  // Metadata defects (the writer refuses to set a key twice, so rebuild the metadata by hand).
  auto with_metadata = [&](const std::string& key, const GgufValue& value) {
    GgufWriter w;
    GgufWriter proto;
    write_zaya_gguf_metadata(model->config(), {}, proto);
    for (const auto& kv : proto.metadata().entries()) w.set(kv.key, kv.key == key ? value : kv.value);
    w.write(path);
  };
  with_metadata("general.architecture", GgufValue::string("llama"));
  // A file of another tool: what zaya reads, said plainly.
  expect_failure([&] { ZayaGgufFile::open(path); },
                 {"r.gguf", "a 'llama' model (general.architecture), not a ZAYA model",
                  "zaya reads the GGUF files `zaya ckpt export` writes", "Hugging Face directory"});
  with_metadata("general.architecture", GgufValue::u32(1));
  expect_failure([&] { ZayaGgufFile::open(path); }, {"no general.architecture string", "zaya ckpt export"});
  with_metadata("zaya.tensor_data_layout", GgufValue::string("zaya.cpp-9"));
  expect_failure([&] { ZayaGgufFile::open(path); }, {"zaya.cpp-9", "zaya.tensor_data_layout 'zaya.cpp-1'"});
  with_metadata("zaya.block_count", GgufValue::u32(5000));
  expect_failure([&] { ZayaGgufFile::open(path); }, {"'zaya.block_count' is 5000", "1..1024"});
  with_metadata("zaya.attention.head_count", GgufValue::f32(4));
  expect_failure([&] { ZayaGgufFile::open(path); }, {"'zaya.attention.head_count' is float32 4"});
  with_metadata("zaya.attention.layer_norm_rms_epsilon_f64", GgufValue::f64(1e-3));
  expect_failure([&] { ZayaGgufFile::open(path); }, {"disagree"});
  with_metadata("zaya.rope.dimension_count", GgufValue::u32(6));
  expect_failure([&] { ZayaGgufFile::open(path); }, {"zaya.rope.dimension_count is 6"});
  with_metadata("zaya.expert_used_count", GgufValue::u32(9));
  expect_failure([&] { ZayaGgufFile::open(path); }, {"r.gguf", "moe_router_topk"});
  with_metadata("zaya.router.eda", GgufValue::u8(1));
  expect_failure([&] { ZayaGgufFile::open(path); }, {"'zaya.router.eda' is uint8 1, expected a bool"});
}

// The int8 set of the test config: q, k, v, o, fc1 (rows of 32) and the tied
// embedding; fc2's rows of 12 are no whole Q8_0 blocks and stay BF16.
TEST(GgufZaya, Q8_0ExportHoldsTheInt8SetInBlocks) {
  for (bool tied : {true, false}) {
    TempDir dir;
    ZayaConfig c = test_config();
    c.tie_word_embeddings = tied;
    auto model = random_model(c, 8);
    const std::string path = dir.file("q.gguf");
    GgufSaveOptions options;
    options.dtype = "q8_0";
    save_gguf_model(*model, path, options);

    const ZayaGgufFile file = ZayaGgufFile::open(path);
    const GgufFile& raw = file.gguf();
    EXPECT_TRUE(file.has_q8_0());
    EXPECT_EQ(raw.metadata().get_u32("general.file_type"), 7u);  // LLAMA_FTYPE_MOSTLY_Q8_0
    for (const char* name : {"blk.0.attn_q.weight", "blk.1.attn_k.weight", "blk.2.attn_output.weight",
                             "blk.0.ffn_gate_exps.weight", "blk.2.ffn_up_exps.weight"})
      EXPECT_EQ(raw.tensor(name).type, GgmlType::kQ8_0) << name;
    EXPECT_EQ(raw.tensor("token_embd.weight").type, tied ? GgmlType::kQ8_0 : GgmlType::kBF16);
    if (!tied) {
      EXPECT_EQ(raw.tensor("output.weight").type, GgmlType::kQ8_0);
    }
    EXPECT_EQ(raw.tensor("blk.0.ffn_down_exps.weight").type, GgmlType::kBF16);  // rows of 12
    EXPECT_EQ(raw.tensor("blk.0.attn_norm.weight").type, GgmlType::kF32);
    EXPECT_EQ(raw.tensor("blk.0.attn_conv_dw.weight").type, GgmlType::kF32);  // read as f32 taps by the decoder
    EXPECT_EQ(raw.tensor("blk.0.attn_conv_grp.weight").type, GgmlType::kBF16);
    for (const GgufTensorInfo& t : raw.tensors())
      if (t.name.find("router") != std::string::npos || t.name.find("conv") != std::string::npos) {
        EXPECT_NE(t.type, GgmlType::kQ8_0) << t.name;
      }

    // llama.cpp's reader rules: type id 8, rows of whole 32-blocks, 34 bytes per
    // block, the data section and every tensor aligned, each tensor right after
    // the previous one padded to the alignment.
    EXPECT_EQ(raw.data_offset() % raw.alignment(), 0u);
    uint64_t next = 0;
    for (const GgufTensorInfo& t : raw.tensors()) {
      EXPECT_EQ(t.offset, next) << t.name;
      if (t.type == GgmlType::kQ8_0) {
        EXPECT_EQ(static_cast<uint32_t>(t.type), 8u);
        EXPECT_EQ(t.dims[0] % 32, 0) << t.name;
        EXPECT_EQ(t.nbytes, uint64_t(t.numel) / 32 * 34) << t.name;
      }
      next = (t.offset + t.nbytes + raw.alignment() - 1) / raw.alignment() * raw.alignment();
    }
    EXPECT_EQ(raw.data_offset() + next, std::filesystem::file_size(path));

    // The blocks are exactly quantize_q8_0 of the model's rows (fc1: the gate
    // rows then the up rows of each expert), and read back block for block.
    int checked = 0, experts = 0;
    for (const ParamEntry& e : model->params().entries()) {
      if (!file.is_q8_0(e.name)) continue;
      ++checked;
      experts += e.role == TensorRole::kExpertFc1;
      const int64_t rows = e.shape[0], cols = e.shape[1];
      std::vector<uint8_t> want(size_t(rows * q8_0_row_bytes(cols))), got(want.size());
      for (int64_t r = 0; r < rows; ++r)
        quantize_q8_0(model->param_data() + e.offset + r * cols, cols, want.data() + r * q8_0_row_bytes(cols));
      file.read_legacy_q8_0(e.name, got.data(), e.shape);
      ASSERT_EQ(got, want) << e.name;
      // Read as floats (ckpt import): the dequantized blocks.
      std::vector<float> deq(size_t(e.numel)), f(size_t(e.numel));
      dequantize_q8_0(want.data(), e.numel, deq.data());
      file.read_legacy(e.name, f.data(), e.shape);
      ASSERT_EQ(std::memcmp(f.data(), deq.data(), f.size() * sizeof(float)), 0) << e.name;
    }
    // Per block q, k, two v, o; fc1 of 4 experts in each of 3 blocks; the head.
    EXPECT_EQ(checked, 3 * 5 + 3 * 4 + 1);
    EXPECT_EQ(experts, 3 * 4);
  }
}

// Byte offset of tensor `name`'s info (just past its name) in the file.
size_t tensor_info_at(const std::string& bytes, const std::string& name) {
  std::string key(8, '\0');
  const uint64_t n = name.size();
  std::memcpy(key.data(), &n, 8);
  key += name;
  const size_t at = bytes.find(key);
  EXPECT_NE(at, std::string::npos) << name;
  return at + key.size();
}

TEST(GgufZaya, BadQ8_0FilesAreRefusedNamingFileAndTensor) {
  TempDir dir;
  auto model = random_model(test_config(), 9);
  const std::string good = dir.file("good.gguf"), bad = dir.file("bad.gguf");
  GgufSaveOptions options;
  options.dtype = "q8_0";
  save_gguf_model(*model, good, options);
  const std::string bytes = testing::read_file(good);
  const GgufFile raw = GgufFile::open(good);

  // Truncated inside a Q8_0 tensor: the last Q8_0 tensor of the file.
  const GgufTensorInfo* last = nullptr;
  for (const GgufTensorInfo& t : raw.tensors())
    if (t.type == GgmlType::kQ8_0) last = &t;
  ASSERT_NE(last, nullptr);
  testing::write_file(bad, bytes.substr(0, raw.data_offset() + last->offset + last->nbytes - 17));
  expect_failure([&] { ZayaGgufFile::open(bad); },
                 {"bad.gguf", "tensor '" + last->name + "'", "Q8_0", "truncated file?"});

  // More blocks than the data holds: blk.0.attn_q.weight claims twice its rows and runs into the next tensor.
  {
    std::string b = bytes;
    const size_t at = tensor_info_at(b, "blk.0.attn_q.weight");
    uint64_t rows;
    std::memcpy(&rows, b.data() + at + 4 + 8, 8);
    rows *= 2;
    std::memcpy(b.data() + at + 4 + 8, &rows, 8);
    testing::write_file(bad, b);
    expect_failure([&] { ZayaGgufFile::open(bad); }, {"bad.gguf", "'blk.0.attn_q.weight'", "overlap"});
  }
  // Rows that are no whole blocks (33 elements): ggml's block rule.
  {
    std::string b = bytes;
    const size_t at = tensor_info_at(b, "blk.1.attn_k.weight");
    const uint64_t cols = 33;
    std::memcpy(b.data() + at + 4, &cols, 8);
    testing::write_file(bad, b);
    expect_failure([&] { ZayaGgufFile::open(bad); },
                   {"bad.gguf", "tensor 'blk.1.attn_k.weight'", "Q8_0", "not a multiple of 32"});
  }
  // Whole blocks, but another shape than the config's (rows of 64: two blocks where the config has one).
  auto keep_metadata = [](GgufWriter&) {};
  std::vector<float> zeros(100000, 0.0f);
  write_edited(*model, bad, keep_metadata, [&](const ZayaGgufTensor& t, GgufWriter& w) {
    if (t.name != "blk.0.attn_q.weight") return false;
    w.add_f32(t.name, {t.shape[0], 64}, zeros.data(), GgmlType::kQ8_0);
    return true;
  });
  expect_failure([&] { ZayaGgufFile::open(bad); }, {"bad.gguf", "'blk.0.attn_q.weight' has shape [32, 64]"});
  // Q8_0 where the set has none (a router matrix).
  write_edited(*model, bad, keep_metadata, [&](const ZayaGgufTensor& t, GgufWriter& w) {
    if (t.name != "blk.0.ffn_router_down.weight") return false;
    w.add_f32(t.name, t.shape, zeros.data(), GgmlType::kQ8_0);
    return true;
  });
  expect_failure([&] { ZayaGgufFile::open(bad); },
                 {"bad.gguf", "'blk.0.ffn_router_down.weight' has ggml type Q8_0", "not one of the int8 matrices"});
}

TEST(GgufZaya, LoadIntoAModelOfAnotherConfigFails) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  save_gguf_model(*random_model(test_config(), 7), path);
  ZayaConfig other = test_config();
  other.router_hidden = 8;
  ZayaModel model(other);
  expect_failure([&] { load_gguf_weights(model, path); }, {"m.gguf", "config differs"});
}

}  // namespace
}  // namespace zaya
