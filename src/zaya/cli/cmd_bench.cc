// zaya bench train: training throughput (tokens/s) and MFU on synthetic tokens.
#include <fmt/format.h>
#include <omp.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/core/profiler.h"
#include "zaya/core/timer.h"
#include "zaya/dist/collective.h"
#include "zaya/dist/mesh.h"
#include "zaya/model/params.h"
#include "zaya/train/trainer.h"

namespace zaya::cli {
namespace {

struct BenchTrainOptions {
  std::string preset = "small", config, json_out;
  std::vector<std::string> overrides;
  int64_t micro_batch = 8, seq_len = 256, grad_accum = 1, steps = 10, warmup = 2;
  int threads = 0;
  int64_t checkpoint_every = 0;  // async checkpoints during the timed steps (0: none)
  std::string checkpoint_dir = "runs/bench/checkpoints";
};

void bench_train(const BenchTrainOptions& o) {
  std::vector<std::string> overrides = {
      fmt::format("train.micro_batch={}", o.micro_batch), fmt::format("train.seq_len={}", o.seq_len),
      fmt::format("train.grad_accum={}", o.grad_accum),   fmt::format("train.steps={}", o.warmup + o.steps),
      fmt::format("train.threads={}", o.threads),         "schedule.warmup_steps=0",
      fmt::format("checkpoint.dir={}", o.checkpoint_dir), "checkpoint.keep_last=1"};
  overrides.insert(overrides.end(), o.overrides.begin(), o.overrides.end());
  // Under mpirun: every rank runs its share; the report is rank 0's.
  auto world = make_world_comm();
  TrainConfig config;
  run_collectively(*world, "loading the config", [&] {
    config = o.config.empty()
                 ? parse_train_config(fmt::format("[model]\npreset = \"{}\"\n[data]\ndir = \"-\"\n", o.preset),
                                      "zaya bench train", overrides)
                 : load_train_config(o.config, overrides);
    ZAYA_CHECK(world->size() % (config.parallel.ep * config.parallel.cp) == 0,
               "the world of {} ranks does not fit parallel.ep = {} x parallel.cp = {} (the world size must be a "
               "multiple of ep * cp)",
               world->size(), config.parallel.ep, config.parallel.cp);
  });
  check_same_on_all_ranks(*world, train_config_to_toml(config), "the benchmark configuration");
  auto mesh = std::make_shared<ProcessMesh>(std::move(world), config.parallel.ep, config.parallel.cp);
  if (o.checkpoint_every > 0 && mesh->rank() == 0) std::filesystem::remove_all(o.checkpoint_dir);
  mesh->world().barrier();
  TrainerOptions topt;
  topt.synthetic_data = true;
  topt.quiet = true;
  topt.write_outputs = false;
  std::unique_ptr<Trainer> trainer;
  run_collectively(mesh->world(), "start-up", [&] { trainer = std::make_unique<Trainer>(config, topt, mesh); });
  const bool root = mesh->rank() == 0;
  const int W = mesh->world_size();
  const ParamCounts counts = count_parameters(trainer->model().config());
  if (root)
    fmt::print(
        "zaya bench train: {} ({:.1f}M params, {:.1f}M active), {} x {} x {} accum tokens/step per rank, "
        "{} rank(s) (dp {} x ep {} x cp {}), {} threads per rank\n",
        o.config.empty() ? o.preset : o.config, counts.total / 1e6, counts.active / 1e6, o.micro_batch, o.seq_len,
        o.grad_accum, W, mesh->dp_size(), mesh->ep_size(), mesh->cp_size(), omp_get_max_threads());
  for (int64_t i = 0; i < o.warmup; ++i) trainer->train_step();
  profile_reset();
  // Per rank: seconds, flops, own tokens, best step, exposed/overlapped comm, gather, expert exchange.
  double t[8] = {0, 0, 0, 1e30, 0, 0, 0, 0};
  double ckpt_stall = 0, ckpt_write = 0, ckpt_bytes = 0;
  int saves = 0;
  for (int64_t i = 0; i < o.steps; ++i) {
    const double c0 = now_seconds();
    if (trainer->checkpoint_writer()) trainer->checkpoint_writer()->poll();
    if (o.checkpoint_every > 0 && i > 0 && i % o.checkpoint_every == 0) {
      trainer->save_checkpoint(true);
      ckpt_write += trainer->checkpoint_writer()->last_stats().write_seconds;  // of the previous save, if any
      ckpt_bytes = double(trainer->checkpoint_writer()->last_stats().bytes);
      ++saves;
    }
    const double stall = now_seconds() - c0;
    ckpt_stall += stall;
    t[0] += stall;
    StepResult r = trainer->train_step();
    t[0] += r.seconds;
    t[1] += r.flops;
    t[2] += double(r.rank_tokens);
    t[3] = std::min(t[3], r.seconds);
    t[4] += r.grad_reduce_exposed;
    t[5] += r.grad_reduce_overlapped;
    t[6] += r.param_gather;
    t[7] += r.expert_exchange;
  }
  if (trainer->checkpoint_writer()) {
    const double f0 = now_seconds();
    trainer->checkpoint_writer()->finish();
    const SaveStats& st = trainer->checkpoint_writer()->last_stats();
    if (root && saves > 0)
      fmt::print(
          "  checkpoints: {} async saves of {:.0f} MB (rank 0); the step loop stalled {:.3f} s per save "
          "(snapshot); background write {:.2f} s = {:.2f} GB/s; final wait {:.2f} s\n",
          saves, double(st.bytes) / 1e6, ckpt_stall / saves, st.write_seconds,
          double(st.bytes) / st.write_seconds / 1e9, now_seconds() - f0);
  }
  (void)ckpt_write;
  (void)ckpt_bytes;
  std::vector<double> all(8 * size_t(W));
  mesh->world().all_gather(t, all.data(), 8, DType::kF64);
  // Memory per rank: the activation workspace (exact) and the process's peak resident set.
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  double mem[2] = {double(trainer->workspace_bytes()), double(usage.ru_maxrss) * 1024.0};
  std::vector<double> all_mem(2 * size_t(W));
  mesh->world().all_gather(mem, all_mem.data(), 2, DType::kF64);
  double max_workspace = 0, max_rss = 0;
  for (int q = 0; q < W; ++q) {
    max_workspace = std::max(max_workspace, all_mem[2 * q]);
    max_rss = std::max(max_rss, all_mem[2 * q + 1]);
  }
  const double peak = trainer->peak_gflops();
  if (!root) return;
  const double steps = double(o.steps);
  double slowest = 0, tokens = 0;
  for (int q = 0; q < W; ++q) {
    slowest = std::max(slowest, all[8 * q]);
    tokens += all[8 * q + 2];
  }
  const double tps = tokens / slowest, mfu = t[1] / t[0] / (peak * 1e9);
  fmt::print("  step time {:.3f} s (best {:.3f} s) over {} steps after {} warm-up\n", t[0] / steps, t[3], o.steps,
             o.warmup);
  fmt::print(
      "  {:.0f} tokens/s aggregate, {:.1f} GFLOP/s model FLOPs per rank, MFU {:.1f}% of one rank's measured "
      "f32 GEMM peak ({:.0f} GFLOP/s)\n",
      tps, t[1] / t[0] / 1e9, 100 * mfu, peak);
  fmt::print("  memory per rank (largest): activation workspace {:.1f} MB, peak resident {:.1f} MB\n",
             max_workspace / 1e6, max_rss / 1e6);
  if (W > 1) {
    fmt::print("  rank  tokens/s   step s   grad-reduce exposed / overlapped   param gather   expert all-to-all\n");
    for (int q = 0; q < W; ++q) {
      const double* a = &all[8 * size_t(q)];
      fmt::print("  {:>4} {:>9.0f} {:>8.3f}   {:>14.3f} / {:<14.3f}   {:>12.3f}   {:>17.3f}\n", q, a[2] / a[0],
                 a[0] / steps, a[4] / steps, a[5] / steps, a[6] / steps, a[7] / steps);
    }
    const double comm_exposed = (t[4] + t[6] + t[7]) / steps;
    fmt::print("  rank 0 per step: compute {:.3f} s, exposed communication {:.3f} s, overlapped {:.3f} s\n",
               t[0] / steps - comm_exposed, comm_exposed, t[5] / steps);
  }
  if (profiling_enabled()) {
    fmt::print("  profile (ZAYA_PROFILE=1), rank 0, per timed step:\n");
    for (const ProfileEntry& e : profile_snapshot())
      if (e.calls > 0)
        fmt::print("    {:<42} {:9.4f} s  {:5.1f}%  ({} calls)\n", e.name, e.seconds / steps, 100 * e.seconds / t[0],
                   e.calls);
  }
  if (!o.json_out.empty()) {
    nlohmann::json ranks = nlohmann::json::array();
    for (int q = 0; q < W; ++q) {
      const double* a = &all[8 * size_t(q)];
      ranks.push_back({{"rank", q},
                       {"tokens_per_second", a[2] / a[0]},
                       {"step_seconds", a[0] / steps},
                       {"grad_reduce_exposed_seconds", a[4] / steps},
                       {"grad_reduce_overlapped_seconds", a[5] / steps},
                       {"param_gather_seconds", a[6] / steps},
                       {"expert_exchange_seconds", a[7] / steps}});
    }
    nlohmann::json j = {{"bench", "train"},
                        {"model", o.config.empty() ? o.preset : o.config},
                        {"micro_batch", o.micro_batch},
                        {"seq_len", o.seq_len},
                        {"grad_accum", o.grad_accum},
                        {"world", W},
                        {"dp", mesh->dp_size()},
                        {"ep", mesh->ep_size()},
                        {"cp", mesh->cp_size()},
                        {"threads", omp_get_max_threads()},
                        {"steps", o.steps},
                        {"warmup", o.warmup},
                        {"step_seconds", t[0] / steps},
                        {"tokens_per_second", tps},
                        {"model_gflops_per_second", t[1] / t[0] / 1e9},
                        {"peak_f32_gemm_gflops", peak},
                        {"mfu", mfu},
                        {"workspace_bytes_per_rank", max_workspace},
                        {"peak_rss_bytes_per_rank", max_rss},
                        {"ranks", ranks}};
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
  train
      ->add_option("--checkpoint-every", o->checkpoint_every,
                   "save an async checkpoint every N timed steps (the overhead is part of the step time)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  train->add_option("--checkpoint-dir", o->checkpoint_dir, "where those checkpoints go (emptied first)");
  train->callback([o] { bench_train(*o); });
}

}  // namespace zaya::cli
