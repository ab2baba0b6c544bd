// `zaya ckpt export` / `inspect` inputs and outputs: a checkpoint, a model
// directory (legacy or native layout) and a checkpoints root (its newest
// checkpoint that reads completely, walking back past a damaged one); the
// format from the output's name; an existing output refused without --force
// and replaced in one step with it; the tokenizer copied, embedded, or its
// absence reported; general.name from the run; what inspect shows of a model
// directory.
#include "zaya/train/model_export.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "zaya/ckpt/checkpoint_model.h"
#include "zaya/ckpt/writer.h"
#include "zaya/data/test_util.h"
#include "zaya/data/tokenizer.h"
#include "zaya/dist/comm.h"
#include "zaya/formats/gguf_zaya.h"
#include "zaya/formats/hf_checkpoint.h"
#include "zaya/formats/hf_config.h"
#include "zaya/formats/model_directory.h"
#include "zaya/io/gguf.h"
#include "zaya/io/safetensors_writer.h"
#include "zaya/model/tensor_table.h"
#include "zaya/train/train_config.h"

namespace zaya {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::TempDir;

// The tiny preset, 2 blocks, with the vocabulary of the 400-piece test tokenizer padded to 416 rows.
ZayaConfig small_config() {
  ZayaConfig c = preset_config("tiny");
  c.num_blocks = 2;
  c.vocab_size = 416;
  c.real_vocab_size = 400;
  return c;
}

std::unique_ptr<ZayaModel> model_with_seed(uint64_t seed) {
  auto m = std::make_unique<ZayaModel>(small_config());
  m->init(seed);
  return m;
}

// ROOT/step_XXXXXXXX holding `model`'s weights, written as the trainer does,
// by a run whose out_dir is `out_dir` and whose data used `tokenizer`.
std::string save_checkpoint(const std::string& root, const ZayaModel& model, int64_t step, const std::string& out_dir,
                            const std::string& tokenizer) {
  auto self = make_self_comm();
  CheckpointWriter w(*self, root, "run", 1, 1, {});
  std::vector<SnapshotTensor> tensors;
  for (const ParamTable* t : {&model.params(), &model.buffers()})
    for (const ParamEntry& e : t->entries())
      tensors.push_back({e.name, CkptDType::kF32, e.shape,
                         (t == &model.params() ? model.param_data() : model.buffer_data()) + e.offset});
  TrainConfig config;
  config.model_preset = "tiny";
  config.model = model.config();
  config.vocab_from_tokenizer = false;
  config.run.out_dir = out_dir;
  config.data.dir = "data";
  config.data.tokenizer = tokenizer;
  CheckpointMeta header;
  header.state = {{"step", step}};
  header.config_toml = train_config_to_toml(config);
  header.model_config = checkpoint_model_json(model.config());
  header.tokenizer = tokenizer;
  w.save(step, tensors, header, false);
  w.finish();
  return (fs::path(root) / checkpoint_dir_name(step)).string();
}

// Flips a byte in the middle of a checkpoint's first shard: the checksums catch it.
void damage(const std::string& step_dir) {
  const CheckpointReader ck = CheckpointReader::open(step_dir);
  const std::string file = step_dir + "/" + ck.meta().files[0].name;
  std::string bytes = testing::read_file(file);
  bytes[bytes.size() / 2] ^= 0x5A;
  testing::write_file(file, bytes);
}

bool same_weights(const ZayaModel& a, const ZayaModel& b) {
  return a.params().total_floats() == b.params().total_floats() &&
         std::memcmp(a.param_data(), b.param_data(), sizeof(float) * a.params().total_floats()) == 0 &&
         std::memcmp(a.buffer_data(), b.buffer_data(), sizeof(float) * a.buffers().total_floats()) == 0;
}

TEST(CkptExport, FormatFollowsTheName) {
  EXPECT_EQ(resolve_export_format("out/model.gguf", "auto"), ExportFormat::kGguf);
  EXPECT_EQ(resolve_export_format("out/MODEL.GGUF", "auto"), ExportFormat::kGguf);
  EXPECT_EQ(resolve_export_format("out/hf", "auto"), ExportFormat::kSafetensors);
  EXPECT_EQ(resolve_export_format("out/hf/", "auto"), ExportFormat::kSafetensors);
  EXPECT_EQ(resolve_export_format("out/model.bin", "gguf"), ExportFormat::kGguf);  // an explicit gguf, any name
  EXPECT_EQ(resolve_export_format("out/hf", "safetensors"), ExportFormat::kSafetensors);
  expect_error([] { resolve_export_format("out/model.gguf", "safetensors"); },
               "--format safetensors writes a directory, but --out out/model.gguf is named like a GGUF file");
  expect_error([] { resolve_export_format("x", "onnx"); }, "--format 'onnx' is invalid; allowed: auto, safetensors");
}

TEST(CkptExport, AnExistingOutputNeedsForce) {
  TempDir dir;
  EXPECT_FALSE(check_export_target(dir.file("new"), ExportFormat::kSafetensors, false));
  EXPECT_FALSE(check_export_target(dir.file("new.gguf"), ExportFormat::kGguf, false));
  fs::create_directories(dir.file("empty"));
  EXPECT_FALSE(
      check_export_target(dir.file("empty"), ExportFormat::kSafetensors, false));  // an empty directory to fill
  expect_error([&] { check_export_target(dir.file("empty"), ExportFormat::kGguf, false); },
               "exists (an empty directory; a GGUF export is one file); pass --force");
  fs::create_directories(dir.file("hf"));
  dir.write("hf/config.json", "{}");
  dir.write("hf/model.safetensors", "x");
  expect_error([&] { check_export_target(dir.file("hf"), ExportFormat::kSafetensors, false); },
               "/hf exists (a directory with 2 entries); pass --force to replace it");
  EXPECT_TRUE(check_export_target(dir.file("hf"), ExportFormat::kSafetensors, true));
  dir.write("m.gguf", "12345");
  expect_error([&] { check_export_target(dir.file("m.gguf"), ExportFormat::kGguf, false); },
               "exists (a file of 5 bytes)");
  EXPECT_TRUE(check_export_target(dir.file("m.gguf"), ExportFormat::kGguf, true));
  // --force replaces what an export writes, never a directory holding anything else.
  dir.write("hf/notes.txt", "mine");
  expect_error([&] { check_export_target(dir.file("hf"), ExportFormat::kSafetensors, true); },
               "holds 'notes.txt', which no model export writes; not replacing it even with --force");
}

TEST(CkptExport, FromACheckpointsRootWalksBackPastADamagedCheckpoint) {
  TempDir dir;
  const std::string tok = testing::small_tokenizer_path();
  const std::string root = dir.file("runs/kjv-tiny/checkpoints");
  auto a = model_with_seed(1), b = model_with_seed(2);
  const std::string out_dir = dir.file("runs/kjv-tiny");
  const std::string step5 = save_checkpoint(root, *a, 5, out_dir, tok);
  const std::string step10 = save_checkpoint(root, *b, 10, out_dir, tok);

  ModelSource s = resolve_model_source(root);
  EXPECT_EQ(s.dir, step10);  // the newest, intact
  EXPECT_TRUE(s.skipped.empty());
  damage(step10);
  s = resolve_model_source(root);
  EXPECT_EQ(s.kind, ModelSource::Kind::kCheckpoint);
  EXPECT_EQ(s.root, root);
  EXPECT_EQ(s.dir, step5);
  ASSERT_EQ(s.skipped.size(), 1u);
  EXPECT_NE(s.skipped[0].find(step10), std::string::npos) << s.skipped[0];
  EXPECT_NE(s.skipped[0].find("checksum mismatch"), std::string::npos) << s.skipped[0];
  EXPECT_EQ(resolve_model_source(step5).dir, step5);  // a step directory as given
  EXPECT_TRUE(resolve_model_source(step5).root.empty());

  // Safetensors from the root: step 5's weights, with the recorded tokenizer.
  const std::string hf = dir.file("export/hf");
  const ExportReport r = export_model(root, hf, {});
  EXPECT_EQ(r.format, ExportFormat::kSafetensors);
  EXPECT_EQ(r.step, 5);
  EXPECT_EQ(r.source.dir, step5);
  EXPECT_EQ(r.source.skipped.size(), 1u);
  EXPECT_EQ(r.tokenizer, tok);
  EXPECT_TRUE(r.notes.empty());
  EXPECT_FALSE(r.replaced);
  EXPECT_EQ(testing::read_file(hf + "/tokenizer.model"), testing::read_file(tok));
  EXPECT_TRUE(same_weights(*load_hf_model(hf), *a));
  EXPECT_FALSE(fs::exists(dir.file("export/.hf.export")));  // nothing staged left behind

  // GGUF from the root (a .gguf name), named after the run, tokenizer embedded.
  const std::string gguf = dir.file("export/model.gguf");
  const ExportReport g = export_model(root, gguf, {});
  EXPECT_EQ(g.format, ExportFormat::kGguf);
  EXPECT_EQ(g.name, "kjv-tiny");
  const GgufFile file = GgufFile::open(gguf);
  EXPECT_EQ(file.metadata().get_string("general.name"), "kjv-tiny");
  EXPECT_EQ(file.metadata().get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(file.metadata().get_array("tokenizer.ggml.tokens", GgufType::kString).size(), 416u);
  EXPECT_TRUE(same_weights(*load_gguf_model(gguf), *a));
  EXPECT_EQ(Tokenizer::load(gguf).serialized(), testing::read_file(tok));

  // Every checkpoint damaged: each one's problem listed.
  damage(step5);
  expect_error([&] { resolve_model_source(root); }, "none of its 2 checkpoint(s) reads completely");
}

TEST(CkptExport, FromAModelDirectoryAndWithForce) {
  TempDir dir;
  const std::string tok = testing::small_tokenizer_path();
  auto a = model_with_seed(3), b = model_with_seed(4);
  // A run's final/ (the run directory holds config.toml): named after the run.
  const std::string run = dir.file("runs/psalms");
  save_hf_model(*a, run + "/final");
  fs::copy_file(tok, run + "/final/tokenizer.model");
  testing::write_file(run + "/config.toml", "");
  const ModelSource s = resolve_model_source(run + "/final");
  EXPECT_EQ(s.kind, ModelSource::Kind::kModelDirectory);
  EXPECT_EQ(export_model_name(s), "psalms");
  save_hf_model(*b, dir.file("other"));
  EXPECT_EQ(export_model_name(resolve_model_source(dir.file("other/"))), "other");

  const std::string gguf = dir.file("m.gguf");
  const ExportReport r = export_model(run + "/final", gguf, {});
  EXPECT_EQ(r.step, -1);
  EXPECT_EQ(r.name, "psalms");
  EXPECT_EQ(r.tokenizer, run + "/final/tokenizer.model");
  EXPECT_TRUE(same_weights(*load_gguf_model(gguf), *a));
  const std::string before = testing::read_file(gguf);

  // An existing output: refused without --force, untouched.
  expect_error([&] { export_model(dir.file("other"), gguf, {}); }, "m.gguf exists (a file of");
  EXPECT_EQ(testing::read_file(gguf), before);
  ExportOptions force;
  force.force = true;
  force.tokenizer = tok;  // "other" has no tokenizer.model of its own
  const ExportReport replaced = export_model(dir.file("other"), gguf, force);
  EXPECT_TRUE(replaced.replaced);
  EXPECT_TRUE(same_weights(*load_gguf_model(gguf), *b));
  EXPECT_FALSE(fs::exists(dir.file(".m.gguf.export")));

  // A directory: every old file goes (here a stale second shard), none is left half old.
  const std::string hf = dir.file("hf");
  export_model(run + "/final", hf, {});
  testing::write_file(hf + "/model-00002-of-00002.safetensors", "stale");
  expect_error([&] { export_model(dir.file("other"), hf, {}); }, "hf exists (a directory with 4 entries)");
  export_model(dir.file("other"), hf, force);
  EXPECT_FALSE(fs::exists(hf + "/model-00002-of-00002.safetensors"));
  EXPECT_TRUE(same_weights(*load_hf_model(hf), *b));
  EXPECT_EQ(testing::read_file(hf + "/tokenizer.model"), testing::read_file(tok));
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".export"), std::string::npos) << e.path();

  // A directory replaced by a GGUF file, and the other way round.
  export_model(dir.file("other"), dir.file("x.gguf"), force);
  EXPECT_TRUE(fs::is_regular_file(dir.file("x.gguf")));
  ExportOptions gguf_force = force;
  gguf_force.format = "gguf";
  export_model(dir.file("other"), hf, gguf_force);
  EXPECT_TRUE(fs::is_regular_file(hf));
  export_model(dir.file("other"), hf, force);
  EXPECT_TRUE(fs::is_directory(hf));

  // dtype rules follow the format.
  ExportOptions f16;
  f16.dtype = "f16";
  expect_error([&] { export_model(dir.file("other"), dir.file("hf16"), f16); },
               "--dtype f16 is only for --format gguf");
}

TEST(CkptExport, WithoutATokenizerTheExportSaysHowToAddOne) {
  TempDir dir;
  auto a = model_with_seed(5);
  const std::string step = save_checkpoint(dir.file("ck"), *a, 3, dir.file("runs/x"), dir.file("gone/tok.model"));
  const ExportReport r = export_model(step, dir.file("hf"), {});
  EXPECT_TRUE(r.tokenizer.empty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("has no tokenizer"), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("gone/tok.model', which does not exist here"), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("cp TOKENIZER.model " + dir.file("hf") + "/tokenizer.model"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.file("hf/tokenizer.model")));
  EXPECT_TRUE(same_weights(*load_hf_model(dir.file("hf")), *a));
  const ExportReport g = export_model(step, dir.file("m.gguf"), {});
  ASSERT_EQ(g.notes.size(), 1u);
  EXPECT_NE(g.notes[0].find("--tokenizer FILE"), std::string::npos) << g.notes[0];
  EXPECT_FALSE(GgufFile::open(dir.file("m.gguf")).metadata().has("zaya.tokenizer.sentencepiece_model"));
  EXPECT_EQ(g.name, "x");
  // --tokenizer: given and missing is an error; one that does not fit the model too.
  ExportOptions o;
  o.tokenizer = dir.file("nope.model");
  o.force = true;
  expect_error([&] { export_model(step, dir.file("hf"), o); }, "nope.model: tokenizer model not found");
}

TEST(CkptExport, InputsThatAreNotAModelSayWhatIs) {
  TempDir dir;
  expect_error([&] { resolve_model_source(dir.file("missing")); }, "missing: no such directory; expected a checkpoint");
  fs::create_directories(dir.file("empty"));
  expect_error([&] { resolve_model_source(dir.file("empty")); },
               "empty: not a checkpoint (step_XXXXXXXX with metadata.json), a model directory");
  dir.write("file", "x");
  expect_error([&] { resolve_model_source(dir.file("file")); }, "file: a file, not a directory");
  auto a = model_with_seed(6);
  save_checkpoint(dir.file("run/checkpoints"), *a, 1, dir.file("run"), "");
  expect_error([&] { resolve_model_source(dir.file("run")); }, "run: a run directory; give --in " +
                                                                   dir.file("run/final") + " (its final weights) or " +
                                                                   dir.file("run/checkpoints"));
}

// A native-layout directory (renamed tensors, experts stacked), as ZAYA1-8B ships.
nlohmann::json native_config(const ZayaConfig& c) {
  nlohmann::json layer_types = nlohmann::json::array();
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
          {"moe_intermediate_size", c.expert_ffn},
          {"num_experts_per_tok", 1},
          {"num_experts", c.experts},
          {"layer_types", layer_types},
          {"router_hidden_size", c.router_hidden},
          {"cca_time0", 2},
          {"cca_time1", 2},
          {"bos_token_id", c.bos_token_id},
          {"eos_token_id", c.eos_token_id},
          {"pad_token_id", c.pad_token_id},
          {"zaya_real_vocab_size", c.real_vocab_size}};
}

void save_native(const ZayaModel& model, const std::string& dir, std::vector<std::vector<float>>& keep) {
  const ZayaConfig& c = model.config();
  fs::create_directories(dir);
  SafetensorsWriter w;
  std::map<std::string, std::vector<std::pair<int64_t, const ParamEntry*>>> stacked;
  auto add = [&](const ParamEntry& e, const float* base) {
    const NativeTensorRef r = native_tensor_for(e.name, c);
    if (r.expert >= 0)
      stacked[r.name].emplace_back(r.expert, &e);
    else
      w.add_f32(r.name, e.shape, base + e.offset);
  };
  for (const ParamEntry& e : model.params().entries()) add(e, model.param_data());
  for (const ParamEntry& e : model.buffers().entries()) add(e, model.buffer_data());
  for (auto& [name, parts] : stacked) {
    const ParamEntry& first = *parts[0].second;
    keep.emplace_back(c.experts * first.numel);
    for (const auto& [expert, e] : parts)
      std::copy(model.param_data() + e->offset, model.param_data() + e->offset + e->numel,
                keep.back().begin() + expert * e->numel);
    w.add_f32(name, {c.experts, first.shape[0], first.shape[1]}, keep.back().data());
  }
  w.write(dir + "/model.safetensors");
  std::ofstream(dir + "/config.json") << native_config(c).dump(2);
}

TEST(CkptExport, FromANativeDirectory) {
  TempDir dir;
  ZayaConfig c = small_config();
  c.top_k = 1;
  ASSERT_TRUE(c.use_skip);
  std::vector<std::vector<float>> keep;
  // Balancing biases that keep the skip slot from ever winning (as on the released 8B).
  ZayaModel dead(c);
  dead.init(7);
  for (float* b : dead.balancing_biases()) {
    b[0] = 0.5f;
    b[c.skip_slot()] = -1.0f;
  }
  save_native(dead, dir.file("native"), keep);
  bool native = false;
  EXPECT_TRUE(same_weights(*load_model_directory(dir.file("native"), &native), dead));
  EXPECT_TRUE(native);
  const ExportReport r = export_model(dir.file("native"), dir.file("hf"), {});
  const auto back = load_hf_model(dir.file("hf"));
  // The legacy config differs only in the router's norm epsilon, which native files tie to rms_norm_eps.
  EXPECT_EQ(std::memcmp(back->param_data(), dead.param_data(), sizeof(float) * dead.params().total_floats()), 0);
  EXPECT_EQ(std::memcmp(back->buffer_data(), dead.buffer_data(), sizeof(float) * dead.buffers().total_floats()), 0);
  ASSERT_EQ(r.notes.size(), 2u);  // the layout, and no tokenizer
  EXPECT_NE(r.notes[0].find("native layout"), std::string::npos) << r.notes[0];
  EXPECT_NE(r.notes[0].find("from ever being chosen in every layer"), std::string::npos) << r.notes[0];

  // Biases under which the skip slot can win: the export says where it computes otherwise.
  ZayaModel live(c);
  live.init(8);
  save_native(live, dir.file("live"), keep);
  const ExportReport l = export_model(dir.file("live"), dir.file("live.gguf"), {});
  ASSERT_FALSE(l.notes.empty());
  EXPECT_NE(l.notes[0].find("in half-layer(s) 1, 3 the skip slot can be chosen"), std::string::npos) << l.notes[0];
}

// --layout native: a legacy directory whose skip slot is dead in every layer
// is written natively and reads back bit for bit; one whose skip slot can be
// chosen is refused, naming the half-layers; a GGUF --out refuses the option.
TEST(CkptExport, NativeLayoutOnlyWhereItComputesTheSame) {
  TempDir dir;
  ZayaConfig c = small_config();
  c.top_k = 1;
  ZayaModel dead(c);
  dead.init(11);
  for (float* b : dead.balancing_biases()) {
    b[0] = 0.5f;
    b[c.skip_slot()] = -1.0f;
  }
  save_hf_model(dead, dir.file("legacy"));
  ExportOptions native;
  native.layout = "native";
  const ExportReport r = export_model(dir.file("legacy"), dir.file("native"), native);
  EXPECT_EQ(r.layout, "native");
  bool is_native = false;
  const auto back = load_model_directory(dir.file("native"), &is_native);
  EXPECT_TRUE(is_native);
  EXPECT_EQ(std::memcmp(back->param_data(), dead.param_data(), sizeof(float) * dead.params().total_floats()), 0);
  EXPECT_EQ(std::memcmp(back->buffer_data(), dead.buffer_data(), sizeof(float) * dead.buffers().total_floats()), 0);
  // native -> native keeps the native semantics: no note about the skip expert.
  const ExportReport again = export_model(dir.file("native"), dir.file("native2"), native);
  for (const std::string& note : again.notes) EXPECT_EQ(note.find("skip"), std::string::npos) << note;

  ZayaModel live(c);
  live.init(12);  // fresh biases: 0 for experts, -1 for the skip slot, which can then still win
  save_hf_model(live, dir.file("live"));
  expect_error([&] { export_model(dir.file("live"), dir.file("live_native"), native); },
               "cannot be written in the native layout exactly: in half-layer(s) 1, 3 the balancing biases "
               "let the skip slot be chosen");
  EXPECT_FALSE(fs::exists(dir.file("live_native")));
  expect_error([&] { export_model(dir.file("legacy"), dir.file("m.gguf"), native); },
               "--layout native is for a Hugging Face directory");
  ZayaConfig top2 = small_config();
  top2.top_k = 2;
  ZayaModel two(top2);
  two.init(13);
  save_hf_model(two, dir.file("top2"));
  expect_error([&] { export_model(dir.file("top2"), dir.file("top2_native"), native); },
               "has no native layout: top_k = ");
}

// What `zaya ckpt inspect` shows of a model directory: legacy or native, its
// config, files, tensors and tokenizer.
TEST(CkptInspect, DescribesAModelDirectory) {
  TempDir dir;
  auto a = model_with_seed(9);
  save_hf_model(*a, dir.file("final"));
  ModelDirectoryInfo info = describe_model_directory(dir.file("final"));
  EXPECT_FALSE(info.native);
  EXPECT_EQ(config_to_hf_json(info.config, "float32"), config_to_hf_json(a->config(), "float32"));
  ASSERT_EQ(info.files.size(), 1u);
  EXPECT_EQ(info.files[0].name, "model.safetensors");
  EXPECT_EQ(info.bytes(), fs::file_size(dir.file("final/model.safetensors")));
  EXPECT_EQ(info.dtypes, std::vector<std::string>{"F32"});
  EXPECT_EQ(info.tensors.size(), a->params().entries().size() + a->buffers().entries().size());
  EXPECT_TRUE(info.tokenizer.empty());
  const auto embed = std::find_if(info.tensors.begin(), info.tensors.end(), [](const ModelDirectoryInfo::Tensor& t) {
    return t.name == "model.embed_tokens.weight";
  });
  ASSERT_NE(embed, info.tensors.end());
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{416, a->config().hidden}));
  EXPECT_EQ(embed->file, "model.safetensors");
  fs::copy_file(testing::small_tokenizer_path(), dir.file("final/tokenizer.model"));
  info = describe_model_directory(dir.file("final"));
  EXPECT_EQ(info.tokenizer, dir.file("final/tokenizer.model"));
  const nlohmann::json j = info.to_json();
  EXPECT_EQ(j["kind"], "model_directory");
  EXPECT_EQ(j["layout"], "legacy");
  EXPECT_EQ(j["tokenizer"], dir.file("final/tokenizer.model"));
  EXPECT_EQ(j["model"]["hidden_size"], a->config().hidden);
  EXPECT_EQ(j["tensors"]["model.embed_tokens.weight"]["dtype"], "F32");
  EXPECT_EQ(j["files"][0]["bytes"], info.bytes());
  ZayaConfig c = small_config();
  c.top_k = 1;  // the native config's num_experts_per_tok
  ZayaModel n(c);
  n.init(10);
  std::vector<std::vector<float>> keep;
  save_native(n, dir.file("native"), keep);
  EXPECT_TRUE(describe_model_directory(dir.file("native")).native);
  expect_error([&] { describe_model_directory(dir.file("missing")); }, "missing/config.json");
}

}  // namespace
}  // namespace zaya
