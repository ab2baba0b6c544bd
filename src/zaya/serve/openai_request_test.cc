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
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "In the");
  EXPECT_FALSE(r.prompts[0].is_ids);
  EXPECT_FALSE(r.echo);
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
  EXPECT_FALSE(r.ignore_eos);
  EXPECT_TRUE(completions(R"({"prompt": "x", "ignore_eos": true})").ignore_eos);  // vLLM's extension
  EXPECT_TRUE(chat(R"({"messages": [{"role": "user", "content": "a"}], "ignore_eos": true})").ignore_eos);
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
      {R"({"prompt": 3})", "prompt",
       "'prompt' must be a string, a list of strings, a list of token ids, or a list of token-id lists; got 3"},
      {R"({"prompt": []})", "prompt", "'prompt' must be a string, a list of strings"},
      {R"({"prompt": ["a", 3]})", "prompt", "'prompt[1]' = 3 is invalid: 'prompt' must be a string, a list"},
      {R"({"prompt": [2, -1]})", "prompt", "'prompt[1]' = -1 is not a token id"},
      {R"({"prompt": [[2], [2, 4294967296]]})", "prompt", "'prompt[1][1]' = 4294967296 is not a token id"},
      {R"({"prompt": [[2], []]})", "prompt", "'prompt[1]' is an empty list of token ids"},
      {R"({"prompt": "x", "stop": "x", "echo": "yes"})", "echo", "'echo' must be true or false; got \"yes\""},
      {R"({"prompt": "x", "echo": true, "stream": true})", "echo",
       "'echo' = true is not supported with \"stream\": true"},
      {R"({"prompt": "x", "max_tokens": -1})", "max_tokens", "'max_tokens' = -1 is invalid; allowed: 0..16777216"},
      {R"({"prompt": "x", "max_tokens": "9"})", "max_tokens", "'max_tokens' must be an integer; got \"9\""},
      {R"({"prompt": "x", "temperature": 2.5})", "temperature", "'temperature' = 2.5 is invalid; allowed: [0, 2]"},
      {R"({"prompt": "x", "top_p": 0})", "top_p", "'top_p' = 0 is invalid; allowed: (0, 1]"},
      {R"({"prompt": "x", "n": 17})", "n", "'n' = 17 is invalid; allowed: 1..16"},
      {R"({"prompt": "x", "stop": [1]})", "stop", "'stop' must hold strings; got 1"},
      {R"({"prompt": "x", "stream": "yes"})", "stream", "'stream' must be true or false; got \"yes\""},
      {R"({"prompt": "x", "ignore_eos": 1})", "ignore_eos", "'ignore_eos' must be true or false; got 1"},
      {R"({"messages": [{"role": "user", "content": "a"}], "ignore_eos": "yes"})", "ignore_eos",
       "'ignore_eos' must be true or false; got \"yes\"", true},
      {R"({"prompt": "x", "ignore_eos": true, "response_format": {"type": "json_object"}})", "ignore_eos",
       "'ignore_eos' = true is not supported with 'response_format'"},
      {R"({"prompt": "x", "logprobs": 6})", "logprobs", "'logprobs' = 6 is invalid; allowed: 0..5"},
      {R"({"prompt": "x", "frequency_penalty": 0.5})", "frequency_penalty",
       "'frequency_penalty' = 0.5 is not supported; allowed: 0 (no penalties)"},
      {R"({})", "messages", "'messages' is required", true},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content", "'messages[0].content' is missing", true},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content[0]",
       "'messages[0].content[0]' must be {\"type\": \"text\", \"text\": \"...\"}", true},
      {R"({"messages": [{"role": "bot", "content": "a"}]})", "messages[0].role",
       "'messages[0].role' = \"bot\" is invalid; allowed: system, developer, user, assistant", true},
      {R"({"messages": [{"role": "assistant", "content": "a"}]})", "messages",
       "messages[0].role is \"assistant\" where \"user\" is expected", true},
      {R"({"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2})", "top_logprobs",
       "'top_logprobs' needs \"logprobs\": true", true},
      // A tool-call history in the gemma3 format is refused as such, not as a missing content (L10).
      {R"({"messages": [{"role": "user", "content": "a"},
                        {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function"}]},
                        {"role": "tool", "tool_call_id": "c", "content": "42"}]})",
       "messages[1].tool_calls",
       "'messages[1].tool_calls' is set, but this model's chat format gemma3 has no tool calls", true},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "42"}]})", "messages[1].role",
       "'messages[1].role' is \"tool\", but this model's chat format gemma3 has no tool results", true},
      {R"({"messages": [{"role": "assistant", "content": null, "function_call": {"name": "f"}}]})",
       "messages[0].function_call", "'messages[0].function_call' is legacy function calling", true},
      {R"({"messages": [{"role": "user", "content": "a"}], "functions": [{"name": "f"}]})", "functions",
       "'functions' = [{\"name\":\"f\"}] is not supported; allowed: [] (legacy function calling", true},
      {R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function", "function": {"name": "f"}}]})",
       "tools", "'tools' is set, but this model's chat format gemma3 has no tool calls", true},
      {R"({"messages": [{"role": "user", "content": "a"}], "function_call": "auto"})", "function_call",
       "'function_call' = \"auto\" is not supported; allowed: \"none\"", true},
      {R"({"messages": [{"role": "user", "content": [{"type": 7}]}]})", "messages[0].content[0]",
       "'messages[0].content[0]' must be {\"type\": \"text\"", true},
  };
  for (const Case& c : cases) {
    const OpenAiRequest r = c.is_chat ? chat(c.body) : completions(c.body);
    EXPECT_EQ(r.error_param, c.param) << c.body;
    EXPECT_EQ(r.error.substr(0, c.message.size()), c.message) << c.body << " -> " << r.error;
  }
}

OpenAiRequest zaya_chat(const std::string& body) {
  ApiLimits l;
  l.chat_format = ChatFormat::kZaya;
  l.max_tools = 3;
  return parse_openai_request(body, ApiEndpoint::kChat, l);
}

// The zaya format's tool parts: a tool loop's history, tools, tool_choice and thinking are read.
TEST(OpenAiRequest, ReadsToolsAndAToolLoop) {
  const OpenAiRequest r = zaya_chat(R"({"messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "reasoning_content": "call it",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Bonn\", \"days\": 2}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    "chat_template_kwargs": {"enable_thinking": false}, "parallel_tool_calls": true})");
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].reasoning, "call it");
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments.dump(), R"({"city":"Bonn","days":2})");  // the client's order
  EXPECT_EQ(r.messages[2].tool_call_id, "c1");
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tool_choice.kind, ToolChoice::Kind::kNamed);
  EXPECT_FALSE(r.enable_thinking);
  EXPECT_TRUE(
      zaya_chat(R"({"messages": [{"role": "user", "content": "a"}]})").enable_thinking);  // the server's default
  ApiLimits zaya;
  zaya.chat_format = ChatFormat::kZaya;
  const ChatOptions o = chat_options(r, zaya);
  EXPECT_EQ(o.forced_tool, std::optional<std::string>("get_weather"));
}

// Bad tool definitions and tool parts are 400s naming the field (hostile-input standard).
TEST(OpenAiRequest, BadToolsAreNamed) {
  const std::string m = R"("messages": [{"role": "user", "content": "a"}])";
  auto tool = [](const std::string& function) { return R"({"type": "function", "function": )" + function + "}"; };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("tools": {"a": 1})", "tools"},
      {R"("tools": [1, 2, 3, 4])", "tools"},  // more than max_tools
      {R"("tools": [{"type": "retrieval", "function": {"name": "f"}}])", "tools[0].type"},
      {R"("tools": [)" + tool(R"({"name": "a b"})") + "]", "tools[0].function.name"},
      {R"("tools": [)" + tool(R"({"name": "f<x>"})") + "]", "tools[0].function.name"},
      {R"("tools": [)" + tool(R"({"name": "f"})") + "," + tool(R"({"name": "f"})") + "]", "tools[1].function.name"},
      {R"("tools": [)" + tool(R"({"name": "f", "description": 3})") + "]", "tools[0].function.description"},
      {R"("tools": [)" + tool(R"({"name": "f", "parameters": []})") + "]", "tools[0].function.parameters"},
      {R"("tools": [)" + tool(R"({"name": "f", "parameters": {"type": "string"}})") + "]",
       "tools[0].function.parameters.type"},
      {R"("tools": [)" + tool(R"({"name": "f", "parameters": {"properties": {"x": {"type": "decimal"}}}})") + "]",
       "tools[0].function.parameters.properties.x.type"},
      {R"("tools": [)" + tool(R"({"name": "f", "parameters": {"properties": {"a>b": {}}}})") + "]",
       "tools[0].function.parameters.properties"},
      {R"("tools": [)" + tool(R"({"name": "f", "parameters": {"properties": {"x": {}}, "required": ["y"]}})") + "]",
       "tools[0].function.parameters.required"},
      {R"("tools": [)" + tool(R"({"name": "f"})") + R"(], "tool_choice": "always")", "tool_choice"},
      {R"("tools": [)" + tool(R"({"name": "f"})") +
           R"(], "tool_choice": {"type": "function", "function": {"name": "g"}})",
       "tool_choice.function.name"},
      {R"("tool_choice": "required")", "tool_choice"},
      {R"("chat_template_kwargs": {"enable_thinking": "no"})", "chat_template_kwargs.enable_thinking"},
  };
  for (const auto& [extra, param] : cases) {
    const OpenAiRequest r = zaya_chat("{" + m + ", " + extra + "}");
    EXPECT_EQ(r.error_param, param) << extra << " -> " << r.error;
    EXPECT_GE(r.error.size(), 20u) << extra;
  }
  const std::vector<std::pair<std::string, std::string>> history = {
      {R"({"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]})",
       "messages[1].tool_calls[0].function.arguments"},
      {R"({"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": "[1]"}}]})",
       "messages[1].tool_calls[0].function.arguments"},
      {R"({"role": "assistant", "content": null, "tool_calls": [{"type": "x", "function": {"name": "f"}}]})",
       "messages[1].tool_calls[0].type"},
      {R"({"role": "assistant", "content": "a", "reasoning_content": 5})", "messages[1].reasoning_content"},
      {R"({"role": "function", "content": "a"})", "messages[1].role"},
  };
  for (const auto& [message, param] : history) {
    const OpenAiRequest r = zaya_chat(R"({"messages": [{"role": "user", "content": "a"}, )" + message + "]}");
    EXPECT_EQ(r.error_param, param) << message << " -> " << r.error;
  }
}

// response_format: text asks for nothing, json_object and json_schema set the
// grammar (and turn thinking off); bad ones are named down to the schema keyword.
TEST(OpenAiRequest, ReadsResponseFormat) {
  const std::string user = R"({"messages": [{"role": "user", "content": "a"}], )";
  EXPECT_EQ(chat(user + R"("response_format": {"type": "text"}})").response_grammar, nullptr);
  const OpenAiRequest object = zaya_chat(user + R"("response_format": {"type": "json_object"}})");
  ASSERT_NE(object.response_grammar, nullptr) << object.error;
  EXPECT_FALSE(object.enable_thinking);
  EXPECT_TRUE(json_accepts(*object.response_grammar, R"({"a": [1]})"));
  EXPECT_FALSE(json_accepts(*object.response_grammar, "[1]"));
  const OpenAiRequest schema = completions(
      R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": true,
          "schema": {"type": "object", "properties": {"c": {"enum": ["r", "g"]}}, "required": ["c"]}}}})");
  ASSERT_NE(schema.response_grammar, nullptr) << schema.error;
  EXPECT_TRUE(json_accepts(*schema.response_grammar, R"({"c":"g"})"));
  EXPECT_FALSE(json_accepts(*schema.response_grammar, R"({"c":"b"})"));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"("json")", "response_format"},
      {R"({"type": "xml"})", "response_format.type"},
      {R"({"type": "json_schema"})", "response_format.json_schema"},
      {R"({"type": "json_schema", "json_schema": {"name": 1, "schema": {}}})", "response_format.json_schema.name"},
      {R"({"type": "json_schema", "json_schema": {"schema": {}, "strict": 1}})", "response_format.json_schema.strict"},
      {R"({"type": "json_schema", "json_schema": {"name": "n"}})", "response_format.json_schema.schema"},
      {R"({"type": "json_schema", "json_schema": {"schema": {"properties": {"x": {"type": "date"}}}}})",
       "response_format.json_schema.schema.properties.x.type"},
      {R"({"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "a"}}})",
       "response_format.json_schema.schema.pattern"},
  };
  for (const auto& [format, param] : bad) {
    const OpenAiRequest r = chat(user + R"("response_format": )" + format + "}");
    EXPECT_EQ(r.error_param, param) << format << " -> " << r.error;
    EXPECT_EQ(r.response_grammar, nullptr);
  }
  const OpenAiRequest tools = zaya_chat(
      user +
      R"("tools": [{"type": "function", "function": {"name": "f"}}], "response_format": {"type": "json_object"}})");
  EXPECT_EQ(tools.error_param, "response_format") << tools.error;
}

// The red-team's five crashing bodies (H1): a value nested 100k deep in a
// checked field. Each is refused while parsing, naming the limit.
TEST(OpenAiRequest, DeeplyNestedFieldsAreRefusedNotCrashing) {
  const int depth = 100000;
  const std::string arrays = std::string(depth, '[') + std::string(depth, ']');
  std::string types;
  for (int i = 0; i < depth; ++i) types += R"({"type":)";
  types += "1" + std::string(depth, '}');
  const std::vector<std::pair<std::string, bool>> bodies = {
      {R"({"prompt": "a", "stop": )" + arrays + "}", false},
      {R"({"prompt": "a", "max_tokens": )" + arrays + "}", false},
      {R"({"prompt": "a", "logit_bias": )" + arrays + "}", false},
      {R"({"messages": [{"role": "user", "content": )" + arrays + "}]}", true},
      {R"({"messages": [{"role": "user", "content": "a"}], "response_format": )" + types + "}", true},
  };
  for (const auto& [body, is_chat] : bodies) {
    const OpenAiRequest r = is_chat ? chat(body) : completions(body);
    EXPECT_EQ(r.error_param, "");
    EXPECT_EQ(r.error.substr(0, 48), "the request body: JSON nests deeper than 128 lev") << r.error.substr(0, 200);
  }
}

// Within the depth limit, a bad value is shown cut short (at most ~100 characters and what was cut).
TEST(OpenAiRequest, MessagesShowBoundedValues) {
  const std::string deep = std::string(120, '[') + std::string(120, ']');
  const std::string long_string = "\"" + std::string(100000, 'x') + "\"";
  std::string types;
  for (int i = 0; i < 100; ++i) types += R"({"type":)";
  types += "1" + std::string(100, '}');
  const std::vector<std::pair<std::string, bool>> bodies = {
      {R"({"prompt": "a", "stop": [)" + deep + "]}", false},
      {R"({"prompt": "a", "max_tokens": )" + deep + "}", false},
      {R"({"prompt": "a", "max_tokens": )" + long_string + "}", false},
      {R"({"prompt": "a", "temperature": )" + long_string + "}", false},
      {R"({"prompt": "a", "stream": )" + deep + "}", false},
      {R"({"prompt": "a", "seed": )" + deep + "}", false},
      {R"({"prompt": "a", "logit_bias": )" + deep + "}", false},
      {R"({"prompt": )" + deep + "}", false},
      {R"({"prompt": [[1, )" + deep + "]]}", false},
      {R"({"messages": [{"role": "user", "content": )" + deep + "}]}", true},
      {R"({"messages": [{"role": "user", "content": [)" + deep + "]}]}", true},
      {R"({"messages": [{"role": )" + long_string + R"(, "content": "a"}]})", true},
      {R"({"messages": [{"role": "user", "content": "a"}], "response_format": )" + types + "}", true},
  };
  for (const auto& [body, is_chat] : bodies) {
    const OpenAiRequest r = is_chat ? chat(body) : completions(body);
    EXPECT_NE(r.error_param, "") << r.error;
    EXPECT_LT(r.error.size(), 320u) << r.error;
    EXPECT_NE(r.error.find(" cut)"), std::string::npos) << r.error;
  }
}

TEST(OpenAiRequest, InvalidJsonHasNoLibraryTag) {
  const OpenAiRequest r = completions(R"({"prompt": "x",, })");
  EXPECT_EQ(r.error.find("[json.exception"), std::string::npos) << r.error;
  EXPECT_EQ(r.error.substr(0, 56), "the request body: invalid JSON: parse error at line 1, c") << r.error;
}

TEST(OpenAiRequest, DeveloperMessagesAreSystemMessages) {
  const OpenAiRequest r =
      chat(R"({"messages": [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})");
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  // Empty tool lists ask for nothing.
  EXPECT_EQ(chat(R"({"messages": [{"role": "user", "content": "a", "tool_calls": []}], "functions": [],
                     "function_call": "none", "tools": []})")
                .error,
            "");
}

// lm-evaluation-harness's local-completions bodies (M5): prompt batches in every form, echo, many stop strings.
TEST(OpenAiRequest, PromptListsEchoAndStopStrings) {
  const OpenAiRequest strings = completions(R"({"prompt": ["a", "b c"], "stop": ["1", "2", "3", "4", "5", "6"]})");
  ASSERT_EQ(strings.error, "");
  ASSERT_EQ(strings.prompts.size(), 2u);
  EXPECT_EQ(strings.prompts[1].text, "b c");
  EXPECT_EQ(strings.stop.size(), 6u);
  const OpenAiRequest ids = completions(R"({"prompt": [2, 100, 200], "echo": true, "max_tokens": 1, "logprobs": 1,
                                            "temperature": 0, "seed": 1234})");
  ASSERT_EQ(ids.error, "");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_ids);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int32_t>{2, 100, 200}));
  EXPECT_TRUE(ids.echo);
  EXPECT_EQ(ids.top_logprobs, 1);
  const OpenAiRequest lists = completions(R"({"prompt": [[2, 100, 200], [2, 300]], "echo": true})");
  ASSERT_EQ(lists.error, "");
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[1].ids, (std::vector<int32_t>{2, 300}));
  // The caps: stop strings and prompts per request.
  std::string stops = R"({"prompt": "a", "stop": [)";
  for (int i = 0; i < 33; ++i) stops += std::string(i ? "," : "") + R"("s")";
  const OpenAiRequest many = completions(stops + "]}");
  EXPECT_EQ(many.error_param, "stop");
  EXPECT_EQ(many.error, "'stop' must be a string or a list of up to 32 strings; got 33 strings");
  std::string prompts = R"({"prompt": [)";
  for (int i = 0; i < 65; ++i) prompts += std::string(i ? "," : "") + R"("p")";
  EXPECT_EQ(completions(prompts + "]}").error, "'prompt' holds 65 prompts; allowed: up to 64 per request");
}

// A model config for the small test tokenizer: 400 real ids of 512, 64 positions.
ZayaConfig small_config() {
  ZayaConfig c = preset_config("tiny");
  c.vocab_size = 512;
  c.real_vocab_size = 400;
  c.max_position = 64;
  return c;
}

TEST(OpenAiRequest, TextRequestsForCompletionAndChat) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const ZayaConfig c = small_config();
  OpenAiRequest r = completions(R"({"prompt": "In the beginning", "n": 3, "seed": 5, "stop": ["x"]})");
  const auto reqs = openai_text_requests(r, tok, c, 64, ApiLimits{});
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].generation.prompt, encode_prompt(tok, "In the beginning", true));
  EXPECT_EQ(reqs[0].generation.max_new_tokens, 16);
  EXPECT_EQ(reqs[2].generation.sampling.seed, 7u);
  EXPECT_EQ(reqs[0].stop_strings, std::vector<std::string>{"x"});
  EXPECT_EQ(reqs[0].generation.stop_ids, default_stop_ids(tok, c));
  // ignore_eos: no stop id (EOS, the chat's end of turn), the stop strings stay.
  OpenAiRequest past = completions(R"({"prompt": "In the", "stop": ["x"], "ignore_eos": true})");
  const auto past_reqs = openai_text_requests(past, tok, c, 64, ApiLimits{});
  ASSERT_EQ(past_reqs.size(), 1u);
  EXPECT_TRUE(past_reqs[0].generation.stop_ids.empty());
  EXPECT_EQ(past_reqs[0].stop_strings, std::vector<std::string>{"x"});
  OpenAiRequest past_chat = chat(R"({"messages": [{"role": "user", "content": "In"}], "ignore_eos": true})");
  const auto past_chats = openai_text_requests(past_chat, tok, c, 64, ApiLimits{});
  ASSERT_EQ(past_chats.size(), 1u);
  EXPECT_TRUE(past_chats[0].generation.stop_ids.empty());
  EXPECT_EQ(past_chats[0].stop_strings, std::vector<std::string>{"<end_of_turn>"});

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

TEST(OpenAiRequest, TextRequestsForEachPromptInOrder) {
  Tokenizer tok = Tokenizer::load(testing::small_tokenizer_path());
  const ZayaConfig c = small_config();
  // Choice prompt_index * n + i: prompt by prompt, n seeds each; token ids run as given (no BOS added).
  OpenAiRequest r = completions(R"({"prompt": [[5, 6, 7], [8, 9]], "n": 2, "seed": 10, "max_tokens": 3})");
  const auto reqs = openai_text_requests(r, tok, c, 64, ApiLimits{});
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].generation.prompt, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(reqs[1].generation.prompt, (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(reqs[2].generation.prompt, (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(reqs[2].prompt, tok.decode({8, 9}));
  EXPECT_EQ(reqs[1].generation.sampling.seed, 11u);
  EXPECT_EQ(reqs[3].generation.sampling.seed, 11u);
  OpenAiRequest s = completions(R"({"prompt": ["In the", "beginning"]})");
  const auto texts = openai_text_requests(s, tok, c, 64, ApiLimits{});
  ASSERT_EQ(texts.size(), 2u);
  EXPECT_EQ(texts[1].generation.prompt, encode_prompt(tok, "beginning", true));
  // A prompt that cannot run is named by its index.
  OpenAiRequest bad = completions(R"({"prompt": [[5], [5, 600]]})");
  EXPECT_TRUE(openai_text_requests(bad, tok, c, 64, ApiLimits{}).empty());
  EXPECT_EQ(bad.error_param, "prompt");
  EXPECT_EQ(bad.error, "'prompt[1]': prompt token 600 at position 1 is outside the tokenizer's vocabulary 0..399");
  // Echoed logprobs are scored over the model's real vocabulary (here narrower than the tokenizer's).
  ZayaConfig narrow = c;
  narrow.real_vocab_size = 300;
  OpenAiRequest padded = completions(R"({"prompt": [5, 350], "echo": true, "logprobs": 0})");
  EXPECT_TRUE(openai_text_requests(padded, tok, narrow, 64, ApiLimits{}).empty());
  EXPECT_EQ(padded.error,
            "'prompt': prompt token 350 at position 1 is outside the scored vocabulary 0..299 (echo with logprobs)");
  OpenAiRequest plain = completions(R"({"prompt": [5, 350]})");
  EXPECT_EQ(openai_text_requests(plain, tok, narrow, 64, ApiLimits{}).size(), 1u);
}

}  // namespace
}  // namespace zaya
