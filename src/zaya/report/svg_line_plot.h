#pragma once
// A dependency-free SVG line chart for loss curves and benchmark plots.
//
//   LinePlotOptions opt;
//   opt.title = "train loss";  opt.x_label = "step";  opt.y_label = "nats/token";
//   SvgLinePlot plot(opt);
//   plot.add_series("tiny, lr 3e-3", steps, losses);
//   plot.add_series("validation", val_steps, val_losses, palette_color(0), LineStyle::kDashed);
//   plot.add_reference_line(7.9, "unigram entropy");
//   plot.save("runs/tiny/loss.svg");
//
// Missing points are NaN (or, on a log axis, non-positive): the line breaks
// there, and a point with no neighbour on either side is drawn as a dot. The
// output is one standalone SVG document; every label is XML-escaped.

#include <optional>
#include <string>
#include <vector>

#include "zaya/report/axis.h"

namespace zaya {

// How a series is stroked (and shown in the legend): a dashed series pairs
// with a solid one of the same colour (validation beside training loss, a
// roofline beside what was measured).
enum class LineStyle { kSolid, kDashed };

// Colour i of the ten-colour qualitative palette add_series picks from.
std::string palette_color(size_t i);

struct LinePlotOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  AxisScale x_scale = AxisScale::kLinear;
  AxisScale y_scale = AxisScale::kLinear;
  // Fixed axis ranges; unset means "fit the data". The axis is then widened to
  // the enclosing ticks, and lines outside it are clipped.
  std::optional<double> x_min, x_max, y_min, y_max;
  int width = 800;
  int height = 500;
};

class SvgLinePlot {
 public:
  explicit SvgLinePlot(LinePlotOptions options);

  // x and y must have the same length. `color` is any SVG colour; empty picks
  // the next colour of a ten-colour qualitative palette (palette_color).
  void add_series(std::string name, std::vector<double> x, std::vector<double> y, std::string color = "",
                  LineStyle style = LineStyle::kSolid);

  // A dashed horizontal line at `y` with `label` at its right end (e.g. the
  // unigram entropy a language model's loss must beat).
  void add_reference_line(double y, std::string label);

  std::string render() const;
  // Writes render() to `path` atomically.
  void save(const std::string& path) const;

 private:
  struct Series {
    std::string name;
    std::vector<double> x, y;
    std::string color;
    LineStyle style;
  };
  struct ReferenceLine {
    double y;
    std::string label;
  };

  LinePlotOptions options_;
  std::vector<Series> series_;
  std::vector<ReferenceLine> references_;
};

}  // namespace zaya
