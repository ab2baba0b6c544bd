// Stop strings over streamed pieces: matches across piece boundaries, partial
// matches released once they fail, several strings, overlapping strings, a stop
// at the very start, UTF-8 characters split over pieces, and (against a
// byte-by-byte reference) the same result for every way of cutting the text.
#include "zaya/infer/stop_strings.h"

#include <gtest/gtest.h>

#include "zaya/core/rng.h"
#include "zaya/io/utf8.h"

namespace zaya {
namespace {

// What each feed() returned, then finish().
std::vector<std::string> run(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const std::string& p : pieces) out.push_back(m.feed(p));
  out.push_back(m.finish());
  return out;
}

using Pieces = std::vector<std::string>;

TEST(StopStrings, WithoutStopStringsTextPassesStraightThrough) {
  StopStringMatcher none;
  EXPECT_EQ(run(none, {"In the", " beginning", ""}), (Pieces{"In the", " beginning", "", ""}));
  StopStringMatcher empty({""});  // an empty stop string is ignored
  EXPECT_EQ(run(empty, {"a", "b"}), (Pieces{"a", "b", ""}));
  EXPECT_FALSE(empty.stopped());
}

TEST(StopStrings, StopSpanningTwoAndMorePieces) {
  StopStringMatcher two({"END"});
  EXPECT_EQ(run(two, {"abc E", "ND and more", "after"}), (Pieces{"abc ", "", "", ""}));
  EXPECT_TRUE(two.stopped());
  StopStringMatcher four({"<|end|>"});
  EXPECT_EQ(run(four, {"x <", "|e", "nd", "|> y"}), (Pieces{"x ", "", "", "", ""}));
  EXPECT_TRUE(four.stopped());
}

TEST(StopStrings, PartialMatchThatFailsIsEmitted) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(run(m, {"abc EN", "OUGH"}), (Pieces{"abc ", "ENOUGH", ""}));
  EXPECT_FALSE(m.stopped());
  // A failed partial match whose tail starts a new one: "EN" + "E" releases "EN" and keeps "E".
  StopStringMatcher again({"END"});
  EXPECT_EQ(run(again, {"xEN", "E", "ND!"}), (Pieces{"x", "EN", "", ""}));
  EXPECT_TRUE(again.stopped());
  // Held back to the end of the stream: finish() releases it.
  StopStringMatcher tail({"END"});
  EXPECT_EQ(run(tail, {"the E"}), (Pieces{"the ", "E"}));
}

TEST(StopStrings, SeveralStopStringsTheFirstInTheTextWins) {
  StopStringMatcher m({"###", "\n\n"});
  EXPECT_EQ(run(m, {"a#b\n", "\nc###"}), (Pieces{"a#b", "", ""}));
  StopStringMatcher other({"###", "\n\n"});
  EXPECT_EQ(run(other, {"a\n#", "##\n\n"}), (Pieces{"a\n", "", ""}));
}

TEST(StopStrings, StopAtTheVeryFirstPiece) {
  StopStringMatcher m({"STOP"});
  EXPECT_EQ(run(m, {"STOP here", "more"}), (Pieces{"", "", ""}));
  EXPECT_TRUE(m.stopped());
  StopStringMatcher split({"STOP"});
  EXPECT_EQ(run(split, {"ST", "OP"}), (Pieces{"", "", ""}));
  EXPECT_TRUE(split.stopped());
}

TEST(StopStrings, StopStringThatIsAPrefixOfAnother) {
  // "ab" is complete one byte before "abc" could be: the text stops at "ab".
  for (const std::vector<std::string>& order : {std::vector<std::string>{"ab", "abc"}, {"abc", "ab"}}) {
    StopStringMatcher bytewise(order);
    EXPECT_EQ(run(bytewise, {"x", "a", "b", "c"}), (Pieces{"x", "", "", "", ""}));
    StopStringMatcher whole(order);
    EXPECT_EQ(run(whole, {"xabc"}), (Pieces{"x", ""}));
  }
  // "bc" ends inside "abcd": it stops first, wherever the pieces are cut and in either order.
  for (const std::vector<std::string>& order : {std::vector<std::string>{"abcd", "bc"}, {"bc", "abcd"}}) {
    StopStringMatcher whole(order);
    EXPECT_EQ(run(whole, {"xabcd"}), (Pieces{"xa", ""}));
    StopStringMatcher bytewise(order);
    EXPECT_EQ(run(bytewise, {"x", "a", "b", "c", "d"}), (Pieces{"x", "", "", "a", "", ""}));
  }
  // Two strings ending at the same byte: the longer one is cut off.
  StopStringMatcher tie({"bc", "abc"});
  EXPECT_EQ(run(tie, {"xabc"}), (Pieces{"x", ""}));
}

TEST(StopStrings, Utf8CharacterSplitAcrossPiecesIsNeverEmittedHalf) {
  StopStringMatcher m;
  // é = C3 A9, ☃ = E2 98 83, 🚀 = F0 9F 9A 80.
  EXPECT_EQ(run(m, {"caf\xc3", "\xa9 \xe2", "\x98", "\x83", "\xf0\x9f", "\x9a", "\x80!"}),
            (Pieces{"caf", "\xc3\xa9 ", "", "\xe2\x98\x83", "", "", "\xf0\x9f\x9a\x80!", ""}));
  // A stop string starting with a multi-byte character, arriving byte by byte.
  StopStringMatcher stop({"\xc3\xa9!"});
  EXPECT_EQ(run(stop, {"caf\xc3", "\xa9", "!"}), (Pieces{"caf", "", "", ""}));
  EXPECT_TRUE(stop.stopped());
  StopStringMatcher not_stop({"\xc3\xa9!"});
  EXPECT_EQ(run(not_stop, {"caf\xc3", "\xa9", "?"}), (Pieces{"caf", "", "\xc3\xa9?", ""}));
}

// The text up to the first stop string as a reader meets them, one byte at a
// time: at each byte, the longest stop string ending there.
std::string reference_cut(const std::string& text, std::vector<std::string> stops) {
  std::sort(stops.begin(), stops.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (size_t end = 1; end <= text.size(); ++end)
    for (const std::string& s : stops)
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0) return text.substr(0, end - s.size());
  return text;
}

// Every way of cutting a text into pieces gives the reference's text, each
// returned piece whole UTF-8 characters.
TEST(StopStrings, SameResultForEveryCutOfTheText) {
  const std::string text =
      "And G\xc3\xb6"
      "d said, Let there be light: and there was l\xe2\x98\x83ght. Amen amen.";
  const std::vector<std::vector<std::string>> stop_sets = {{"light"},
                                                           {"there", "the"},
                                                           {"light: and", "t:"},
                                                           {"amen", "Amen."},
                                                           {"\xe2\x98\x83g", "was"},
                                                           {"nothing"},
                                                           {"A"},
                                                           {"."}};
  for (const auto& stops : stop_sets) {
    const std::string want = reference_cut(text, stops);
    for (uint64_t trial = 0; trial < 200; ++trial) {
      StopStringMatcher m(stops);
      std::string got;
      for (size_t at = 0, k = 0; at < text.size(); ++k) {
        const size_t len = trial == 0 ? 1 : 1 + philox4x32(trial, 11, k)[0] % 7;
        const std::string piece = m.feed(text.substr(at, len));
        EXPECT_TRUE(is_valid_utf8(piece)) << piece;
        got += piece;
        at += len;
      }
      got += m.finish();
      ASSERT_EQ(got, want) << "stops " << stops[0] << ", trial " << trial;
      EXPECT_EQ(m.stopped(), want.size() < text.size());
    }
  }
}

}  // namespace
}  // namespace zaya
