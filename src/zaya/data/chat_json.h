#pragma once
// The tool parts of a chat as OpenAI's clients send them, read once for the
// server's requests (serve/openai_request.h) and fine-tuning examples
// (sft_example.h): an assistant message's "tool_calls", a request's "tools"
// and "tool_choice". Every problem is a ChatFieldError naming the field
// ("tools[2].function.parameters.properties.x.type") and what is allowed;
// a message never shows a client's value whole (json_preview).
//
// A tool's checks: {"type": "function", "function": {"name", "description",
// "parameters"}}; the name 1-64 of [A-Za-z0-9_-] (OpenAI's rule; it goes into
// the XML of a call) and unique; parameters a JSON schema of "type" "object"
// whose "properties" are schemas, each "type" one of string, number, integer,
// boolean, object, array, null (or a list of them), names without '<', '>' or
// a line break (they go into <parameter=NAME>), and "required" naming
// properties. At most `max_tools` tools.

#include <cstddef>
#include <string>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/data/chat_template.h"

namespace zaya {

// A problem with one field: its path (an OpenAI error's "param") and the sentence.
class ChatFieldError : public Error {
 public:
  ChatFieldError(std::string param, const std::string& message) : Error(message), param(std::move(param)) {}
  std::string param;
};

// "tool_choice": auto (the model decides), none (no tools offered), required (a
// call of some tool), or one named function.
struct ToolChoice {
  enum class Kind { kAuto, kNone, kRequired, kNamed };
  Kind kind = Kind::kAuto;
  std::string name;  // kNamed
};

// `v` is the "tool_calls" list at `at` (e.g. "messages[1].tool_calls"); a
// call's "arguments" is a JSON object or the JSON text of one.
template <class Json>
std::vector<ToolCall> read_tool_calls(const Json& v, const std::string& at);

// The request's "tools".
template <class Json>
std::vector<ChatTool> read_chat_tools(const Json& v, size_t max_tools);

// The request's "tool_choice": "auto", "none", "required", or {"type": "function",
// "function": {"name": NAME}} naming one of `tools`.
template <class Json>
ToolChoice read_tool_choice(const Json& v, const std::vector<ChatTool>& tools);

}  // namespace zaya
