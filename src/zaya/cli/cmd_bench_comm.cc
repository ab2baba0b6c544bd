// zaya bench comm: collective microbenchmarks with nccl-tests' semantics over
// the Comm layer (src/zaya/bench/comm_bench.h; docs/bench.md). Run it under
// mpirun: every rank runs this verb, rank 0 prints and writes the JSON.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "zaya/bench/byte_size.h"
#include "zaya/bench/comm_bench.h"
#include "zaya/bench/comm_split.h"
#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/dist/collective.h"
#include "zaya/io/atomic_file.h"

namespace zaya::cli {
namespace {

struct BenchCommOptions {
  std::vector<std::string> collectives = {"all_reduce"};
  std::string min_bytes = "32M", max_bytes = "32M", step_bytes = "1M";
  uint64_t step_factor = 1;
  int iters = 20, warmup = 5, agg_iters = 1, check = 1, average = 1, root = 0, cycles = 1, iter_stats = 0;
  std::vector<std::string> dtypes = {"float"}, ops = {"sum"};
  double timeout = 0, min_bw = 0, stall_seconds = 3600;
  std::string split, matrix, routing, routing_layer = "mean", write_matrix, json_out, fault = "none",
                                      time_stat = "mean";
  int64_t routing_step = -1;
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

// Rank 0 reads (or derives) the traffic matrix and sends its text to every
// rank, so the file need only exist where rank 0 runs; an error reaches all ranks.
std::optional<TrafficMatrix> load_matrix(Comm& world, Comm& group, const BenchCommOptions& o) {
  if (o.matrix.empty() && o.routing.empty()) return std::nullopt;
  std::string text;
  bool ok = true;
  if (world.rank() == 0) {
    try {
      ZAYA_CHECK(o.matrix.empty() || o.routing.empty(), "give --matrix or --routing, not both");
      TrafficMatrix m = !o.matrix.empty()
                            ? read_traffic_matrix(o.matrix)
                            : traffic_matrix_from_routing(o.routing, group.size(), {o.routing_step, o.routing_layer});
      if (!o.write_matrix.empty()) write_file_atomic(o.write_matrix, format_traffic_matrix(m));
      text = m.source + "\n" + format_traffic_matrix(m);
    } catch (const Error& e) {
      ok = false;
      text = e.what();
    }
  }
  int64_t header[2] = {ok ? 1 : 0, int64_t(text.size())};
  world.broadcast(header, 2, DType::kI64, 0);
  text.resize(size_t(header[1]));
  world.broadcast(text.data(), text.size(), DType::kU8, 0);
  if (!header[0]) fail("{}", text);
  const size_t nl = text.find('\n');
  TrafficMatrix m = parse_traffic_matrix(text.substr(nl + 1), "the traffic matrix");
  m.source = text.substr(0, nl);
  return m;
}

std::vector<std::string> rank_lines(Comm& world, int color) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  constexpr size_t kLine = 192;
  std::string mine = fmt::format("Rank {:3} Group {:3} Pid {:7} on {}", world.rank(), color, getpid(), host);
  mine.resize(kLine, '\0');
  std::string all(kLine * size_t(world.size()), '\0');
  world.all_gather(mine.data(), all.data(), kLine, DType::kU8);
  std::vector<std::string> lines;
  for (int r = 0; r < world.size(); ++r) lines.emplace_back(all.c_str() + size_t(r) * kLine);
  return lines;
}

void bench_comm(const BenchCommOptions& o) {
  auto world = make_world_comm();
  const bool root_rank = world->rank() == 0;
  bool agreed = true;  // errors so far happen alike on every rank
  try {
    CommBenchOptions opt;
    opt.collectives.clear();
    for (const std::string& c : o.collectives) {
      if (c == "all")
        opt.collectives = all_collectives();
      else
        opt.collectives.push_back(parse_collective(c));
    }
    ZAYA_CHECK(!opt.collectives.empty(), "no collective to run");
    opt.min_bytes = parse_byte_size(o.min_bytes, "-b/--minbytes");
    opt.max_bytes = parse_byte_size(o.max_bytes, "-e/--maxbytes");
    opt.step_bytes = parse_byte_size(o.step_bytes, "-i/--stepbytes");
    opt.step_factor = o.step_factor;
    opt.iters = o.iters;
    opt.warmup = o.warmup;
    opt.agg_iters = o.agg_iters;
    opt.check = o.check;
    opt.average = o.average;
    opt.time_stat = o.time_stat;
    opt.root = o.root;
    opt.timeout = o.timeout;
    opt.fault = parse_comm_fault(o.fault);
    opt.stall_seconds = o.stall_seconds;
    opt.dtypes.clear();
    for (const std::string& d : o.dtypes) {
      if (d == "all")
        opt.dtypes = all_dtypes();
      else
        opt.dtypes.push_back(parse_dtype(d));
    }
    opt.ops.clear();
    bool all_ops = false;
    for (const std::string& op : o.ops) {
      if (op == "all") {
        opt.ops = all_reduce_ops();
        all_ops = true;
      } else {
        opt.ops.push_back(parse_reduce_op(op));
      }
    }
    const SplitSpec split = parse_split(o.split);
    const int color = split_color(split, world->rank());
    std::unique_ptr<Comm> split_comm;
    Comm* group = world.get();
    if (split.op != SplitSpec::Op::kNone) {
      split_comm = world->split(color, world->rank(), "bench-group");
      group = split_comm.get();
    }
    int64_t leader = group->rank() == 0, groups = 0, sizes[2] = {group->size(), -group->size()}, extremes[2];
    world->all_reduce(&leader, &groups, 1, DType::kI64, ReduceOp::kSum);
    world->all_reduce(sizes, extremes, 2, DType::kI64, ReduceOp::kMax);
    ZAYA_CHECK(extremes[0] == -extremes[1],
               "--split '{}' makes groups of different sizes ({} to {} ranks); use a "
               "split that divides the ranks evenly",
               o.split, -extremes[1], extremes[0]);
    opt.matrix = load_matrix(*world, *group, o);

    CommBenchContext ctx;
    ctx.world_ranks = world->size();
    ctx.group_ranks = group->size();
    ctx.groups = int(groups);
    ctx.split = split.op == SplitSpec::Op::kNone ? "" : o.split;
    ctx.rank_lines = rank_lines(*world, color);
    ctx.min_bw = o.min_bw;

    // Validate every combination before anything is measured.
    struct Combo {
      Collective c;
      DType t;
      ReduceOp op;
    };
    std::vector<Combo> combos;
    for (Collective c : opt.collectives)
      for (DType t : opt.dtypes) {
        if (!collective_reduces(c)) {
          combos.push_back({c, t, ReduceOp::kSum});
          continue;
        }
        for (ReduceOp op : opt.ops) {
          if (comm_combination_valid(c, t, op))
            combos.push_back({c, t, op});
          else
            ZAYA_CHECK(all_ops, "-o avg needs a floating-point data type, got {}", dtype_name(t));
        }
      }
    if (group->size() < 2)
      std::erase_if(combos, [&](const Combo& x) {
        if (x.c != Collective::kSendRecv) return false;
        ZAYA_CHECK(opt.collectives.size() > 1,
                   "send_recv needs at least 2 ranks per group; run it under mpirun -np 2 or more");
        return true;
      });
    CommBench bench(*world, *group, opt);
    agreed = false;

    if (root_rank) {
      fmt::print("# zaya bench comm: {} ranks, {} group(s) of {}{}\n", ctx.world_ranks, ctx.groups, ctx.group_ranks,
                 ctx.split.empty() ? "" : fmt::format(" (split {})", ctx.split));
      fmt::print(
          "# minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg iters: {} validation: {} "
          "time: {} timeout: {}{}\n",
          opt.min_bytes, opt.max_bytes, opt.step_factor > 1 ? opt.step_factor : opt.step_bytes,
          opt.step_factor > 1 ? "factor" : "bytes", opt.warmup, opt.iters, opt.agg_iters, opt.check,
          opt.time_stat == "mean" ? std::string("mean") : opt.time_stat + " of iterations",
          opt.timeout > 0 ? fmt::format("{} s", opt.timeout) : "none",
          opt.fault != CommFault::kNone ? fmt::format(" fault: {}", comm_fault_name(opt.fault)) : "");
      fmt::print("#\n# Using ranks\n");
      for (const std::string& line : ctx.rank_lines) fmt::print("#  {}\n", line);
      std::fflush(stdout);
    }
    std::vector<CommRun> runs;
    for (int cycle = 0; o.cycles == 0 || cycle < o.cycles; ++cycle) {
      runs.clear();
      for (const Combo& x : combos) {
        bool header_printed = false;
        runs.push_back(bench.run(x.c, x.t, x.op, [&](const CommRun& run, const CommRow& row) {
          if (!root_rank) return;
          if (!header_printed) print_table_header(run, o.iter_stats != 0);
          header_printed = true;
          print_row(run, row, o.iter_stats != 0);
        }));
      }
    }
    const CommBenchSummary s = summarize_comm_runs(runs);
    const bool gate_failed = o.min_bw > 0 && s.avg_busbw < 0.9 * o.min_bw;
    if (root_rank) {
      fmt::print("# Out of bounds values : {} {}\n", s.wrong_total,
                 !s.verified     ? "(not verified)"
                 : s.wrong_total ? "FAILED"
                                 : "OK");
      fmt::print("# Avg bus bandwidth    : {:g} {}\n#\n", s.avg_busbw,
                 o.min_bw <= 0 ? ""
                 : gate_failed ? fmt::format("FAILED (below 0.9 x --min-bw {:g})", o.min_bw)
                               : fmt::format("OK (--min-bw {:g})", o.min_bw));
      std::fflush(stdout);
      if (!o.json_out.empty()) write_file_atomic(o.json_out, comm_bench_json(opt, ctx, runs).dump(2) + "\n");
    }
    agreed = true;
    if (s.wrong_total > 0)
      fail("zaya bench comm: {} wrong elements: the collectives returned incorrect data", s.wrong_total);
    if (gate_failed)
      fail("zaya bench comm: average bus bandwidth {:.3g} GB/s is below 0.9 x --min-bw {:g} GB/s", s.avg_busbw,
           o.min_bw);
  } catch (const Error& e) {
    if (world->size() == 1) throw;
    std::fflush(stdout);
    if (agreed) {  // every rank failed alike: rank 0 reports it, the others leave quietly
      if (root_rank) throw CollectiveError(e.what());
      std::exit(1);
    }
    // One rank failed while the others may be inside a collective: stop them all.
    fmt::print(stderr, "error: rank {}: {}\n", world->rank(), e.what());
    std::fflush(stderr);
    abort_world(1);
  }
}

CLI::Validator size_validator() {
  return CLI::Validator([](std::string& s) { return byte_size_error(s); }, "SIZE");
}

}  // namespace

void add_bench_comm_command(CLI::App& bench) {
  auto o = std::make_shared<BenchCommOptions>();
  auto* cmd = bench.add_subcommand("comm", "collective microbenchmarks (nccl-tests semantics); run under mpirun -np N");
  cmd->add_option("collectives", o->collectives,
                  "all_reduce (default), reduce_scatter, all_gather, broadcast, reduce, all_to_all, all_to_all_v, "
                  "send_recv, or all")
      ->delimiter(',');
  cmd->add_option("-b,--minbytes", o->min_bytes, "smallest message size, e.g. 8, 64K, 32M (default 32M)")
      ->check(size_validator());
  cmd->add_option("-e,--maxbytes", o->max_bytes, "largest message size (default 32M)")->check(size_validator());
  cmd->add_option("-i,--stepbytes", o->step_bytes, "size increment when -f is 1 (default 1M)")->check(size_validator());
  cmd->add_option("-f,--stepfactor", o->step_factor, "size multiplier between steps (default 1: use -i)")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 20));
  cmd->add_option("-n,--iters", o->iters, "timed iterations per size (default 20)")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("-w,--warmup_iters,--warmup", o->warmup,
                  "warm-up operations at the largest and smallest size (default 5)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-m,--agg_iters", o->agg_iters, "operations per timed iteration (default 1)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-c,--check", o->check, "verified operations per size and form, 0: no verification (default 1)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("-d,--datatype", o->dtypes, "float, double, bfloat16, half, int32, int64, uint8, or all")
      ->delimiter(',');
  cmd->add_option("-o,--op", o->ops, "sum, prod, min, max, avg, or all")->delimiter(',');
  cmd->add_option("-r,--root", o->root, "root rank of broadcast and reduce (default 0)")->check(CLI::Range(0, 1 << 30));
  cmd->add_option("-a,--average", o->average, "time over ranks: 0 rank 0, 1 mean (default), 2 min, 3 max")
      ->check(CLI::Range(0, 3));
  cmd->add_option("--time-stat", o->time_stat,
                  "time/algbw/busbw from the mean (nccl-tests, default), or the median or min of the iterations "
                  "(robust on shared machines)")
      ->check(CLI::IsMember({"mean", "median", "min"}));
  cmd->add_option("-N,--run_cycles", o->cycles, "run the whole sweep N times, 0: forever (default 1)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("-I,--iter-stats", o->iter_stats, "1: print per-iteration min/max/p99/cv columns (always in JSON)")
      ->check(CLI::Range(0, 1));
  cmd->add_option("-T,--timeout", o->timeout, "seconds before a stuck operation is an error (default 0: none)")
      ->check(CLI::Range(0.0, 1e6));
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
  cmd->add_option("--stall-seconds", o->stall_seconds, "testing: how long --inject-fault stall sleeps (default 3600)")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--json", o->json_out, "write the results as JSON (rank 0)");
  cmd->callback([o] { bench_comm(*o); });
}

}  // namespace zaya::cli
