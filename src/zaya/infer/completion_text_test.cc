// A completion's text from real tokenizer pieces: streamed pieces make the
// whole text, a stop string spanning several tokens ends it (nothing after it
// is shown), stop ids are left out, characters spelled in byte pieces are
// never shown half.
#include "zaya/infer/completion_text.h"

#include <gtest/gtest.h>

#include "zaya/data/test_util.h"
#include "zaya/io/utf8.h"

namespace zaya {
namespace {

struct Streamed {
  std::vector<std::string> pieces;  // per pushed id, then finish()
  std::string all;
  size_t stopped_after = SIZE_MAX;  // index of the id after which stopped() turned true
};

Streamed stream(CompletionText& t, const std::vector<int32_t>& ids) {
  Streamed s;
  for (size_t k = 0; k < ids.size(); ++k) {
    s.pieces.push_back(t.push(ids[k]));
    if (t.stopped() && s.stopped_after == SIZE_MAX) s.stopped_after = k;
  }
  s.pieces.push_back(t.finish());
  for (const std::string& p : s.pieces) s.all += p;
  return s;
}

const std::string kText = "And God said, Let there be light: and there was light.";

TEST(CompletionText, StreamedPiecesMakeTheText) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const std::vector<int32_t> ids = tok.encode(kText);
  CompletionText t(tok, {tok.eos_id()}, {});
  const Streamed s = stream(t, ids);
  EXPECT_EQ(s.all, kText);
  EXPECT_EQ(t.text(), kText);
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(s.pieces.back(), "");  // nothing was held back
}

TEST(CompletionText, StopStringSpanningTokensEndsTheText) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const std::vector<int32_t> ids = tok.encode(kText);
  const std::string stop = "be light";
  // The first prefix of the ids whose text holds the stop string; it must take
  // more than one token to spell it.
  size_t completing = 0;
  while (tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + completing + 1)).find(stop) == std::string::npos)
    ++completing;
  const size_t before = tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + completing)).size();
  ASSERT_GT(before, kText.find(stop)) << "the stop string is inside one token; pick one that spans two";

  CompletionText t(tok, {tok.eos_id()}, {stop});
  const Streamed s = stream(t, ids);
  EXPECT_EQ(s.all, "And God said, Let there ");
  EXPECT_EQ(s.stopped_after, completing);
  for (size_t k = completing; k < s.pieces.size(); ++k) EXPECT_EQ(s.pieces[k], "") << "piece after the stop";
  EXPECT_EQ(t.text(), s.all);
}

TEST(CompletionText, StopAtTheFirstToken) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const std::vector<int32_t> ids = tok.encode(kText);
  CompletionText t(tok, {}, {"An"});
  const Streamed s = stream(t, ids);
  EXPECT_EQ(s.all, "");
  EXPECT_TRUE(t.stopped());
}

TEST(CompletionText, StopIdsAreLeftOutOfTheText) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const std::vector<int32_t> ids = tok.encode(kText);
  ASSERT_GT(ids.size(), 4u);
  // A word token as the stop id: it ends the request (the generator's job)
  // and is never spelled out.
  CompletionText t(tok, {ids[3]}, {});
  const Streamed s = stream(t, std::vector<int32_t>(ids.begin(), ids.begin() + 4));
  EXPECT_EQ(s.all, tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + 3)));
  EXPECT_FALSE(t.stopped());  // stopped() is about stop strings
}

TEST(CompletionText, CharactersInBytePiecesAreNeverShownHalf) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const std::string text = "caf\xc3\xa9 \xe2\x98\x83 snow \xf0\x9f\x9a\x80!";  // spelled in byte pieces
  const std::vector<int32_t> ids = tok.encode(text);
  ASSERT_GT(ids.size(), text.size() / 2);  // mostly single-byte pieces
  CompletionText plain(tok, {}, {});
  const Streamed s = stream(plain, ids);
  for (const std::string& p : s.pieces) EXPECT_TRUE(is_valid_utf8(p)) << p;
  EXPECT_EQ(s.all, text);
  // A stop string made of a multi-byte character.
  CompletionText stop(tok, {}, {"\xe2\x98\x83"});
  EXPECT_EQ(stream(stop, ids).all, "caf\xc3\xa9 ");
}

}  // namespace
}  // namespace zaya
