#pragma once
// `zaya bench train` (docs/bench.md): training throughput and MFU of the real
// training job on synthetic tokens, with the same start-up as `zaya train`
// (job_start.h), per-rank communication timings, memory, optional async
// checkpoints during the timed steps, and the profile (ZAYA_PROFILE=1).

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/core/profiler.h"

namespace zaya {

struct BenchTrainOptions {
  std::string preset = "small";  // used when config is empty
  std::string config;            // a training config (TOML) instead of a preset
  std::vector<std::string> overrides;
  int64_t micro_batch = 8, seq_len = 256, grad_accum = 1, steps = 10, warmup = 2;
  int threads = 0;
  int64_t checkpoint_every = 0;  // async checkpoints during the timed steps (0: none)
  std::string checkpoint_dir = "runs/bench/checkpoints";
  double peak_gflops = 0;  // 0: measure
};

// Per-rank totals over the timed steps.
struct BenchTrainRank {
  double seconds = 0, flops = 0, tokens = 0, best_step = 0;
  double grad_reduce_exposed = 0, grad_reduce_overlapped = 0, param_gather = 0, expert_exchange = 0;
  double param_gather_bytes = 0;  // received in the ZeRO-1 parameter all-gathers, all timed steps
};

// Known once the job has started (before any step).
struct BenchTrainSetup {
  std::string model;  // the preset or config path
  double params = 0, active_params = 0;
  int world = 1, dp = 1, ep = 1, cp = 1, threads = 1;
  bool root = true;
  std::string precision = "f32";          // of the GEMMs (train.precision resolved for this CPU)
  std::string zero_gather_dtype = "f32";  // of the ZeRO-1 parameter all-gather (distributed runs)
  std::string recompute = "none";         // train.recompute
  int64_t loss_chunk = 0;                 // train.loss_chunk (0: every row's logits at once)
  bool lora = false;                      // a [lora] run (docs/training.md "LoRA")
  // This rank's parameter memory (model/model.h): the float32 parameters (a
  // frozen bf16 base: the small tensors only), their bf16 copy, the base's
  // gradient arena (0 in a LoRA run), in bytes.
  double f32_param_bytes = 0, bf16_param_bytes = 0, base_gradient_bytes = 0;
  double quant_param_bytes = 0;  // a quantized LoRA base's experts (ZayaModel::quant_param_bytes)
  double startup_seconds = 0;    // rank 0: start_train_job (config, model, init_from, workspace)
};

struct BenchTrainResult {
  BenchTrainSetup setup;
  BenchTrainOptions options;
  std::vector<BenchTrainRank> ranks;  // every rank's (gathered)
  double first_step_seconds = 0;      // rank 0: the first step (warm-up or timed), its one-time costs included
  double peak_gflops = 0;             // one rank's measured GEMM peak in setup.precision
  // The largest over ranks: the whole batch-sized workspace, its activations
  // kept for backward (model/model.h), the process's peak resident set.
  double workspace_bytes = 0, activation_bytes = 0, peak_rss_bytes = 0;
  // Async checkpoints (rank 0): saves, bytes of the last, stall per save, background write.
  int saves = 0;
  double checkpoint_bytes = 0, checkpoint_stall_seconds = 0, checkpoint_write_seconds = 0, final_wait_seconds = 0;
  std::vector<ProfileEntry> profile;  // rank 0, empty unless ZAYA_PROFILE=1

  double step_seconds() const;       // rank 0's mean
  double tokens_per_second() const;  // all ranks' tokens / the slowest rank's time
  double mfu() const;                // rank 0's FLOPs / time / peak
};

// Collective under mpirun; every rank returns the gathered result (root: setup.root).
BenchTrainResult bench_train(const BenchTrainOptions& options,
                             const std::function<void(const BenchTrainSetup&)>& started = {});

// The --json record of a result.
nlohmann::json bench_train_json(const BenchTrainResult& result);

}  // namespace zaya
