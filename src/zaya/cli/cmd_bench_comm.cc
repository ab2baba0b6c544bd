// zaya bench comm: collective microbenchmarks with nccl-tests' semantics over
// the Comm layer (src/zaya/bench/comm_job.h, comm_bench.h; docs/bench.md). Run
// it under mpirun: every rank runs the job, rank 0 prints and writes the JSON.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "zaya/bench/byte_size.h"
#include "zaya/bench/comm_bench.h"
#include "zaya/bench/comm_job.h"
#include "zaya/cli/commands.h"
#include "zaya/dist/comm.h"
#include "zaya/io/atomic_file.h"

namespace zaya::cli {
namespace {

// The job's options (bench/comm_job_options.h) and what only the printing and the JSON need.
struct BenchCommCliOptions : CommJobOptions {
  int iter_stats = 0;
  std::string json_out;
};

// "12.34" with nccl-tests' widths: 7 characters, fewer decimals as it grows.
std::string format_time_us(double us) {
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

std::string format_sample(const CommSample& s, bool iter_stats) {
  if (!s.ran)
    return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}{}", "N/A", "N/A", "N/A", "N/A",
                       iter_stats ? fmt::format("  {:>7}  {:>7}  {:>7}  {:>5}", "", "", "", "") : "");
  std::string out = fmt::format("  {}  {:6.2f}  {:6.2f}  {:>6}", format_time_us(s.time_us), s.algbw, s.busbw,
                                s.wrong >= 0 ? std::to_string(s.wrong) : std::string("N/A"));
  if (iter_stats)
    out += fmt::format("  {}  {}  {}  {:5.1f}", format_time_us(s.iter_us.min), format_time_us(s.iter_us.max),
                       format_time_us(s.iter_us.p99), 100 * s.iter_us.cv);
  return out;
}

void print_table_header(const CommRun& run, bool iter_stats) {
  const std::string extra =
      iter_stats ? fmt::format("  {:>7}  {:>7}  {:>7}  {:>5}", "i_min", "i_max", "i_p99", "i_cv%") : "";
  const std::string units = iter_stats ? fmt::format("  {:>7}  {:>7}  {:>7}  {:>5}", "(us)", "(us)", "(us)", "") : "";
  const int half = 34 + int(extra.size());
  fmt::print("#\n# {} {}{}{}\n", collective_name(run.coll), dtype_name(run.dtype),
             run.has_op ? fmt::format(" {}", reduce_op_name(run.op)) : "",
             run.matrix_source.empty() ? "" : ", matrix: " + run.matrix_source);
  fmt::print("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:^{}}{:^{}}\n", "", "", "", "", "", "out-of-place", half,
             "in-place", half);
  fmt::print("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}{}  {:>7}  {:>6}  {:>6}  {:>6}{}\n",
             "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", extra, "time", "algbw",
             "busbw", "#wrong", extra);
  fmt::print("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}{}  {:>7}  {:>6}  {:>6}  {:>6}{}\n",
             "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", units, "(us)", "(GB/s)", "(GB/s)", "",
             units);
}

void print_row(const CommRun& run, const CommRow& row, bool iter_stats) {
  fmt::print("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}\n", row.size_bytes, row.count, dtype_name(run.dtype),
             run.has_op ? reduce_op_name(run.op) : "none", run.root, format_sample(row.out_of_place, iter_stats),
             format_sample(row.in_place, iter_stats));
  std::fflush(stdout);
}

void print_start(const CommJob& job) {
  const CommBenchOptions& opt = job.options();
  const CommBenchContext& ctx = job.context();
  fmt::print("# zaya bench comm: {} ranks, {} group(s) of {}{}\n", ctx.world_ranks, ctx.groups, ctx.group_ranks,
             ctx.split.empty() ? "" : fmt::format(" (split {})", ctx.split));
  fmt::print(
      "# minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg iters: {} validation: {} "
      "time: {} timeout: {} calls: {}{}\n",
      opt.min_bytes, opt.max_bytes, opt.step_factor > 1 ? opt.step_factor : opt.step_bytes,
      opt.step_factor > 1 ? "factor" : "bytes", opt.warmup, opt.iters, opt.agg_iters, opt.check,
      opt.time_stat == "mean" ? std::string("mean") : opt.time_stat + " of iterations",
      opt.timeout > 0 ? fmt::format("{} s", opt.timeout) : "none", opt.raw ? "MPI directly (--raw)" : "Comm layer",
      opt.fault != CommFault::kNone ? fmt::format(" fault: {}", comm_fault_name(opt.fault)) : "");
  fmt::print("#\n# Using ranks\n");
  for (const std::string& line : ctx.rank_lines) fmt::print("#  {}\n", line);
  std::fflush(stdout);
}

void print_summary(const CommJobResult& r, double min_bw) {
  const CommBenchSummary& s = r.summary;
  fmt::print("# Out of bounds values : {} {}\n", s.wrong_total,
             !s.verified     ? "(not verified)"
             : s.wrong_total ? "FAILED"
                             : "OK");
  fmt::print("# Avg bus bandwidth    : {:g} {}\n#\n", s.avg_busbw,
             min_bw <= 0     ? ""
             : r.gate_failed ? fmt::format("FAILED (below 0.9 x --min-bw {:g})", min_bw)
                             : fmt::format("OK (--min-bw {:g})", min_bw));
  std::fflush(stdout);
}

// Every rank runs the job (comm_job.h); rank 0 prints and writes the JSON.
void bench_comm(const BenchCommCliOptions& o) {
  auto world = make_world_comm();
  const bool root_rank = world->rank() == 0;
  const bool iter_stats = o.iter_stats != 0;
  CommJobCallbacks cb;
  cb.on_start = [&](const CommJob& job) {
    if (root_rank) print_start(job);
  };
  cb.on_row = [&](const CommRun& run, const CommRow& row) {
    if (!root_rank) return;
    if (run.rows.size() == 1) print_table_header(run, iter_stats);
    print_row(run, row, iter_stats);
  };
  cb.on_done = [&](const CommJob& job, const CommJobResult& r) {
    if (!root_rank) return;
    print_summary(r, o.min_bw);
    if (!o.json_out.empty())
      write_file_atomic(o.json_out, comm_bench_json(job.options(), job.context(), r.runs).dump(2) + "\n");
  };
  run_comm_job(*world, o, cb);
}

CLI::Validator size_validator() {
  return CLI::Validator([](std::string& s) { return byte_size_error(s); }, "SIZE");
}

}  // namespace

void add_bench_comm_command(CLI::App& bench) {
  auto o = std::make_shared<BenchCommCliOptions>();
  auto* cmd = bench.add_subcommand("comm", "collective microbenchmarks (nccl-tests semantics); run under mpirun -np N");
  cmd->add_option("collectives", o->collectives,
                  "all_reduce (default), reduce_scatter, all_gather, broadcast, reduce, all_to_all, all_to_all_v, "
                  "send_recv, or all")
      ->delimiter(',');
  cmd->add_option("-b,--minbytes", o->min_bytes, "smallest message size, e.g. 8, 64K, 32M")->check(size_validator());
  cmd->add_option("-e,--maxbytes", o->max_bytes, "largest message size")->check(size_validator());
  cmd->add_option("-i,--stepbytes", o->step_bytes, "size increment when -f is 1")->check(size_validator());
  cmd->add_option("-f,--stepfactor", o->step_factor, "size multiplier between steps (default 1: use -i)")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 20));
  cmd->add_option("-n,--iters", o->iters, "timed iterations per size")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("-w,--warmup_iters,--warmup", o->warmup, "warm-up operations at the largest and smallest size")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-m,--agg_iters", o->agg_iters, "operations per timed iteration")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-c,--check", o->check, "verified operations per size and form, 0: no verification")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-d,--datatype", o->dtypes, "float, double, bfloat16, half, int32, int64, uint8, or all")
      ->delimiter(',');
  cmd->add_option("-o,--op", o->ops, "sum, prod, min, max, avg, or all")->delimiter(',');
  cmd->add_option("-r,--root", o->root, "root rank of broadcast and reduce")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("-a,--average", o->average, "time over ranks: 0 rank 0, 1 mean (default), 2 min, 3 max")
      ->check(CLI::Range(0, 3));
  cmd->add_option("--time-stat", o->time_stat,
                  "time/algbw/busbw from the mean (nccl-tests, default), or the median or min of the iterations "
                  "(robust on shared machines)")
      ->check(CLI::IsMember({"mean", "median", "min"}));
  cmd->add_option("-N,--run_cycles", o->cycles, "run the whole sweep N times, 0: forever")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-I,--iter-stats", o->iter_stats, "1: print per-iteration min/max/p99/cv columns (always in JSON)")
      ->check(CLI::Range(0, 1));
  cmd->add_option("-T,--timeout", o->timeout, "seconds before a stuck operation is an error (default 0: none)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_flag("--raw", o->raw,
                "time the MPI library's own blocking calls, bypassing the Comm layer (its ordering and deadline)");
  cmd->add_option("--split", o->split, "split ranks into groups, as NCCL_TESTS_SPLIT: 'MOD n', 'DIV n', 'AND mask'");
  cmd->add_option("--matrix", o->matrix, "all_to_all_v traffic matrix file (n lines of n weights, row = sender)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--routing", o->routing, "derive the all_to_all_v matrix from zaya train's metrics.jsonl")
      ->check(CLI::ExistingFile);
  cmd->add_option("--routing-step", o->routing_step, "metrics step to use (default: the last)");
  cmd->add_option("--routing-layer", o->routing_layer, "MoE layer number, mean (default) or max (most imbalanced)");
  cmd->add_option("--write-matrix", o->write_matrix, "write the traffic matrix used to this file");
  cmd->add_option("--min-bw", o->min_bw, "fail (exit 1) when the average busbw is below 0.9 x this many GB/s")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--inject-fault", o->fault, "testing: none, drop-rank, off-by-one or stall")
      ->check(CLI::IsMember({"none", "drop-rank", "off-by-one", "stall"}));
  cmd->add_option("--stall-seconds", o->stall_seconds, "testing: how long --inject-fault stall sleeps")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--json", o->json_out, "write the results as JSON (rank 0)");
  cmd->callback([o] { bench_comm(*o); });
}

}  // namespace zaya::cli
