#pragma once
// JSON text as Python writes it, for the chat templates' `tojson` and `string`
// filters (transformers' tojson is json.dumps(x, ensure_ascii=False)): ", " and
// ": " between items, keys in the object's order, UTF-8 kept; and str() of a
// scalar (True, None, 1.5). The chat renderer (chat_template.h) writes tool
// schemas and call arguments with them, so its text equals the Jinja
// template's (tests/chat_templates), and the server writes a tool call's
// "arguments" with python_json, as vLLM does.

#include <nlohmann/json.hpp>
#include <string>

namespace zaya {

// json.dumps(value, ensure_ascii=False).
std::string python_json(const nlohmann::ordered_json& value);

// Jinja's `value | string` of a JSON value: a string as it is, True/False,
// None, numbers as Python prints them; objects and arrays as python_json.
std::string python_str(const nlohmann::ordered_json& value);

}  // namespace zaya
