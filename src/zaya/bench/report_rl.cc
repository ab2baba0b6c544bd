#include "zaya/bench/report_rl.h"

#include <algorithm>
#include <cmath>

#include "zaya/bench/report_plot.h"

namespace zaya {
namespace {

bool has_values(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

}  // namespace

void add_rl_figures(const std::vector<RunMetrics>& runs, ReportSection& sec) {
  std::vector<PlotSeries> reward, kl, flips, length;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& r = runs[i];
    if (!has_values(r.reward) && r.eval_steps.empty()) continue;
    const std::string color = palette_color(i);
    if (has_values(r.reward)) reward.push_back({r.label + " training (sampled)", r.steps, r.reward, color});
    if (!r.eval_steps.empty())
      reward.push_back({r.label + " held-out (greedy)", r.eval_steps, r.eval_reward, color, LineStyle::kDashed});
    if (has_values(r.kl)) kl.push_back({r.label, r.steps, r.kl, color});
    if (has_values(r.flip_rate)) flips.push_back({r.label, r.steps, r.flip_rate, color});
    if (has_values(r.length)) length.push_back({r.label, r.steps, r.length, color});
  }
  if (reward.empty()) return;
  sec.html +=
      "<p>RL runs (zaya rl): the mean reward of each step's samples (solid) and of the held-out prompts, decoded "
      "greedily (dashed); the KL to the frozen reference (k3 estimate, 0 without rl.kl_coef), the router-flip "
      "rate where the run logs it, and the mean response length in tokens.</p>\n";
  sec.figures.push_back(line_figure("rl_reward.svg", "RL reward: training samples and held-out prompts", "step",
                                    "mean reward", AxisScale::kLinear, AxisScale::kLinear, reward));
  if (!kl.empty())
    sec.figures.push_back(line_figure("rl_kl.svg", "RL: KL to the reference", "step", "mean k3 KL (nats)",
                                      AxisScale::kLinear, AxisScale::kLinear, kl));
  if (!flips.empty())
    sec.figures.push_back(line_figure("rl_flip_rate.svg", "RL: router-flip rate", "step",
                                      "share of token x layer choices", AxisScale::kLinear, AxisScale::kLinear, flips));
  if (!length.empty())
    sec.figures.push_back(line_figure("rl_length.svg", "RL: response length", "step", "mean generated tokens",
                                      AxisScale::kLinear, AxisScale::kLinear, length));
}

}  // namespace zaya
