#include "zaya/io/json_file.h"

#include <fstream>
#include <sstream>

#include "zaya/core/error.h"
#include "zaya/io/utf8.h"

namespace zaya {

template <typename Json>
Json parse_json(std::string_view text, const std::string& where) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", where, printable(e.what()));
  }
}
template nlohmann::json parse_json<nlohmann::json>(std::string_view, const std::string&);
template nlohmann::ordered_json parse_json<nlohmann::ordered_json>(std::string_view, const std::string&);

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
  fail("{}: \"{}\" = {} is invalid; expected {}", source, key, v.dump(), want);
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
