// check_chat (chat_template.h), apart from the rendering and encoding: it needs
// no tokenizer, so the request parser that calls it links without one
// (fuzz/fuzz_openai_request.cc).
#include "zaya/core/error.h"
#include "zaya/data/chat_template.h"

namespace zaya {
namespace {

void check_gemma3_chat(const std::vector<ChatMessage>& messages) {
  size_t turn = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system") continue;
    ZAYA_CHECK(m.role == "user" || m.role == "assistant",
               "messages[{}].role \"{}\" is invalid; allowed: system (first message only), user, assistant{}", i,
               m.role, m.role == "tool" ? " (the chat format gemma3 has no tool results; the zaya format has)" : "");
    const char* want = turn % 2 == 0 ? "user" : "assistant";
    ZAYA_CHECK(m.role == want,
               "messages[{}].role is \"{}\" where \"{}\" is expected: roles must alternate user/assistant/... "
               "(after an optional first system message)",
               i, m.role, want);
    ZAYA_CHECK(m.tool_calls.empty(), "messages[{}].tool_calls: the chat format gemma3 has no tool calls", i);
    ZAYA_CHECK(m.reasoning.empty(), "messages[{}].reasoning_content: the chat format gemma3 has no reasoning", i);
    ++turn;
  }
  ZAYA_CHECK(turn > 0, "messages has no user message (a system message alone has no turn to open)");
}

void check_zaya_chat(const std::vector<ChatMessage>& messages) {
  bool calls_open = false;  // the last assistant message made calls and only tool results followed
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system") continue;
    ZAYA_CHECK(m.role == "user" || m.role == "assistant" || m.role == "tool",
               "messages[{}].role \"{}\" is invalid; allowed: system (first message only), user, assistant, tool", i,
               m.role);
    if (m.role == "tool")
      ZAYA_CHECK(calls_open, "messages[{}].role is \"tool\" but no assistant tool call comes before it", i);
    else
      calls_open = m.role == "assistant" && !m.tool_calls.empty();
    ZAYA_CHECK(m.role == "assistant" || (m.tool_calls.empty() && m.reasoning.empty()),
               "messages[{}]: only an assistant message has tool_calls or reasoning_content", i);
  }
  ZAYA_CHECK(!(messages.size() == 1 && messages[0].role == "system"),
             "messages has only a system message; a conversation needs a user message");
}

}  // namespace

void check_chat(const std::vector<ChatMessage>& messages, ChatFormat format) {
  ZAYA_CHECK(!messages.empty(), "messages is empty; a conversation needs at least one message");
  for (size_t i = 1; i < messages.size(); ++i)
    ZAYA_CHECK(messages[i].role != "system", "messages[{}].role \"system\" is allowed only for the first message", i);
  if (format == ChatFormat::kZaya)
    check_zaya_chat(messages);
  else
    check_gemma3_chat(messages);
}

}  // namespace zaya
