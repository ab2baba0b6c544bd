#include "zaya/data/python_json.h"

namespace zaya {
namespace {

// A scalar as nlohmann writes it (strings escaped as json.dumps escapes them:
// \" \\ \b \f \n \r \t and \u00XX for the other control characters; UTF-8 as is).
std::string scalar_json(const nlohmann::ordered_json& v) {
  return v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

void append_json(const nlohmann::ordered_json& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [k, x] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += scalar_json(nlohmann::ordered_json(k)) + ": ";
      append_json(x, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      append_json(v[i], out);
    }
    out += ']';
  } else {
    out += scalar_json(v);
  }
}

}  // namespace

std::string python_json(const nlohmann::ordered_json& value) {
  std::string out;
  append_json(value, out);  // recursion bounded: every JSON zaya reads nests at most kMaxJsonDepth
  return out;
}

std::string python_str(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return python_json(v);
}

}  // namespace zaya
