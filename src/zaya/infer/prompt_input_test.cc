// Prompts from a file or standard input ("-"): the whole text, one final line
// ending dropped, UTF-8 checked with the line and column named.
#include "zaya/infer/prompt_input.h"

#include <gtest/gtest.h>

#include <sstream>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

TEST(PromptInput, ReadsAFileOrStandardInput) {
  testing::TempDir dir;
  std::istringstream in("from stdin\n");
  EXPECT_EQ(read_input_text(dir.write("p.txt", "a\nb\n"), "--prompts", in), "a\nb\n");
  EXPECT_EQ(read_input_text("-", "--prompts", in), "from stdin\n");
  EXPECT_EQ(in.str(), "from stdin\n");
  EXPECT_EQ(input_name("-"), "<stdin>");
  EXPECT_EQ(input_name("p.txt"), "p.txt");
  EXPECT_EQ(testing::error_of([&] { read_input_text(dir.file("none.txt"), "--prompt-file", in); }),
            "--prompt-file: cannot read '" + dir.file("none.txt") + "'");
}

TEST(PromptInput, APromptFileLosesOneFinalLineEnding) {
  testing::TempDir dir;
  std::istringstream none;
  auto prompt_of = [&](const std::string& text) { return read_prompt_file(dir.write("p.txt", text), none); };
  EXPECT_EQ(prompt_of("In the beginning\n"), "In the beginning");
  EXPECT_EQ(prompt_of("In the beginning\r\n"), "In the beginning");
  EXPECT_EQ(prompt_of("two lines\nof text\n\n"), "two lines\nof text\n");  // only the last ending goes
  EXPECT_EQ(prompt_of("no ending"), "no ending");
  EXPECT_EQ(prompt_of("  spaced  "), "  spaced  ");
  EXPECT_EQ(prompt_of(""), "");
  EXPECT_EQ(prompt_of("\xc3\xa9t\xc3\xa9\n"), "\xc3\xa9t\xc3\xa9");
  std::istringstream in("piped prompt\n");
  EXPECT_EQ(read_prompt_file("-", in), "piped prompt");
}

TEST(PromptInput, APromptFileMustBeUtf8) {
  testing::TempDir dir;
  std::istringstream none;
  const std::string p = dir.write("latin1.txt", "first line\nsecond caf\xe9 line\n");
  EXPECT_EQ(testing::error_of([&] { read_prompt_file(p, none); }),
            "--prompt-file " + p + ": line 2: invalid UTF-8 (byte 0xe9 at column 11); a prompt must be UTF-8 text");
  std::istringstream in("\xff");
  EXPECT_EQ(testing::error_of([&] { read_prompt_file("-", in); }),
            "--prompt-file <stdin>: line 1: invalid UTF-8 (byte 0xff at column 1); a prompt must be UTF-8 text");
}

}  // namespace
}  // namespace zaya
