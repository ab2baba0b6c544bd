#include "zaya/report/axis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "zaya/core/error.h"

namespace zaya {
namespace {

// Strips the "+" and leading zeros fmt puts in exponents: "2.5e+08" -> "2.5e8".
std::string tidy_exponent(std::string s) {
  size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mantissa = s.substr(0, e);
  std::string exponent = s.substr(e + 1);
  bool negative = !exponent.empty() && exponent[0] == '-';
  if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) exponent.erase(0, 1);
  exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
  return fmt::format("{}e{}{}", mantissa, negative ? "-" : "", exponent);
}

}  // namespace

std::string format_linear_tick(double v, double step, double max_abs) {
  if (v == 0) return "0";
  int step_exp = static_cast<int>(std::floor(std::log10(step)));
  int max_exp = max_abs > 0 ? static_cast<int>(std::floor(std::log10(max_abs))) : step_exp;
  if (max_exp >= 6 || max_exp < -3) {
    int significant = std::clamp(max_exp - step_exp + 1, 1, 15);
    return tidy_exponent(fmt::format("{:.{}g}", v, significant));
  }
  // Steps are 1, 2 or 5 times 10^step_exp, so -step_exp decimals are exact.
  return fmt::format("{:.{}f}", v, std::max(0, -step_exp));
}

std::string format_power_of_ten(int e, bool plain) {
  if (!plain) return fmt::format("1e{}", e);
  if (e >= 0) return fmt::format("1{:0>{}}", "", e);
  return fmt::format("0.{:0>{}}1", "", -e - 1);
}

AxisTicks linear_ticks(double lo, double hi, int target) {
  ZAYA_ASSERT(std::isfinite(lo) && std::isfinite(hi) && lo <= hi && target >= 1);
  ZAYA_CHECK(std::isfinite(hi - lo), "axis range [{}, {}] is too wide to plot", lo, hi);
  if (hi - lo <= std::max(std::abs(lo), std::abs(hi)) * 1e-12) {
    double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  double raw = (hi - lo) / target;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double residual = raw / magnitude;
  double step = (residual < 1.5 ? 1 : residual < 3 ? 2 : residual < 7 ? 5 : 10) * magnitude;

  AxisTicks t;
  double first = std::floor(lo / step + 1e-9);
  double last = std::ceil(hi / step - 1e-9);
  t.lo = first * step;
  t.hi = last * step;
  double max_abs = std::max(std::abs(t.lo), std::abs(t.hi));
  // The 1e-12 relative width floor above bounds |first| and |last| by about
  // 1e13, so they are exact integers in a double.
  const auto count = static_cast<int64_t>(last - first);
  for (int64_t i = 0; i <= count; ++i) {
    double v = (first + static_cast<double>(i)) * step;  // k * step, not a running sum, so errors do not add up
    if (std::abs(v) < step * 1e-9) v = 0;
    t.values.push_back(v);
    t.labels.push_back(format_linear_tick(v, step, max_abs));
  }
  return t;
}

AxisTicks log10_ticks(double lo, double hi) {
  ZAYA_ASSERT(lo > 0 && lo <= hi && std::isfinite(hi));
  int e_lo = static_cast<int>(std::floor(std::log10(lo) + 1e-12));
  int e_hi = static_cast<int>(std::ceil(std::log10(hi) - 1e-12));
  // Keep 10^e a normal double at both ends.
  e_lo = std::clamp(e_lo, -300, 299);
  e_hi = std::clamp(e_hi, e_lo + 1, 300);
  // At most about ten labelled decades; the top is moved up to a labelled one.
  int every = std::max(1, (e_hi - e_lo + 9) / 10);
  e_hi = std::min(e_lo + (e_hi - e_lo + every - 1) / every * every, 300);

  // One notation per axis: "0.001" .. "10000" when every label is short that
  // way, otherwise "1e-6" .. "1e9" throughout, rather than a mix of both.
  const bool plain = e_lo >= -3 && e_hi <= 4;
  AxisTicks t;
  t.lo = std::pow(10.0, e_lo);
  t.hi = std::pow(10.0, e_hi);
  for (int e = e_lo; e <= e_hi; e += every) {
    t.values.push_back(std::pow(10.0, e));
    t.labels.push_back(format_power_of_ten(e, plain));
  }
  if (every == 1)
    for (int e = e_lo; e < e_hi; ++e)
      for (int m = 2; m <= 9; ++m) t.minor.push_back(m * std::pow(10.0, e));
  return t;
}

AxisTicks make_ticks(AxisScale scale, double lo, double hi) {
  return scale == AxisScale::kLog10 ? log10_ticks(lo, hi) : linear_ticks(lo, hi);
}

AxisMap::AxisMap(AxisScale scale, double lo, double hi, double p0, double p1)
    : scale_(scale), lo_(lo), hi_(hi), p0_(p0), p1_(p1) {
  if (scale_ == AxisScale::kLog10) {
    lo_ = std::log10(lo);
    hi_ = std::log10(hi);
  }
  ZAYA_ASSERT(hi_ > lo_);
}

bool drawable(AxisScale scale, double v) { return std::isfinite(v) && (scale == AxisScale::kLinear || v > 0); }

double AxisMap::operator()(double v) const {
  double u = scale_ == AxisScale::kLog10 ? std::log10(v) : v;
  return p0_ + (u - lo_) / (hi_ - lo_) * (p1_ - p0_);
}

}  // namespace zaya
