#pragma once
// Summary statistics of repeated timings (per-iteration times of a benchmark).

#include <cstdint>
#include <vector>

namespace zaya {

struct SampleStats {
  int64_t n = 0;
  double min = 0, max = 0, mean = 0;
  double p50 = 0, p99 = 0;  // nearest-rank percentiles: the ceil(p * n)-th smallest sample
  double stddev = 0;        // population standard deviation
  double cv = 0;            // coefficient of variation, stddev / mean (0 when the mean is 0)
};

SampleStats summarize(std::vector<double> samples);

// Nearest-rank percentile of sorted samples, p in [0, 1].
double percentile_sorted(const std::vector<double>& sorted, double p);

}  // namespace zaya
