#include "zaya/bench/report_plot.h"

#include <fmt/format.h>

#include <cctype>

namespace zaya {

ReportFigure line_figure(const std::string& file, const std::string& title, const std::string& x_label,
                         const std::string& y_label, AxisScale xs, AxisScale ys, const std::vector<PlotSeries>& series,
                         double reference_y, const std::string& reference_label) {
  LinePlotOptions opt;
  opt.title = title;
  opt.x_label = x_label;
  opt.y_label = y_label;
  opt.x_scale = xs;
  opt.y_scale = ys;
  SvgLinePlot plot(opt);
  for (const PlotSeries& s : series) plot.add_series(s.label, s.x, s.y, s.color, s.style);
  if (!reference_label.empty()) plot.add_reference_line(reference_y, reference_label);
  return {file, title, plot.render()};
}

std::string file_slug(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

std::string fixed(double v, int decimals) { return fmt::format("{:.{}f}", v, decimals); }

}  // namespace zaya
