// zaya bench io: checkpoint-sized sequential writes (with fsync) and reads,
// random page reads and training-window reads of a token dataset, and the
// scatter factor / break-even step time of docs/systems-notes.md §3
// (src/zaya/bench/io_job.h, io_bench.h, io_model.h).
#include <fmt/format.h>

#include <memory>

#include "zaya/bench/byte_size.h"
#include "zaya/bench/io_job.h"
#include "zaya/cli/commands.h"
#include "zaya/io/atomic_file.h"

namespace zaya::cli {
namespace {

// The job's options (bench/io_job.h) and the JSON file.
struct BenchIoCliOptions : IoJobOptions {
  std::string json_out;
};

std::string evicted_note(double resident) {
  if (resident < 0) return " (page-cache residency unknown)";
  if (resident > 0.05)
    return fmt::format(
        " WARNING: {:.0f}% of the pages stayed cached; the file system ignored the eviction, so this "
        "measures memory, not storage",
        100 * resident);
  return "";
}

void bench_io(const BenchIoCliOptions& o) {
  const IoJobPlan plan = plan_io_job(o);
  const IoBenchOptions& io = plan.io;
  const std::string what =
      !plan.from_model ? format_bytes(double(io.file_bytes))
                       : fmt::format(
                             "{} checkpoint of {} ({:.2f}B parameters x 12 bytes: f32 weights + 2 AdamW moments) in {} "
                             "shard(s) of {}",
                             format_bytes(double(plan.checkpoint_bytes)), o.model, double(plan.model_params) / 1e9,
                             io.files, format_bytes(double(io.file_bytes)));
  fmt::print("# zaya bench io: {} in {}{}\n", what, io.dir, io.direct ? ", O_DIRECT" : "");
  std::fflush(stdout);
  const IoBenchResult r = run_io_bench(io);
  if (r.write.ran) {
    fmt::print("checkpoint write  {:>10} in {} file(s): {:8.3f} s  {:8.3f} GB/s  (fsync {:.3f} s)\n",
               format_bytes(r.write.bytes), io.files, r.write.seconds, r.write.gbps, r.write.sync_seconds);
    fmt::print("checkpoint read   {:>10} cold:       {:8.3f} s  {:8.3f} GB/s{}\n", format_bytes(r.read.bytes),
               r.read.seconds, r.read.gbps, evicted_note(r.read.resident_after_evict));
  }
  fmt::print("dataset           {} ({})\n", r.dataset_path, format_bytes(double(r.dataset_bytes)));
  if (r.pages.ran)
    fmt::print(
        "random {} B page reads, {} thread(s): {:.0f} IOPS  latency p50 {:.1f} us  p99 {:.1f} us  ({} reads){}\n",
        r.page_size, io.io_threads, r.pages.iops, r.pages.latency_us.p50, r.pages.latency_us.p99, r.pages.reads,
        evicted_note(r.pages.resident_after_evict));
  if (r.samples.ran) {
    const IoSamples& s = r.samples;
    fmt::print("training windows  {} random windows of seq {} + 1 tokens ({} B) via mmap, cold:\n", s.samples,
               io.seq_len, s.window_bytes);
    fmt::print(
        "  ideal pages per sample s*b/P = {:.2f}; pages touched {:.2f}; page faults {:.2f} (MADV_RANDOM), "
        "{:.1f} us per sample{}\n",
        s.ideal_pages, s.pages_touched, s.faults_random, s.seconds_random * 1e6, evicted_note(s.resident_after_evict));
    fmt::print("  scatter factor sigma = faults / ideal = {:.3f}  (m = {:.2f} extra faults per sample)\n", s.sigma,
               s.extra_faults);
    if (s.read_amplification > 0)
      fmt::print("  with the default readahead: {:.1f} us per sample, {:.2f} bytes read per useful byte\n",
                 s.seconds_readahead * 1e6, s.read_amplification);
  } else if (io.samples > 0) {
    fmt::print("training windows  skipped: the dataset holds fewer than seq + 1 = {} tokens\n", io.seq_len + 1);
  }
  const StorageModelInput& in = r.model_input;
  const StorageModel& m = r.model;
  fmt::print(
      "\nstorage model (docs/systems-notes.md section 3): G = {:g} sequences x s = {:g} tokens x b = {:g} B, "
      "P = {:g} B, t = {:g} s, I_max = {:.0f} IOPS ({}), sigma = {:.3f} ({})\n",
      in.batch, in.seq_len, in.bytes_per_token, in.page_size, in.step_seconds, in.iops,
      io.iops > 0 ? "given" : "measured", in.sigma, r.samples.ran ? "measured" : "assumed");
  fmt::print("  per step: {} in {:.0f} pages ideal, {:.0f} I/O operations -> {:.0f} IOPS needed\n",
             format_bytes(m.bytes_per_step), m.ideal_pages_per_step, m.io_per_step, m.required_iops);
  fmt::print("  break-even step time t_break = {:.4g} s: {} (t / t_break = {:.2f})\n", m.break_even_seconds,
             m.storage_safe ? "storage-safe" : "STORAGE-BOUND: the data loader cannot keep up", m.headroom);
  fmt::print("  {:>6} {:>14} {:>14}  {}\n", "sigma", "IOPS needed", "t_break (s)", "verdict at t");
  for (const StorageModelAtSigma& y : storage_model_sigma_table(in))
    fmt::print("  {:>6g} {:>14.0f} {:>14.4g}  {}\n", y.sigma, y.model.required_iops, y.model.break_even_seconds,
               y.model.storage_safe ? "safe" : "storage-bound");
  if (!o.json_out.empty()) write_file_atomic(o.json_out, io_bench_json(io, r).dump(2) + "\n");
}

}  // namespace

void add_bench_io_command(CLI::App& bench) {
  auto o = std::make_shared<BenchIoCliOptions>();
  auto* cmd =
      bench.add_subcommand("io", "checkpoint write/read, dataset page reads, scatter factor and break-even step time");
  auto size = CLI::Validator([](std::string& s) { return byte_size_error(s); }, "SIZE");
  IoBenchOptions& io = o->io;
  cmd->add_option("--dir", io.dir, "directory on the storage to test")->check(CLI::ExistingDirectory);
  cmd->add_option("--file-size", o->file_size, "bytes per checkpoint file (default 1G; 0: skip the checkpoint test)")
      ->check(size);
  cmd->add_option("--files", io.files, "checkpoint files written and read at once, one thread each")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--model", o->model, "size the checkpoint from a model (preset or config.json): 12 bytes/parameter");
  cmd->add_option("--ranks", o->ranks, "--model: shard files the checkpoint is split into")->check(CLI::Range(1, 4096));
  cmd->add_option("--block-size", o->block_size, "bytes per write/read call")->check(size);
  cmd->add_flag("--direct", io.direct, "use O_DIRECT (bypass the page cache)");
  cmd->add_flag("--keep", io.keep, "keep the written files");
  cmd->add_option("--dataset", io.dataset,
                  "token shard prefix (PREFIX.bin) or file for the random reads (default: the checkpoint file)");
  cmd->add_option("--page-reads", io.page_reads, "random page reads for the IOPS test (default 20000; 0: skip)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  cmd->add_option("--io-threads", io.io_threads, "concurrent page readers, i.e. queue depth")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--samples", io.samples, "random training windows to read (default 1000; 0: skip)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40));
  cmd->add_option("--seq-len", io.seq_len, "tokens per sequence, s (default 4096)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd->add_option("--bytes-per-token", io.bytes_per_token, "b (default 4: uint32 token shards)")
      ->check(CLI::Range(1, 8));
  cmd->add_option("--batch", io.batch, "sequences per step, G (default 4096, ZAYA1)")->check(CLI::Range(1.0, 1e12));
  cmd->add_option("--step-time", io.step_seconds, "seconds per training step, t (default 2.5, ZAYA1)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--iops", io.iops, "sustainable IOPS of the storage, I_max (default: the measured page IOPS)")
      ->check(CLI::Range(0.0, 1e12));
  cmd->add_option("--seed", io.seed, "seed of the random offsets");
  cmd->add_option("--json", o->json_out, "write the results as JSON");
  cmd->callback([o] { bench_io(*o); });
}

}  // namespace zaya::cli
