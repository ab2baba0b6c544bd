// zaya bench membw: STREAM copy/scale/add/triad and memcpy bandwidth from
// L1-resident working sets to DRAM, over thread counts (src/zaya/bench/membw_job.h, membw_bench.h).
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <memory>

#include "zaya/bench/byte_size.h"
#include "zaya/bench/membw_job.h"
#include "zaya/cli/commands.h"
#include "zaya/io/atomic_file.h"

namespace zaya::cli {
namespace {

// The job's options (bench/membw_job.h) and the JSON file.
struct BenchMembwCliOptions : MembwJobOptions {
  std::string json_out;
};

void bench_membw(const BenchMembwCliOptions& o) {
  const MembwOptions m = membw_options(o);
  const std::vector<int> threads = membw_thread_counts(m, omp_get_max_threads());
  fmt::print(
      "# zaya bench membw: best of {} repetitions, GB/s (1e9 bytes/s), STREAM byte counting; working set = "
      "bytes of all arrays touched\n",
      m.reps);
  const bool progress = isatty(STDERR_FILENO);
  size_t done = 0;
  std::vector<MembwPoint> points = run_membw(m, [&](const MembwPoint& p) {
    if (progress)
      fmt::print(stderr, "\r  {} points, last {} {} threads {}      ", ++done, p.kernel, p.threads,
                 format_bytes(double(p.nominal)));
  });
  if (progress) fmt::print(stderr, "\r{:70}\r", "");
  const MembwTable t = membw_table(points, m.kernels, threads);
  fmt::print("{:>12}", "working set");
  for (const std::string& c : t.columns) fmt::print(" {:>11}", c);
  fmt::print("\n");
  for (size_t r = 0; r < t.gbps.size(); ++r) {
    fmt::print("{:>12}", format_bytes(double(t.working_sets[r])));
    for (double v : t.gbps[r]) fmt::print(" {:11.1f}", v);
    fmt::print("\n");
  }
  if (!o.json_out.empty()) write_file_atomic(o.json_out, membw_json(m, points).dump(2) + "\n");
}

}  // namespace

void add_bench_membw_command(CLI::App& bench) {
  auto o = std::make_shared<BenchMembwCliOptions>();
  auto* cmd = bench.add_subcommand("membw", "memory bandwidth (STREAM kernels, memcpy) from L1 to DRAM sizes");
  auto size = CLI::Validator([](std::string& s) { return byte_size_error(s); }, "SIZE");
  cmd->add_option("--kernel", o->kernels, "copy, scale, add, triad, memcpy (default all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"copy", "scale", "add", "triad", "memcpy"}));
  cmd->add_option("--threads", o->threads, "thread counts, e.g. 1,2 (default 1, 2, 4, ... and all)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--min-bytes", o->min_bytes, "smallest working set")->check(size);
  cmd->add_option("--max-bytes", o->max_bytes, "largest working set (default 2G; make it several times the LLC)")
      ->check(size);
  cmd->add_option("--factor", o->factor, "working-set multiplier between steps")
      ->check(CLI::Range(uint64_t(2), uint64_t(1024)));
  cmd->add_option("--reps", o->reps, "timed repetitions per point; the best is reported")->check(CLI::Range(1, 100000));
  cmd->add_option("--json", o->json_out, "write every point as JSON");
  cmd->callback([o] { bench_membw(*o); });
}

}  // namespace zaya::cli
