// Request bodies: the fields a client sends become the request, defaults are
// OpenAI's, and every bad field is refused naming it.
#include "zaya/serve/openai_request.h"

#include <gtest/gtest.h>

#include "zaya/data/test_util.h"

namespace zaya {
namespace {

OpenAiRequest completions(const std::string& body) {
  return parse_openai_request(body, ApiEndpoint::kCompletions, ApiLimits{});
}
OpenAiRequest chat(const std::string& body) { return parse_openai_request(body, ApiEndpoint::kChat, ApiLimits{}); }

TEST(OpenAiRequest, ReadsTheFieldsOfACompletion) {
  const OpenAiRequest r = completions(
      R"({"model": "m", "prompt": ["In the"], "max_tokens": 7, "stop": "\n", "temperature": 0.5, "top_p": 0.9,
          "top_k": 3, "seed": 11, "n": 2, "stream": true, "stream_options": {"include_usage": true}, "logprobs": 2,
          "user": "ignored", "presence_penalty": 0})");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "In the");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.temperature, 0.5);
  EXPECT_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.top_k, 3);
  EXPECT_EQ(r.seed, 11u);
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.top_logprobs, 2);
  // OpenAI's defaults.
  const OpenAiRequest d = completions(R"({"prompt": "x"})");
  EXPECT_EQ(d.temperature, 1.0);
  EXPECT_EQ(d.top_p, 1.0);
  EXPECT_EQ(d.top_k, 0);
  EXPECT_EQ(d.n, 1);
  EXPECT_EQ(d.top_logprobs, -1);
  EXPECT_FALSE(d.stream);
}

TEST(OpenAiRequest, ReadsChatMessagesAndLogprobs) {
  const OpenAiRequest r = chat(
      R"({"messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "!"}]}],
          "logprobs": true, "top_logprobs": 3, "max_completion_tokens": 5})");
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "Hi!");
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "a"}], "logprobs": true})").top_logprobs, 0);
}

TEST(OpenAiRequest, BadFieldsAreNamed) {
  struct Case {
    std::string body, param, message;
    bool is_chat = false;
  };
  const std::vector<Case> cases = {
      {"{oops", "", "the request body: invalid JSON"},
      {"[1]", "", "the request body must be a JSON object"},
      {R"({})", "prompt", "'prompt' is required"},
      {R"({"prompt": 3})", "prompt", "'prompt' must be a string (or a list of one string)"},
      {R"({"prompt": "x", "max_tokens": -1})", "max_tokens", "'max_tokens' = -1 is invalid; allowed: 0..16777216"},
      {R"({"prompt": "x", "max_tokens": "9"})", "max_tokens", "'max_tokens' must be an integer; got \"9\""},
      {R"({"prompt": "x", "temperature": 2.5})", "temperature", "'temperature' = 2.5 is invalid; allowed: [0, 2]"},
      {R"({"prompt": "x", "top_p": 0})", "top_p", "'top_p' = 0 is invalid; allowed: (0, 1]"},
      {R"({"prompt": "x", "n": 17})", "n", "'n' = 17 is invalid; allowed: 1..16"},
      {R"({"prompt": "x", "stop": [1]})", "stop", "'stop' must hold strings; got 1"},
      {R"({"prompt": "x", "stream": "yes"})", "stream", "'stream' must be true or false; got \"yes\""},
      {R"({"prompt": "x", "logprobs": 6})", "logprobs", "'logprobs' = 6 is invalid; allowed: 0..5"},
      {R"({"prompt": "x", "echo": true})", "echo", "'echo' = true is not supported; allowed: false"},
      {R"({"prompt": "x", "frequency_penalty": 0.5})", "frequency_penalty",
       "'frequency_penalty' = 0.5 is not supported; allowed: 0 (no penalties)"},
      {R"({})", "messages", "'messages' is required", true},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content", "'messages[0].content' is missing", true},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content[0]",
       "'messages[0].content[0]' must be {\"type\": \"text\", \"text\": \"...\"}", true},
      {R"({"messages": [{"role": "bot", "content": "a"}]})", "messages", "messages[0].role \"bot\" is invalid", true},
      {R"({"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2})", "top_logprobs",
       "'top_logprobs' needs \"logprobs\": true", true},
  };
  for (const Case& c : cases) {
    const OpenAiRequest r = c.is_chat ? chat(c.body) : completions(c.body);
    EXPECT_EQ(r.error_param, c.param) << c.body;
    EXPECT_EQ(r.error.substr(0, c.message.size()), c.message) << c.body << " -> " << r.error;
  }
}

TEST(OpenAiRequest, TextRequestsForCompletionAndChat) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  ZayaConfig c = preset_config("tiny");
  c.vocab_size = 512;
  c.real_vocab_size = 400;
  c.max_position = 64;
  OpenAiRequest r = completions(R"({"prompt": "In the beginning", "n": 3, "seed": 5, "stop": ["x"]})");
  const auto reqs = openai_text_requests(r, tok, c, 64, ApiLimits{});
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].generation.prompt, encode_prompt(tok, "In the beginning", true));
  EXPECT_EQ(reqs[0].generation.max_new_tokens, 16);
  EXPECT_EQ(reqs[2].generation.sampling.seed, 7u);
  EXPECT_EQ(reqs[0].stop_strings, std::vector<std::string>{"x"});
  EXPECT_EQ(reqs[0].generation.stop_ids, default_stop_ids(tok, c));

  // Chat: the template's ids, its stop string (this tokenizer has no turn markers), max_tokens capped by the context.
  OpenAiRequest q = chat(R"({"messages": [{"role": "user", "content": "In the"}], "max_tokens": 1000})");
  const auto chats = openai_text_requests(q, tok, c, 64, ApiLimits{});
  ASSERT_EQ(chats.size(), 1u);
  const std::vector<ChatMessage> m = {{"user", "In the"}};
  EXPECT_EQ(chats[0].generation.prompt, encode_chat(tok, m, true).ids);
  EXPECT_EQ(chats[0].generation.max_new_tokens, 64 - int64_t(chats[0].generation.prompt.size()));
  EXPECT_EQ(chats[0].stop_strings, std::vector<std::string>{"<end_of_turn>"});

  // A prompt that leaves no room under the context.
  OpenAiRequest big = completions(R"({"prompt": ")" + std::string(400, 'a') + R"("})");
  EXPECT_TRUE(openai_text_requests(big, tok, c, 64, ApiLimits{}).empty());
  EXPECT_EQ(big.error_param, "prompt");
  EXPECT_NE(big.error.find("leaves no room under"), std::string::npos) << big.error;
}

}  // namespace
}  // namespace zaya
