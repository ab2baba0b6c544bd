#pragma once
// A training run as `zaya report` reads it from its metrics.jsonl (one
// JSON-lines document, docs/training.md "Outputs"): the step records (loss,
// learning rate, gradient norm, per-layer routing), the validation records,
// and the straggler records distributed runs interleave
// ({"step", "rank_step_seconds": [...], "slowest_rank"}). Phase records and
// anything unknown are passed over. A `zaya rl` run's step records (docs/rl.md
// "Metrics") also carry its reward, KL, response length and router-flip rate,
// and its evaluations ({"step", "eval_reward"}) the held-out reward.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace zaya {

// One MoE layer's routing at one step: each expert's share of the choices,
// the skip expert's share, the mean router entropy (nats).
struct RoutingLayer {
  int64_t layer = 0;  // as logged (the MoE half-layer: 1, 3, 5, ...)
  std::vector<double> load;
  double skip = 0, entropy = 0;
};

struct RoutingRecord {
  double step = 0;
  std::vector<RoutingLayer> layers;
};

struct RunMetrics {
  std::string label;  // the run: its directory (run_label)
  // Step records, in file order; lr and grad_norm are NaN where a record lacks them.
  std::vector<double> steps, loss, lr, grad_norm;
  std::vector<double> val_steps, val_loss;
  std::vector<RoutingRecord> routing;  // the step records that carry routing
  // Straggler records: the step and the slowest and fastest rank's seconds.
  std::vector<double> rank_steps, slowest_seconds, fastest_seconds;
  int64_t ranks = 0;  // the most ranks a straggler record lists
  // `zaya rl`: per step record (NaN where a record lacks it): reward_mean, kl_ref, flip_rate, response_length;
  // the held-out evaluations.
  std::vector<double> reward, kl, flip_rate, length;
  std::vector<double> eval_steps, eval_reward;
};

// How a run is named in legends: the name of the directory that holds its
// metrics.jsonl ("my" for runs/my/metrics.jsonl; the working directory's name
// for a bare "metrics.jsonl"), or a file of another name without its
// extension ("run1" for bj/run1.jsonl).
std::string run_label(const std::string& metrics_path);

// The longer name for runs whose run_label coincide: the whole path of the
// directory ("x/a/run" for x/a/run/metrics.jsonl), or of the file without its
// extension ("bj/run1" for bj/run1.jsonl).
std::string run_path_label(const std::string& metrics_path);

// The run in `lines` (the array of a .jsonl input's records), named run_label(path).
RunMetrics read_run_metrics(const nlohmann::json& lines, const std::string& path);

}  // namespace zaya
