#include "zaya/data/chat_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "zaya/io/json_file.h"

namespace zaya {
namespace {

[[noreturn]] void bad_field(const std::string& param, const std::string& message) {
  throw ChatFieldError(param, message);
}

bool name_ok(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

constexpr const char* kSchemaTypes[] = {"string", "number", "integer", "boolean", "object", "array", "null"};

bool schema_type_ok(const std::string& t) {
  return std::find_if(std::begin(kSchemaTypes), std::end(kSchemaTypes), [&](const char* k) { return t == k; }) !=
         std::end(kSchemaTypes);
}

template <class Json>
nlohmann::ordered_json to_ordered(const Json& v) {
  if constexpr (std::is_same_v<Json, nlohmann::ordered_json>)
    return v;
  else
    return nlohmann::ordered_json::parse(v.dump());
}

template <class Json>
void check_property_type(const Json& t, const std::string& at) {
  const std::string allowed = "one of string, number, integer, boolean, object, array, null, or a list of them";
  if (t.is_string() && schema_type_ok(t.template get<std::string>())) return;
  if (t.is_array() && !t.empty() && std::all_of(t.begin(), t.end(), [](const Json& x) {
        return x.is_string() && schema_type_ok(x.template get<std::string>());
      }))
    return;
  bad_field(at, fmt::format("'{}' = {} is invalid; allowed: {}", at, json_preview(t), allowed));
}

// A function's parameters: a JSON schema of an object.
template <class Json>
void check_parameters(const Json& p, const std::string& at) {
  if (!p.is_object()) bad_field(at, fmt::format("'{}' must be a JSON schema object; got {}", at, json_preview(p)));
  if (p.contains("type") && !(p["type"].is_string() && p["type"] == "object"))
    bad_field(at + ".type", fmt::format("'{}.type' = {} is invalid; allowed: \"object\" (a function takes named "
                                        "parameters)",
                                        at, json_preview(p["type"])));
  if (p.contains("properties")) {
    const Json& props = p["properties"];
    if (!props.is_object())
      bad_field(at + ".properties",
                fmt::format("'{}.properties' must be an object of schemas; got {}", at, json_preview(props)));
    for (const auto& [name, schema] : props.items()) {
      if (name.empty() || name.size() > 256 || name.find_first_of("<>\n\r") != std::string::npos)
        bad_field(at + ".properties",
                  fmt::format("'{}.properties' has the parameter name {}, which is not usable: 1-256 characters "
                              "without '<', '>' or a line break (it is written as <parameter=NAME>)",
                              at, json_preview(Json(name), 64)));
      const std::string pat = fmt::format("{}.properties.{}", at, name);
      if (!schema.is_object())
        bad_field(pat, fmt::format("'{}' must be a JSON schema object; got {}", pat, json_preview(schema)));
      if (schema.contains("type")) check_property_type(schema["type"], pat + ".type");
    }
  }
  if (p.contains("required")) {
    const Json& req = p["required"];
    if (!req.is_array()) bad_field(at + ".required", fmt::format("'{}.required' must be a list of names", at));
    for (const Json& r : req)
      if (!r.is_string() || !p.contains("properties") || !p["properties"].contains(r.template get<std::string>()))
        bad_field(at + ".required",
                  fmt::format("'{}.required' names {}, which is not one of its properties", at, json_preview(r)));
  }
}

}  // namespace

template <class Json>
std::vector<ToolCall> read_tool_calls(const Json& v, const std::string& at) {
  if (!v.is_array()) bad_field(at, fmt::format("'{}' must be a list of tool calls; got {}", at, json_preview(v)));
  std::vector<ToolCall> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string c = fmt::format("{}[{}]", at, i);
    const Json& call = v[i];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      bad_field(c, fmt::format("'{}' must be {{\"id\", \"type\": \"function\", \"function\": {{\"name\", "
                               "\"arguments\"}}}}; got {}",
                               c, json_preview(call)));
    if (call.contains("type") && call["type"] != "function")
      bad_field(c + ".type",
                fmt::format("'{}.type' = {} is invalid; allowed: \"function\"", c, json_preview(call["type"])));
    ToolCall t;
    if (call.contains("id") && !call["id"].is_null()) {
      if (!call["id"].is_string()) bad_field(c + ".id", fmt::format("'{}.id' must be a string", c));
      t.id = call["id"].template get<std::string>();
    }
    const Json& f = call["function"];
    if (!f.contains("name") || !f["name"].is_string() || !name_ok(f["name"].template get<std::string>()))
      bad_field(c + ".function.name",
                fmt::format("'{}.function.name' must be a function name (1-64 of A-Z a-z 0-9 _ -); got {}", c,
                            f.contains("name") ? json_preview(f["name"]) : "nothing"));
    t.name = f["name"].template get<std::string>();
    const std::string ap = c + ".function.arguments";
    if (f.contains("arguments") && !f["arguments"].is_null()) {
      const Json& a = f["arguments"];
      if (a.is_string()) {
        try {
          t.arguments = parse_json<nlohmann::ordered_json>(a.template get<std::string>(), ap);
        } catch (const Error& e) {
          bad_field(ap, fmt::format("'{}' is not the JSON text of an object: {}", ap, e.what()));
        }
      } else {
        t.arguments = to_ordered(a);
      }
      if (!t.arguments.is_object())
        bad_field(ap, fmt::format("'{}' must be a JSON object (or its text); got {}", ap, json_preview(a)));
    }
    out.push_back(std::move(t));
  }
  return out;
}

template <class Json>
std::vector<ChatTool> read_chat_tools(const Json& v, size_t max_tools) {
  if (!v.is_array()) bad_field("tools", fmt::format("'tools' must be a list of functions; got {}", json_preview(v)));
  if (v.size() > max_tools)
    bad_field("tools", fmt::format("'tools' holds {} tools; allowed: up to {} (--max-tools)", v.size(), max_tools));
  std::vector<ChatTool> out;
  std::set<std::string> names;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = fmt::format("tools[{}]", i);
    const Json& t = v[i];
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object())
      bad_field(at, fmt::format("'{}' must be {{\"type\": \"function\", \"function\": {{\"name\", \"description\", "
                                "\"parameters\"}}}}; got {}",
                                at, json_preview(t)));
    if (!t.contains("type") || t["type"] != "function")
      bad_field(at + ".type", fmt::format("'{}.type' = {} is invalid; allowed: \"function\"", at,
                                          t.contains("type") ? json_preview(t["type"]) : "nothing"));
    const Json& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string() || !name_ok(f["name"].template get<std::string>()))
      bad_field(at + ".function.name", fmt::format("'{}.function.name' must be 1-64 of A-Z a-z 0-9 _ -; got {}", at,
                                                   f.contains("name") ? json_preview(f["name"]) : "nothing"));
    ChatTool tool;
    tool.name = f["name"].template get<std::string>();
    if (!names.insert(tool.name).second)
      bad_field(at + ".function.name", fmt::format("'{}.function.name' = \"{}\" is given twice", at, tool.name));
    if (f.contains("description") && !f["description"].is_string())
      bad_field(at + ".function.description", fmt::format("'{}.function.description' must be a string", at));
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      check_parameters(f["parameters"], at + ".function.parameters");
      tool.parameters = to_ordered(f["parameters"]);
    } else {
      tool.parameters = nlohmann::ordered_json::object();
    }
    tool.entry = to_ordered(t);
    out.push_back(std::move(tool));
  }
  return out;
}

template <class Json>
ToolChoice read_tool_choice(const Json& v, const std::vector<ChatTool>& tools) {
  ToolChoice c;
  if (v.is_string()) {
    const std::string s = v.template get<std::string>();
    if (s == "auto") return c;
    if (s == "none") return {ToolChoice::Kind::kNone, ""};
    if (s == "required") {
      if (tools.empty()) bad_field("tool_choice", "'tool_choice' is \"required\" but 'tools' offers none");
      return {ToolChoice::Kind::kRequired, ""};
    }
  } else if (v.is_object() && v.contains("function") && v["function"].is_object() && v["function"].contains("name") &&
             v["function"]["name"].is_string()) {
    c = {ToolChoice::Kind::kNamed, v["function"]["name"].template get<std::string>()};
    if (std::none_of(tools.begin(), tools.end(), [&](const ChatTool& t) { return t.name == c.name; }))
      bad_field("tool_choice.function.name",
                fmt::format("'tool_choice.function.name' = {} is not one of the request's tools",
                            json_preview(v["function"]["name"])));
    return c;
  }
  bad_field("tool_choice", fmt::format("'tool_choice' = {} is invalid; allowed: \"auto\", \"none\", \"required\", or "
                                       "{{\"type\": \"function\", \"function\": {{\"name\": NAME}}}}",
                                       json_preview(v)));
}

template std::vector<ToolCall> read_tool_calls(const nlohmann::json&, const std::string&);
template std::vector<ToolCall> read_tool_calls(const nlohmann::ordered_json&, const std::string&);
template std::vector<ChatTool> read_chat_tools(const nlohmann::json&, size_t);
template std::vector<ChatTool> read_chat_tools(const nlohmann::ordered_json&, size_t);
template ToolChoice read_tool_choice(const nlohmann::json&, const std::vector<ChatTool>&);
template ToolChoice read_tool_choice(const nlohmann::ordered_json&, const std::vector<ChatTool>&);

}  // namespace zaya
