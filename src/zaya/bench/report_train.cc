// The training section of `zaya report` (report_builder.h): zaya bench train's
// throughput, and per run of zaya train (its metrics.jsonl, report_metrics.h)
// the loss curves (validation dashed in the run's colour), the learning rate,
// the gradient norm, the slowest and fastest rank's step time of a
// distributed run, and heat maps of the routing per MoE layer over the steps;
// for `zaya rl` runs, their reward, KL, flip rate and length (report_rl.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "zaya/bench/report_builder.h"
#include "zaya/bench/report_json.h"
#include "zaya/bench/report_metrics.h"
#include "zaya/bench/report_plot.h"
#include "zaya/bench/report_rl.h"
#include "zaya/report/svg_heatmap.h"

namespace zaya {
namespace {

using nlohmann::json;

constexpr size_t kMaxStepColumns = 50;  // routing heat maps: steps are averaged into at most this many columns
constexpr size_t kStepLabels = 10;      // column labels shown, about

bool any_finite(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

// Runs that share a label (directories of one name in two places) are told
// apart by their whole paths (run_path_label).
void disambiguate(std::vector<RunMetrics>& runs, const std::vector<std::string>& paths) {
  std::map<std::string, int> count;
  for (const RunMetrics& r : runs) ++count[r.label];
  for (size_t i = 0; i < runs.size(); ++i)
    if (count[runs[i].label] > 1) runs[i].label = run_path_label(paths[i]);
}

// One value per (layer, step) of a run's routing.
using LayerValue = double (*)(const RoutingLayer&);
double skip_of(const RoutingLayer& l) { return l.skip; }
double entropy_of(const RoutingLayer& l) { return l.entropy; }
// The busiest expert's share over the mean share: 1 when the experts are used evenly.
double imbalance_of(const RoutingLayer& l) {
  double sum = 0, most = 0;
  for (double v : l.load) {
    sum += v;
    most = std::max(most, v);
  }
  return sum > 0 ? most * double(l.load.size()) / sum : NAN;
}

// The MoE layers of a run's routing (those of its first record), as row
// labels: by block, as `zaya info` counts them ("4 blocks"). metrics.jsonl
// names each by its half-layer, 2 x block + 1 (the MoE half of the block).
std::vector<std::string> layer_labels(const RunMetrics& run) {
  std::vector<std::string> rows;
  for (const RoutingLayer& l : run.routing.front().layers) {
    const int64_t half = int64_t(l.layer);
    rows.push_back(half % 2 == 1 ? fmt::format("block {}", (half - 1) / 2) : fmt::format("half-layer {}", half));
  }
  return rows;
}

HeatmapOptions routing_options(const std::string& title, const std::string& x_label, const std::string& value_label,
                               size_t rows) {
  HeatmapOptions opt;
  opt.title = title;
  opt.x_label = x_label;
  opt.y_label = "MoE layer of block (half-layer 2b+1)";
  opt.value_label = value_label;
  opt.width = 900;
  opt.height = std::max(300, 110 + 16 * int(rows));
  return opt;
}

// A layers x steps heat map: the run's routing records averaged into at most
// kMaxStepColumns columns of consecutive records, each labelled by its last step.
// v_min / v_max: a fixed colour range (a share: [0, 1], so that a map of zeros is not drawn from -1 to 1),
// or unset to fit the data.
ReportFigure routing_over_steps(const RunMetrics& run, const std::string& file, const std::string& what,
                                const std::string& value_label, LayerValue value, std::optional<double> v_min,
                                std::optional<double> v_max = std::nullopt) {
  const std::vector<std::string> rows = layer_labels(run);
  const size_t n = run.routing.size(), per = (n + kMaxStepColumns - 1) / kMaxStepColumns, cols = (n + per - 1) / per;
  std::vector<std::string> col_labels(cols);
  std::vector<double> grid(rows.size() * cols, NAN);
  for (size_t c = 0; c < cols; ++c) {
    const size_t begin = c * per, end = std::min(n, begin + per);
    col_labels[c] = fmt::format("{:g}", run.routing[end - 1].step);
    for (size_t r = 0; r < rows.size(); ++r) {
      double sum = 0;
      int64_t count = 0;
      for (size_t k = begin; k < end; ++k) {
        if (r >= run.routing[k].layers.size()) continue;
        const double v = value(run.routing[k].layers[r]);
        if (!std::isfinite(v)) continue;
        sum += v;
        ++count;
      }
      if (count > 0) grid[r * cols + c] = sum / double(count);
    }
  }
  HeatmapOptions opt = routing_options(fmt::format("{}: {} per layer{}", run.label, what,
                                                   per > 1 ? fmt::format(" (mean of {} records per column)", per) : ""),
                                       "step", value_label, rows.size());
  opt.cell_text = false;
  opt.v_min = v_min;
  opt.v_max = v_max;
  opt.col_label_every = int(std::max<size_t>(1, (cols + kStepLabels - 1) / kStepLabels));
  return {file, opt.title, SvgHeatmap(opt, rows, col_labels, grid).render()};
}

// A layers x experts heat map of each expert's share, over the run's last records.
ReportFigure expert_load(const RunMetrics& run, const std::string& file) {
  const std::vector<std::string> rows = layer_labels(run);
  size_t experts = 0;
  for (const RoutingLayer& l : run.routing.front().layers) experts = std::max(experts, l.load.size());
  const size_t n = run.routing.size(), last = std::min<size_t>(n, 10);
  std::vector<std::string> cols;
  for (size_t e = 0; e < experts; ++e) cols.push_back(std::to_string(e));
  std::vector<double> grid(rows.size() * experts, NAN);
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t e = 0; e < experts; ++e) {
      double sum = 0;
      int64_t count = 0;
      for (size_t k = n - last; k < n; ++k)
        if (r < run.routing[k].layers.size() && e < run.routing[k].layers[r].load.size() &&
            std::isfinite(run.routing[k].layers[r].load[e])) {
          sum += run.routing[k].layers[r].load[e];
          ++count;
        }
      if (count > 0) grid[r * experts + e] = sum / double(count);
    }
  HeatmapOptions opt = routing_options(
      fmt::format("{}: expert load at steps {:g}-{:g}", run.label, run.routing[n - last].step, run.routing[n - 1].step),
      "expert", "share of the choices", rows.size());
  opt.v_min = 0;  // a share: the same [0, 1] scale for every run and layer
  opt.v_max = 1;
  opt.cell_decimals = 2;
  return {file, opt.title, SvgHeatmap(opt, rows, cols, grid).render()};
}

}  // namespace

ReportSection train_report_section(const std::vector<const ReportInput*>& inputs) {
  ReportSection sec;
  sec.id = "train";
  sec.title = "Training (zaya bench train, zaya train metrics)";
  std::vector<std::vector<std::string>> bench_rows, run_rows;
  std::vector<RunMetrics> runs;
  std::vector<std::string> paths;
  for (const ReportInput* in : inputs) {
    if (in->kind == "train") {
      const json& d = in->doc;
      bench_rows.push_back({std::filesystem::path(in->path).filename().string(), json_string(d, "model"),
                            fixed(json_number(d, "tokens_per_second"), 0), fixed(json_number(d, "step_seconds"), 3),
                            fixed(100 * json_number(d, "mfu"), 1)});
      continue;
    }
    runs.push_back(read_run_metrics(in->doc, in->path));
    paths.push_back(in->path);
  }
  disambiguate(runs, paths);
  if (!bench_rows.empty()) sec.html += html_table({"file", "model", "tokens/s", "step (s)", "MFU %"}, bench_rows);
  if (runs.empty()) return sec;

  std::vector<PlotSeries> loss, lr, gnorm, rank_time;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& r = runs[i];
    const std::string color = palette_color(i);
    loss.push_back({r.label, r.steps, r.loss, color});
    if (!r.val_steps.empty())
      loss.push_back({r.label + " validation", r.val_steps, r.val_loss, color, LineStyle::kDashed});
    if (any_finite(r.lr)) lr.push_back({r.label, r.steps, r.lr, color});
    if (any_finite(r.grad_norm)) gnorm.push_back({r.label, r.steps, r.grad_norm, color});
    if (!r.rank_steps.empty()) {
      rank_time.push_back({r.label + " slowest rank", r.rank_steps, r.slowest_seconds, color});
      rank_time.push_back({r.label + " fastest rank", r.rank_steps, r.fastest_seconds, color, LineStyle::kDashed});
    }
    run_rows.push_back({r.label, paths[i], r.steps.empty() ? "-" : fmt::format("{:g}", r.steps.back()),
                        r.loss.empty() ? "-" : fixed(r.loss.back(), 4),
                        r.val_loss.empty() ? "-" : fixed(r.val_loss.back(), 4),
                        r.ranks > 0 ? std::to_string(r.ranks) : "-",
                        r.routing.empty() ? "-" : std::to_string(r.routing.front().layers.size())});
  }
  sec.html +=
      "<p>Each run is named by its directory. Training loss is solid, validation loss dashed in the run's colour. "
      "The routing maps show each block's MoE layer over the steps (metrics.jsonl numbers it by half-layer, "
      "2 x block + 1): load imbalance is the busiest expert's share of the "
      "choices over the mean share (1 = even), skip rate the skip expert's share, entropy the mean entropy of "
      "the router's distribution (nats); the expert-load map shows each expert's share over the last 10 "
      "records. Shares (skip rate, expert load) are coloured on a fixed 0-1 scale.</p>\n" +
      html_table({"run", "metrics", "last step", "last loss", "last validation loss", "ranks", "MoE layers"}, run_rows);
  sec.figures.push_back(line_figure("train_loss.svg", "training and validation loss", "step", "loss (nats/token)",
                                    AxisScale::kLinear, AxisScale::kLinear, loss));
  if (!lr.empty())
    sec.figures.push_back(line_figure("train_lr.svg", "learning rate", "step", "learning rate", AxisScale::kLinear,
                                      AxisScale::kLinear, lr));
  if (!gnorm.empty())
    sec.figures.push_back(line_figure("train_grad_norm.svg", "gradient norm (before clipping)", "step", "gradient norm",
                                      AxisScale::kLinear, AxisScale::kLog10, gnorm));
  if (!rank_time.empty())
    sec.figures.push_back(line_figure("train_rank_step_time.svg", "step time of the slowest and fastest rank", "step",
                                      "step time (s)", AxisScale::kLinear, AxisScale::kLinear, rank_time));
  add_rl_figures(runs, sec);
  std::set<std::string> stems;  // labels of one slug ("a-b", "a_b") get files of their own
  for (const RunMetrics& r : runs) {
    if (r.routing.empty() || r.routing.front().layers.empty()) continue;
    std::string stem = "train_routing_" + file_slug(r.label);
    for (int k = 2; !stems.insert(stem).second; ++k) stem = fmt::format("train_routing_{}_{}", file_slug(r.label), k);
    sec.figures.push_back(routing_over_steps(r, stem + "_imbalance.svg", "expert load imbalance",
                                             "busiest expert / mean", imbalance_of, 1.0));
    sec.figures.push_back(
        routing_over_steps(r, stem + "_skip.svg", "skip rate", "skip expert's share", skip_of, 0.0, 1.0));
    sec.figures.push_back(
        routing_over_steps(r, stem + "_entropy.svg", "router entropy", "entropy (nats)", entropy_of, 0.0));
    sec.figures.push_back(expert_load(r, stem + "_load.svg"));
  }
  return sec;
}

}  // namespace zaya
