#include "zaya/core/suggest.h"

#include <algorithm>

namespace zaya {
namespace {

std::string_view without_dashes(std::string_view s) {
  while (!s.empty() && s.front() == '-') s.remove_prefix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

size_t edit_distance(std::string_view a, std::string_view b) {
  // Rows i-2, i-1 and i of the (|a|+1) x (|b|+1) table.
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, prev);
    std::swap(prev, row);
  }
  return prev[b.size()];
}

std::optional<std::string> closest_name(std::string_view word, const std::vector<std::string>& names) {
  const std::string_view w = without_dashes(word);
  if (w.size() < 3) return std::nullopt;
  if (std::find(names.begin(), names.end(), word) != names.end()) return std::nullopt;
  const size_t limit = w.size() / 3;
  const std::string* best = nullptr;
  size_t best_distance = limit + 1;
  for (const std::string& name : names) {
    const size_t d = edit_distance(w, without_dashes(name));
    if (d < best_distance) best = &name, best_distance = d;
  }
  if (best != nullptr) return *best;
  const std::string* prefix = nullptr;
  for (const std::string& name : names) {
    const std::string_view n = without_dashes(name);
    if (n.size() < 3 || !(starts_with(n, w) || starts_with(w, n))) continue;
    if (prefix != nullptr) return std::nullopt;  // not one name: no guess
    prefix = &name;
  }
  if (prefix != nullptr) return *prefix;
  return std::nullopt;
}

}  // namespace zaya
