#include "zaya/bench/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "zaya/core/error.h"

namespace zaya {

uint64_t parse_byte_size(const std::string& text, const std::string& what) {
  const char* s = text.c_str();
  char* end = nullptr;
  const double value = std::strtod(s, &end);
  if (end == s || !std::isfinite(value) || value < 0)
    fail("{} = '{}' is not a size; use bytes with an optional K, M, G or T suffix, e.g. 8, 64K, 32M", what, text);
  std::string unit(end);
  for (char& c : unit) c = char(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  const char* prefixes = "kmgt";
  for (int i = 0; i < 4; ++i) {
    const std::string p(1, prefixes[i]);
    if (unit == p || unit == p + "b" || unit == p + "ib") scale = std::pow(1024.0, i + 1);
  }
  if (scale == 0)
    fail("{} = '{}' has an unknown unit '{}'; allowed: K, M, G, T (powers of 1024), optionally followed by B or iB",
         what, text, std::string(end));
  const double bytes = value * scale;
  if (bytes > 9.2e18) fail("{} = '{}' is too large", what, text);
  return uint64_t(std::llround(bytes));
}

std::string byte_size_error(const std::string& text) {
  try {
    parse_byte_size(text, "size");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string format_bytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  if (bytes == std::floor(bytes)) return fmt::format("{:.0f} {}", bytes, units[u]);
  return fmt::format("{:.1f} {}", bytes, units[u]);
}

std::vector<uint64_t> size_sweep(uint64_t min_bytes, uint64_t max_bytes, uint64_t step_factor, uint64_t step_bytes) {
  ZAYA_CHECK(min_bytes <= max_bytes, "invalid sizes: minbytes {} > maxbytes {}", min_bytes, max_bytes);
  ZAYA_CHECK(step_factor > 1 || step_bytes > 0, "stepbytes must be positive when stepfactor is 1");
  std::vector<uint64_t> sizes;
  for (uint64_t size = min_bytes; size <= max_bytes;) {
    sizes.push_back(size);
    ZAYA_CHECK(sizes.size() <= 100000, "the size sweep {}..{} has more than 100000 steps", min_bytes, max_bytes);
    const uint64_t next = step_factor > 1 ? (size == 0 ? 1 : size * step_factor) : size + step_bytes;
    if (next <= size) break;  // overflow
    size = next;
  }
  return sizes;
}

}  // namespace zaya
