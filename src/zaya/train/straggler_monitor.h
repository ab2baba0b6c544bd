#pragma once
// Stragglers (docs/fault-tolerance.md): each rank's own compute time (forward
// and backward without waiting for others) is summed between reports; at a
// report every rank's sum goes to metrics.jsonl and a rank slower than
// ft.straggler_ratio x the fastest one becomes an incident.

#include <cstdint>
#include <vector>

#include "zaya/dist/mesh.h"
#include "zaya/train/run_log.h"

namespace zaya {

class StragglerMonitor {
 public:
  StragglerMonitor(double ratio, ProcessMesh& mesh) : ratio_(ratio), mesh_(mesh) {}
  void add(double compute_seconds) { seconds_ += compute_seconds; }
  // Collective on a distributed run; starts the next period.
  void report(int64_t step, RunLog& log);

 private:
  double ratio_;
  ProcessMesh& mesh_;
  double seconds_ = 0;  // this rank's step seconds since the last report
  std::vector<double> times_;
};

}  // namespace zaya
