// check_chat (chat_template.h), apart from the rendering and encoding: it needs
// no tokenizer, so the request parser that calls it links without one
// (fuzz/fuzz_openai_request.cc).
#include "zaya/core/error.h"
#include "zaya/data/chat_template.h"

namespace zaya {

void check_chat(const std::vector<ChatMessage>& messages) {
  ZAYA_CHECK(!messages.empty(), "messages is empty; a conversation needs at least one message");
  size_t turn = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role == "system") {
      ZAYA_CHECK(i == 0, "messages[{}].role \"system\" is allowed only for the first message", i);
      continue;
    }
    ZAYA_CHECK(role == "user" || role == "assistant",
               "messages[{}].role \"{}\" is invalid; allowed: system (first message only), user, assistant", i, role);
    const char* want = turn % 2 == 0 ? "user" : "assistant";
    ZAYA_CHECK(role == want,
               "messages[{}].role is \"{}\" where \"{}\" is expected: roles must alternate user/assistant/... "
               "(after an optional first system message)",
               i, role, want);
    ++turn;
  }
  ZAYA_CHECK(turn > 0, "messages has no user message (a system message alone has no turn to open)");
}

}  // namespace zaya
