#include "zaya/serve/tool_call_xml.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "zaya/io/json_file.h"

namespace zaya {
namespace {

using ojson = nlohmann::ordered_json;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t skip_space(const std::string& s, size_t at) {
  while (at < s.size() && is_space(s[at])) ++at;
  return at;
}

bool starts_at(const std::string& s, size_t at, const char* what) { return s.compare(at, strlen(what), what) == 0; }

// The value read as JSON of schema type `type`, or none.
std::optional<ojson> typed(const std::string& text, const std::string& type) {
  if (type == "string") return ojson(text);
  if (type == "boolean") {
    std::string t = text;
    std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    if (t == "true" || t == "false") return ojson(t == "true");
    return std::nullopt;
  }
  if (type == "null") return text == "null" || text == "None" ? std::optional<ojson>(ojson()) : std::nullopt;
  ojson v;
  try {
    v = parse_json<ojson>(text, "a tool call's parameter");
  } catch (const Error&) {
    return std::nullopt;
  }
  if (type == "integer" &&
      (v.is_number_integer() || (v.is_number_float() && v.get<double>() == double(int64_t(v.get<double>())))))
    return v.is_number_integer() ? v : ojson(int64_t(v.get<double>()));
  if (type == "number" && v.is_number()) return v;
  if (type == "object" && v.is_object()) return v;
  if (type == "array" && v.is_array()) return v;
  return std::nullopt;
}

// The schema's type names for a parameter: ["integer"], ["string", "null"], or [] (none given).
std::vector<std::string> types_of(const ojson& schema) {
  std::vector<std::string> out;
  if (!schema.is_object() || !schema.contains("type")) return out;
  const ojson& t = schema["type"];
  if (t.is_string()) out.push_back(t.get<std::string>());
  if (t.is_array())
    for (const ojson& x : t)
      if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

ojson typed_value(const std::string& text, const ojson& schema, const std::string& param, ParsedToolCall& call) {
  std::vector<std::string> types = types_of(schema);
  if (types.empty()) return ojson(text);
  // Non-string types first: "null" in ["string", "null"] must win over the text "null".
  std::stable_partition(types.begin(), types.end(), [](const std::string& t) { return t != "string"; });
  for (const std::string& t : types)
    if (std::optional<ojson> v = typed(text, t)) return *v;
  call.warnings.push_back(fmt::format("parameter '{}' = {} is not of its schema's type {}; kept as text", param,
                                      json_preview(ojson(text), 60), json_preview(schema["type"], 60)));
  return ojson(text);
}

std::optional<ParsedToolCall> malformed(std::string* why, std::string reason) {
  if (why) *why = std::move(reason);
  return std::nullopt;
}

}  // namespace

std::optional<ParsedToolCall> parse_tool_call_xml(const std::string& b, const std::vector<ChatTool>& tools,
                                                  std::string* why) {
  size_t at = skip_space(b, 0);
  if (!starts_at(b, at, "<function=")) return malformed(why, "it does not start with <function=NAME>");
  at += strlen("<function=");
  const size_t name_end = b.find('>', at);
  if (name_end == std::string::npos) return malformed(why, "<function= is not closed by '>'");
  ParsedToolCall call;
  call.name = b.substr(at, name_end - at);
  const auto tool = std::find_if(tools.begin(), tools.end(), [&](const ChatTool& t) { return t.name == call.name; });
  if (!tools.empty() && tool == tools.end())
    return malformed(
        why, fmt::format("the function {} is not one of the request's tools", json_preview(ojson(call.name), 60)));
  const ojson no_schema = ojson::object();
  const ojson& props =
      tool != tools.end() && tool->parameters.contains("properties") ? tool->parameters["properties"] : no_schema;
  at = skip_space(b, name_end + 1);
  while (starts_at(b, at, "<parameter=")) {
    at += strlen("<parameter=");
    const size_t pend = b.find('>', at);
    if (pend == std::string::npos) return malformed(why, "<parameter= is not closed by '>'");
    const std::string param = b.substr(at, pend - at);
    const size_t vend = b.find("</parameter>", pend + 1);
    if (vend == std::string::npos) return malformed(why, fmt::format("the parameter {} has no </parameter>", param));
    std::string value = b.substr(pend + 1, vend - pend - 1);
    if (!value.empty() && value.front() == '\n') value.erase(0, 1);
    if (!value.empty() && value.back() == '\n') value.pop_back();
    if (call.arguments.contains(param)) return malformed(why, fmt::format("the parameter {} is given twice", param));
    call.arguments[param] = typed_value(value, props.contains(param) ? props[param] : no_schema, param, call);
    at = skip_space(b, vend + strlen("</parameter>"));
  }
  if (!starts_at(b, at, "</function>")) return malformed(why, "the call does not end with </function>");
  if (skip_space(b, at + strlen("</function>")) != b.size()) return malformed(why, "there is text after </function>");
  return call;
}

}  // namespace zaya
