// The --prompts JSONL reader: keys override the defaults, blank lines are
// skipped, "id" is kept as written, standard input stands for "-", and a line
// that cannot be a request still is one, with an error that names the file
// and line, the key and what is allowed.
#include "zaya/infer/prompts_file.h"

#include <gtest/gtest.h>

#include <sstream>

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
                                     "\"top_k\": 7, \"top_p\": 0.5, \"ignore_eos\": true, \"id\": {\"any\": [1]}}\n");
  std::istringstream no_stdin;
  std::vector<TextRequest> r;
  for (const PromptLine& line : read_prompts_file(path, defaults(), no_stdin)) {
    EXPECT_EQ(line.error, "");
    r.push_back(line.request);
  }
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].prompt, "In the beginning");
  EXPECT_EQ(r[0].generation.max_new_tokens, 17);
  EXPECT_EQ(r[0].generation.sampling.temperature, 0.5);
  EXPECT_EQ(r[0].generation.sampling.seed, 9u);
  EXPECT_EQ(r[0].generation.stop_ids, std::vector<int32_t>{1});
  EXPECT_EQ(r[0].stop_strings, std::vector<std::string>{"\n\n"});
  EXPECT_FALSE(r[0].ignore_eos);
  EXPECT_TRUE(r[0].generation.prompt.empty());  // left to encode_prompt
  EXPECT_EQ(r[1].prompt, "And");
  EXPECT_EQ(r[1].generation.max_new_tokens, 3);
  EXPECT_EQ(r[1].generation.sampling.seed, 4u);
  EXPECT_EQ(r[1].generation.sampling.temperature, 0.0);
  EXPECT_EQ(r[1].generation.sampling.top_k, 7);
  EXPECT_EQ(r[1].generation.sampling.top_p, 0.5);
  EXPECT_EQ(r[1].stop_strings, std::vector<std::string>{"\n\n"});
  EXPECT_TRUE(r[1].ignore_eos);  // prepare_text_request drops the stop ids
}

TEST(PromptsFile, IdsAreKeptAsWrittenAndLinesNamed) {
  const std::vector<PromptLine> lines = parse_prompt_lines(
      "{\"prompt\": \"a\", \"id\": \"first\"}\n\n{\"id\": 2, \"prompt\": \"b\"}\n"
      "{\"prompt\": \"c\", \"id\": {\"z\": 1, \"a\": [true, null]}}\n{\"prompt\": \"d\"}\n",
      "p.jsonl", defaults());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].id.dump(), "\"first\"");
  EXPECT_EQ(lines[1].id.dump(), "2");
  EXPECT_EQ(lines[2].id.dump(), "{\"z\":1,\"a\":[true,null]}");  // the caller's key order
  EXPECT_TRUE(lines[3].id.is_null());
  EXPECT_EQ(lines[0].where, "p.jsonl:1");
  EXPECT_EQ(lines[1].where, "p.jsonl:3");  // blank lines count
  EXPECT_EQ(lines[3].where, "p.jsonl:5");
  for (const PromptLine& line : lines) {
    EXPECT_EQ(line.error, "");
    EXPECT_TRUE(line.has_prompt);
  }
}

TEST(PromptsFile, StandardInputStandsForDash) {
  std::istringstream in("{\"prompt\": \"from stdin\", \"id\": 7}\n");
  const std::vector<PromptLine> lines = read_prompts_file("-", defaults(), in);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].request.prompt, "from stdin");
  EXPECT_EQ(lines[0].where, "<stdin>:1");
  std::istringstream empty("\n");
  EXPECT_EQ(testing::error_of([&] { read_prompts_file("-", defaults(), empty); }),
            "<stdin>: no prompts (one JSON object per line)");
}

// A bad line is a request with an error; the lines around it are unaffected.
TEST(PromptsFile, ErrorsNameTheFileLineAndKey) {
  auto error_for = [&](const std::string& text) {
    const std::vector<PromptLine> lines = parse_prompt_lines(text, "bad.jsonl", defaults());
    EXPECT_FALSE(lines.empty());
    std::string errors;
    for (const PromptLine& line : lines)
      if (!line.error.empty()) errors += (errors.empty() ? "" : " | ") + line.error;
    return errors;
  };
  const std::string file = "bad.jsonl";
  // The line number counts blank lines.
  EXPECT_EQ(error_for("{\"prompt\": \"x\"}\n\n{\"prompt\": \"y\", \"temprature\": 1}\n"),
            file +
                ":3: unknown key \"temprature\"; allowed: prompt, max_new_tokens, seed, temperature, top_k, top_p, "
                "ignore_eos, id");
  EXPECT_EQ(error_for("{\"prompt\": \"x\", \"ignore_eos\": 1}\n"),
            file + ":1: \"ignore_eos\" = 1 must be true or false");
  EXPECT_EQ(error_for("{\"prompt\": \"x\", \"max_new_tokens\": \"z\"}\n"),
            file + ":1: \"max_new_tokens\" = \"z\" must be an integer");
  EXPECT_EQ(error_for("{\"prompt\": \"x\", \"max_new_tokens\": -1}\n"),
            file + ":1: \"max_new_tokens\" = -1 is invalid; allowed: >= 0");
  EXPECT_EQ(error_for("{\"prompt\": \"x\", \"seed\": 1.5}\n"), file + ":1: \"seed\" = 1.5 must be an integer");
  EXPECT_EQ(error_for("{\"prompt\": \"x\", \"temperature\": \"hot\"}\n"),
            file + ":1: \"temperature\" = \"hot\" must be a number");
  EXPECT_EQ(error_for("{\"prompt\": \"x\", \"top_p\": 2}\n"), file + ":1: --top-p 2 is invalid; allowed: (0, 1]");
  EXPECT_EQ(error_for("{\"seed\": 1}\n"), file + ":1: expected an object with a string \"prompt\"");
  EXPECT_EQ(error_for("{\"prompt\": 3}\n"), file + ":1: expected an object with a string \"prompt\"");
  EXPECT_EQ(error_for("[\"x\"]\n"), file + ":1: expected an object with a string \"prompt\"");
  EXPECT_NE(error_for("{\"prompt\": \"x\"}\n{oops\n").find(file + ":2: invalid JSON: "), std::string::npos);

  // Each line is one request, valid or not, in order; an error keeps what the line did give.
  const std::vector<PromptLine> lines = parse_prompt_lines(
      "{\"prompt\": \"ok\", \"id\": 1}\n{oops\n{\"prompt\": \"p\", \"id\": \"b\", \"max_new_tokens\": -3}\n"
      "{\"id\": \"c\"}\n{\"prompt\": \"fine\"}\n",
      file, defaults());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].error, "");
  EXPECT_NE(lines[1].error, "");
  EXPECT_FALSE(lines[1].has_prompt);
  EXPECT_TRUE(lines[1].id.is_null());
  EXPECT_NE(lines[2].error, "");
  EXPECT_TRUE(lines[2].has_prompt);
  EXPECT_EQ(lines[2].request.prompt, "p");
  EXPECT_EQ(lines[2].id, "b");
  EXPECT_FALSE(lines[3].has_prompt);
  EXPECT_EQ(lines[3].id, "c");  // the id is echoed even without a prompt
  EXPECT_EQ(lines[4].error, "");
  EXPECT_EQ(lines[4].request.prompt, "fine");

  testing::TempDir dir;
  std::istringstream no_stdin;
  EXPECT_EQ(testing::error_of([&] { read_prompts_file(dir.write("e.jsonl", ""), defaults(), no_stdin); }),
            dir.file("e.jsonl") + ": no prompts (one JSON object per line)");
  EXPECT_EQ(testing::error_of([&] { read_prompts_file(dir.write("e.jsonl", "\n  \n"), defaults(), no_stdin); }),
            dir.file("e.jsonl") + ": no prompts (one JSON object per line)");
  EXPECT_EQ(testing::error_of([&] { read_prompts_file(dir.file("missing.jsonl"), defaults(), no_stdin); }),
            "--prompts: cannot read '" + dir.file("missing.jsonl") + "'");
}

}  // namespace
}  // namespace zaya
