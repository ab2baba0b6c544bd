#include "zaya/bench/membw_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "zaya/bench/byte_size.h"
#include "zaya/core/error.h"

namespace zaya {

MembwOptions membw_options(const MembwJobOptions& o) {
  MembwOptions m;
  m.kernels = o.kernels;
  m.threads = o.threads;
  m.min_bytes = parse_byte_size(o.min_bytes, "--min-bytes");
  m.max_bytes = parse_byte_size(o.max_bytes, "--max-bytes");
  m.step_factor = o.factor;
  m.reps = o.reps;
  return m;
}

std::vector<int> membw_thread_counts(const MembwOptions& o, int max_threads) {
  return o.threads.empty() ? default_thread_counts(max_threads) : o.threads;
}

MembwTable membw_table(const std::vector<MembwPoint>& points, const std::vector<std::string>& kernels,
                       const std::vector<int>& threads) {
  MembwTable t;
  for (const std::string& k : kernels)
    for (int n : threads) t.columns.push_back(fmt::format("{}/{}t", k, n));
  std::map<std::string, size_t> seen;  // points so far per column
  for (const MembwPoint& p : points) {
    const std::string col = fmt::format("{}/{}t", p.kernel, p.threads);
    const auto c = std::find(t.columns.begin(), t.columns.end(), col);
    ZAYA_CHECK(c != t.columns.end(), "membw point {} is not one of the table's kernels x thread counts", col);
    const size_t r = seen[col]++;
    if (r >= t.gbps.size()) {
      t.gbps.emplace_back(t.columns.size(), 0.0);
      t.working_sets.push_back(p.nominal);
    }
    t.gbps[r][size_t(c - t.columns.begin())] = p.best_gbps;
  }
  return t;
}

}  // namespace zaya
