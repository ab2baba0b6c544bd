#include "zaya/io/json_file.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/io/utf8.h"

namespace zaya {

std::string json_error_text(const std::exception& e) {
  std::string_view what = e.what();
  if (what.starts_with("[json.exception.")) {
    const size_t end = what.find("] ");
    if (end != std::string_view::npos) what.remove_prefix(end + 2);
  }
  return std::string(what);
}

template <typename Json>
Json parse_json(std::string_view text, const std::string& where) {
  // The callback sees every container as it opens, with the number of
  // containers already open around it: the check runs before the parser goes
  // one level deeper, so no deep value is ever built.
  auto cap_depth = [&where](int depth, typename Json::parse_event_t event, Json&) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      fail(
          "{}: JSON nests deeper than {} levels (objects and arrays inside each other), the limit for any JSON zaya "
          "reads",
          where, kMaxJsonDepth);
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), cap_depth);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", where, printable(json_error_text(e)));
  }
}
template nlohmann::json parse_json<nlohmann::json>(std::string_view, const std::string&);
template nlohmann::ordered_json parse_json<nlohmann::ordered_json>(std::string_view, const std::string&);

// Collects the first `max` characters of a rendering and counts the rest.
// (Outside the anonymous namespace: json_preview's lambdas capture it, which
// GCC rejects from a unity batch, -Wsubobject-linkage.)
struct JsonPreviewSink {
  explicit JsonPreviewSink(size_t max_chars) : max(max_chars) {}
  size_t max, total = 0;
  std::string head;
  void put(std::string_view s) {
    if (head.size() < max) head.append(s.substr(0, max - head.size()));
    total += s.size();
  }
};

namespace {

const char* json_kind(const nlohmann::json::value_t t) {
  switch (t) {
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    default: return "a value";
  }
}

}  // namespace

template <typename Json>
std::string json_preview(const Json& value, size_t max_chars) {
  JsonPreviewSink sink(max_chars);
  const auto scalar = [](const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); };
  struct Frame {
    const Json* v;
    typename Json::const_iterator it;
    bool first;
  };
  std::vector<Frame> stack;
  const auto open = [&](const Json& v) {
    if (v.is_structured() && !v.empty()) {
      sink.put(v.is_object() ? "{" : "[");
      stack.push_back({&v, v.cbegin(), true});
    } else {
      sink.put(scalar(v));  // a scalar, {} or []: no recursion
    }
  };
  open(value);
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.it == f.v->cend()) {
      sink.put(f.v->is_object() ? "}" : "]");
      stack.pop_back();
      continue;
    }
    if (!f.first) sink.put(",");
    f.first = false;
    if (f.v->is_object()) {
      sink.put(scalar(Json(f.it.key())));
      sink.put(":");
    }
    const Json& child = *f.it;
    ++f.it;
    open(child);  // may grow the stack: `f` is not used after this
  }
  if (sink.total <= max_chars) return sink.head;
  sink.head.resize(sink.head.size() - incomplete_utf8_tail(sink.head));  // no character cut in two
  return fmt::format("{}... ({} of {} characters; {} cut)", sink.head, json_kind(value.type()), sink.total,
                     sink.total - sink.head.size());
}
template std::string json_preview<nlohmann::json>(const nlohmann::json&, size_t);
template std::string json_preview<nlohmann::ordered_json>(const nlohmann::ordered_json&, size_t);

namespace {

std::string read_text(const std::string& path, const std::string& what, const std::string& hint) {
  std::ifstream in(path, std::ios::binary);
  ZAYA_CHECK(in.good(), "cannot read {}'{}'{}", what.empty() ? "" : what + " ", path,
             hint.empty() ? "" : " (" + hint + ")");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

nlohmann::json read_json_file(const std::string& path, const std::string& what, const std::string& hint) {
  return parse_json(read_text(path, what, hint), path);
}

void for_each_json_line(std::string_view text, const std::string& path,
                        const std::function<bool(nlohmann::json&&, const std::string&)>& fn) {
  int64_t n = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    if (!fn(parse_json(line, where), where)) return;
  }
}

void read_json_lines(const std::string& path, const std::function<bool(nlohmann::json&&, const std::string&)>& fn) {
  for_each_json_line(read_text(path, "", ""), path, fn);
}

void json_field_error(const std::string& source, const std::string& key, const nlohmann::json& v,
                      const std::string& want) {
  fail("{}: \"{}\" = {} is invalid; expected {}", source, key, json_preview(v), want);
}

int64_t json_int(const nlohmann::json& j, const std::string& source, const char* key, int64_t def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_number_integer()) json_field_error(source, key, j[key], "an integer");
  return j[key].get<int64_t>();
}

double json_number(const nlohmann::json& j, const std::string& source, const char* key, double def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_number()) json_field_error(source, key, j[key], "a number");
  return j[key].get<double>();
}

bool json_bool(const nlohmann::json& j, const std::string& source, const char* key, bool def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_boolean()) json_field_error(source, key, j[key], "true or false");
  return j[key].get<bool>();
}

void json_require(const nlohmann::json& j, const std::string& source, const char* key, const nlohmann::json& want,
                  const std::string& why) {
  if (j.contains(key) && !j[key].is_null() && j[key] != want) json_field_error(source, key, j[key], why);
}

}  // namespace zaya
