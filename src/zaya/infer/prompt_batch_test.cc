// A --prompts batch: every line gets one result line, in order, echoing its
// id; a line that cannot run (bad JSON, a bad value, a prompt too long for the
// context) gets an error line naming file:line while the others run and give
// what they give alone; the failure message names the failed lines.
#include "zaya/infer/prompt_batch.h"

#include <gtest/gtest.h>

#include "zaya/data/test_util.h"
#include "zaya/infer/test_util.h"

namespace zaya {
namespace {

ZayaConfig prompt_batch_config() {
  ZayaConfig c = testing::small_test_config();  // max_position 128
  c.vocab_size = 512;
  c.real_vocab_size = 400;
  return c;
}

std::string repeated(const std::string& text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += text;
  return out;
}

class PromptBatch : public ::testing::Test {
 protected:
  PromptBatch()
      : tok_(Tokenizer::load(testing::small_tokenizer_path())),
        model_(testing::random_model(prompt_batch_config(), 61)),
        im_(InferModel::from_model(*model_)) {
    defaults_.generation.max_new_tokens = 6;
    defaults_.generation.sampling.temperature = 0.8;
    defaults_.generation.sampling.seed = 5;
    defaults_.generation.stop_ids = {};  // every request runs to its token limit or the context
  }
  GeneratorOptions options() const {
    GeneratorOptions o;
    o.max_batch = 2;
    o.step_tokens = 8;
    o.sample_vocab = tok_.vocab_size();
    return o;
  }
  std::vector<PromptLine> lines(const std::string& text, int64_t max_context = 0) const {
    std::vector<PromptLine> out = parse_prompt_lines(text, "p.jsonl", defaults_);
    prepare_prompt_lines(out, tok_, im_->config(), true, max_context);
    return out;
  }
  std::vector<nlohmann::ordered_json> run(const std::vector<PromptLine>& ls, const GeneratorOptions& o,
                                          PromptBatchOutcome* outcome = nullptr, GenerationStats* st = nullptr) {
    std::vector<nlohmann::ordered_json> out;
    const PromptBatchOutcome r = run_prompt_batch(
        *im_, tok_, ls, o, [&](const nlohmann::ordered_json& j) { out.push_back(j); }, st);
    if (outcome) *outcome = r;
    return out;
  }
  // What `line` gives when it runs alone.
  TextCompletion alone(const PromptLine& line) const {
    return generate_text(*im_, tok_, {line.request}, GeneratorOptions{})[0];
  }
  Tokenizer tok_;
  std::unique_ptr<ZayaModel> model_;
  std::unique_ptr<InferModel> im_;
  TextRequest defaults_;
};

TEST_F(PromptBatch, EveryLineGetsOneResultInOrderAndTheValidOnesRun) {
  const std::string too_long = repeated("And God said, Let there be light: and there was light. ", 20);
  const std::vector<PromptLine> ls =
      lines("{\"prompt\": \"" + too_long +
            "\", \"id\": \"long\"}\n"                                         // 1: too long for 128 positions
            "{\"prompt\": \"In the beginning\", \"id\": \"a\"}\n"             // 2
            "{oops\n"                                                         // 3: not JSON
            "\n"                                                              // 4: skipped
            "{\"prompt\": \"And\", \"id\": 2, \"max_new_tokens\": -1}\n"      // 5: a negative limit
            "{\"prompt\": \"Blessed\", \"id\": {\"k\": [1]}, \"seed\": 9}\n"  // 6
            "{\"prompt\": \"And God said\"}\n");                              // 7: no id
  ASSERT_EQ(ls.size(), 6u);
  PromptBatchOutcome outcome;
  const std::vector<nlohmann::ordered_json> out = run(ls, options(), &outcome);
  ASSERT_EQ(out.size(), 6u);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i]["index"], i);
  EXPECT_EQ(outcome.failed, 3u);
  EXPECT_EQ(outcome.context_limited, 0u);

  // The errors, each naming the file and line, with the id and prompt the line gave.
  EXPECT_EQ(out[0]["finish_reason"], "error");
  EXPECT_EQ(out[0]["id"], "long");
  EXPECT_EQ(out[0]["prompt"], too_long);
  const std::string long_error = out[0]["error"].get<std::string>();
  EXPECT_EQ(long_error.rfind("p.jsonl:1: the prompt (", 0), 0u) << long_error;
  EXPECT_NE(long_error.find("tokens) leaves no room under max_position_embeddings (128)"), std::string::npos);
  EXPECT_FALSE(out[0].contains("completion"));
  EXPECT_EQ(out[2]["finish_reason"], "error");
  EXPECT_TRUE(out[2]["id"].is_null());
  EXPECT_TRUE(out[2]["prompt"].is_null());
  EXPECT_EQ(out[2]["error"].get<std::string>().rfind("p.jsonl:3: invalid JSON: ", 0), 0u);
  EXPECT_EQ(out[3]["id"], 2);
  EXPECT_EQ(out[3]["error"], "p.jsonl:5: \"max_new_tokens\" = -1 is invalid; allowed: >= 0");

  // The valid requests: the same completion as alone, the id echoed as written.
  for (size_t i : {size_t(1), size_t(4), size_t(5)}) {
    const TextCompletion single = alone(ls[i]);
    EXPECT_EQ(out[i]["completion"], single.text) << "line " << i;
    EXPECT_EQ(out[i]["tokens"].get<std::vector<int32_t>>(), single.tokens) << "line " << i;
    EXPECT_EQ(out[i]["finish_reason"], "length");
    EXPECT_FALSE(out[i].contains("error"));
  }
  EXPECT_EQ(out[1]["id"], "a");
  EXPECT_EQ(out[4]["id"].dump(), "{\"k\":[1]}");
  EXPECT_TRUE(out[5]["id"].is_null());
  EXPECT_EQ(out[1].dump().rfind("{\"index\":1,\"id\":\"a\",\"prompt\":\"In the beginning\",\"completion\":", 0), 0u)
      << out[1].dump();
  EXPECT_NE(out[0].dump().find(",\"finish_reason\":\"error\",\"error\":\"p.jsonl:1: the prompt ("), std::string::npos);

  EXPECT_EQ(prompt_batch_failure(ls),
            "3 of 6 requests failed (p.jsonl:1, p.jsonl:3, p.jsonl:5); their result lines have \"finish_reason\": "
            "\"error\"");
}

TEST_F(PromptBatch, TheContextCapIsCheckedFirstAndItsStopsCounted) {
  GeneratorOptions o = options();
  o.max_context = 12;
  const std::vector<PromptLine> ls = lines(
      "{\"prompt\": \"" + repeated("In the beginning ", 6) + "\"}\n{\"prompt\": \"And\", \"max_new_tokens\": 40}\n",
      o.max_context);
  ASSERT_EQ(ls.size(), 2u);
  EXPECT_NE(ls[0].error.find("p.jsonl:1: the prompt ("), std::string::npos);
  EXPECT_NE(ls[0].error.find("tokens) leaves no room under --max-context (12)"), std::string::npos) << ls[0].error;
  EXPECT_EQ(ls[1].error, "");
  PromptBatchOutcome outcome;
  GenerationStats st;
  const std::vector<nlohmann::ordered_json> out = run(ls, o, &outcome, &st);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1]["finish_reason"], "context");
  EXPECT_EQ(outcome.context_limited, 1u);
  EXPECT_EQ(outcome.failed, 1u);
  EXPECT_EQ(st.context, 12);
  // The cache holds 12 positions; the last token sampled is never fed.
  EXPECT_EQ(int64_t(ls[1].request.generation.prompt.size() + out[1]["tokens"].size()), 12 + 1);
}

TEST_F(PromptBatch, AllLinesFailingStillAnswersEachAndNamesTheFirstTen) {
  std::string text;
  for (int i = 0; i < 12; ++i) text += "{\"prompt\": \"x\", \"top_k\": -1, \"id\": " + std::to_string(i) + "}\n";
  const std::vector<PromptLine> ls = lines(text);
  const std::vector<nlohmann::ordered_json> out = run(ls, options());
  ASSERT_EQ(out.size(), 12u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i]["id"], i);
    EXPECT_EQ(out[i]["finish_reason"], "error");
  }
  EXPECT_EQ(prompt_batch_failure(ls),
            "12 of 12 requests failed (p.jsonl:1, p.jsonl:2, p.jsonl:3, p.jsonl:4, p.jsonl:5, p.jsonl:6, p.jsonl:7, "
            "p.jsonl:8, p.jsonl:9, p.jsonl:10, and 2 more); their result lines have \"finish_reason\": \"error\"");
  EXPECT_EQ(prompt_batch_failure(lines("{\"prompt\": \"x\"}\n")), "");
}

}  // namespace
}  // namespace zaya
