// Loading inference weights: dtype conversions, memory-mapped bf16 used in
// place, and every kind of bad input (missing or unexpected tensor, wrong
// shape or dtype, unknown config key, a tokenizer that does not fit) failing
// with a message that names it. Also the Gemma 3 vocabulary layout: a
// tokenizer smaller than the padded embedding, padding ids never sampled.
#include "zaya/infer/infer_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "zaya/data/test_util.h"
#include "zaya/data/tokenizer_gguf.h"
#include "zaya/formats/gguf_zaya.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/formats/hf_config.h"
#include "zaya/infer/engine.h"
#include "zaya/infer/generator.h"
#include "zaya/infer/test_util.h"
#include "zaya/infer/text.h"
#include "zaya/io/gguf_writer.h"
#include "zaya/io/safetensors_dir.h"

namespace zaya {
namespace {

// Writes `model` as model.safetensors + config.json, letting `edit` change a
// tensor: return false to drop it; it may change the name, shape or dtype.
struct TensorEdit {
  std::string name;
  std::vector<int64_t> shape;
  bool as_i32 = false;
};
void write_model(const ZayaModel& model, const std::string& dir, const std::function<bool(TensorEdit&)>& edit,
                 std::vector<std::vector<int32_t>>& keep_alive) {
  std::filesystem::create_directories(dir);
  SafetensorsWriter w;
  auto add = [&](const ParamEntry& e, const float* src) {
    TensorEdit t{e.name, e.shape};
    if (!edit(t)) return;
    if (t.as_i32) {
      keep_alive.emplace_back(e.numel, 1);
      w.add_i32(t.name, t.shape, keep_alive.back().data());
    } else {
      int64_t n = 1;
      for (int64_t s : t.shape) n *= s;
      ASSERT_LE(n, e.numel);
      w.add_bf16(t.name, t.shape, src);
    }
  };
  for (const ParamEntry& e : model.params().entries()) add(e, model.param_data() + e.offset);
  for (const ParamEntry& e : model.buffers().entries()) add(e, model.buffer_data() + e.offset);
  w.write(dir + "/model.safetensors");
  std::ofstream(dir + "/config.json") << config_to_hf_json(model.config(), "bfloat16").dump(2);
}

std::string load_error(const std::string& dir) {
  return testing::error_of([&] { InferModel::load(dir); });
}

// Bytes of every weight matrix (not the float32 vectors).
int64_t matrix_bytes(const InferModel& m) {
  const InferWeights& w = m.weights();
  int64_t n = w.embed.bytes();
  for (const auto& a : w.attn)
    n += a.q.bytes() + a.k.bytes() + a.v_cur.bytes() + a.v_prev.bytes() + a.conv_b.bytes() + a.o.bytes();
  for (const auto& mo : w.moe) {
    n += mo.down.bytes() + mo.mlp0.bytes() + mo.mlp2.bytes() + mo.mlp4.bytes();
    for (size_t e = 0; e < mo.fc1.size(); ++e) n += mo.fc1[e].bytes() + mo.fc2[e].bytes();
  }
  return n;
}

TEST(InferModel, DtypeOptions) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 41);
  testing::TempDir dir;
  HfSaveOptions save;
  save.dtype = "bf16";
  save_hf_model(*model, dir.path(), save);
  InferLoadOptions in_place;
  in_place.huge_pages = false;
  auto as_stored = InferModel::load(dir.path(), in_place);
  EXPECT_EQ(as_stored->matrix_dtype(), "bf16");
  // Everything but the repacked grouped conv is used in place from the mapping.
  int64_t conv = 0;
  for (const auto& a : as_stored->weights().attn) conv += a.conv_b.bytes();
  EXPECT_EQ(as_stored->mapped_bytes(), matrix_bytes(*as_stored) - conv);
  InferLoadOptions f32;
  f32.dtype = "f32";
  auto widened = InferModel::load(dir.path(), f32);
  EXPECT_EQ(widened->matrix_dtype(), "f32");
  EXPECT_EQ(widened->mapped_matrices(), 0);
  EXPECT_EQ(matrix_bytes(*widened), 2 * matrix_bytes(*as_stored));
  auto from_memory = InferModel::from_model(*model, "bf16");
  EXPECT_EQ(from_memory->matrix_dtype(), "bf16");
  EXPECT_EQ(from_memory->weight_bytes().total, as_stored->weight_bytes().total);
  EXPECT_EQ(InferModel::from_model(*model)->matrix_dtype(), "f32");
  testing::expect_error([&] { InferModel::from_model(*model, "nf4"); },
                        "dtype 'nf4' is invalid; allowed: auto, bf16, f32");
  InferLoadOptions bad;
  bad.dtype = "int4";
  testing::expect_error([&] { InferModel::load(dir.path(), bad); }, "--dtype 'int4' is invalid");
}

// A ZayaModel of `storage` and expert type holding `source`'s values (rounded where it holds bf16 or packed
// rows), and a plain float32 model holding exactly the values it holds.
struct HeldAndWidened {
  std::unique_ptr<ZayaModel> held, widened;
};
HeldAndWidened held_and_widened(const ZayaModel& source, ParamStorage storage, WeightType experts) {
  const ZayaConfig& c = source.config();
  HeldAndWidened r{std::make_unique<ZayaModel>(c, ExpertRange{}, storage, experts), std::make_unique<ZayaModel>(c)};
  std::vector<float> v;
  for (const ParamEntry& e : source.params().entries()) {
    v.assign(source.param_data() + e.offset, source.param_data() + e.offset + e.numel);
    r.held->set_param(e, v.data());
    r.held->read_param(e, v.data());
    r.widened->set_param(e, v.data());
  }
  const size_t buffer_bytes = sizeof(float) * size_t(source.buffers().total_floats());
  std::memcpy(r.held->buffer_data(), source.buffer_data(), buffer_bytes);
  std::memcpy(r.widened->buffer_data(), source.buffer_data(), buffer_bytes);
  return r;
}

// [S, V] logits of one prefill of `ids` by the cached decoder.
std::vector<float> prefill_logits(const InferModel& im, const std::vector<int32_t>& ids) {
  EngineOptions o;
  o.max_context = 64;
  InferenceEngine engine(im, o);
  StepChunk all{0, ids.data(), int64_t(ids.size()), LogitsWanted::kAll};
  engine.step({&all, 1});
  return testing::step_logits(engine);
}

// The decoder over a frozen LoRA base (`zaya rl` with LoRA builds one every
// rollout): the matrices such a base holds only as bf16 or as packed expert
// rows (model/frozen_base.h) have float32 views without memory, so the
// builder reads the bf16 values or rows themselves, in place, and widens them
// exactly under dtype f32: the logits are those of a float32 model holding
// the same values, bit for bit.
TEST(InferModel, FrozenLoraBaseIsReadAsHeld) {
  ZayaConfig c = testing::small_test_config();
  c.expert_ffn = 64;  // MXFP4 rows are groups of 32
  auto source = testing::random_model(c, 43);
  const std::vector<int32_t> ids = testing::random_tokens(12, c.real_vocab_size, 3);
  struct Case {
    ParamStorage storage;
    WeightType experts;
    const char* held_dtype;  // matrix_dtype() of the decoder read as held
  };
  for (const Case& k : {Case{ParamStorage::kFrozenBf16, WeightType::kF32, "mixed"},
                        Case{ParamStorage::kF32, WeightType::kMXFP4, "mxfp4-experts+f32"},
                        Case{ParamStorage::kFrozenBf16, WeightType::kFP8, "fp8-experts+mixed"}}) {
    SCOPED_TRACE(std::string(k.held_dtype));
    const HeldAndWidened m = held_and_widened(*source, k.storage, k.experts);
    const std::vector<float> want = prefill_logits(*InferModel::from_model(*m.widened, "f32"), ids);
    EXPECT_TRUE(testing::same_bits(prefill_logits(*InferModel::from_model(*m.held, "f32"), ids), want));
    const auto as_held = InferModel::from_model(*m.held, "auto");
    EXPECT_EQ(as_held->matrix_dtype(), k.held_dtype);
    const std::vector<float> got = prefill_logits(*as_held, ids);
    // bf16 matrices: the same values, another kernel's summation order; packed experts: int8-rounded activations
    // (measured on this model: 3.1e-5 for the bf16 base; the bounds leave room for other compilers).
    const double bound = k.experts == WeightType::kF32 ? 1e-4 : 3e-2;
    EXPECT_LT(testing::logits_error(got.data(), want.data(), int64_t(ids.size()), c.vocab_size, c.real_vocab_size),
              bound);
  }
}

TEST(InferModel, BadCheckpointsNameTheProblem) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 42);
  std::vector<std::vector<int32_t>> keep;
  const std::string q = "model.layers.2.self_attn.qkv.linear_q.weight";
  {
    testing::TempDir dir;
    write_model(
        *model, dir.path(), [&](TensorEdit& t) { return t.name != q; }, keep);
    const std::string e = load_error(dir.path());
    EXPECT_NE(e.find("missing tensor '" + q + "'"), std::string::npos) << e;
  }
  {
    testing::TempDir dir;
    write_model(
        *model, dir.path(),
        [&](TensorEdit& t) {
          if (t.name == q) t.shape = {t.shape[0] - 1, t.shape[1]};
          return true;
        },
        keep);
    const std::string e = load_error(dir.path());
    EXPECT_NE(e.find("tensor '" + q + "': expected shape [64, 64], found [63, 64]"), std::string::npos) << e;
  }
  {
    testing::TempDir dir;
    write_model(
        *model, dir.path(),
        [&](TensorEdit& t) {
          t.as_i32 = t.name == q;
          return true;
        },
        keep);
    const std::string e = load_error(dir.path());
    EXPECT_NE(e.find("'" + q + "' has dtype I32; weight matrices must be BF16, F32, F16 or F64"), std::string::npos)
        << e;
  }
  {
    testing::TempDir dir;
    const std::string norm = "model.layers.1.input_norm.weight";
    write_model(
        *model, dir.path(),
        [&](TensorEdit& t) {
          t.as_i32 = t.name == norm;
          return true;
        },
        keep);
    const std::string e = load_error(dir.path());
    EXPECT_NE(e.find("'" + norm + "' has dtype I32"), std::string::npos) << e;
  }
  {
    testing::TempDir dir;
    write_model(
        *model, dir.path(),
        [&](TensorEdit& t) {
          if (t.name == q) t.name = "model.layers.2.self_attn.qkv.linear_qq.weight";
          return true;
        },
        keep);
    const std::string e = load_error(dir.path());
    EXPECT_NE(e.find("missing tensor '" + q + "'"), std::string::npos) << e;
  }
  {
    // A config.json that does not describe the weights (one expert fewer).
    ZayaConfig fewer = c;
    fewer.experts = c.experts - 1;
    testing::TempDir dir;
    write_model(
        *model, dir.path(), [](TensorEdit&) { return true; }, keep);
    nlohmann::json j = config_to_hf_json(fewer, "bfloat16");
    std::ofstream(dir.file("config.json")) << j.dump();
    const std::string e = load_error(dir.path());
    EXPECT_NE(e.find("expected shape"), std::string::npos) << e;  // the router's slot count differs first
  }
  {
    testing::TempDir dir;
    write_model(
        *model, dir.path(), [](TensorEdit&) { return true; }, keep);
    nlohmann::json j = config_to_hf_json(c, "bfloat16");
    j["hiden_size"] = 64;
    std::ofstream(dir.file("config.json")) << j.dump();
    const std::string e = load_error(dir.path());
    EXPECT_NE(e.find("unknown config key \"hiden_size\""), std::string::npos) << e;
  }
  {
    // A tied lm_head.weight is accepted (spec §6.1); any other stray tensor is not.
    testing::TempDir dir;
    write_model(
        *model, dir.path(),
        [](TensorEdit& t) {
          if (t.name == "model.final_norm.weight") t.name = "lm_head.weight";
          return true;
        },
        keep);
    EXPECT_NE(load_error(dir.path()).find("missing tensor 'model.final_norm.weight'"), std::string::npos);
  }
}

TEST(InferModel, StrayTensorIsRejected) {
  const ZayaConfig c = testing::small_test_config();
  auto model = testing::random_model(c, 43);
  testing::TempDir dir;
  save_hf_model(*model, dir.path());
  // Append a stray tensor by rewriting the file with one more entry.
  SafetensorsWriter w;
  for (const ParamEntry& e : model->params().entries()) w.add_f32(e.name, e.shape, model->param_data() + e.offset);
  for (const ParamEntry& e : model->buffers().entries()) w.add_f32(e.name, e.shape, model->buffer_data() + e.offset);
  const float one = 1;
  w.add_f32("model.layers.0.self_attn.rotary_emb.inv_freq", {1}, &one);
  w.write(dir.file("model.safetensors"));
  const std::string e = load_error(dir.path());
  EXPECT_NE(e.find("unexpected tensor 'model.layers.0.self_attn.rotary_emb.inv_freq'"), std::string::npos) << e;
}

// The GGUF files `zaya ckpt export` writes: the same weights as the model they
// came from (f32: bit for bit, so the same greedy tokens), bf16 files kept in
// bf16, the embedded tokenizer found through tokenizer_hint(); a GGUF file of
// another architecture, or a file that is no GGUF, refused saying what is read.
TEST(InferModel, LoadsTheGgufFilesZayaWrites) {
  ZayaConfig c = testing::small_test_config();
  c.vocab_size = 416;  // room for the 400-piece test tokenizer
  c.real_vocab_size = 400;
  auto model = testing::random_model(c, 45);
  testing::TempDir dir;
  const std::string path = dir.file("m.gguf");
  save_gguf_model(*model, path);
  auto g = InferModel::open(path);
  EXPECT_EQ(g->source(), path);
  EXPECT_EQ(g->matrix_dtype(), "f32");
  EXPECT_EQ(g->tokenizer_hint(), path);  // none embedded, none beside: the file (whose loader says so)
  testing::expect_error([&] { Tokenizer::load(g->tokenizer_hint()); },
                        "m.gguf: the GGUF file embeds no tokenizer (zaya.tokenizer.sentencepiece_model); pass "
                        "--tokenizer FILE, put tokenizer.model beside it");
  EXPECT_FALSE(load_tokenizer_if_present(path, "", g->tokenizer_hint()).has_value());  // eval of token ids needs none
  std::filesystem::copy_file(testing::small_tokenizer_path(), dir.file("tokenizer.model"));
  EXPECT_EQ(InferModel::open(path)->tokenizer_hint(), dir.file("tokenizer.model"));  // the one beside it
  EXPECT_TRUE(load_tokenizer_if_present(path, "", InferModel::open(path)->tokenizer_hint()).has_value());
  EXPECT_EQ(config_to_hf_json(g->config(), "float32"), config_to_hf_json(c, "float32"));
  auto mem = InferModel::from_model(*model, "f32");
  auto same = [](const WeightMatrix& a, const WeightMatrix& b) {
    return a.type == b.type && a.rows == b.rows && a.cols == b.cols && std::memcmp(a.data, b.data, a.bytes()) == 0;
  };
  EXPECT_TRUE(same(g->weights().embed, mem->weights().embed));
  for (size_t i = 0; i < size_t(c.num_blocks); ++i) {
    EXPECT_TRUE(same(g->weights().attn[i].q, mem->weights().attn[i].q));
    EXPECT_TRUE(same(g->weights().attn[i].conv_b, mem->weights().attn[i].conv_b));
    EXPECT_TRUE(same(g->weights().moe[i].mlp4, mem->weights().moe[i].mlp4));
    for (size_t e = 0; e < size_t(c.experts); ++e) {
      EXPECT_TRUE(same(g->weights().moe[i].fc1[e], mem->weights().moe[i].fc1[e]));
      EXPECT_TRUE(same(g->weights().moe[i].fc2[e], mem->weights().moe[i].fc2[e]));
    }
    EXPECT_EQ(std::memcmp(g->weights().moe[i].balancing_bias_N, mem->weights().moe[i].balancing_bias_N,
                          sizeof(float) * c.router_slots()),
              0);
  }
  GenerationRequest r;
  r.prompt = {2, 17, 99, 250};
  r.max_new_tokens = 12;
  r.sampling.temperature = 0;
  EXPECT_EQ(generate(*g, {r}, {})[0].tokens, generate(*mem, {r}, {})[0].tokens);

  // bf16 files stay bf16 (unless asked otherwise).
  GgufSaveOptions bf16;
  bf16.dtype = "bf16";
  // The tokenizer embedded: the file itself is the tokenizer.
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  bf16.extra_metadata = gguf_vocab_metadata(tokenizer_gguf_vocab(tok, c.vocab_size));
  save_gguf_model(*model, dir.file("m16.gguf"), bf16);
  auto g16 = InferModel::open(dir.file("m16.gguf"));
  EXPECT_EQ(g16->matrix_dtype(), "bf16");
  EXPECT_EQ(g16->tokenizer_hint(), dir.file("m16.gguf"));
  EXPECT_EQ(default_tokenizer_path(dir.file("m16.gguf"), "", g16->tokenizer_hint()), dir.file("m16.gguf"));
  EXPECT_EQ(default_tokenizer_path(dir.file("m16.gguf"), "given.model", g16->tokenizer_hint()), "given.model");
  const Tokenizer back = Tokenizer::load(g16->tokenizer_hint());
  EXPECT_EQ(check_tokenizer(back, g16->config(), "m16.gguf"), 400);
  EXPECT_EQ(back.encode("In the beginning"), tok.encode("In the beginning"));
  InferLoadOptions f32;
  f32.dtype = "f32";
  EXPECT_EQ(InferModel::open(dir.file("m16.gguf"), f32)->matrix_dtype(), "f32");

  // Not ours.
  GgufWriter other;
  other.set_string("general.architecture", "llama");
  const float x[4] = {1, 2, 3, 4};
  other.add_f32("token_embd.weight", {2, 2}, x);
  other.write(dir.file("llama.gguf"));
  testing::expect_error([&] { InferModel::open(dir.file("llama.gguf")); },
                        "llama.gguf: a 'llama' model (general.architecture), not a ZAYA model; zaya reads the GGUF "
                        "files `zaya ckpt export` writes");
  testing::write_file(dir.file("notes.txt"), "hello");
  testing::expect_error([&] { InferModel::open(dir.file("notes.txt")); }, "notes.txt: a file, but not a GGUF file");
}

// A Q8_0 export (`zaya ckpt export --dtype q8_0`) loads as int8 without
// widening: its blocks are the bytes `--dtype int8` makes from the same
// weights, so the matrices, the logits and the greedy tokens are identical;
// `--dtype f32` on it dequantizes.
TEST(InferModel, Q8_0GgufEqualsLoadTimeInt8) {
  for (bool tied : {true, false}) {
    ZayaConfig c = testing::small_test_config();
    c.tie_word_embeddings = tied;
    auto model = testing::random_model(c, 46);
    testing::TempDir dir;
    const std::string path = dir.file("q.gguf");
    GgufSaveOptions q8;
    q8.dtype = "q8_0";
    save_gguf_model(*model, path, q8);
    auto g = InferModel::open(path);
    auto mem = InferModel::from_model(*model, "int8");
    EXPECT_EQ(g->matrix_dtype(), "int8+bf16");
    EXPECT_EQ(mem->matrix_dtype(), "int8+bf16");
    auto same = [](const WeightMatrix& a, const WeightMatrix& b) {
      return a.type == b.type && a.rows == b.rows && a.cols == b.cols && std::memcmp(a.data, b.data, a.bytes()) == 0;
    };
    const InferWeights& gw = g->weights();
    EXPECT_EQ(gw.lm_head.type, WeightType::kI8);
    EXPECT_EQ(gw.embed.type, tied ? WeightType::kI8 : WeightType::kBF16);
    EXPECT_TRUE(same(gw.embed, mem->weights().embed));
    EXPECT_TRUE(same(gw.lm_head, mem->weights().lm_head));
    for (size_t i = 0; i < size_t(c.num_blocks); ++i) {
      const InferAttention &a = gw.attn[i], &b = mem->weights().attn[i];
      EXPECT_EQ(a.q.type, WeightType::kI8);
      EXPECT_TRUE(same(a.q, b.q) && same(a.k, b.k) && same(a.v_cur, b.v_cur) && same(a.v_prev, b.v_prev) &&
                  same(a.o, b.o) && same(a.conv_b, b.conv_b))
          << i;
      EXPECT_TRUE(same(gw.moe[i].down, mem->weights().moe[i].down));
      EXPECT_EQ(gw.moe[i].down.type, WeightType::kBF16);
      for (size_t e = 0; e < size_t(c.experts); ++e) {
        EXPECT_EQ(gw.moe[i].fc1[e].type, WeightType::kI8);
        EXPECT_EQ(gw.moe[i].fc2[e].type, WeightType::kBF16);  // rows of 48: no whole Q8_0 blocks
        EXPECT_TRUE(same(gw.moe[i].fc1[e], mem->weights().moe[i].fc1[e]));
        EXPECT_TRUE(same(gw.moe[i].fc2[e], mem->weights().moe[i].fc2[e]));
      }
    }
    EXPECT_EQ(g->weight_bytes().total, mem->weight_bytes().total);
    GenerationRequest r;
    r.prompt = {2, 17, 99, 250};
    r.max_new_tokens = 12;
    r.sampling.temperature = 0;
    EXPECT_EQ(generate(*g, {r}, {})[0].tokens, generate(*mem, {r}, {})[0].tokens);
    // Token-by-token decode: the logits bit for bit.
    auto decode_logits = [&](const InferModel& m) {
      EngineOptions o;
      o.max_context = 32;
      InferenceEngine engine(m, o);
      const std::vector<int32_t> ids = {2, 17, 99, 250, 5, 7, 11};
      std::vector<float> out(ids.size() * size_t(c.vocab_size));
      engine.reset(0);
      for (size_t t = 0; t < ids.size(); ++t) {
        StepChunk one{0, ids.data() + t, 1, LogitsWanted::kLast};
        engine.step({&one, 1});
        engine.logits(0, 1, out.data() + t * size_t(c.vocab_size));
      }
      return out;
    };
    EXPECT_EQ(decode_logits(*g), decode_logits(*mem));

    InferLoadOptions f32;
    f32.dtype = "f32";
    auto wide = InferModel::open(path, f32);
    EXPECT_EQ(wide->matrix_dtype(), "f32");
    std::vector<float> row(size_t(c.hidden)), want(size_t(c.hidden));
    wide->weights().attn[1].q.row_f32(3, row.data());
    gw.attn[1].q.row_f32(3, want.data());
    EXPECT_EQ(row, want);
  }
}

// Gemma 3's layout: the tokenizer (pad 0, eos 1, bos 2, unk 3, byte fallback)
// has fewer pieces than the padded embedding, and config.json has no
// zaya_real_vocab_size (as ZAYA1-base's: 262,144 pieces, 262,272 rows).
TEST(Tokenizer, GemmaLayoutPaddedVocabulary) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.bos_id(), 2);
  ZayaConfig c = testing::small_test_config();
  c.vocab_size = 512;  // 400 pieces padded to a multiple of 128
  c.real_vocab_size = 512;
  auto model = testing::random_model(c, 44);
  float* embed = model->param_data() + model->params().at("model.embed_tokens.weight").offset;
  for (int64_t v = tok.vocab_size(); v < c.vocab_size; ++v)
    for (int64_t i = 0; i < c.hidden; ++i) embed[v * c.hidden + i] = 30.0f;
  testing::TempDir dir;
  save_hf_model(*model, dir.path());
  nlohmann::json j;
  std::ifstream(dir.file("config.json")) >> j;
  j.erase("zaya_real_vocab_size");
  std::ofstream(dir.file("config.json")) << j.dump(2);
  auto im = InferModel::load(dir.path());
  EXPECT_EQ(im->config().real_vocab_size, 512);
  const int64_t sample_vocab = check_tokenizer(tok, im->config(), dir.path());
  EXPECT_EQ(sample_vocab, 400);
  GenerationRequest r;
  r.prompt = {tok.bos_id()};
  for (int32_t id : tok.encode("In the beginning")) r.prompt.push_back(id);
  r.max_new_tokens = 30;
  r.sampling.temperature = 1.5;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1;
  GeneratorOptions o;
  o.sample_vocab = sample_vocab;
  const auto out = generate(*im, {r}, o)[0].tokens;
  ASSERT_EQ(out.size(), 30u);
  for (int32_t id : out) EXPECT_LT(id, 400);
  EXPECT_NO_THROW(tok.decode(out));
}

TEST(Tokenizer, MismatchIsAnError) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());  // 400 pieces, bos 2
  ZayaConfig c = testing::small_test_config();                       // 320 rows
  EXPECT_NE(testing::error_of([&] { check_tokenizer(tok, c, "m"); }).find("has 400 pieces but model m has only 320"),
            std::string::npos);
  c.vocab_size = 512;
  c.real_vocab_size = 512;
  c.bos_token_id = 5;
  EXPECT_NE(
      testing::error_of([&] { check_tokenizer(tok, c, "m"); }).find("BOS id 2 but model m expects bos_token_id 5"),
      std::string::npos);
}

TEST(TextStream, HoldsBackIncompleteCharacters) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const std::string text = "caf\xc3\xa9 \xe2\x98\x83 snow";  // characters spelled in byte pieces
  const std::vector<int32_t> ids = tok.encode(text);
  TextStream s(tok);
  std::string shown;
  for (int32_t id : ids) {
    const std::string add = s.push(id);
    shown += add;
    // Never a partial UTF-8 sequence or a replacement character on screen.
    EXPECT_EQ(shown.find("\xEF\xBF\xBD"), std::string::npos);
  }
  shown += s.flush();
  EXPECT_EQ(shown, text);
}

}  // namespace
}  // namespace zaya
