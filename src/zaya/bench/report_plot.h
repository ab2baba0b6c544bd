#pragma once
// Helpers the sections of `zaya report` share (report_builder.h): a line
// figure from labelled series, file-name slugs, and number formatting.

#include <string>
#include <vector>

#include "zaya/bench/report_builder.h"
#include "zaya/report/svg_line_plot.h"

namespace zaya {

struct PlotSeries {
  std::string label;
  std::vector<double> x, y;
  std::string color = "";  // "" picks the next palette colour
  LineStyle style = LineStyle::kSolid;
};

// One line plot of `series`, with an optional dashed reference line (its label non-empty).
ReportFigure line_figure(const std::string& file, const std::string& title, const std::string& x_label,
                         const std::string& y_label, AxisScale x_scale, AxisScale y_scale,
                         const std::vector<PlotSeries>& series, double reference_y = 0,
                         const std::string& reference_label = "");

// `text` with every character that is not a letter or digit replaced by '_', for file names.
std::string file_slug(std::string text);

// v with `decimals` decimals ("12.35").
std::string fixed(double v, int decimals);

}  // namespace zaya
