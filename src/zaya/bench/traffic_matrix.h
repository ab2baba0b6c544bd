#pragma once
// Traffic matrices for the all_to_all_v benchmark: w[i][j] is how much rank i
// sends to rank j (any non-negative unit; the benchmark rescales it to the
// message size of each step, see scale_traffic).
//
// File format (text): n lines of n numbers separated by spaces, tabs or
// commas; '#' starts a comment; blank lines are ignored. Row i is sender i.
//
// From MoE routing: `zaya train` writes one JSON line per logged step to
// OUT_DIR/metrics.jsonl, with the fraction of routed tokens each expert
// received in each MoE layer:
//   {"step":120, ..., "routing":[{"layer":1,"load":[0.26,0.24,...],"skip":0.05,...}, ...]}
// With expert parallelism over n ranks, expert e lives on rank e / (E / n)
// (contiguous blocks, E divisible by n). Each rank routes its own tokens with
// the same distribution (the metrics record the global loads), so rank i sends
// rank j the share of tokens bound for j's experts:
//   w[i][j] = sum of load[e] over the experts e of rank j      (every row alike)
// Tokens sent to the skip expert stay on their rank and are not dispatched.

#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

struct TrafficMatrix {
  int n = 0;
  std::vector<double> w;  // n x n, row-major, rows are senders
  std::string source;     // a file name, "uniform", or "routing FILE step S layer L"

  double at(int from, int to) const { return w[size_t(from) * size_t(n) + size_t(to)]; }
};

TrafficMatrix uniform_traffic_matrix(int n);
TrafficMatrix read_traffic_matrix(const std::string& path);
TrafficMatrix parse_traffic_matrix(const std::string& text, const std::string& source);
// The text form read_traffic_matrix accepts (with a comment naming the source).
std::string format_traffic_matrix(const TrafficMatrix& m);

// Which routing record to use: `step` -1 is the last logged step; `layer` is a
// "layer" value of the records, or "mean" (the average load over all MoE
// layers) or "max" (the layer whose busiest rank is the most overloaded).
struct RoutingSelection {
  int64_t step = -1;
  std::string layer = "mean";
};
TrafficMatrix traffic_matrix_from_routing(const std::string& metrics_path, int ep_size,
                                          const RoutingSelection& selection = {});

// Element counts counts[i * n + j] that rank i sends to rank j for a step
// whose average per-rank send volume is `elems_per_rank` (so the whole
// exchange moves n * elems_per_rank elements, distributed as the weights).
std::vector<int64_t> scale_traffic(const TrafficMatrix& m, int64_t elems_per_rank);

// The busiest rank's bytes: max over ranks of max(sent, received), all of it
// (for algbw) and only what crosses to other ranks (for busbw).
struct TrafficLoad {
  int64_t max_rank_elems = 0;
  int64_t max_rank_remote_elems = 0;
  double imbalance = 1;  // max_rank_elems / mean per-rank send
};
TrafficLoad traffic_load(const std::vector<int64_t>& counts, int n);

}  // namespace zaya
