// Writes the seed corpora of the fuzz targets: a few small valid files of each
// format, made by the project's own writers so they follow format changes.
// Usage: make_seeds DIR   (creates DIR/<target>/seed-N)

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "zaya/core/error.h"
#include "zaya/data/shard_format.h"
#include "zaya/formats/gguf_zaya_map.h"
#include "zaya/formats/hf_config.h"
#include "zaya/io/gguf_vocab.h"
#include "zaya/io/gguf_writer.h"

namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const fs::path& dir, int n, const std::string& bytes) {
  zaya::fuzz::write_bytes((dir / ("seed-" + std::to_string(n))).string(), bytes.data(), bytes.size());
}

// A small model: every tensor of the ZAYA mapping, zeros.
zaya::ZayaConfig small_config() {
  zaya::ZayaConfig c;
  c.hidden = 8;
  c.num_blocks = 2;
  c.vocab_size = 8;
  c.real_vocab_size = 8;
  c.q_heads = 2;
  c.kv_heads = 1;
  c.head_dim = 4;
  c.max_position = 16;
  c.experts = 2;
  c.expert_ffn = 4;
  c.router_hidden = 4;
  return c;
}

void gguf_seeds(const fs::path& dir, const std::string& tmp) {
  {  // metadata of every type and tensors of every float type
    zaya::GgufWriter w;
    w.set_string("general.architecture", "test");
    w.set_u32("test.u32", 7);
    w.set_i64("test.i64", -7);
    w.set_f32("test.f32", 0.5f);
    w.set_f64("test.f64", 1e-5);
    w.set_bool("test.bool", true);
    const std::vector<uint16_t> shorts = {1, 2, 3};
    w.set("test.u16s", zaya::GgufValue::numbers<uint16_t>(shorts));
    w.set("test.strings", zaya::GgufValue::strings({"a", "bc"}));
    w.set("test.nested", zaya::GgufValue::arrays({zaya::GgufValue::bools({true, false})}));
    const float x[12] = {1, -2, 3, 0.5f, 1e-3f, 7, 8, 9, 10, 11, 12, 13};
    w.add_f32("a.weight", {3, 4}, x);
    w.add_f32("b.weight", {2, 2, 3}, x, zaya::GgmlType::kBF16);
    w.add_f32("c.bias", {5}, x, zaya::GgmlType::kF16);
    const int32_t ids[2] = {1, 2};
    w.add_raw("d.ids", {2}, zaya::GgmlType::kI32, ids);
    w.write(tmp);
    put(dir, 0, read_all(tmp));
  }
  {  // no tensors
    zaya::GgufWriter w(64);
    w.set_string("general.name", "empty");
    w.write(tmp);
    put(dir, 1, read_all(tmp));
  }
  {  // a complete ZAYA model (the mapping's tensors, zeros)
    const zaya::ZayaConfig c = small_config();
    zaya::GgufWriter w;
    zaya::GgufSaveOptions options;
    options.dtype = "bf16";
    zaya::write_zaya_gguf_metadata(c, options, w);
    static const std::vector<float> zeros(4096, 0.0f);
    for (const zaya::ZayaGgufTensor& t : zaya::zaya_gguf_tensor_map(c)) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      if (n > int64_t(zeros.size())) zaya::fail("seed model tensor {} is too large", t.name);
      w.add_f32(t.name, t.shape, zeros.data(), t.keep_f32 ? zaya::GgmlType::kF32 : zaya::GgmlType::kBF16);
    }
    w.write(tmp);
    put(dir, 2, read_all(tmp));
  }
  {  // a vocabulary under llama.cpp's keys, with a (hand-encoded) embedded SentencePiece model
    zaya::GgufVocab v;
    v.tokens = {"<unk>", "a", "\n"};
    v.scores = {0.0f, -1.0f, 0.0f};
    v.token_types = {2, 1, 4};
    v.unknown_id = 0;
    v.add_bos = true;
    v.add_space_prefix = false;
    // ModelProto { pieces { piece "<unk>" type UNKNOWN } pieces { piece "a" score -1 } normalizer_spec {
    // add_dummy_prefix false } }
    v.sentencepiece_model = std::string("\x0a\x09\x0a\x05<unk>\x18\x02", 11) +
                            std::string(
                                "\x0a\x08\x0a\x01"
                                "a"
                                "\x15\x00\x00\x80\xbf",
                                10) +
                            std::string("\x1a\x02\x18\x00", 4);
    zaya::GgufWriter w;
    w.set_string("general.architecture", "zaya");
    for (const zaya::GgufKeyValue& kv : zaya::gguf_vocab_metadata(v)) w.set(kv.key, kv.value);
    w.write(tmp);
    put(dir, 3, read_all(tmp));
  }
}

void safetensors_seeds(const fs::path& dir, const std::string& tmp_dir) {
  zaya::fuzz::write_fixture_shards(tmp_dir);
  put(dir, 0, read_all(tmp_dir + "/a.safetensors"));
  put(dir, 1, read_all(tmp_dir + "/b.safetensors"));
}

void index_seeds(const fs::path& dir) {
  put(dir, 0, std::string(zaya::fuzz::kFixtureIndex));
  put(dir, 1, R"({"weight_map": {"z": "b.safetensors", "x": "a.safetensors", "y": "a.safetensors"}})");
}

// flags, u16 idx length, NAME.idx, NAME.bin (see fuzz_shard_index.cc).
std::string shard_input(const std::vector<std::vector<uint32_t>>& docs, uint32_t vocab, uint8_t flags) {
  std::string bin;
  std::vector<uint64_t> offsets = {0};
  for (const auto& d : docs) {
    bin.append(reinterpret_cast<const char*>(d.data()), d.size() * sizeof(uint32_t));
    offsets.push_back(offsets.back() + d.size());
  }
  zaya::ShardIdxHeader h{};
  std::memcpy(h.magic, zaya::kShardIdxMagic.data(), sizeof(h.magic));
  h.version = zaya::kShardFormatVersion;
  h.vocab_size = vocab;
  h.num_documents = docs.size();
  h.num_tokens = offsets.back();
  h.bin_xxh64 = XXH64(bin.data(), bin.size(), 0);
  std::string idx(reinterpret_cast<const char*>(&h), sizeof(h));
  idx.append(reinterpret_cast<const char*>(offsets.data()), offsets.size() * sizeof(uint64_t));
  std::string out;
  out.push_back(static_cast<char>(flags));
  out.push_back(static_cast<char>(idx.size() & 0xff));
  out.push_back(static_cast<char>(idx.size() >> 8));
  return out + idx + bin;
}

void shard_seeds(const fs::path& dir) {
  put(dir, 0, shard_input({{1, 2, 3}, {}, {4, 5}}, 16, 3));
  put(dir, 1, shard_input({}, 4, 1));
  put(dir, 2, shard_input({{0, 1, 2, 3, 4, 5, 6, 7}}, 8, 0));
}

void config_seeds(const fs::path& dir) {
  int n = 0;
  for (const std::string& preset : zaya::preset_names())
    put(dir, n++, zaya::config_to_hf_json(zaya::preset_config(preset), "bfloat16").dump(2));
  put(dir, n++, zaya::config_to_hf_json(small_config(), "float32").dump());
}

// Request bodies as OpenAI's clients and lm-evaluation-harness send them.
void request_seeds(const fs::path& dir) {
  const char* bodies[] = {
      R"({"model": "m", "prompt": "In the beginning", "max_tokens": 16, "temperature": 0.8, "top_p": 0.95, "top_k": 40,
          "seed": 1, "n": 2, "stop": ["\n", "."], "stream": true, "stream_options": {"include_usage": true},
          "logprobs": 2, "user": "u"})",
      R"({"prompt": [[2, 100, 200], [2, 300]], "temperature": 0, "max_tokens": 1, "logprobs": 1, "echo": true,
          "seed": 1234})",
      R"({"prompt": ["a", "b"], "max_tokens": 8, "stop": ["1", "2", "3", "4", "5"], "presence_penalty": 0,
          "frequency_penalty": 0, "logit_bias": {}, "best_of": 1, "suffix": ""})",
      R"({"messages": [{"role": "developer", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                       {"role": "assistant", "content": "Hello", "tool_calls": []},
                       {"role": "user", "content": "Again"}],
          "max_completion_tokens": 5, "logprobs": true, "top_logprobs": 3, "tools": [], "functions": [],
          "function_call": "none", "response_format": {"type": "text"}})",
      R"({"messages": [{"role": "user", "content": "a"},
                       {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function"}]},
                       {"role": "tool", "tool_call_id": "c", "content": "42"}]})",
      // The tokenizer endpoints' bodies, as lm-evaluation-harness's remote tokenizer sends them.
      R"({"prompt": "<bos>In the beginning<eos>", "add_special_tokens": false, "return_token_strs": true})",
      R"({"tokens": [2, 100, 200, 1]})",
  };
  int n = 0;
  for (const char* b : bodies) put(dir, n++, b);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  try {
    const fs::path root = argv[1];
    const std::string tmp = zaya::fuzz::scratch_dir();
    for (const char* target : {"fuzz_gguf", "fuzz_safetensors_header", "fuzz_safetensors_dir", "fuzz_shard_index",
                               "fuzz_hf_config", "fuzz_openai_request"})
      fs::create_directories(root / target);
    gguf_seeds(root / "fuzz_gguf", tmp + "/seed.gguf");
    safetensors_seeds(root / "fuzz_safetensors_header", tmp);
    index_seeds(root / "fuzz_safetensors_dir");
    shard_seeds(root / "fuzz_shard_index");
    config_seeds(root / "fuzz_hf_config");
    request_seeds(root / "fuzz_openai_request");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
