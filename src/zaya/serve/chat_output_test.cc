// A chat answer split into reasoning, content and tool calls (chat_output.h,
// tool_call_xml.h) on model-independent text: every test feeds the text whole
// and one byte at a time and wants the same result, so streamed and whole
// responses agree wherever a piece ends.
#include "zaya/serve/chat_output.h"

#include <gtest/gtest.h>

#include "zaya/data/chat_json.h"
#include "zaya/serve/tool_call_xml.h"

namespace zaya {
namespace {

struct Split {
  std::string reasoning, content;
  std::vector<ApiToolCall> calls;
  std::vector<std::string> warnings;
  size_t deltas = 0;  // non-empty deltas
};

Split run(const ChatOutputOptions& o, const std::string& text, size_t piece) {
  ChatOutputParser p(o);
  Split s;
  auto take = [&](const ChatDelta& d) {
    s.reasoning += d.reasoning;
    s.content += d.content;
    s.calls.insert(s.calls.end(), d.tool_calls.begin(), d.tool_calls.end());
    s.warnings.insert(s.warnings.end(), d.warnings.begin(), d.warnings.end());
    s.deltas += d.empty() ? 0 : 1;
  };
  for (size_t i = 0; i < text.size(); i += piece) take(p.feed(text.substr(i, piece)));
  take(p.finish());
  return s;
}

// The same split whole and byte by byte; returns the byte-by-byte one.
Split split(const ChatOutputOptions& o, const std::string& text) {
  const Split whole = run(o, text, text.size() + 1), bytes = run(o, text, 1);
  EXPECT_EQ(whole.reasoning, bytes.reasoning) << text;
  EXPECT_EQ(whole.content, bytes.content) << text;
  EXPECT_EQ(whole.calls.size(), bytes.calls.size()) << text;
  for (size_t i = 0; i < whole.calls.size() && i < bytes.calls.size(); ++i)
    EXPECT_EQ(whole.calls[i].arguments, bytes.calls[i].arguments) << text;
  return bytes;
}

std::vector<ChatTool> weather_tools() {
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
      "scale": {"type": "number"}, "when": {"type": ["string", "null"]}, "tags": {"type": "array"},
      "where": {"type": "object"}}}}},
    {"type": "function", "function": {"name": "ping"}}])");
  return read_chat_tools(tools, 10);
}

ChatOutputOptions zaya_options(bool reasoning, bool tools) {
  ChatOutputOptions o;
  o.format = ChatFormat::kZaya;
  o.reasoning = reasoning;
  o.parse_tools = tools;
  if (tools) o.tools = weather_tools();
  o.id_prefix = "call_7_0_";
  return o;
}

TEST(ChatOutput, ReasoningThenContent) {
  const Split s = split(zaya_options(true, false), "Two and two.\nIs four.\n</think>\n\nIt is 4.");
  EXPECT_EQ(s.reasoning, "Two and two.\nIs four.");
  EXPECT_EQ(s.content, "It is 4.");
  // Cut off inside the think block: all reasoning, no content.
  const Split cut = split(zaya_options(true, false), "Still thinking </thi");
  EXPECT_EQ(cut.reasoning, "Still thinking </thi");
  EXPECT_EQ(cut.content, "");
  // Thinking off: all content, a "</think>" in it is text.
  EXPECT_EQ(split(zaya_options(false, false), "a </think> b").content, "a </think> b");
}

TEST(ChatOutput, Gemma3IsContentAtOnce) {
  ChatOutputOptions o;
  o.format = ChatFormat::kGemma3;
  const std::string text = "Hello <zyphra_tool_call> </think> \n";
  const Split s = split(o, text);
  EXPECT_EQ(s.content, text);
  EXPECT_EQ(s.deltas, text.size());  // one delta per byte fed: nothing held back
}

TEST(ChatOutput, ToolCallsTypedBySchema) {
  const std::string text =
      "Need data.\n</think>\n\nLet me check.\n<zyphra_tool_call>\n<function=get_weather>\n<parameter=city>\nZürich "
      "\"Nord\"\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=metric>\nTrue\n</parameter>\n"
      "<parameter=scale>\n1.5\n</parameter>\n<parameter=when>\nnull\n</parameter>\n<parameter=tags>\n[\"a\", "
      "\"b\"]\n</parameter>\n<parameter=where>\n{\"lat\": 47.3}\n</parameter>\n<parameter=extra>\n12\n</parameter>\n"
      "</function>\n</zyphra_tool_call>\n<zyphra_tool_call>\n<function=ping>\n</function>\n</zyphra_tool_call>";
  const Split s = split(zaya_options(true, true), text);
  EXPECT_EQ(s.reasoning, "Need data.");
  EXPECT_EQ(s.content, "Let me check.");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].id, "call_7_0_0");
  EXPECT_EQ(s.calls[0].index, 0u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(s.calls[0].arguments,
            "{\"city\": \"Zürich \\\"Nord\\\"\", \"days\": 3, \"metric\": true, \"scale\": 1.5, \"when\": null, "
            "\"tags\": [\"a\", \"b\"], \"where\": {\"lat\": 47.3}, \"extra\": \"12\"}");
  EXPECT_EQ(s.calls[1].id, "call_7_0_1");
  EXPECT_EQ(s.calls[1].arguments, "{}");
  EXPECT_TRUE(s.warnings.empty());
}

TEST(ChatOutput, MistypedValueStaysTextWithAWarning) {
  const Split s = split(zaya_options(false, true),
                        "<zyphra_tool_call><function=get_weather><parameter=days>three</parameter></function>"
                        "</zyphra_tool_call>");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].arguments, "{\"days\": \"three\"}");
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("parameter 'days'"), std::string::npos) << s.warnings[0];
}

TEST(ChatOutput, MalformedCallsAreContentWithAWarning) {
  for (const std::string body :
       {"\n<function=nope>\n</function>\n", "\n<parameter=x>1</parameter>\n",
        "\n<function=ping>\n<parameter=x>\n1\n</function>\n", "\n<function=ping>\n</function>\ntrailing"}) {
    const std::string text = "Hi.\n<zyphra_tool_call>" + body + "</zyphra_tool_call> after";
    const Split s = split(zaya_options(false, true), text);
    EXPECT_TRUE(s.calls.empty()) << body;
    EXPECT_EQ(s.content, text) << body;
    ASSERT_EQ(s.warnings.size(), 1u) << body;
    EXPECT_NE(s.warnings[0].find("malformed tool call"), std::string::npos);
  }
  // Unclosed at the end: read when whole (the model stopped after </function>), else content.
  EXPECT_EQ(split(zaya_options(false, true), "<zyphra_tool_call>\n<function=ping>\n</function>\n").calls.size(), 1u);
  const Split cut = split(zaya_options(false, true), "<zyphra_tool_call>\n<function=get_weather>\n<parameter=ci");
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "<zyphra_tool_call>\n<function=get_weather>\n<parameter=ci");
}

// A forced call: the prompt opened it, so the answer's text starts inside the call.
TEST(ChatOutput, ForcedCallStartsInsideTheCall) {
  ChatOptions chat;
  chat.format = ChatFormat::kZaya;
  chat.tools = weather_tools();
  chat.forced_tool = "ping";
  const ChatOutputOptions o = chat_output_options(chat, "call_1_0_");
  EXPECT_FALSE(o.reasoning);
  const Split s = split(o, "</function>\n</zyphra_tool_call>");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "ping");
  chat.forced_tool = "";  // "required": the model names the function
  const Split r = split(chat_output_options(chat, "c"), "get_weather>\n<parameter=days>\n2\n</parameter>\n</function>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"days\": 2}");
}

TEST(ToolCallXml, ReadsOneCall) {
  std::string why;
  const auto call = parse_tool_call_xml("\n<function=f>\n<parameter=a>\n\nx\n\n</parameter>\n</function>\n", {}, &why);
  ASSERT_TRUE(call) << why;
  EXPECT_EQ(call->name, "f");
  EXPECT_EQ(call->arguments["a"], "\nx\n");  // one line break off each end
  EXPECT_FALSE(
      parse_tool_call_xml("<function=f><parameter=a>1</parameter><parameter=a>2</parameter></function>", {}, &why));
  EXPECT_NE(why.find("given twice"), std::string::npos);
}

}  // namespace
}  // namespace zaya
