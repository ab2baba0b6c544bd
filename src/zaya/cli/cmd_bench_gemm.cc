// zaya bench gemm: GEMM throughput over M, N, K sweeps or a model's own GEMM
// shapes, in f32 and bf16, against the measured peak; writes the efficiency
// table the planner reads (src/zaya/bench/gemm_job.h, gemm_table.h; docs/bench.md).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>
#include <unistd.h>

#include <memory>

#include "zaya/bench/byte_size.h"
#include "zaya/bench/gemm_job.h"
#include "zaya/cli/commands.h"
#include "zaya/io/atomic_file.h"
#include "zaya/ops/matmul_bf16.h"

namespace zaya::cli {
namespace {

// The job's options (bench/gemm_job.h) and what only this verb needs.
struct BenchGemmCliOptions : GemmJobOptions {
  int threads = 0;
  std::string json_out;
};

std::string note_of(const GemmTableEntry& e) {
  std::string note = e.memory_bound ? "AI<ridge" : "";
  if (e.falls_off) note += fmt::format("{}FALLS OFF: {}", note.empty() ? "" : "; ", e.falloff_reason);
  return note;
}

void print_start(const GemmEfficiencyTable& t) {
  fmt::print("# zaya bench gemm: {} threads, CPU {}, oneDNN ISA {}\n", t.machine.value("omp_threads", 0),
             t.machine.value("cpu", std::string("?")), t.machine.value("isa", std::string("?")));
  for (const auto& [d, peak] : t.peak_gflops)
    fmt::print("# peak {:>4}: {:8.1f} GFLOP/s; roofline ridge {:.1f} FLOP/byte at {:.1f} GB/s DRAM (STREAM triad)\n", d,
               peak, t.membw_gbps > 0 ? peak / t.membw_gbps : 0.0, t.membw_gbps);
  std::fflush(stdout);
}

void print_entry_header() {
  fmt::print("{:>5} {:>6} {:>7} {:>7} {:>7} {:>11} {:>9} {:>6} {:>8}  {}\n", "dtype", "layout", "M", "N", "K",
             "time (us)", "GFLOP/s", "%peak", "FLOP/B", "note");
}

void print_entries(const GemmEfficiencyTable& t) {
  print_entry_header();
  for (const GemmTableEntry& e : t.entries)
    fmt::print("{:>5} {:>6} {:>7} {:>7} {:>7} {:11.1f} {:9.1f} {:6.1f} {:8.1f}  {}\n", gemm_dtype_name(e.dtype),
               e.shape.layout(), e.shape.m, e.shape.n, e.shape.k, e.seconds * 1e6, e.gflops, 100 * e.efficiency,
               e.intensity, note_of(e));
  std::fflush(stdout);
}

void print_model(const GemmEfficiencyTable& t) {
  fmt::print("\n# {}: micro-batch {} x seq {} = {} tokens, ep {}, {} rows per expert GEMM\n", t.model, t.micro_batch,
             t.seq_len, t.micro_batch * t.seq_len, t.ep, t.expert_tokens);
  for (GemmDType d : {GemmDType::kF32, GemmDType::kBF16}) {
    const GemmModelTotal total = gemm_model_total(t, d);
    if (total.seconds == 0) continue;
    const std::string dtype = gemm_dtype_name(d);
    fmt::print("{:>5} {:<22} {:<13} {:>6} {:>7} {:>7} {:>10} {:>9} {:>6} {:>10} {:>6}  {}\n", "dtype", "gemm", "phase",
               "M", "N", "K", "count", "GFLOP/s", "%peak", "ms/step", "share", "note");
    for (const GemmModelEntry& g : t.model_gemms) {
      if (g.dtype != d) continue;
      const std::string layout = g.shape.layout();
      if (g.entry < 0) {
        fmt::print("{:>5} {:<22} {:<13} {:>6} {:>7} {:>7} {:>10.0f} {:>9} {:>6} {:>10} {:>6}  skipped\n", dtype, g.name,
                   g.phase, g.shape.m, g.shape.n, g.shape.k, g.count, "-", "-", "-", "-");
        continue;
      }
      const GemmTableEntry& e = t.entries[size_t(g.entry)];
      const double ms = e.seconds * g.count * 1e3;
      fmt::print("{:>5} {:<22} {:<13} {:>6} {:>7} {:>7} {:>10.0f} {:>9.1f} {:>6.1f} {:>10.3f} {:>5.1f}%  {}{}\n", dtype,
                 g.name, g.phase + " " + layout, g.shape.m, g.shape.n, g.shape.k, g.count, e.gflops, 100 * e.efficiency,
                 ms, 100 * ms / (total.seconds * 1e3), g.approximate ? "(mean attention block) " : "", note_of(e));
    }
    fmt::print(
        "# {} GEMMs of one micro-batch (forward + backward): {:.1f} ms, {:.1f} GFLOP -> {:.1f} GFLOP/s = "
        "{:.1f}% of peak\n\n",
        dtype, 1e3 * total.seconds, total.flops / 1e9, total.flops / total.seconds / 1e9,
        100 * total.flops / total.seconds / 1e9 / t.peak_gflops.at(dtype));
  }
}

void bench_gemm(const BenchGemmCliOptions& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const GemmRunOptions r = gemm_run_options(o);
  for (GemmDType d : r.dtypes)
    if (d == GemmDType::kBF16 && !bf16_gemm_is_native())
      fmt::print(
          "# note: this CPU has neither AVX512-BF16 nor AMX; bf16 GEMMs are emulated (by oneDNN on AVX-512, as "
          "float32 GEMMs of the widened operands on AVX2), slower than f32\n");
  int done = 0;
  const bool progress = isatty(STDERR_FILENO);
  std::vector<std::string> skipped;
  auto on_entry = [&](GemmDType d, const GemmShape& s, const GemmTableEntry* e) {
    if (e == nullptr) skipped.push_back(fmt::format("{} {} {}x{}x{}", gemm_dtype_name(d), s.layout(), s.m, s.n, s.k));
    if (progress)
      fmt::print(stderr, "\r  measured {} shapes, last {} {}x{}x{}      ", ++done, gemm_dtype_name(d), s.m, s.n, s.k);
  };
  const GemmEfficiencyTable table = run_gemm_job(o, r, on_entry);
  if (progress) fmt::print(stderr, "\r{:70}\r", "");
  print_start(table);
  print_entries(table);
  if (!o.model.empty()) print_model(table);
  if (!skipped.empty())
    fmt::print("# skipped (operands beyond --max-memory {}): {}\n", o.max_memory, fmt::join(skipped, ", "));
  fmt::print(
      "# {} of {} measured shapes fall off (below {:.0f}% of a contained shape's GFLOP/s, or slower than "
      "their padded version{})\n",
      count_falloffs(table), table.entries.size(), 100 * o.falloff,
      r.align > 0 ? fmt::format(" at multiples of {}", r.align) : ", not measured: --align 0");
  if (!o.json_out.empty()) write_file_atomic(o.json_out, table.to_json().dump(2) + "\n");
}

}  // namespace

void add_bench_gemm_command(CLI::App& bench) {
  auto o = std::make_shared<BenchGemmCliOptions>();
  auto* cmd = bench.add_subcommand("gemm", "GEMM GFLOP/s and % of peak over M, N, K sweeps or a model's shapes");
  cmd->add_option("-m,--m", o->m, "M values: list and ranges, e.g. 512,1024 or 256:4096 (x2) or 64:512:+64")
      ->capture_default_str();
  cmd->add_option("-n,--n", o->n, "N values (same forms)")->capture_default_str();
  cmd->add_option("-k,--k", o->k, "K values (same forms)")->capture_default_str();
  cmd->add_option("--shape", o->shapes, "explicit MxNxK shapes instead of the M, N, K product")->delimiter(',');
  cmd->add_option("--dtype", o->dtypes, "f32, bf16 (default both)")
      ->delimiter(',')
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_option("--layout", o->layouts, "nn (default), nt, tn, tt: transposes of A and B")
      ->delimiter(',')
      ->check(CLI::IsMember({"nn", "nt", "tn", "tt"}));
  cmd->add_option("--model", o->model,
                  "benchmark this model's forward+backward GEMMs: preset, config.json or model dir");
  cmd->add_option("--micro-batch", o->micro_batch, "--model: sequences per micro-batch")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--seq-len", o->seq_len, "--model: tokens per sequence")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  cmd->add_option("--ep", o->ep, "--model: expert-parallel ranks")->check(CLI::Range(int64_t(1), int64_t(1) << 16));
  cmd->add_option("--skip-fraction", o->skip_fraction, "--model: share of routed tokens taking the skip expert")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--expert-tokens", o->expert_tokens, "--model: rows per expert GEMM (default: the expected value)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  cmd->add_option("--align", o->align,
                  "also time each shape padded to multiples of this (default 64 with --model, else 0: off)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 16));
  cmd->add_option("--falloff", o->falloff, "fall-off threshold as a fraction")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-time", o->min_time, "seconds of calls per shape")->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--min-calls", o->min_calls, "timed calls per shape at least")->check(CLI::Range(1, 1000));
  cmd->add_option("--peak-f32", o->peak_f32, "f32 peak in GFLOP/s (default: measured)")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--peak-bf16", o->peak_bf16, "bf16 peak in GFLOP/s (default: measured)")->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--peak-size", o->peak_side,
                  "side of the square GEMM that measures the peak (default 2048 f32, 4096 bf16)")
      ->check(CLI::Range(int64_t(0), int64_t(65536)));
  cmd->add_option("--membw-gbps", o->membw, "DRAM GB/s for the roofline (default: measured, STREAM triad)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--max-memory", o->max_memory, "skip shapes whose operands exceed this")
      ->check(CLI::Validator([](std::string& s) { return byte_size_error(s); }, "SIZE"));
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: all)")->check(CLI::Range(0, 4096));
  cmd->add_option("--json", o->json_out, "write the efficiency table (format zaya.gemm_efficiency) as JSON");
  cmd->callback([o] { bench_gemm(*o); });
}

}  // namespace zaya::cli
