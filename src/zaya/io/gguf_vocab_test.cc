// A vocabulary as GGUF metadata: llama.cpp's keys in their order, the
// embedded model last, optional keys left out, and what was written read back
// unchanged; vocabularies whose arrays disagree are refused on write and on read.
#include "zaya/io/gguf_vocab.h"

#include <gtest/gtest.h>

#include "zaya/core/error.h"
#include "zaya/core/test_util.h"

namespace zaya {
namespace {

using testing::expect_error;

GgufMetadata as_metadata(const std::vector<GgufKeyValue>& keys) {
  GgufMetadata m("v.gguf");
  for (const GgufKeyValue& kv : keys) m.add(kv.key, kv.value);
  return m;
}

TEST(GgufVocab, WritesLlamaCppsKeysAndReadsThemBack) {
  GgufVocab v;
  v.tokens = {"<unk>", "a", "\n"};
  v.scores = {0.0f, -1.5f, 0.0f};
  v.token_types = {2, 1, 4};
  v.unknown_id = 0;
  v.add_bos = true;
  v.add_eos = false;
  v.add_space_prefix = false;
  v.sentencepiece_model = std::string("\x0a\x00\xff", 3);
  const std::vector<GgufKeyValue> keys = gguf_vocab_metadata(v);
  std::vector<std::string> names;
  for (const GgufKeyValue& kv : keys) names.push_back(kv.key);
  EXPECT_EQ(names, (std::vector<std::string>{"tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                             "tokenizer.ggml.token_type", "tokenizer.ggml.unknown_token_id",
                                             "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                             "tokenizer.ggml.add_space_prefix", "zaya.tokenizer.sentencepiece_model"}));
  const std::optional<GgufVocab> back = read_gguf_vocab(as_metadata(keys));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->model, "llama");
  EXPECT_EQ(back->tokens, v.tokens);
  EXPECT_EQ(back->scores, v.scores);
  EXPECT_EQ(back->token_types, v.token_types);
  EXPECT_EQ(back->unknown_id, 0);
  EXPECT_EQ(back->add_bos, std::optional<bool>(true));
  EXPECT_EQ(back->add_eos, std::optional<bool>(false));
  EXPECT_EQ(back->add_space_prefix, std::optional<bool>(false));
  EXPECT_EQ(back->sentencepiece_model, v.sentencepiece_model);

  // Only the tokens: the optional keys are not written, and read back as absent.
  GgufVocab bare;
  bare.tokens = {"x"};
  const std::vector<GgufKeyValue> two = gguf_vocab_metadata(bare);
  EXPECT_EQ(two.size(), 2u);
  const std::optional<GgufVocab> b = read_gguf_vocab(as_metadata(two));
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->scores.empty());
  EXPECT_EQ(b->unknown_id, -1);
  EXPECT_FALSE(b->add_bos.has_value());
  EXPECT_TRUE(b->sentencepiece_model.empty());
  // No vocabulary at all.
  EXPECT_FALSE(read_gguf_vocab(as_metadata({{"general.architecture", GgufValue::string("zaya")}})).has_value());
}

TEST(GgufVocab, ArraysThatDisagreeAreRefused) {
  GgufVocab v;
  v.tokens = {"a", "b"};
  v.scores = {1.0f};
  expect_error([&] { gguf_vocab_metadata(v); }, "GGUF vocabulary: 1 scores for 2 tokens");
  v.scores.clear();
  v.token_types = {1, 1, 1};
  expect_error([&] { gguf_vocab_metadata(v); }, "GGUF vocabulary: 3 token types for 2 tokens");
  v.token_types.clear();
  v.unknown_id = 2;
  expect_error([&] { gguf_vocab_metadata(v); }, "GGUF vocabulary: unknown id 2 outside the 2 tokens");

  expect_error(
      [] {
        read_gguf_vocab(as_metadata({{"tokenizer.ggml.tokens", GgufValue::strings({"a"})},
                                     {"tokenizer.ggml.unknown_token_id", GgufValue::u32(1)}}));
      },
      "v.gguf: metadata key 'tokenizer.ggml.unknown_token_id' is 1, outside the 1 tokens");
  expect_error(
      [] {
        read_gguf_vocab(
            as_metadata({{"zaya.tokenizer.sentencepiece_model", GgufValue::numbers<uint8_t>(std::vector<uint8_t>{})}}));
      },
      "v.gguf: metadata key 'zaya.tokenizer.sentencepiece_model' is empty");
}

}  // namespace
}  // namespace zaya
