#include "zaya/model/recompute.h"

#include <fmt/format.h>

#include "zaya/core/error.h"

namespace zaya {

const std::vector<std::string>& recompute_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const EnumName<Recompute>& n : kRecomputeNames) out.emplace_back(n.name);
    return out;
  }();
  return names;
}

const std::string& recompute_name(Recompute r) { return recompute_names()[size_t(r)]; }

Recompute parse_recompute(const std::string& name, const std::string& what) {
  if (const Recompute* r = enum_find<Recompute>(kRecomputeNames, name)) return *r;
  fail("{} = \"{}\" is invalid; allowed: {}", what, name, enum_allowed<Recompute>(kRecomputeNames));
}

}  // namespace zaya
