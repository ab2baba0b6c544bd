#pragma once
// Plot axes: "nice" tick values and labels, and the mapping from data values
// to pixels, for linear and log10 scales.
//
// Linear ticks use steps of 1, 2 or 5 times a power of ten (Heckbert,
// "Nice numbers for graph labels", Graphics Gems, 1990), and the axis is
// widened to the enclosing ticks so the data never runs past the last label.
// Log10 ticks are whole powers of ten (every k-th decade when there are many),
// and the axis spans whole decades.

#include <string>
#include <vector>

namespace zaya {

enum class AxisScale { kLinear, kLog10 };

struct AxisTicks {
  double lo = 0;  // axis range after widening to the ticks
  double hi = 1;
  std::vector<double> values;       // labelled ticks, ascending, lo and hi included
  std::vector<std::string> labels;  // one per value
  std::vector<double> minor;        // unlabelled ticks (log axes: 2..9 x 10^k)
};

// Ticks for data in [lo, hi] (lo <= hi, both finite), aiming at about
// `target` intervals. A zero-width range is widened around its value.
AxisTicks linear_ticks(double lo, double hi, int target = 6);

// Ticks for data in [lo, hi] with 0 < lo <= hi.
AxisTicks log10_ticks(double lo, double hi);

AxisTicks make_ticks(AxisScale scale, double lo, double hi);

// Label for a linear tick `v` on an axis with step `step` whose largest
// magnitude is `max_abs`: as many decimals as the step needs, or exponent
// notation ("2.5e8") for very large or very small numbers.
std::string format_linear_tick(double v, double step, double max_abs);

// Label for 10^e: "0.001", "1", "100" when `plain`, else "1e-3", "1e0", "1e2".
std::string format_power_of_ten(int e, bool plain);

// Whether v can be drawn on an axis of this scale (finite, and positive on a log axis).
bool drawable(AxisScale scale, double v);

// Maps data values along one axis onto pixels [p0, p1] (p1 < p0 is fine: the
// y axis grows upwards on screen).
class AxisMap {
 public:
  AxisMap(AxisScale scale, double lo, double hi, double p0, double p1);
  double operator()(double v) const;
  bool valid(double v) const { return drawable(scale_, v); }

 private:
  AxisScale scale_;
  double lo_, hi_, p0_, p1_;
};

}  // namespace zaya
