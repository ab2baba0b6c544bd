#pragma once
// A dependency-free SVG heat map (e.g. GEMM efficiency over M x N shapes):
// a grid of coloured cells with row and column labels, an optional value in
// each cell, and a colour bar with ticks as legend.
//
//   HeatmapOptions opt;
//   opt.title = "bf16 GEMM, % of peak";  opt.value_label = "% of peak";
//   SvgHeatmap map(opt, {"M=512", "M=4096"}, {"N=512", "N=4096"}, {41, 63, 70, 88});
//   map.save("gemm.svg");
//
// Colours follow viridis (perceptually uniform, readable in grey and for
// common colour-vision deficiencies). NaN cells are missing: grey, no text.

#include <optional>
#include <string>
#include <vector>

namespace zaya {

struct HeatmapOptions {
  std::string title;
  std::string x_label;      // under the column labels
  std::string y_label;      // left of the row labels
  std::string value_label;  // caption of the colour bar
  // Colour range; unset means "fit the data", widened to the enclosing ticks.
  std::optional<double> v_min, v_max;
  bool cell_text = true;  // print each value in its cell
  int cell_decimals = 2;  // decimals of the printed values
  // Label every k-th column only (the first, then every k-th after it), for
  // many narrow columns such as training steps; long labels are then written
  // at 45 degrees only when they do not fit k columns.
  int col_label_every = 1;
  int width = 800;
  int height = 500;
};

class SvgHeatmap {
 public:
  // values_grid holds rows x cols values, row-major (row i, column j at i*cols + j).
  SvgHeatmap(HeatmapOptions options, std::vector<std::string> row_labels, std::vector<std::string> col_labels,
             std::vector<double> values_grid);

  std::string render() const;
  // Writes render() to `path` atomically.
  void save(const std::string& path) const;

 private:
  HeatmapOptions options_;
  std::vector<std::string> row_labels_, col_labels_;
  std::vector<double> values_grid_;
};

// Viridis colour for t in [0, 1] (clamped), as "#rrggbb".
std::string viridis(double t);

}  // namespace zaya
