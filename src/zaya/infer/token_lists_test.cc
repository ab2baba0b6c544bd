// zaya score's input: JSON token-id lists, with errors naming the file, the
// sequence and the position.
#include "zaya/infer/token_lists.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

TEST(TokenLists, ReadsListsOfIds) {
  testing::TempDir dir;
  const std::string p = dir.write("ids.json", "[[2, 100, 299, 1], [], [0]]");
  const auto seqs = token_lists(parse_token_lists(p), p, 300);
  EXPECT_EQ(seqs, (std::vector<std::vector<int32_t>>{{2, 100, 299, 1}, {}, {0}}));
}

TEST(TokenLists, ErrorsNameTheFileSequenceAndPosition) {
  testing::TempDir dir;
  auto error_for = [&](const std::string& text) {
    const std::string p = dir.write("bad.json", text);
    return testing::error_of([&] { token_lists(parse_token_lists(p), p, 300); });
  };
  const std::string file = dir.file("bad.json");
  EXPECT_EQ(error_for("[[2, 5, 300]]"), file + ": sequence 0 position 2: 300 is not a token id in 0..299");
  EXPECT_EQ(error_for("[[2], [-1]]"), file + ": sequence 1 position 0: -1 is not a token id in 0..299");
  EXPECT_EQ(error_for("[[2, 1.5]]"), file + ": sequence 0 position 1: 1.5 is not a token id in 0..299");
  EXPECT_EQ(error_for("[[2, \"x\"]]"), file + ": sequence 0 position 1: \"x\" is not a token id in 0..299");
  EXPECT_EQ(error_for("[[2, 5], 3]"), file + ": entry 1 is not a list of token ids");
  EXPECT_EQ(error_for("{\"a\": 1}"), file + ": expected a JSON list of token-id lists");
  EXPECT_NE(error_for("[[2, 5").find(file + ": invalid JSON: "), std::string::npos);
  // The file is checked before any vocabulary is known.
  EXPECT_EQ(testing::error_of([&] { parse_token_lists(dir.write("obj.json", "3")); }),
            dir.file("obj.json") + ": expected a JSON list of token-id lists");
  EXPECT_EQ(testing::error_of([&] { parse_token_lists(dir.file("none.json")); }),
            "cannot read '" + dir.file("none.json") + "'");
}

}  // namespace
}  // namespace zaya
