#include "zaya/core/count_units.h"

#include <fmt/format.h>

#include <cmath>

namespace zaya {

CountUnit count_unit(double largest) {
  static constexpr CountUnit kUnits[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const CountUnit& u : kUnits)
    if (std::fabs(largest) >= u.scale) return u;
  return {};
}

std::string format_count(double n, CountUnit u) {
  if (u.scale == 1) return fmt::format("{:.0f}", n);
  const double v = n / u.scale, a = std::fabs(v);
  // The thresholds are where the shorter form's rounding starts: 99.96 prints as "100", not "100.0".
  const int decimals = a >= 99.95 ? 0 : a >= 9.995 ? 1 : 2;
  return fmt::format("{:.{}f}{}", v, decimals, u.suffix);
}

}  // namespace zaya
