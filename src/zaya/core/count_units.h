#pragma once
// Parameter and token counts in the unit that reads: "1.55M", "0.44M",
// "8.84B", "28.7K". A group of related counts (a model's total and active
// parameters) shares the unit of its largest, so they compare at a glance;
// a fixed "{:.3f}B" printed a 1.5M-parameter model as "0.002B" (red-team L14).

#include <string>

namespace zaya {

struct CountUnit {
  double scale = 1;         // 1, 1e3, 1e6, 1e9 or 1e12
  const char* suffix = "";  // "", "K", "M", "B", "T"
};

// The largest unit whose scale is at most |largest| (plain below 1,000).
CountUnit count_unit(double largest);

// n in unit u: 3 significant digits from 1 up ("1.55M", "15.5M", "155M"),
// two decimals below 1 ("0.44M"); a plain count is printed whole ("950").
std::string format_count(double n, CountUnit u);
// n in its own unit.
inline std::string format_count(double n) { return format_count(n, count_unit(n)); }

}  // namespace zaya
