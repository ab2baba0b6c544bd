#include "zaya/report/svg_heatmap.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"
#include "zaya/report/axis.h"
#include "zaya/report/svg_text.h"

namespace zaya {
namespace {

struct Rgb {
  double r, g, b;
};

// Viridis (matplotlib's default colour map) sampled at nine equally spaced
// points; linear interpolation between them stays within a few units of the
// full 256-entry table.
constexpr std::array<Rgb, 9> kViridis = {{{68, 1, 84},
                                          {72, 40, 120},
                                          {62, 74, 137},
                                          {49, 104, 142},
                                          {38, 130, 142},
                                          {31, 158, 137},
                                          {53, 183, 121},
                                          {109, 205, 89},
                                          {253, 231, 37}}};

Rgb viridis_rgb(double t) {
  t = std::isfinite(t) ? std::clamp(t, 0.0, 1.0) : 0.0;
  double pos = t * (kViridis.size() - 1);
  size_t i = std::min(static_cast<size_t>(pos), kViridis.size() - 2);
  double f = pos - static_cast<double>(i);
  const Rgb& a = kViridis[i];
  const Rgb& b = kViridis[i + 1];
  return {a.r + f * (b.r - a.r), a.g + f * (b.g - a.g), a.b + f * (b.b - a.b)};
}

std::string hex(const Rgb& c) {
  auto byte = [](double v) { return static_cast<int>(std::lround(std::clamp(v, 0.0, 255.0))); };
  return fmt::format("#{:02x}{:02x}{:02x}", byte(c.r), byte(c.g), byte(c.b));
}

// Dark text on light cells, white on dark ones (Rec. 709 luma weights).
const char* text_color(const Rgb& c) { return 0.2126 * c.r + 0.7152 * c.g + 0.0722 * c.b < 128 ? "white" : "#222"; }

constexpr double kLabelFontSize = 11;
constexpr const char* kMissingColor = "#dddddd";

// A vertical colour bar at x = bar_x from y0 (top, ticks.hi) to y1 (bottom,
// ticks.lo): 64 bands of the colour map, a frame, and labelled ticks on its right.
void draw_color_bar(std::string& svg, const AxisTicks& ticks, double bar_x, double y0, double y1) {
  constexpr int kBands = 64;
  constexpr double kBarWidth = 16;
  const double band_h = (y1 - y0) / kBands;
  append_format(svg, "<g class=\"colorbar\">\n");
  for (int b = 0; b < kBands; ++b)  // bands overlap by half a pixel so no seams show
    append_format(svg, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n", svg_number(bar_x),
                  svg_number(y0 + b * band_h), kBarWidth, svg_number(band_h + 0.5), viridis(1.0 - (b + 0.5) / kBands));
  append_format(svg, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n",
                svg_number(bar_x), svg_number(y0), kBarWidth, svg_number(y1 - y0));
  for (size_t k = 0; k < ticks.values.size(); ++k) {
    double y = y1 - (ticks.values[k] - ticks.lo) / (ticks.hi - ticks.lo) * (y1 - y0);
    append_format(svg, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>",
                  svg_number(bar_x + kBarWidth), svg_number(y), svg_number(bar_x + kBarWidth + 4));
    append_format(svg, "<text class=\"ctick\" x=\"{}\" y=\"{}\" font-size=\"{}\">{}</text>\n",
                  svg_number(bar_x + kBarWidth + 7), svg_number(y + 4), kLabelFontSize, xml_escape(ticks.labels[k]));
  }
  append_format(svg, "</g>\n");
}

}  // namespace

std::string viridis(double t) { return hex(viridis_rgb(t)); }

SvgHeatmap::SvgHeatmap(HeatmapOptions options, std::vector<std::string> row_labels, std::vector<std::string> col_labels,
                       std::vector<double> values_grid)
    : options_(std::move(options)),
      row_labels_(std::move(row_labels)),
      col_labels_(std::move(col_labels)),
      values_grid_(std::move(values_grid)) {
  ZAYA_CHECK(values_grid_.size() == row_labels_.size() * col_labels_.size(),
             "heat map: {} values for {} rows x {} columns", values_grid_.size(), row_labels_.size(),
             col_labels_.size());
  ZAYA_CHECK(options_.width >= 200 && options_.height >= 150, "heat map: size {}x{} is too small (min 200x150)",
             options_.width, options_.height);
  ZAYA_CHECK(options_.col_label_every >= 1, "heat map: col_label_every {} is invalid; allowed: >= 1",
             options_.col_label_every);
  ZAYA_CHECK(options_.cell_decimals >= 0 && options_.cell_decimals <= 12,
             "heat map: cell_decimals {} is outside [0, 12]", options_.cell_decimals);
  for (auto bound : {options_.v_min, options_.v_max})
    if (bound) ZAYA_CHECK(std::isfinite(*bound), "heat map: colour range bound {} is not finite", *bound);
  if (options_.v_min && options_.v_max)
    ZAYA_CHECK(*options_.v_min < *options_.v_max, "heat map: colour range [{}, {}] is empty", *options_.v_min,
               *options_.v_max);
}

std::string SvgHeatmap::render() const {
  const HeatmapOptions& o = options_;
  const double W = o.width, H = o.height;
  const size_t rows = row_labels_.size(), cols = col_labels_.size();

  // Colour range: the finite values, overridden by the fixed bounds.
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values_grid_)
    if (std::isfinite(v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  if (o.v_min) lo = *o.v_min;
  if (o.v_max) hi = *o.v_max;
  if (lo > hi) {  // no finite data, or one bound beyond all of it: a unit range at that bound
    if (o.v_max) {
      lo = *o.v_max - 1;
    } else if (o.v_min) {
      hi = *o.v_min + 1;
    } else {
      lo = 0;
      hi = 1;
    }
  }
  const AxisTicks ticks = linear_ticks(lo, hi, 5);

  // Margins sized to the text they hold.
  double row_w = 0, col_w = 0, tick_w = 0;
  for (const auto& l : row_labels_) row_w = std::max(row_w, text_width(l, kLabelFontSize));
  for (const auto& l : col_labels_) col_w = std::max(col_w, text_width(l, kLabelFontSize));
  for (const auto& l : ticks.labels) tick_w = std::max(tick_w, text_width(l, kLabelFontSize));
  const double x0 = 12 + (o.y_label.empty() ? 0 : 22) + row_w + 6;
  const double bar_x = W - (12 + (o.value_label.empty() ? 0 : 22) + tick_w + 6 + 16);
  const double x1 = bar_x - 24;
  const double y0 = o.title.empty() ? 16 : 40;
  const double cell_w = cols ? (x1 - x0) / static_cast<double>(cols) : 0;
  const size_t label_every = static_cast<size_t>(o.col_label_every);
  // Long column labels are written at 45 degrees.
  const bool rotate_cols = col_w > cell_w * static_cast<double>(label_every) - 4;
  const double col_label_h = rotate_cols ? col_w * 0.71 + 14 : 18;
  const double y1 = H - (8 + col_label_h + (o.x_label.empty() ? 0 : 22));
  const double cell_h = rows ? (y1 - y0) / static_cast<double>(rows) : 0;
  ZAYA_CHECK(x1 - x0 >= 20 && y1 - y0 >= 20, "heat map: labels leave no room for cells at {}x{}", o.width, o.height);

  std::string svg;
  begin_svg(svg, o.width, o.height, o.title);
  if (!o.title.empty())
    append_format(svg,
                  "<text class=\"title\" x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"{}\" "
                  "font-weight=\"bold\">{}</text>\n",
                  svg_number((x0 + x1) / 2), kSvgTitleFontSize, xml_escape(o.title));

  // Cells, with their values when there is room for the text.
  // crispEdges: anti-aliased edges of abutting cells let the background show
  // through as thin white seams in most renderers.
  append_format(svg, "<g class=\"cells\" shape-rendering=\"crispEdges\">\n");
  for (size_t i = 0; i < rows; ++i)
    for (size_t j = 0; j < cols; ++j) {
      double v = values_grid_[i * cols + j];
      double x = x0 + static_cast<double>(j) * cell_w, y = y0 + static_cast<double>(i) * cell_h;
      bool missing = !std::isfinite(v);
      Rgb c = viridis_rgb((v - ticks.lo) / (ticks.hi - ticks.lo));
      append_format(svg, "<rect class=\"cell\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>",
                    svg_number(x), svg_number(y), svg_number(cell_w), svg_number(cell_h),
                    missing ? kMissingColor : hex(c));
      if (o.cell_text && !missing) {
        std::string text = fmt::format("{:.{}f}", v, o.cell_decimals);
        double font = std::min({kLabelFontSize, cell_h * 0.6, (cell_w - 4) / (0.6 * static_cast<double>(text.size()))});
        if (font >= 6)
          append_format(
              svg,
              "<text class=\"value\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{}\" fill=\"{}\">{}</text>",
              svg_number(x + cell_w / 2), svg_number(y + cell_h / 2 + font * 0.35), svg_number(font), text_color(c),
              text);
      }
      svg += '\n';
    }
  if (rows == 0 || cols == 0)
    append_format(svg, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#777\">no data</text>\n",
                  svg_number((x0 + x1) / 2), svg_number((y0 + y1) / 2));
  append_format(
      svg, "</g>\n<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n",
      svg_number(x0), svg_number(y0), svg_number(x1 - x0), svg_number(y1 - y0));

  // Row and column labels.
  append_format(svg, "<g font-size=\"{}\" fill=\"#333\">\n", kLabelFontSize);
  for (size_t i = 0; i < rows; ++i)
    append_format(svg, "<text class=\"row-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                  svg_number(x0 - 6), svg_number(y0 + (static_cast<double>(i) + 0.5) * cell_h + 4),
                  xml_escape(row_labels_[i]));
  for (size_t j = 0; j < cols; j += label_every) {
    double cx = x0 + (static_cast<double>(j) + 0.5) * cell_w;
    if (rotate_cols)
      append_format(
          svg, "<text class=\"col-label\" transform=\"translate({} {}) rotate(-45)\" text-anchor=\"end\">{}</text>\n",
          svg_number(cx + 4), svg_number(y1 + 12), xml_escape(col_labels_[j]));
    else
      append_format(svg, "<text class=\"col-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                    svg_number(cx), svg_number(y1 + 15), xml_escape(col_labels_[j]));
  }
  append_format(svg, "</g>\n");

  draw_color_bar(svg, ticks, bar_x, y0, y1);
  if (!o.value_label.empty())
    append_format(
        svg,
        "<text class=\"value-label\" transform=\"translate({} {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        svg_number(W - 14), svg_number((y0 + y1) / 2), xml_escape(o.value_label));

  append_axis_titles(svg, o.x_label, o.y_label, (x0 + x1) / 2, (y0 + y1) / 2, H);
  append_format(svg, "</svg>\n");
  return svg;
}

void SvgHeatmap::save(const std::string& path) const { write_file_atomic(path, render()); }

}  // namespace zaya
