#pragma once
// A whole `zaya bench comm` run on every rank of the world, in two steps:
//   plan  resolve the options (comm_job_options.h), split the world into
//         equal groups, share the traffic matrix, gather the rank lines and
//         validate every combination: an error here happens alike on every rank
//   run   `cycles` sweeps over the combinations (CommBench), calling back after
//         each row so the caller can print nccl-tests' table as it goes
// and the outcome: the wrong-element count and the bandwidth gate (--min-bw)
// decide the exit status after the results are reported.
//
// run_comm_job() ties the steps together with the error agreement a
// multi-rank run needs: an error every rank hit alike (in the plan, or in the
// outcome) is reported once, by rank 0, while the others leave quietly; an
// error on one rank during the measurement, while the others may be waiting in
// a collective, is reported by that rank, which then stops the world.

#include <functional>
#include <memory>
#include <vector>

#include "zaya/bench/comm_bench.h"
#include "zaya/bench/comm_groups.h"
#include "zaya/bench/comm_job_options.h"
#include "zaya/dist/comm.h"

namespace zaya {

struct CommJobResult {
  std::vector<CommRun> runs;  // of the last cycle
  CommBenchSummary summary;
  bool gate_failed = false;  // comm_gate_failed(summary, --min-bw)
};

// After each measured row, on every rank; run.rows ends with `row` (so it
// holds one row at a run's first, where nccl-tests prints the table header).
using CommRowCallback = CommBench::RowCallback;

class CommJob {
 public:
  // The plan step; collective: every rank of `world` constructs it with the same options.
  CommJob(Comm& world, const CommJobOptions& options);
  ~CommJob();
  CommJob(const CommJob&) = delete;
  CommJob& operator=(const CommJob&) = delete;

  const CommBenchOptions& options() const { return bench_->options(); }  // with the traffic matrix
  const CommBenchContext& context() const { return context_; }
  const std::vector<CommCombo>& combos() const { return combos_; }
  Comm& group() const { return *groups_.group; }

  // The run step, on every rank.
  CommJobResult run(const CommRowCallback& on_row = {});

 private:
  int cycles_ = 1;
  double min_bw_ = 0;
  CommGroups groups_;
  CommBenchContext context_;
  std::vector<CommCombo> combos_;
  std::unique_ptr<Comm> raw_;         // --raw: the group's raw_view, which the collectives run on
  std::unique_ptr<CommBench> bench_;  // after groups_: destroyed first, it restores their timeouts
};

// The bandwidth gate: below 0.9 x `min_bw` GB/s average bus bandwidth (nccl-tests'
// "Avg bus bandwidth"); `min_bw` 0 is no gate.
bool comm_gate_failed(const CommBenchSummary& summary, double min_bw);
// Throws when the collectives returned wrong elements or the gate failed.
void check_comm_result(const CommBenchSummary& summary, double min_bw);

struct CommJobCallbacks {
  std::function<void(const CommJob&)> on_start;  // planned, before anything is measured
  CommRowCallback on_row;
  std::function<void(const CommJob&, const CommJobResult&)> on_done;  // before the outcome is checked
};
// Plan, run and check on every rank of `world` with the error agreement above.
// On one rank an error propagates as it is; on several, every rank throws a
// CollectiveError for an agreed error (rank 0 reports it, dist/collective.h),
// and a rank that failed alone prints "error: rank R: ..." and aborts the world.
void run_comm_job(Comm& world, const CommJobOptions& options, const CommJobCallbacks& callbacks);

}  // namespace zaya
