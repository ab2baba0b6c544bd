#pragma once
// A chat answer's text, as it is generated, split into what OpenAI's clients
// read apart (docs/serve.md, "Reasoning" and "Tool calls"):
//
//   reasoning   the think block's text (zaya format, thinking on: the prompt
//               opened <think>, so everything up to </think>), sent as
//               "reasoning_content" and "reasoning"
//   content     the rest, less the whitespace between </think> and the
//               answer and the whitespace before a tool call
//   tool_calls  each <zyphra_tool_call> block read by tool_call_xml.h, with an
//               id, the name, and the arguments as JSON text
//
// feed() takes each new piece of text and returns what can be shown now;
// text that may still be the start of a marker (or whitespace that may end up
// before a call) is held back, and a call is returned once its closing tag has
// arrived and it has been read (so a call's text never leaks out as content
// first). A malformed call is returned as content, with a warning. The whole
// answer is the same feed() followed by finish(), so whole and streamed
// responses always agree. With neither reasoning nor tools every piece is
// content at once (gemma3 answers stream as before).

#include <string>
#include <vector>

#include "zaya/data/chat_template.h"

namespace zaya {

struct ApiToolCall {
  size_t index = 0;  // the call's place among the choice's calls
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of an object (json.dumps)
};

struct ChatDelta {
  std::string reasoning, content;
  std::vector<ApiToolCall> tool_calls;
  std::vector<std::string> warnings;  // malformed calls and mistyped values, for the server's log
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct ChatOutputOptions {
  bool reasoning = false;           // the answer starts inside a think block
  bool parse_tools = false;         // <zyphra_tool_call> blocks become tool calls
  std::vector<ChatTool> tools;      // their schemas (names checked, values typed)
  std::string answer_prefix;        // text the prompt already holds of the answer (a forced call's opening)
  std::string id_prefix = "call_";  // call ids: PREFIX0, PREFIX1, ...
  ChatFormat format = ChatFormat::kZaya;
};

// How the answer to a prompt rendered with `chat` reads: reasoning when the
// prompt opened a think block, tool calls when tools were rendered, a forced
// call's opening as the answer's start. Call ids are ID_PREFIX0, ID_PREFIX1, ...
ChatOutputOptions chat_output_options(const ChatOptions& chat, std::string id_prefix);

class ChatOutputParser {
 public:
  explicit ChatOutputParser(ChatOutputOptions options);
  ChatDelta feed(const std::string& text);
  // The end of the answer: what was held back, and an unclosed call (read if it is whole, else content).
  ChatDelta finish();
  // Whether any tool call was returned (finish_reason "tool_calls").
  bool called() const { return calls_ > 0; }

 private:
  enum class State { kReasoning, kContent, kCall };
  void step(ChatDelta& d, bool at_end);
  void end_call(const std::string& block, bool closed, ChatDelta& d);

  ChatOutputOptions o_;
  const ChatFormatSpec& spec_;
  State state_;
  std::string pending_;  // text not yet classified
  bool strip_leading_ = false;
  std::string space_before_call_;  // the whitespace the last call's opening followed
  int calls_ = 0;
};

}  // namespace zaya
