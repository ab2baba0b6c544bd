#pragma once
// Reading the keys of one TOML table of a config file (the training config,
// its [model] table, recipe phases) with range checks, reporting every
// problem with the file, line, key, value and what is allowed. A value set on
// the command line (`--set section.key=value`, insert_override below) is
// blamed on that flag instead, with a UsageError (exit 2).

#include <fmt/format.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "zaya/core/error.h"
#include "zaya/core/suggest.h"

namespace zaya {

// Sets table[key] to `value` from the override `assignment` ("train.steps=5",
// given as `--set train.steps=5`): parsed as a TOML value, or taken as a
// string when it is not one (a bare path). The node remembers the flag as its
// source, so that TomlSection blames the command line for a bad value or key.
inline void insert_override(toml::table& table, const std::string& key, const std::string& value,
                            const std::string& assignment) {
  const std::string source = "--set " + assignment;
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + value, std::string(source));
  } catch (const toml::parse_error&) {
    std::ostringstream quoted;  // the bare word as a TOML string, parsed again to carry the source
    quoted << toml::table{{"v", value}};
    parsed = toml::parse(quoted.str(), std::string(source));
  }
  table.insert_or_assign(key, std::move(*parsed.get("v")));  // a move keeps the node's source
}

// Whether a node came from a --set override (insert_override) rather than the file.
inline bool from_command_line(const toml::node& n) {
  const auto& path = n.source().path;
  return path != nullptr && path->rfind("--set ", 0) == 0;
}

// Reads the keys of one TOML table, remembering which were used so that
// unknown keys (typos) are reported instead of silently ignored. `name` is how
// the table is named in messages ("train", "phase[2]").
class TomlSection {
 public:
  TomlSection(const toml::table* table, std::string name, std::string source)
      : table_(table), name_(std::move(name)), source_(std::move(source)) {}

  bool has(const char* key) const { return table_ != nullptr && table_->contains(key); }

  int64_t get_int(const char* key, int64_t def, int64_t lo, int64_t hi) {
    const toml::node* n = node(key);
    if (n == nullptr) return def;
    auto v = n->value<int64_t>();
    if (!v || !n->is_integer()) bad(key, *n, fmt::format("an integer in {}..{}", lo, hi));
    if (*v < lo || *v > hi) bad(key, *n, fmt::format("an integer in {}..{}", lo, hi));
    return *v;
  }
  // A number in [lo, hi], or in (lo, hi] when lo_open.
  double get_double(const char* key, double def, double lo, double hi, bool lo_open = false) {
    const toml::node* n = node(key);
    if (n == nullptr) return def;
    const std::string expect = fmt::format("a number in {}{}, {}]", lo_open ? "(" : "[", lo, hi);
    if (!n->is_number()) bad(key, *n, expect);
    double v = *n->value<double>();
    if (!((lo_open ? v > lo : v >= lo) && v <= hi)) bad(key, *n, expect);
    return v;
  }
  bool get_bool(const char* key, bool def) {
    const toml::node* n = node(key);
    if (n == nullptr) return def;
    if (!n->is_boolean()) bad(key, *n, "true or false");
    return *n->value<bool>();
  }
  std::vector<int64_t> get_int_list(const char* key, const std::vector<int64_t>& def, int64_t lo, int64_t hi) {
    const toml::node* n = node(key);
    if (n == nullptr) return def;
    const std::string expect = fmt::format("a list of integers in {}..{}", lo, hi);
    if (!n->is_array()) bad(key, *n, expect);
    std::vector<int64_t> out;
    for (const toml::node& item : *n->as_array()) {
      auto v = item.value<int64_t>();
      if (!item.is_integer() || !v || *v < lo || *v > hi) bad(key, *n, expect);
      out.push_back(*v);
    }
    return out;
  }
  std::string get_string(const char* key, const std::string& def, const std::vector<std::string>& allowed = {}) {
    const toml::node* n = node(key);
    if (n == nullptr) return def;
    std::string expect = allowed.empty() ? "a string" : "one of: " + fmt::format("{}", fmt::join(allowed, ", "));
    if (!n->is_string()) bad(key, *n, expect);
    std::string v = *n->value<std::string>();
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end()) bad(key, *n, expect);
    return v;
  }
  // A non-empty list of distinct strings, each one of `allowed` (empty: any string).
  std::vector<std::string> get_string_list(const char* key, const std::vector<std::string>& def,
                                           const std::vector<std::string>& allowed) {
    const toml::node* n = node(key);
    if (n == nullptr) return def;
    const std::string expect =
        allowed.empty() ? std::string("a non-empty list of distinct non-empty strings")
                        : fmt::format("a non-empty list of distinct names out of {}", fmt::join(allowed, ", "));
    if (!n->is_array() || n->as_array()->empty()) bad(key, *n, expect);
    std::vector<std::string> out;
    for (const toml::node& item : *n->as_array()) {
      if (!item.is_string()) bad(key, *n, expect);
      std::string v = *item.value<std::string>();
      if ((allowed.empty() ? v.empty() : std::find(allowed.begin(), allowed.end(), v) == allowed.end()) ||
          std::find(out.begin(), out.end(), v) != out.end())
        bad(key, *n, expect);
      out.push_back(std::move(v));
    }
    return out;
  }
  // The array of tables under `key`, or null when absent; `expected` says how
  // to write it ("[[phase.data]] tables").
  const toml::array* get_table_array(const char* key, const std::string& expected) {
    const toml::node* n = node(key);
    if (n == nullptr) return nullptr;
    const toml::array* a = n->as_array();
    if (a == nullptr || !a->is_array_of_tables() || a->empty())
      raise(*n, fmt::format("{}: {}.{} is invalid; allowed: {}", where(*n), name_, key, expected));
    return a;
  }
  // A key that must not be set in this configuration: fails naming it and why.
  void forbid(const char* key, const std::string& why) {
    const toml::node* n = node(key);
    if (n == nullptr) return;
    std::ostringstream value;
    n->visit([&](auto&& v) { value << v; });
    raise(*n, fmt::format("{}: {}.{} = {} is not allowed here: {}", where(*n), name_, key, value.str(), why));
  }
  // A key that must be present: fails naming the table's line when it is not.
  void require(const char* key, const std::string& what) const {
    if (!has(key)) fail("{}: {}.{} is missing; {}", where_table(), name_, key, what);
  }
  // Every key of the table must have been read; an unknown one is named with
  // the known key it most likely misspells.
  void finish(const std::vector<std::string>& known) const {
    if (table_ == nullptr) return;
    for (auto&& [k, v] : *table_) {
      std::string key(k.str());
      if (used_.count(key) != 0) continue;
      const std::optional<std::string> guess = closest_name(key, known);
      const char* kind = v.is_table() ? " (a table)" : "";
      const std::string hint = guess ? fmt::format(" (did you mean '{}.{}'?)", name_, *guess) : "";
      const std::string message = fmt::format("{}: unknown key '{}.{}'{}{}; allowed keys in [{}]: {}", where(v), name_,
                                              key, kind, hint, name_, fmt::join(known, ", "));
      raise(v, message);
    }
  }
  // "file:line" of the table itself (for problems with the table as a whole).
  std::string where_table() const { return table_ == nullptr ? source_ : where(*table_); }

 private:
  const toml::node* node(const char* key) {
    used_.insert(key);
    return table_ == nullptr ? nullptr : table_->get(key);
  }
  // "file:line" of a node from the file, "--set section.key=value" of one from the command line.
  std::string where(const toml::node& n) const {
    if (from_command_line(n)) return *n.source().path;
    const auto& src = n.source();
    if (src.begin.line > 0) return fmt::format("{}:{}", source_, src.begin.line);
    return source_;
  }
  // Fails with the message, a UsageError when the node came from the command line.
  [[noreturn]] static void raise(const toml::node& n, const std::string& message) {
    if (from_command_line(n)) throw UsageError(message);
    throw Error(message);
  }
  [[noreturn]] void bad(const char* key, const toml::node& n, const std::string& expected) const {
    std::ostringstream value;
    n.visit([&](auto&& v) { value << v; });
    raise(n, fmt::format("{}: {}.{} = {} is invalid; allowed: {}", where(n), name_, key, value.str(), expected));
  }
  const toml::table* table_;
  std::string name_, source_;
  std::set<std::string> used_;
};

}  // namespace zaya
