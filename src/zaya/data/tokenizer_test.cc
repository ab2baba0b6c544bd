#include "zaya/data/tokenizer.h"

#include <gtest/gtest.h>

#include "zaya/core/error.h"
#include "zaya/core/timer.h"
#include "zaya/data/test_util.h"

namespace zaya {
namespace {

using testing::TempDir;

// Expects `fn` to throw zaya::Error whose message contains every part.
template <typename Fn>
void expect_error(Fn&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected zaya::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

TEST(Tokenizer, TrainedModelHasGemmaLayoutAndRoundTrips) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  EXPECT_EQ(tok.vocab_size(), 400);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.eos_id(), 1);
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.unk_id(), 3);
  EXPECT_EQ(tok.id_to_piece(0), "<pad>");
  EXPECT_EQ(tok.id_to_piece(1), "<eos>");
  EXPECT_EQ(tok.id_to_piece(2), "<bos>");
  EXPECT_EQ(tok.id_to_piece(3), "<unk>");
  EXPECT_EQ(tok.id_to_piece(4), "\n");
  EXPECT_EQ(tok.id_to_piece(5), "<0x00>");
  EXPECT_EQ(tok.id_to_piece(260), "<0xFF>");

  // The first chapter of Genesis, as the shard builder would see it.
  std::string text = testing::kjv_slice(4000);
  text = text.substr(0, text.find("\n\n"));
  std::vector<int32_t> ids = tok.encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), tok.bos_id());  // encode adds no bos/eos
  EXPECT_NE(ids.back(), tok.eos_id());
  EXPECT_LT(ids.size(), text.size() * 2 / 3);  // 400 pieces already merge common words
  EXPECT_EQ(tok.decode(ids), text);

  // Text as written: double spaces, tabs, leading space, characters never
  // seen in training (byte fallback), control ids dropped on decode.
  const std::string odd = "  Two  spaces,\ttab \xe2\x98\x83 caf\xc3\xa9 12345\n\nend ";
  std::vector<int32_t> odd_ids = tok.encode(odd);
  for (int32_t id : odd_ids) EXPECT_NE(id, tok.unk_id());
  EXPECT_EQ(tok.decode(odd_ids), odd);
  odd_ids.insert(odd_ids.begin(), tok.bos_id());
  odd_ids.push_back(tok.eos_id());
  EXPECT_EQ(tok.decode(odd_ids), odd);
  EXPECT_TRUE(tok.encode("").empty());
}

TEST(Tokenizer, TrainingIsDeterministic) {
  TempDir dir;
  testing::write_file(dir.file("c.txt"), testing::kjv_slice(100'000));
  TokenizerTrainOptions o;
  o.corpus.inputs = {dir.file("c.txt")};
  o.vocab_size = 300;
  o.byte_fallback = false;  // 300 pieces leave no room for 256 byte pieces
  o.max_sentences = 400;    // fewer than the slice's ~800 lines: exercises seeded sampling
  o.seed = 7;
  o.output_prefix = dir.file("a");
  Tokenizer::train(o);
  o.output_prefix = dir.file("sub/b");  // also creates the directory
  Tokenizer::train(o);
  std::string a = testing::read_file(dir.file("a.model"));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, testing::read_file(dir.file("sub/b.model")));
  EXPECT_EQ(testing::read_file(dir.file("a.vocab")), testing::read_file(dir.file("sub/b.vocab")));
  EXPECT_EQ(Tokenizer::load(dir.file("a.model")).vocab_size(), 300);

  o.seed = 8;
  o.output_prefix = dir.file("c");
  Tokenizer::train(o);
  EXPECT_NE(a, testing::read_file(dir.file("c.model")));  // another sample of sentences

  o.model_type = "unigram";
  o.output_prefix = dir.file("u");
  Tokenizer::train(o);
  Tokenizer uni = Tokenizer::load(dir.file("u.model"));
  EXPECT_EQ(uni.vocab_size(), 300);
  EXPECT_EQ(uni.decode(uni.encode("And God said")), "And God said");
}

TEST(Tokenizer, LongLinesAreCutNotSkipped) {
  // One 100 KB line: SentencePiece alone would skip it (max_sentence_length)
  // and fail for lack of sentences.
  TempDir dir;
  std::string text = testing::kjv_slice(100'000);
  for (char& c : text)
    if (c == '\n') c = ' ';
  testing::write_file(dir.file("long.txt"), text + "\n");
  TokenizerTrainOptions o;
  o.corpus.inputs = {dir.file("long.txt")};
  o.output_prefix = dir.file("long");
  o.vocab_size = 300;
  o.byte_fallback = false;
  Tokenizer::train(o);
  Tokenizer tok = Tokenizer::load(dir.file("long.model"));
  EXPECT_EQ(tok.decode(tok.encode("the LORD said")), "the LORD said");
}

TEST(Tokenizer, TrainsKjv4096BpeQuickly) {
  TempDir dir;
  TokenizerTrainOptions o;
  o.corpus.inputs = {testing::kjv_path()};
  o.output_prefix = dir.file("kjv");
  o.vocab_size = 4096;
  double t0 = now_seconds();
  Tokenizer::train(o);
  double seconds = now_seconds() - t0;
  EXPECT_LT(seconds, 20.0);
  Tokenizer tok = Tokenizer::load(o.output_prefix + ".model");
  EXPECT_EQ(tok.vocab_size(), 4096);
  const std::string text = "In the beginning God created the heaven and the earth.";
  std::vector<int32_t> ids = tok.encode(text);
  EXPECT_LE(ids.size(), 14u);  // whole words for such common text
  EXPECT_EQ(tok.decode(ids), text);
}

TEST(Tokenizer, LoadErrorsNameTheFile) {
  TempDir dir;
  expect_error([&] { Tokenizer::load(dir.file("nope.model")); }, {"nope.model", "not found"});
  testing::write_file(dir.file("garbage.model"), std::string(1000, '\xff'));
  expect_error([&] { Tokenizer::load(dir.file("garbage.model")); }, {"garbage.model", "SentencePiece"});
  expect_error([&] { Tokenizer::load(dir.path()); }, {"not found"});  // a directory
}

TEST(Tokenizer, RejectsOutOfRangeIds) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  std::vector<int32_t> ids = {5, 400};
  expect_error([&] { tok.decode(ids); }, {"token 400 at position 1", "[0, 400)"});
  ids = {-1};
  expect_error([&] { tok.decode(ids); }, {"token -1"});
  expect_error([&] { tok.id_to_piece(400); }, {"400", "outside the vocabulary"});
}

TEST(Tokenizer, TrainOptionErrors) {
  TempDir dir;
  testing::write_file(dir.file("c.txt"), "some text\n");
  TokenizerTrainOptions o;
  o.corpus.inputs = {dir.file("c.txt")};
  o.output_prefix = dir.file("t");
  o.model_type = "wordpiece";
  expect_error([&] { Tokenizer::train(o); }, {"model_type 'wordpiece'", "'bpe' or 'unigram'"});
  o.model_type = "bpe";
  o.vocab_size = 100;
  expect_error([&] { Tokenizer::train(o); }, {"vocab_size 100", "at least 262"});
  o.vocab_size = 4096;
  o.character_coverage = 0.9;
  expect_error([&] { Tokenizer::train(o); }, {"character_coverage 0.9", "[0.98, 1]"});
  o.character_coverage = 1;
  o.corpus.inputs = {dir.file("missing.txt")};
  expect_error([&] { Tokenizer::train(o); }, {"missing.txt", "cannot open"});
  // SentencePiece's own failure (vocab larger than this corpus supports) is wrapped.
  o.corpus.inputs = {dir.file("c.txt")};
  expect_error([&] { Tokenizer::train(o); }, {"c.txt", "SentencePiece bpe training"});
  testing::write_file(dir.file("bad.txt"), "good line\n\xc3\x28 bad\n");
  o.corpus.inputs = {dir.file("bad.txt")};
  expect_error([&] { Tokenizer::train(o); }, {"bad.txt: line 2", "invalid UTF-8"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("t.model")));
}

}  // namespace
}  // namespace zaya
