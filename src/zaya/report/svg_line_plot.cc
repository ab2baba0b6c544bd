#include "zaya/report/svg_line_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"
#include "zaya/report/svg_text.h"

namespace zaya {
namespace {

// Tableau 10: distinguishable, and still readable for common colour-vision deficiencies.
constexpr std::array<const char*, 10> kPalette = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

constexpr double kFontSize = 12;  // begin_svg's default
constexpr double kTickFontSize = 11;
constexpr double kTickLength = 5;

constexpr const char* kDashArray = "6 3";

// The stroke-dasharray attribute of a style ("" when solid).
std::string dash_attr(LineStyle style) {
  return style == LineStyle::kDashed ? fmt::format(" stroke-dasharray=\"{}\"", kDashArray) : "";
}

// Smallest and largest drawable value seen on one axis.
struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

// Applies the fixed bounds, falls back to a unit range without data, and
// returns the ticks, which fix the axis range.
AxisTicks axis_ticks(const char* axis, AxisScale scale, Range data, std::optional<double> min,
                     std::optional<double> max) {
  const bool log = scale == AxisScale::kLog10;
  for (auto bound : {min, max})
    if (bound)
      ZAYA_CHECK(drawable(scale, *bound), "line plot: {} axis bound {} is not usable on a {} axis", axis, *bound,
                 log ? "log10" : "linear");
  if (min && max) ZAYA_CHECK(*min < *max, "line plot: {} axis range [{}, {}] is empty", axis, *min, *max);
  if (min) data.lo = *min;
  if (max) data.hi = *max;
  if (data.empty()) {  // no data, or one bound beyond all of it: a unit range at that bound
    if (max) {
      data.lo = log ? *max / 10 : *max - 1;
    } else if (min) {
      data.hi = log ? *min * 10 : *min + 1;
    } else {
      data.lo = log ? 1 : 0;
      data.hi = log ? 10 : 1;
    }
  }
  return make_ticks(scale, data.lo, data.hi);
}

// The plot area in pixels and the axes that map data onto it.
struct Frame {
  double x0, x1, y0, y1;  // left, right, top, bottom
  AxisTicks xt, yt;
  AxisMap px, py;
};

void draw_axes(std::string& svg, const Frame& f) {
  append_format(svg, "<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n");
  for (double v : f.xt.values)
    append_format(svg, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", svg_number(f.px(v)), svg_number(f.y0),
                  svg_number(f.y1));
  for (double v : f.yt.values)
    append_format(svg, "<line x1=\"{1}\" y1=\"{0}\" x2=\"{2}\" y2=\"{0}\"/>\n", svg_number(f.py(v)), svg_number(f.x0),
                  svg_number(f.x1));
  append_format(svg, "</g>\n<g class=\"ticks\" stroke=\"#333\" stroke-width=\"1\">\n");
  auto x_tick = [&](double v, double len) {
    append_format(svg, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", svg_number(f.px(v)), svg_number(f.y1),
                  svg_number(f.y1 + len));
  };
  auto y_tick = [&](double v, double len) {
    append_format(svg, "<line x1=\"{1}\" y1=\"{0}\" x2=\"{2}\" y2=\"{0}\"/>\n", svg_number(f.py(v)),
                  svg_number(f.x0 - len), svg_number(f.x0));
  };
  for (double v : f.xt.values) x_tick(v, kTickLength);
  for (double v : f.yt.values) y_tick(v, kTickLength);
  for (double v : f.xt.minor) x_tick(v, 3);
  for (double v : f.yt.minor) y_tick(v, 3);
  append_format(svg, "</g>\n<g font-size=\"{}\" fill=\"#333\">\n", kTickFontSize);
  for (size_t i = 0; i < f.xt.values.size(); ++i)
    append_format(svg, "<text class=\"xtick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                  svg_number(f.px(f.xt.values[i])), svg_number(f.y1 + kTickLength + 13), xml_escape(f.xt.labels[i]));
  for (size_t i = 0; i < f.yt.values.size(); ++i)
    append_format(svg, "<text class=\"ytick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                  svg_number(f.x0 - kTickLength - 3), svg_number(f.py(f.yt.values[i]) + 4), xml_escape(f.yt.labels[i]));
  append_format(svg, "</g>\n");
  append_format(svg,
                "<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n",
                svg_number(f.x0), svg_number(f.y0), svg_number(f.x1 - f.x0), svg_number(f.y1 - f.y0));
}

// One <path> for the series: "M" starts a run of drawable points, "L"
// continues it, so the line breaks at missing points. A point with no
// drawable neighbour would be an invisible zero-length run; it becomes a dot.
void draw_series(std::string& svg, const Frame& f, const std::string& name, const std::vector<double>& x,
                 const std::vector<double>& y, const std::string& color, LineStyle style) {
  std::string d, dots;
  const size_t n = x.size();
  auto ok = [&](size_t i) { return f.px.valid(x[i]) && f.py.valid(y[i]); };
  for (size_t i = 0; i < n; ++i) {
    if (!ok(i)) continue;
    const bool starts = i == 0 || !ok(i - 1);
    if (starts && (i + 1 == n || !ok(i + 1))) {
      append_format(dots, "<circle cx=\"{}\" cy=\"{}\" r=\"2.5\" fill=\"{}\"/>", svg_number(f.px(x[i])),
                    svg_number(f.py(y[i])), xml_escape(color));
      continue;
    }
    if (!d.empty()) d += ' ';
    append_format(d, "{}{} {}", starts ? 'M' : 'L', svg_number(f.px(x[i])), svg_number(f.py(y[i])));
  }
  append_format(svg, "<path class=\"series\" data-name=\"{}\" stroke=\"{}\"{} d=\"{}\"/>{}\n", xml_escape(name),
                xml_escape(color), dash_attr(style), d, dots);
}

}  // namespace

std::string palette_color(size_t i) { return kPalette[i % kPalette.size()]; }

SvgLinePlot::SvgLinePlot(LinePlotOptions options) : options_(std::move(options)) {
  ZAYA_CHECK(options_.width >= 200 && options_.height >= 150, "line plot: size {}x{} is too small (min 200x150)",
             options_.width, options_.height);
}

void SvgLinePlot::add_series(std::string name, std::vector<double> x, std::vector<double> y, std::string color,
                             LineStyle style) {
  ZAYA_CHECK(x.size() == y.size(), "line plot: series '{}' has {} x values but {} y values", name, x.size(), y.size());
  if (color.empty()) color = palette_color(series_.size());
  series_.push_back({std::move(name), std::move(x), std::move(y), std::move(color), style});
}

void SvgLinePlot::add_reference_line(double y, std::string label) { references_.push_back({y, std::move(label)}); }

std::string SvgLinePlot::render() const {
  const LinePlotOptions& o = options_;
  const double W = o.width, H = o.height;

  // Axis ranges cover every point drawable on both axes, and the reference lines.
  Range xr, yr;
  for (const Series& s : series_)
    for (size_t i = 0; i < s.x.size(); ++i)
      if (drawable(o.x_scale, s.x[i]) && drawable(o.y_scale, s.y[i])) {
        xr.add(s.x[i]);
        yr.add(s.y[i]);
      }
  for (const ReferenceLine& r : references_)
    if (drawable(o.y_scale, r.y)) yr.add(r.y);
  AxisTicks xt = axis_ticks("x", o.x_scale, xr, o.x_min, o.x_max);
  AxisTicks yt = axis_ticks("y", o.y_scale, yr, o.y_min, o.y_max);

  // Margins sized to the text they hold; the legend sits right of the plot.
  double y_tick_width = 0, legend_text = 0;
  for (const auto& l : yt.labels) y_tick_width = std::max(y_tick_width, text_width(l, kTickFontSize));
  for (const Series& s : series_) legend_text = std::max(legend_text, text_width(s.name, kFontSize));
  const bool legend = legend_text > 0;
  const double x0 = 12 + (o.y_label.empty() ? 0 : 22) + y_tick_width + kTickLength + 4;
  const double x1 = W - (legend ? std::min(16 + 24 + 6 + legend_text + 8, W / 3) : 16);
  const double y0 = o.title.empty() ? 16 : 40;
  const double y1 = H - (8 + 18 + (o.x_label.empty() ? 0 : 22));
  const AxisMap px(o.x_scale, xt.lo, xt.hi, x0, x1);
  const AxisMap py(o.y_scale, yt.lo, yt.hi, y1, y0);
  const Frame f{x0, x1, y0, y1, std::move(xt), std::move(yt), px, py};

  // Clip-path ids are document-global in HTML; derive one from the plot's text
  // so several plots inlined in one page do not collide, yet output is reproducible.
  std::string id_seed = o.title + '\n' + o.x_label + '\n' + o.y_label;
  for (const Series& s : series_) id_seed += '\n' + s.name;
  const std::string clip_id = fmt::format("zaya-plot-{:08x}", fnv1a(id_seed));

  std::string svg;
  begin_svg(svg, o.width, o.height, o.title);
  append_format(svg,
                "<defs><clipPath id=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>\n",
                clip_id, svg_number(x0), svg_number(y0), svg_number(x1 - x0), svg_number(y1 - y0));
  if (!o.title.empty())
    append_format(svg,
                  "<text class=\"title\" x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"{}\" "
                  "font-weight=\"bold\">{}</text>\n",
                  svg_number((x0 + x1) / 2), kSvgTitleFontSize, xml_escape(o.title));
  draw_axes(svg, f);

  for (const ReferenceLine& r : references_) {
    if (!py.valid(r.y) || r.y < f.yt.lo || r.y > f.yt.hi) continue;  // outside a fixed y range
    const double y = py(r.y);
    append_format(svg,
                  "<g class=\"reference\"><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#555\" "
                  "stroke-dasharray=\"6 4\"/>",
                  svg_number(x0), svg_number(y), svg_number(x1), svg_number(y));
    append_format(svg, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"{}\" fill=\"#555\">{}</text></g>\n",
                  svg_number(x1 - 4), svg_number(y - 4), kTickFontSize, xml_escape(r.label));
  }

  append_format(svg, "<g clip-path=\"url(#{})\" fill=\"none\" stroke-width=\"1.5\" stroke-linejoin=\"round\">\n",
                clip_id);
  for (const Series& s : series_) draw_series(svg, f, s.name, s.x, s.y, s.color, s.style);
  append_format(svg, "</g>\n");

  if (legend) {
    append_format(svg, "<g class=\"legend\">\n");
    for (size_t i = 0; i < series_.size(); ++i) {
      const double lx = x1 + 16, ly = y0 + 10 + 20 * static_cast<double>(i);
      append_format(svg, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2.5\"{}/>",
                    svg_number(lx), svg_number(ly), svg_number(lx + 24), svg_number(ly), xml_escape(series_[i].color),
                    dash_attr(series_[i].style));
      append_format(svg, "<text x=\"{}\" y=\"{}\">{}</text>\n", svg_number(lx + 30), svg_number(ly + 4),
                    xml_escape(series_[i].name));
    }
    append_format(svg, "</g>\n");
  }

  append_axis_titles(svg, o.x_label, o.y_label, (x0 + x1) / 2, (y0 + y1) / 2, H);
  append_format(svg, "</svg>\n");
  return svg;
}

void SvgLinePlot::save(const std::string& path) const { write_file_atomic(path, render()); }

}  // namespace zaya
