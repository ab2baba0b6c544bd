#pragma once
// The figures of `zaya rl` runs in `zaya report`'s training section
// (report_train.cc; docs/rl.md "Metrics"): over the steps, the mean training
// reward (solid) with the held-out reward (dashed, the run's colour), the KL
// to the reference, the router-flip rate (when the runs log it) and the mean
// response length. Runs without RL records add nothing.

#include <vector>

#include "zaya/bench/report_builder.h"
#include "zaya/bench/report_metrics.h"

namespace zaya {

void add_rl_figures(const std::vector<RunMetrics>& runs, ReportSection& section);

}  // namespace zaya
