#pragma once
// One zaya_xml tool call, the text between <zyphra_tool_call> and
// </zyphra_tool_call> (Qwen3-Coder's XML with ZAYA1-8B's tags):
//
//   \n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n
//
// read into a name and arguments typed by the tool's JSON schema: a value is
// the text between its tags less one leading and one trailing line break;
// "integer", "number", "boolean", "null", "object" and "array" parameters are
// read as JSON of that type (a type list: each non-string type in turn, then
// text), "string" ones and parameters the schema does not name stay text. A
// value that does not read as its type stays text, with a warning.

#include <optional>
#include <string>
#include <vector>

#include "zaya/data/chat_template.h"

namespace zaya {

struct ParsedToolCall {
  std::string name;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
  std::vector<std::string> warnings;  // values kept as text against their schema
};

// The call in `block`, or none when it is malformed (then `why` says how): no
// <function=NAME>, an unclosed tag, text outside the tags, a name that is not
// one of `tools` (when tools are given).
std::optional<ParsedToolCall> parse_tool_call_xml(const std::string& block, const std::vector<ChatTool>& tools,
                                                  std::string* why);

}  // namespace zaya
