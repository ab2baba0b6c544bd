// zaya bench membw: STREAM copy/scale/add/triad and memcpy bandwidth from
// L1-resident working sets to DRAM, over thread counts (src/zaya/bench/membw_bench.h).
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <map>
#include <memory>

#include "zaya/bench/byte_size.h"
#include "zaya/bench/membw_bench.h"
#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/io/atomic_file.h"

namespace zaya::cli {
namespace {

struct BenchMembwOptions {
  std::vector<std::string> kernels = {"copy", "scale", "add", "triad", "memcpy"};
  std::vector<int> threads;
  std::string min_bytes = "16K", max_bytes = "2G", json_out;
  uint64_t factor = 2;
  int reps = 5;
};

void bench_membw(const BenchMembwOptions& o) {
  MembwOptions m;
  m.kernels = o.kernels;
  m.threads = o.threads;
  m.min_bytes = parse_byte_size(o.min_bytes, "--min-bytes");
  m.max_bytes = parse_byte_size(o.max_bytes, "--max-bytes");
  m.step_factor = o.factor;
  m.reps = o.reps;
  const std::vector<int> threads = m.threads.empty() ? default_thread_counts(omp_get_max_threads()) : m.threads;
  fmt::print(
      "# zaya bench membw: best of {} repetitions, GB/s (1e9 bytes/s), STREAM byte counting; working set = "
      "bytes of all arrays touched\n",
      m.reps);
  // Columns: kernel x threads; rows: working sets. Printed as each row completes.
  std::vector<std::string> columns;
  for (const std::string& k : m.kernels)
    for (int t : threads) columns.push_back(fmt::format("{}/{}t", k, t));
  const bool progress = isatty(STDERR_FILENO);
  size_t done = 0;
  std::vector<MembwPoint> points = run_membw(m, [&](const MembwPoint& p) {
    if (progress)
      fmt::print(stderr, "\r  {} points, last {} {} threads {}      ", ++done, p.kernel, p.threads,
                 format_bytes(double(p.nominal)));
  });
  if (progress) fmt::print(stderr, "\r{:70}\r", "");
  // One row per nominal working set (the exact bytes differ slightly per kernel: whole elements per array).
  std::vector<std::vector<double>> rows;
  std::vector<uint64_t> row_size;
  std::map<std::string, size_t> seen;
  for (const MembwPoint& p : points) {
    const std::string col = fmt::format("{}/{}t", p.kernel, p.threads);
    const size_t r = seen[col]++;
    if (r >= rows.size()) {
      rows.emplace_back(columns.size(), 0.0);
      row_size.push_back(p.nominal);
    }
    const size_t c = size_t(std::find(columns.begin(), columns.end(), col) - columns.begin());
    rows[r][c] = p.best_gbps;
  }
  fmt::print("{:>12}", "working set");
  for (const std::string& c : columns) fmt::print(" {:>11}", c);
  fmt::print("\n");
  for (size_t r = 0; r < rows.size(); ++r) {
    fmt::print("{:>12}", format_bytes(double(row_size[r])));
    for (double v : rows[r]) fmt::print(" {:11.1f}", v);
    fmt::print("\n");
  }
  if (!o.json_out.empty()) write_file_atomic(o.json_out, membw_json(m, points).dump(2) + "\n");
}

}  // namespace

void add_bench_membw_command(CLI::App& bench) {
  auto o = std::make_shared<BenchMembwOptions>();
  auto* cmd = bench.add_subcommand("membw", "memory bandwidth (STREAM kernels, memcpy) from L1 to DRAM sizes");
  auto size = CLI::Validator([](std::string& s) { return byte_size_error(s); }, "SIZE");
  cmd->add_option("--kernel", o->kernels, "copy, scale, add, triad, memcpy (default all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"copy", "scale", "add", "triad", "memcpy"}));
  cmd->add_option("--threads", o->threads, "thread counts, e.g. 1,2 (default 1, 2, 4, ... and all)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--min-bytes", o->min_bytes, "smallest working set (default 16K)")->check(size);
  cmd->add_option("--max-bytes", o->max_bytes, "largest working set (default 2G; make it several times the LLC)")
      ->check(size);
  cmd->add_option("--factor", o->factor, "working-set multiplier between steps (default 2)")
      ->check(CLI::Range(uint64_t(2), uint64_t(1024)));
  cmd->add_option("--reps", o->reps, "timed repetitions per point; the best is reported (default 5)")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--json", o->json_out, "write every point as JSON");
  cmd->callback([o] { bench_membw(*o); });
}

}  // namespace zaya::cli
