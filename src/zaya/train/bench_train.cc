#include "zaya/train/bench_train.h"

#include <fmt/format.h>
#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <filesystem>

#include "zaya/core/timer.h"
#include "zaya/dist/comm.h"
#include "zaya/train/job_start.h"

namespace zaya {
namespace {

constexpr int kFields = 9;  // BenchTrainRank as doubles, for all_gather

void to_array(const BenchTrainRank& r, double* a) {
  const double v[kFields] = {r.seconds,
                             r.flops,
                             r.tokens,
                             r.best_step,
                             r.grad_reduce_exposed,
                             r.grad_reduce_overlapped,
                             r.param_gather,
                             r.expert_exchange,
                             r.param_gather_bytes};
  std::copy(v, v + kFields, a);
}

BenchTrainRank from_array(const double* a) { return {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8]}; }

TrainConfig bench_config(const BenchTrainOptions& o) {
  std::vector<std::string> overrides = {
      fmt::format("train.micro_batch={}", o.micro_batch), fmt::format("train.seq_len={}", o.seq_len),
      fmt::format("train.grad_accum={}", o.grad_accum),   fmt::format("train.steps={}", o.warmup + o.steps),
      fmt::format("train.threads={}", o.threads),         "schedule.warmup_steps=0",
      fmt::format("checkpoint.dir={}", o.checkpoint_dir), "checkpoint.keep_last=1"};
  overrides.insert(overrides.end(), o.overrides.begin(), o.overrides.end());
  if (!o.config.empty()) return load_train_config(o.config, overrides);
  return parse_train_config(fmt::format("[model]\npreset = \"{}\"\n[data]\ndir = \"-\"\n", o.preset),
                            "zaya bench train", overrides);
}

}  // namespace

double BenchTrainResult::step_seconds() const { return ranks[0].seconds / double(options.steps); }

double BenchTrainResult::tokens_per_second() const {
  double slowest = 0, tokens = 0;
  for (const BenchTrainRank& r : ranks) {
    slowest = std::max(slowest, r.seconds);
    tokens += r.tokens;
  }
  return tokens / slowest;
}

double BenchTrainResult::mfu() const { return ranks[0].flops / ranks[0].seconds / (peak_gflops * 1e9); }

BenchTrainResult bench_train(const BenchTrainOptions& o, const std::function<void(const BenchTrainSetup&)>& started) {
  TrainJobOptions topt;
  topt.synthetic_data = true;
  topt.quiet = true;
  topt.write_outputs = false;
  topt.peak_gflops = o.peak_gflops;
  const double start = now_seconds();
  std::unique_ptr<TrainJob> job = start_train_job([&] { return bench_config(o); }, topt, "the benchmark configuration");
  ProcessMesh& mesh = job->mesh();
  if (o.checkpoint_every > 0 && mesh.rank() == 0) std::filesystem::remove_all(o.checkpoint_dir);
  mesh.world().barrier();
  BenchTrainResult res;
  res.options = o;
  BenchTrainSetup& s = res.setup;
  const ParamCounts counts = count_parameters(job->numerics().model().config());
  s.model = o.config.empty() ? o.preset : o.config;
  s.params = double(counts.total);
  s.active_params = double(counts.active);
  s.world = mesh.world_size();
  s.dp = mesh.dp_size();
  s.ep = mesh.ep_size();
  s.cp = mesh.cp_size();
  s.threads = omp_get_max_threads();
  s.precision = job->numerics().bf16_gemms() ? "bf16" : "f32";
  s.zero_gather_dtype = job->numerics().bf16_gather() ? "bf16" : "f32";
  s.recompute = recompute_name(job->numerics().recompute());
  s.loss_chunk = job->config().run.loss_chunk;
  s.root = mesh.rank() == 0;
  const StepNumerics& numerics = job->numerics();
  s.lora = numerics.lora() != nullptr;
  s.f32_param_bytes = double(numerics.model().f32_param_bytes());
  s.bf16_param_bytes = double(numerics.model().bf16_param_bytes());
  s.quant_param_bytes = double(numerics.model().quant_param_bytes());
  s.base_gradient_bytes = double(numerics.base_gradient_bytes());
  s.startup_seconds = now_seconds() - start;
  if (started) started(s);
  for (int64_t i = 0; i < o.warmup; ++i) {
    const StepResult r = job->train_step();
    if (i == 0) res.first_step_seconds = r.seconds;
  }
  profile_reset();
  BenchTrainRank mine;
  mine.best_step = 1e30;
  CheckpointManager& ckpt = job->checkpoints();
  for (int64_t i = 0; i < o.steps; ++i) {
    const double c0 = now_seconds();
    if (ckpt.writer()) ckpt.writer()->poll();
    if (o.checkpoint_every > 0 && i > 0 && i % o.checkpoint_every == 0) {
      job->save_checkpoint(true);
      ++res.saves;
    }
    const double stall = now_seconds() - c0;
    res.checkpoint_stall_seconds += stall;
    mine.seconds += stall;
    const StepResult r = job->train_step();
    if (o.warmup == 0 && i == 0) res.first_step_seconds = r.seconds;
    mine.seconds += r.seconds;
    mine.flops += r.flops;
    mine.tokens += double(r.rank_tokens);
    mine.best_step = std::min(mine.best_step, r.seconds);
    mine.grad_reduce_exposed += r.grad_reduce_exposed;
    mine.grad_reduce_overlapped += r.grad_reduce_overlapped;
    mine.param_gather += r.param_gather;
    mine.expert_exchange += r.expert_exchange;
    mine.param_gather_bytes += double(r.param_gather_bytes);
  }
  if (ckpt.writer()) {
    const double f0 = now_seconds();
    ckpt.writer()->finish();
    res.final_wait_seconds = now_seconds() - f0;
    res.checkpoint_bytes = double(ckpt.writer()->last_stats().bytes);
    res.checkpoint_write_seconds = ckpt.writer()->last_stats().write_seconds;
  }
  const int W = mesh.world_size();
  double a[kFields];
  to_array(mine, a);
  std::vector<double> all(size_t(kFields) * size_t(W));
  mesh.world().all_gather(a, all.data(), kFields, DType::kF64);
  for (int q = 0; q < W; ++q) res.ranks.push_back(from_array(&all[size_t(kFields) * size_t(q)]));
  // Memory per rank: the workspace and its activations (exact) and the process's peak resident set.
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  double mem[3] = {double(job->numerics().workspace_bytes()), double(job->numerics().activation_bytes()),
                   double(usage.ru_maxrss) * 1024.0};
  std::vector<double> all_mem(3 * size_t(W));
  mesh.world().all_gather(mem, all_mem.data(), 3, DType::kF64);
  for (int q = 0; q < W; ++q) {
    res.workspace_bytes = std::max(res.workspace_bytes, all_mem[3 * size_t(q)]);
    res.activation_bytes = std::max(res.activation_bytes, all_mem[3 * size_t(q) + 1]);
    res.peak_rss_bytes = std::max(res.peak_rss_bytes, all_mem[3 * size_t(q) + 2]);
  }
  res.peak_gflops = job->peak_gflops();
  if (profiling_enabled()) res.profile = profile_snapshot();
  return res;
}

nlohmann::json bench_train_json(const BenchTrainResult& res) {
  const BenchTrainOptions& o = res.options;
  const BenchTrainSetup& s = res.setup;
  const double steps = double(o.steps);
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t q = 0; q < res.ranks.size(); ++q) {
    const BenchTrainRank& a = res.ranks[q];
    ranks.push_back({{"rank", q},
                     {"tokens_per_second", a.tokens / a.seconds},
                     {"step_seconds", a.seconds / steps},
                     {"grad_reduce_exposed_seconds", a.grad_reduce_exposed / steps},
                     {"grad_reduce_overlapped_seconds", a.grad_reduce_overlapped / steps},
                     {"param_gather_seconds", a.param_gather / steps},
                     {"param_gather_bytes", a.param_gather_bytes / steps},
                     {"expert_exchange_seconds", a.expert_exchange / steps}});
  }
  const BenchTrainRank& r0 = res.ranks[0];
  return {{"bench", "train"},
          {"model", s.model},
          {"micro_batch", o.micro_batch},
          {"seq_len", o.seq_len},
          {"grad_accum", o.grad_accum},
          {"world", s.world},
          {"dp", s.dp},
          {"ep", s.ep},
          {"cp", s.cp},
          {"threads", s.threads},
          {"steps", o.steps},
          {"warmup", o.warmup},
          {"step_seconds", res.step_seconds()},
          {"tokens_per_second", res.tokens_per_second()},
          {"model_gflops_per_second", r0.flops / r0.seconds / 1e9},
          {"precision", s.precision},
          {"zero_gather_dtype", s.zero_gather_dtype},
          {"recompute", s.recompute},
          {"loss_chunk", s.loss_chunk},
          {"peak_gemm_gflops", res.peak_gflops},
          {"mfu", res.mfu()},
          {"workspace_bytes_per_rank", res.workspace_bytes},
          {"activation_bytes_per_rank", res.activation_bytes},
          {"peak_rss_bytes_per_rank", res.peak_rss_bytes},
          {"lora", s.lora},
          {"f32_param_bytes", s.f32_param_bytes},
          {"bf16_param_bytes", s.bf16_param_bytes},
          {"quant_param_bytes", s.quant_param_bytes},
          {"base_gradient_bytes", s.base_gradient_bytes},
          {"startup_seconds", s.startup_seconds},
          {"first_step_seconds", res.first_step_seconds},
          {"ranks", ranks}};
}

}  // namespace zaya
