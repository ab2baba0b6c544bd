#pragma once
// Reading the fields of a result file for `zaya report`: a field that is
// absent or of another type reads as the fallback, so one odd file thins a
// figure out instead of stopping the report.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace zaya {

inline double json_number(const nlohmann::json& j, const char* key, double fallback = 0) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

inline std::string json_string(const nlohmann::json& j, const char* key, const std::string& fallback = "") {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : fallback;
}

// The array under key, or an empty one.
inline const nlohmann::json& json_array(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kEmpty = nlohmann::json::array();
  return j.is_object() && j.contains(key) && j[key].is_array() ? j[key] : kEmpty;
}

// "dir/run.json" -> "run.json": how a figure names the file a series came from.
inline std::string file_base_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

}  // namespace zaya
