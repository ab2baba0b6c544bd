#include "zaya/model/recompute.h"

#include <fmt/format.h>

#include "zaya/core/error.h"

namespace zaya {

const std::vector<std::string>& recompute_names() {
  static const std::vector<std::string> names = {"none", "attention", "moe", "full"};
  return names;
}

const std::string& recompute_name(Recompute r) { return recompute_names()[size_t(r)]; }

Recompute parse_recompute(const std::string& name, const std::string& what) {
  const std::vector<std::string>& names = recompute_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return Recompute(i);
  fail("{} = \"{}\" is invalid; allowed: {}", what, name, fmt::join(names, ", "));
}

}  // namespace zaya
