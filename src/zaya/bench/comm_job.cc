#include "zaya/bench/comm_job.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "zaya/core/error.h"
#include "zaya/dist/collective.h"

namespace zaya {

CommJob::CommJob(Comm& world, const CommJobOptions& o) : cycles_(o.cycles), min_bw_(o.min_bw) {
  CommJobSettings s = resolve_comm_job_options(o);
  groups_ = split_comm_groups(world, s.split, o.split);
  s.bench.matrix = load_comm_matrix(world, groups_.group->size(),
                                    {o.matrix, o.routing, {o.routing_step, o.routing_layer}, o.write_matrix});
  context_.world_ranks = world.size();
  context_.group_ranks = groups_.group->size();
  context_.groups = groups_.groups;
  context_.split = s.split.op == SplitSpec::Op::kNone ? "" : o.split;
  context_.rank_lines = comm_rank_lines(world, groups_.color);
  context_.min_bw = o.min_bw;
  combos_ = comm_combos(s.bench, s.all_ops, groups_.group->size());
  if (s.bench.raw) raw_ = groups_.group->raw_view();
  bench_ = std::make_unique<CommBench>(world, raw_ ? *raw_ : *groups_.group, std::move(s.bench));
}

CommJob::~CommJob() = default;

CommJobResult CommJob::run(const CommRowCallback& on_row) {
  CommJobResult r;
  for (int cycle = 0; cycles_ == 0 || cycle < cycles_; ++cycle) {
    r.runs.clear();
    for (const CommCombo& x : combos_) r.runs.push_back(bench_->run(x.coll, x.dtype, x.op, on_row));
  }
  r.summary = summarize_comm_runs(r.runs);
  r.gate_failed = comm_gate_failed(r.summary, min_bw_);
  return r;
}

bool comm_gate_failed(const CommBenchSummary& s, double min_bw) { return min_bw > 0 && s.avg_busbw < 0.9 * min_bw; }

void check_comm_result(const CommBenchSummary& s, double min_bw) {
  if (s.wrong_total > 0)
    fail("zaya bench comm: {} wrong elements: the collectives returned incorrect data", s.wrong_total);
  if (comm_gate_failed(s, min_bw))
    fail("zaya bench comm: average bus bandwidth {:.3g} GB/s is below 0.9 x --min-bw {:g} GB/s", s.avg_busbw, min_bw);
}

void run_comm_job(Comm& world, const CommJobOptions& o, const CommJobCallbacks& cb) {
  bool agreed = true;  // errors so far happen alike on every rank
  try {
    CommJob job(world, o);
    agreed = false;
    if (cb.on_start) cb.on_start(job);
    const CommJobResult r = job.run(cb.on_row);
    if (cb.on_done) cb.on_done(job, r);
    agreed = true;
    check_comm_result(r.summary, o.min_bw);
  } catch (const Error& e) {
    if (world.size() == 1) throw;
    std::fflush(stdout);
    if (agreed)  // every rank failed alike: rank 0 reports it, the others leave quietly
      throw CollectiveError(e.what(), dynamic_cast<const UsageError*>(&e) != nullptr, world.rank() == 0);
    // One rank failed while the others may be inside a collective: stop them all.
    fmt::print(stderr, "error: rank {}: {}\n", world.rank(), e.what());
    std::fflush(stderr);
    abort_world(1);
  }
}

}  // namespace zaya
