// zaya bench train: training throughput (tokens/s) and MFU on synthetic tokens.
#include <fmt/format.h>
#include <omp.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/model/params.h"
#include "zaya/train/trainer.h"

namespace zaya::cli {
namespace {

struct BenchTrainOptions {
  std::string preset = "small", config, json_out;
  std::vector<std::string> overrides;
  int64_t micro_batch = 8, seq_len = 256, grad_accum = 1, steps = 10, warmup = 2;
  int threads = 0;
};

void bench_train(const BenchTrainOptions& o) {
  std::vector<std::string> overrides = {
      fmt::format("train.micro_batch={}", o.micro_batch), fmt::format("train.seq_len={}", o.seq_len),
      fmt::format("train.grad_accum={}", o.grad_accum), fmt::format("train.steps={}", o.warmup + o.steps),
      fmt::format("train.threads={}", o.threads), "schedule.warmup_steps=0"};
  overrides.insert(overrides.end(), o.overrides.begin(), o.overrides.end());
  TrainConfig config = o.config.empty()
                           ? parse_train_config(fmt::format("[model]\npreset = \"{}\"\n[data]\ndir = \"-\"\n", o.preset),
                                                "zaya bench train", overrides)
                           : load_train_config(o.config, overrides);
  TrainerOptions topt;
  topt.synthetic_data = true;
  topt.quiet = true;
  topt.write_outputs = false;
  Trainer trainer(config, topt);
  const ParamCounts counts = count_parameters(trainer.model().config());
  fmt::print("zaya bench train: {} ({:.1f}M params, {:.1f}M active), {} x {} x {} accum tokens/step, {} threads\n",
             o.config.empty() ? o.preset : o.config, counts.total / 1e6, counts.active / 1e6, o.micro_batch,
             o.seq_len, o.grad_accum, omp_get_max_threads());
  for (int64_t i = 0; i < o.warmup; ++i) trainer.train_step();
  profile_reset();
  double seconds = 0, flops = 0, tokens = 0, best = 1e30;
  for (int64_t i = 0; i < o.steps; ++i) {
    StepResult r = trainer.train_step();
    seconds += r.seconds;
    flops += r.flops;
    tokens += double(r.tokens);
    best = std::min(best, r.seconds);
  }
  // MFU against the f32 GEMM peak measured now, in the same process.
  const double peak = trainer.peak_gflops();
  const double tps = tokens / seconds, mfu = flops / seconds / (peak * 1e9);
  fmt::print("  step time {:.3f} s (best {:.3f} s) over {} steps after {} warm-up\n", seconds / double(o.steps), best,
             o.steps, o.warmup);
  fmt::print("  {:.0f} tokens/s, {:.1f} GFLOP/s model FLOPs, MFU {:.1f}% of the measured f32 GEMM peak ({:.0f} GFLOP/s)\n",
             tps, flops / seconds / 1e9, 100 * mfu, peak);
  if (profiling_enabled()) {
    fmt::print("  profile (ZAYA_PROFILE=1), per timed step:\n");
    for (const ProfileEntry& e : profile_snapshot())
      if (e.calls > 0)
        fmt::print("    {:<42} {:9.4f} s  {:5.1f}%  ({} calls)\n", e.name, e.seconds / double(o.steps),
                   100 * e.seconds / seconds, e.calls);
  }
  if (!o.json_out.empty()) {
    nlohmann::json j = {{"bench", "train"},
                        {"model", o.config.empty() ? o.preset : o.config},
                        {"micro_batch", o.micro_batch},
                        {"seq_len", o.seq_len},
                        {"grad_accum", o.grad_accum},
                        {"threads", omp_get_max_threads()},
                        {"steps", o.steps},
                        {"warmup", o.warmup},
                        {"step_seconds", seconds / double(o.steps)},
                        {"tokens_per_second", tps},
                        {"model_gflops_per_second", flops / seconds / 1e9},
                        {"peak_f32_gemm_gflops", peak},
                        {"mfu", mfu}};
    std::ofstream f(o.json_out);
    ZAYA_CHECK(f.good(), "cannot write '{}'", o.json_out);
    f << j.dump(2) << "\n";
  }
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
  auto o = std::make_shared<BenchTrainOptions>();
  auto* train = bench.add_subcommand("train", "training tokens/s and MFU on synthetic tokens");
  train->add_option("--preset", o->preset, "model preset (tiny, small, zaya1-base)");
  train->add_option("--config", o->config, "a training config (TOML) instead of a preset");
  train->add_option("--micro-batch", o->micro_batch, "sequences per micro-batch")->check(CLI::Range(1, 1 << 16));
  train->add_option("--seq-len", o->seq_len, "tokens per sequence")->check(CLI::Range(1, 1 << 20));
  train->add_option("--grad-accum", o->grad_accum, "micro-batches per step")->check(CLI::Range(1, 1 << 16));
  train->add_option("--steps", o->steps, "timed steps")->check(CLI::Range(1, 1 << 20));
  train->add_option("--warmup", o->warmup, "untimed steps first")->check(CLI::Range(0, 1 << 20));
  train->add_option("--threads", o->threads, "OpenMP threads (0: all)")->check(CLI::Range(0, 4096));
  train->add_option("--set", o->overrides, "override a config key: section.key=value");
  train->add_option("--json", o->json_out, "write the results as JSON");
  train->callback([o] { bench_train(*o); });
}

}  // namespace zaya::cli
