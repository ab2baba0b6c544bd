// The --prompts JSONL reader: keys override the defaults, blank lines are
// skipped, and every error names the file and line, the key and what is allowed.
#include "zaya/infer/prompts_file.h"

#include <gtest/gtest.h>

#include "zaya/core/test_util.h"

namespace zaya {
namespace {

TextRequest defaults() {
  TextRequest d;
  d.generation.max_new_tokens = 17;
  d.generation.sampling.temperature = 0.5;
  d.generation.sampling.seed = 9;
  d.generation.stop_ids = {1};
  d.stop_strings = {"\n\n"};
  return d;
}

TEST(PromptsFile, KeysOverrideTheDefaultsAndBlankLinesAreSkipped) {
  testing::TempDir dir;
  const std::string path = dir.write("p.jsonl",
                                     "{\"prompt\": \"In the beginning\"}\n"
                                     "\n"
                                     "  \t\r\n"
                                     "{\"prompt\": \"And\", \"max_new_tokens\": 3, \"seed\": 4, \"temperature\": 0, "
                                     "\"top_k\": 7, \"top_p\": 0.5, \"id\": {\"any\": [1]}}\n");
  const std::vector<TextRequest> r = read_prompts_file(path, defaults());
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].prompt, "In the beginning");
  EXPECT_EQ(r[0].generation.max_new_tokens, 17);
  EXPECT_EQ(r[0].generation.sampling.temperature, 0.5);
  EXPECT_EQ(r[0].generation.sampling.seed, 9u);
  EXPECT_EQ(r[0].generation.stop_ids, std::vector<int32_t>{1});
  EXPECT_EQ(r[0].stop_strings, std::vector<std::string>{"\n\n"});
  EXPECT_TRUE(r[0].generation.prompt.empty());  // left to encode_prompt
  EXPECT_EQ(r[1].prompt, "And");
  EXPECT_EQ(r[1].generation.max_new_tokens, 3);
  EXPECT_EQ(r[1].generation.sampling.seed, 4u);
  EXPECT_EQ(r[1].generation.sampling.temperature, 0.0);
  EXPECT_EQ(r[1].generation.sampling.top_k, 7);
  EXPECT_EQ(r[1].generation.sampling.top_p, 0.5);
  EXPECT_EQ(r[1].stop_strings, std::vector<std::string>{"\n\n"});
}

TEST(PromptsFile, ErrorsNameTheFileLineAndKey) {
  testing::TempDir dir;
  auto error_for = [&](const std::string& text) {
    const std::string p = dir.write("bad.jsonl", text);
    return testing::error_of([&] { read_prompts_file(p, defaults()); });
  };
  const std::string file = dir.file("bad.jsonl");
  // The line number counts blank lines.
  EXPECT_EQ(
      error_for("{\"prompt\": \"x\"}\n\n{\"prompt\": \"y\", \"temprature\": 1}\n"),
      file + ":3: unknown key \"temprature\"; allowed: prompt, max_new_tokens, seed, temperature, top_k, top_p, id");
  EXPECT_EQ(error_for("{\"prompt\": \"x\", \"max_new_tokens\": \"z\"}\n"),
            file + ":1: \"max_new_tokens\" = \"z\" must be an integer");
  EXPECT_EQ(error_for("{\"prompt\": \"x\", \"seed\": 1.5}\n"), file + ":1: \"seed\" = 1.5 must be an integer");
  EXPECT_EQ(error_for("{\"prompt\": \"x\", \"temperature\": \"hot\"}\n"),
            file + ":1: \"temperature\" = \"hot\" must be a number");
  EXPECT_EQ(error_for("{\"prompt\": \"x\", \"top_p\": 2}\n"), file + ":1: --top-p 2 is invalid; allowed: (0, 1]");
  EXPECT_EQ(error_for("{\"seed\": 1}\n"), file + ":1: expected an object with a string \"prompt\"");
  EXPECT_EQ(error_for("{\"prompt\": 3}\n"), file + ":1: expected an object with a string \"prompt\"");
  EXPECT_EQ(error_for("[\"x\"]\n"), file + ":1: expected an object with a string \"prompt\"");
  EXPECT_NE(error_for("{\"prompt\": \"x\"}\n{oops\n").find(file + ":2: invalid JSON: "), std::string::npos);
  EXPECT_EQ(error_for(""), file + ": no prompts (one JSON object per line)");
  EXPECT_EQ(error_for("\n  \n"), file + ": no prompts (one JSON object per line)");
  EXPECT_EQ(testing::error_of([&] { read_prompts_file(dir.file("missing.jsonl"), defaults()); }),
            "cannot read '" + dir.file("missing.jsonl") + "'");
}

}  // namespace
}  // namespace zaya
