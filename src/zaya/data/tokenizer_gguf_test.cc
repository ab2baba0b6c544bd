// A tokenizer in a GGUF file: the llama.cpp vocabulary keys (pieces, scores,
// types, padding rows) and the embedded SentencePiece model, from which the
// same tokenizer comes back: it encodes and decodes the whole bundled corpus
// exactly like the original. Files without one, or whose keys disagree with
// the embedded model, fail saying so.
#include "zaya/data/tokenizer_gguf.h"

#include <gtest/gtest.h>

#include "zaya/core/error.h"
#include "zaya/data/sentencepiece_proto.h"
#include "zaya/data/test_util.h"
#include "zaya/io/gguf.h"
#include "zaya/io/gguf_writer.h"

namespace zaya {
namespace {

using testing::TempDir;

// Writes a GGUF file holding only `keys` (and a tensor, as model files have).
void write_gguf(const std::string& path, const std::vector<GgufKeyValue>& keys) {
  GgufWriter w;
  w.set_string("general.architecture", "zaya");
  for (const GgufKeyValue& kv : keys) w.set(kv.key, kv.value);
  static const float x[4] = {1, 2, 3, 4};
  w.add_f32("token_embd.weight", {2, 2}, x);
  w.write(path);
}

TEST(TokenizerGguf, VocabularyKeysAreLlamaCppsAndPadToTheEmbedding) {
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  ASSERT_EQ(tok.vocab_size(), 400);
  const GgufVocab v = tokenizer_gguf_vocab(tok, 416);
  EXPECT_EQ(v.model, "llama");
  ASSERT_EQ(v.tokens.size(), 416u);
  ASSERT_EQ(v.scores.size(), 416u);
  ASSERT_EQ(v.token_types.size(), 416u);
  // The Gemma layout: pad, eos, bos control; unk; "\n" user-defined; 256 byte pieces; then learned pieces.
  EXPECT_EQ(v.tokens[0], "<pad>");
  EXPECT_EQ(v.token_types[0], int32_t(GgufTokenType::kControl));
  EXPECT_EQ(v.token_types[1], int32_t(GgufTokenType::kControl));
  EXPECT_EQ(v.token_types[2], int32_t(GgufTokenType::kControl));
  EXPECT_EQ(v.token_types[3], int32_t(GgufTokenType::kUnknown));
  EXPECT_EQ(v.tokens[4], "\n");
  EXPECT_EQ(v.token_types[4], int32_t(GgufTokenType::kUserDefined));
  EXPECT_EQ(v.tokens[5], "<0x00>");
  EXPECT_EQ(v.token_types[5], int32_t(GgufTokenType::kByte));
  EXPECT_EQ(v.token_types[260], int32_t(GgufTokenType::kByte));
  EXPECT_EQ(v.token_types[261], int32_t(GgufTokenType::kNormal));
  EXPECT_EQ(v.token_types[399], int32_t(GgufTokenType::kNormal));
  for (int32_t id = 0; id < 400; ++id) {
    EXPECT_EQ(v.tokens[size_t(id)], tok.id_to_piece(id));
    EXPECT_EQ(v.scores[size_t(id)], tok.score(id));
  }
  // Rows beyond the pieces, as llama.cpp's converters pad them.
  EXPECT_EQ(v.tokens[400], "[PAD1]");
  EXPECT_EQ(v.tokens[415], "[PAD16]");
  EXPECT_EQ(v.token_types[415], int32_t(GgufTokenType::kUnused));
  EXPECT_EQ(v.scores[415], -1000.0f);
  EXPECT_EQ(v.unknown_id, 3);
  EXPECT_EQ(v.add_bos, true);
  EXPECT_EQ(v.add_eos, false);
  EXPECT_EQ(v.add_space_prefix, false);  // zaya's tokenizers add no dummy prefix
  EXPECT_EQ(v.sentencepiece_model, testing::read_file(testing::small_tokenizer_path()));
  testing::expect_error([&] { tokenizer_gguf_vocab(tok, 399); }, "400 pieces, more than the model's 399");
}

TEST(TokenizerGguf, RebuiltTokenizerEncodesAndDecodesTheCorpusLikeTheOriginal) {
  TempDir dir;
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const std::string path = dir.file("m.gguf");
  write_gguf(path, gguf_vocab_metadata(tokenizer_gguf_vocab(tok, 416)));

  // The metadata as another reader sees it.
  const GgufFile file = GgufFile::open(path);
  const GgufMetadata& m = file.metadata();
  EXPECT_EQ(m.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(m.get_array("tokenizer.ggml.tokens", GgufType::kString).size(), 416u);
  EXPECT_EQ(m.get_array("tokenizer.ggml.scores", GgufType::kF32).size(), 416u);
  EXPECT_EQ(m.get_array("tokenizer.ggml.token_type", GgufType::kI32).size(), 416u);
  EXPECT_EQ(m.get_uint("tokenizer.ggml.unknown_token_id"), 3u);
  EXPECT_TRUE(m.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(m.get_array("zaya.tokenizer.sentencepiece_model", GgufType::kU8).size(), tok.serialized().size());

  ASSERT_TRUE(is_gguf_file(path));
  EXPECT_FALSE(is_gguf_file(testing::small_tokenizer_path()));
  EXPECT_FALSE(is_gguf_file(dir.file("missing.gguf")));
  // Tokenizer::load takes the GGUF file itself.
  const Tokenizer back = Tokenizer::load(path);
  EXPECT_EQ(back.model_path(), path);
  EXPECT_EQ(back.serialized(), tok.serialized());
  EXPECT_EQ(back.vocab_size(), tok.vocab_size());
  EXPECT_EQ(back.bos_id(), tok.bos_id());
  EXPECT_EQ(back.eos_id(), tok.eos_id());
  EXPECT_EQ(back.pad_id(), tok.pad_id());
  EXPECT_EQ(back.unk_id(), tok.unk_id());

  // The first 256 KB of the bundled corpus (KJV; whole lines) and text it never saw. The serialized
  // models are equal above, so more text would test SentencePiece, not the GGUF round trip
  // (the whole 4.4 MB took 15 s, 40 s under the sanitizers).
  const std::string kjv = testing::read_file(testing::kjv_path());
  const std::string corpus = kjv.substr(0, kjv.rfind('\n', size_t(1) << 18) + 1);
  ASSERT_GT(corpus.size(), size_t(200000));
  const std::vector<int32_t> ids = tok.encode(corpus);
  EXPECT_EQ(back.encode(corpus), ids);
  EXPECT_EQ(back.decode(ids), tok.decode(ids));
  EXPECT_EQ(back.decode(ids), corpus);
  const std::string odd = "  Two  spaces,\ttab \xe2\x98\x83 caf\xc3\xa9 12345\n\nend ";
  EXPECT_EQ(back.encode(odd), tok.encode(odd));
  EXPECT_EQ(back.decode(back.encode(odd)), odd);
}

TEST(TokenizerGguf, FilesWithoutOrWithDisagreeingKeysFail) {
  TempDir dir;
  const Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());

  // llama.cpp's keys alone: no embedded model, so no exact tokenizer.
  GgufVocab v = tokenizer_gguf_vocab(tok, 400);
  const std::string embedded = v.sentencepiece_model;
  v.sentencepiece_model.clear();
  write_gguf(dir.file("keys.gguf"), gguf_vocab_metadata(v));
  EXPECT_FALSE(tokenizer_from_gguf(GgufFile::open(dir.file("keys.gguf")).metadata()).has_value());
  testing::expect_error([&] { Tokenizer::load(dir.file("keys.gguf")); },
                        "keys.gguf: the GGUF file embeds no tokenizer (zaya.tokenizer.sentencepiece_model); pass "
                        "--tokenizer FILE");
  write_gguf(dir.file("none.gguf"), {});
  EXPECT_FALSE(tokenizer_from_gguf(GgufFile::open(dir.file("none.gguf")).metadata()).has_value());

  // An edited token list.
  v.sentencepiece_model = embedded;
  v.tokens[300] = "edited";
  write_gguf(dir.file("edited.gguf"), gguf_vocab_metadata(v));
  testing::expect_error([&] { Tokenizer::load(dir.file("edited.gguf")); },
                        "edited.gguf: token 300 is 'edited' in 'tokenizer.ggml.tokens'");
  v.tokens[300] = tok.id_to_piece(300);
  v.token_types[4] = 1;
  write_gguf(dir.file("types.gguf"), gguf_vocab_metadata(v));
  testing::expect_error([&] { Tokenizer::load(dir.file("types.gguf")); }, "token 4 has type 1");
  v.token_types[4] = 4;
  v.tokens.resize(10);
  v.scores.resize(10);
  v.token_types.resize(10);
  write_gguf(dir.file("short.gguf"), gguf_vocab_metadata(v));
  testing::expect_error([&] { Tokenizer::load(dir.file("short.gguf")); }, "lists 10 tokens");

  // Not a SentencePiece model; arrays of the wrong type or length.
  write_gguf(dir.file("junk.gguf"),
             {{"zaya.tokenizer.sentencepiece_model", GgufValue::numbers<uint8_t>(std::vector<uint8_t>{1, 2, 3})}});
  testing::expect_error([&] { Tokenizer::load(dir.file("junk.gguf")); }, "junk.gguf: cannot load as a SentencePiece");
  write_gguf(dir.file("string.gguf"), {{"zaya.tokenizer.sentencepiece_model", GgufValue::string("x")}});
  testing::expect_error([&] { Tokenizer::load(dir.file("string.gguf")); }, "an array of uint8");
  write_gguf(dir.file("scores.gguf"), {{"tokenizer.ggml.tokens", GgufValue::strings({"a", "b"})},
                                       {"tokenizer.ggml.scores", GgufValue::numbers<float>(std::vector<float>{1})}});
  testing::expect_error([&] { read_gguf_vocab(GgufFile::open(dir.file("scores.gguf")).metadata()); },
                        "'tokenizer.ggml.scores' has 1 elements, but 'tokenizer.ggml.tokens' has 2 tokens");
  write_gguf(dir.file("type9.gguf"),
             {{"tokenizer.ggml.tokens", GgufValue::strings({"a"})},
              {"tokenizer.ggml.token_type", GgufValue::numbers<int32_t>(std::vector<int32_t>{9})}});
  testing::expect_error([&] { read_gguf_vocab(GgufFile::open(dir.file("type9.gguf")).metadata()); },
                        "element 0 is 9, not a token type");
}

TEST(SentencePieceProto, DecodesPieceTypesAndTheDummyPrefix) {
  // pieces { piece "<unk>" type UNKNOWN } pieces { piece "a" score -1 } normalizer_spec { add_dummy_prefix false }
  const std::string model = std::string("\x0a\x09\x0a\x05<unk>\x18\x02", 11) +
                            std::string(
                                "\x0a\x08\x0a\x01"
                                "a"
                                "\x15\x00\x00\x80\xbf",
                                10) +
                            std::string("\x1a\x02\x18\x00", 4);
  const SentencePieceProtoInfo info = decode_sentencepiece_proto(model, "t");
  EXPECT_EQ(info.piece_types, (std::vector<int32_t>{2, 1}));
  EXPECT_FALSE(info.add_dummy_prefix);
  EXPECT_TRUE(decode_sentencepiece_proto(model.substr(0, 21), "t").add_dummy_prefix);  // the default
  testing::expect_error([&] { decode_sentencepiece_proto(model.substr(0, 5), "t"); }, "t: SentencePiece model");
  testing::expect_error([&] { decode_sentencepiece_proto(std::string("\x0b", 1), "t"); }, "wire type 3");
  testing::expect_error([&] { decode_sentencepiece_proto(std::string("\x0a\x02\x18\x09", 4), "t"); },
                        "piece type 9 is not 1..6");
}

}  // namespace
}  // namespace zaya
