#include "zaya/bench/stats.h"

#include <algorithm>
#include <cmath>

namespace zaya {

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p * double(sorted.size()));
  const size_t i = rank < 1 ? 0 : std::min(sorted.size() - 1, size_t(rank) - 1);
  return sorted[i];
}

SampleStats summarize(std::vector<double> samples) {
  SampleStats s;
  s.n = int64_t(samples.size());
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.min = samples.front();
  s.max = samples.back();
  double sum = 0;
  for (double v : samples) sum += v;
  s.mean = sum / double(s.n);
  double var = 0;
  for (double v : samples) var += (v - s.mean) * (v - s.mean);
  s.stddev = std::sqrt(var / double(s.n));
  s.cv = s.mean != 0 ? s.stddev / s.mean : 0;
  s.p50 = percentile_sorted(samples, 0.5);
  s.p99 = percentile_sorted(samples, 0.99);
  return s;
}

}  // namespace zaya
