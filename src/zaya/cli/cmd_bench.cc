// zaya bench train: training throughput (tokens/s) and MFU on synthetic tokens (train/bench_train.h).
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "zaya/cli/commands.h"
#include "zaya/io/atomic_file.h"
#include "zaya/train/bench_train.h"

namespace zaya::cli {
namespace {

void print_bench_train(const BenchTrainResult& res) {
  const BenchTrainOptions& o = res.options;
  const double steps = double(o.steps);
  const BenchTrainRank& r0 = res.ranks[0];
  if (res.saves > 0)
    fmt::print(
        "  checkpoints: {} async saves of {:.0f} MB (rank 0); the step loop stalled {:.3f} s per save "
        "(snapshot); background write {:.2f} s = {:.2f} GB/s; final wait {:.2f} s\n",
        res.saves, res.checkpoint_bytes / 1e6, res.checkpoint_stall_seconds / res.saves, res.checkpoint_write_seconds,
        res.checkpoint_bytes / res.checkpoint_write_seconds / 1e9, res.final_wait_seconds);
  fmt::print("  step time {:.3f} s (best {:.3f} s) over {} steps after {} warm-up\n", res.step_seconds(), r0.best_step,
             o.steps, o.warmup);
  fmt::print(
      "  {:.0f} tokens/s aggregate, {:.1f} GFLOP/s model FLOPs per rank, MFU {:.1f}% of one rank's measured "
      "{} GEMM peak ({:.0f} GFLOP/s)\n",
      res.tokens_per_second(), r0.flops / r0.seconds / 1e9, 100 * res.mfu(), res.setup.precision, res.peak_gflops);
  fmt::print(
      "  memory per rank (largest), recompute {}, {}: workspace {:.1f} MB (activations kept for backward {:.1f} MB), "
      "peak resident {:.1f} MB\n",
      res.setup.recompute,
      res.setup.loss_chunk > 0 ? fmt::format("logits {} rows at a time", res.setup.loss_chunk) : "all logits at once",
      res.workspace_bytes / 1e6, res.activation_bytes / 1e6, res.peak_rss_bytes / 1e6);
  fmt::print(
      "  parameters (rank 0){}: float32 {:.1f} MB, bf16 {:.1f} MB{}, base gradients {:.1f} MB; start-up {:.1f} s, "
      "first step {:.2f} s\n",
      res.setup.lora ? ", LoRA" : "", res.setup.f32_param_bytes / 1e6, res.setup.bf16_param_bytes / 1e6,
      res.setup.quant_param_bytes > 0 ? fmt::format(", quantized experts {:.1f} MB", res.setup.quant_param_bytes / 1e6)
                                      : "",
      res.setup.base_gradient_bytes / 1e6, res.setup.startup_seconds, res.first_step_seconds);
  if (res.ranks.size() > 1) {
    fmt::print(
        "  rank  tokens/s   step s   grad-reduce exposed / overlapped   param gather ({}, MB received)   expert "
        "all-to-all\n",
        res.setup.zero_gather_dtype);
    for (size_t q = 0; q < res.ranks.size(); ++q) {
      const BenchTrainRank& a = res.ranks[q];
      fmt::print("  {:>4} {:>9.0f} {:>8.3f}   {:>14.3f} / {:<14.3f}   {:>12.3f} s {:>10.1f} MB   {:>17.3f}\n", q,
                 a.tokens / a.seconds, a.seconds / steps, a.grad_reduce_exposed / steps,
                 a.grad_reduce_overlapped / steps, a.param_gather / steps, a.param_gather_bytes / steps / 1e6,
                 a.expert_exchange / steps);
    }
    const double comm_exposed = (r0.grad_reduce_exposed + r0.param_gather + r0.expert_exchange) / steps;
    fmt::print("  rank 0 per step: compute {:.3f} s, exposed communication {:.3f} s, overlapped {:.3f} s\n",
               r0.seconds / steps - comm_exposed, comm_exposed, r0.grad_reduce_overlapped / steps);
  }
  if (!res.profile.empty()) {
    fmt::print("  profile (ZAYA_PROFILE=1), rank 0, per timed step:\n");
    for (const ProfileEntry& e : res.profile)
      if (e.calls > 0)
        fmt::print("    {:<42} {:9.4f} s  {:5.1f}%  ({} calls)\n", e.name, e.seconds / steps,
                   100 * e.seconds / r0.seconds, e.calls);
  }
}

void run_bench_train(const BenchTrainOptions& o, const std::string& json_out) {
  const BenchTrainResult res = bench_train(o, [&](const BenchTrainSetup& s) {
    if (!s.root) return;
    fmt::print(
        "zaya bench train: {} ({:.1f}M params, {:.1f}M active), {} x {} x {} accum tokens/step per rank, "
        "{} rank(s) (dp {} x ep {} x cp {}), {} threads per rank, {} GEMMs, recompute {}\n",
        s.model, s.params / 1e6, s.active_params / 1e6, o.micro_batch, o.seq_len, o.grad_accum, s.world, s.dp, s.ep,
        s.cp, s.threads, s.precision, s.recompute);
    std::fflush(stdout);
  });
  if (!res.setup.root) return;
  print_bench_train(res);
  if (!json_out.empty()) write_file_atomic(json_out, bench_train_json(res).dump(2) + "\n");
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "benchmarks: train, comm, gemm, membw, io, infer");
  bench->require_subcommand(1);
  add_bench_train_command(*bench);
  add_bench_comm_command(*bench);
  add_bench_gemm_command(*bench);
  add_bench_membw_command(*bench);
  add_bench_io_command(*bench);
  add_bench_infer_command(*bench);
}

void add_bench_train_command(CLI::App& bench) {
  struct Options : BenchTrainOptions {
    std::string json_out;
  };
  auto o = std::make_shared<Options>();
  auto* train = bench.add_subcommand("train", "training tokens/s and MFU on synthetic tokens");
  train->add_option("--preset", o->preset, "model preset (tiny, small, zaya1-base, zaya1-8b, zaya1-74b)");
  train->add_option("--config", o->config, "a training config (TOML) instead of a preset");
  train->add_option("--micro-batch", o->micro_batch, "sequences per micro-batch")->check(CLI::Range(1, 1 << 16));
  train->add_option("--seq-len", o->seq_len, "tokens per sequence")->check(CLI::Range(1, 1 << 20));
  train->add_option("--grad-accum", o->grad_accum, "micro-batches per step")->check(CLI::Range(1, 1 << 16));
  train->add_option("--steps", o->steps, "timed steps")->check(CLI::Range(1, 1 << 20));
  train->add_option("--warmup", o->warmup, "untimed steps first")->check(CLI::Range(0, 1 << 20));
  train->add_option("--threads", o->threads, "OpenMP threads (0: all)")->check(CLI::Range(0, 4096));
  train->add_option("--set", o->overrides, "override a config key: section.key=value");
  train->add_option("--json", o->json_out, "write the results as JSON");
  train
      ->add_option("--checkpoint-every", o->checkpoint_every,
                   "save an async checkpoint every N timed steps (the overhead is part of the step time)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  train->add_option("--checkpoint-dir", o->checkpoint_dir, "where those checkpoints go (emptied first)");
  train->callback([o] { run_bench_train(*o, o->json_out); });
}

}  // namespace zaya::cli
