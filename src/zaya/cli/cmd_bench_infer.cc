// zaya bench infer: prefill tokens/s and decode ms/token vs batch and context
// length, with the bandwidth roofline (STREAM measured in the same run;
// src/zaya/infer/benchmark_job.h, benchmark.h).
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <memory>

#include "zaya/bench/stream.h"
#include "zaya/cli/commands.h"
#include "zaya/infer/benchmark_job.h"
#include "zaya/infer/infer_model.h"
#include "zaya/io/atomic_file.h"
#include "zaya/model/params.h"
#include "zaya/ops/matvec.h"
#include "zaya/ops/matvec_fp8_bf16.h"
#include "zaya/ops/matvec_lowbit.h"
#include "zaya/ops/matvec_mxfp4_q8.h"
#include "zaya/ops/matvec_q8.h"

namespace zaya::cli {
namespace {

// The job's options (infer/benchmark_job.h) and what only this verb needs.
struct BenchInferCliOptions : InferBenchJobOptions {
  std::string json_out;
  int threads = 0;
};

void bench_infer(const BenchInferCliOptions& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const InferBenchModel m = open_infer_bench_model(o);
  const InferModel& model = *m.model;
  const InferBenchOptions bo = infer_bench_options(o, m);
  const WeightBytes& wb = model.weight_bytes();
  const ParamCounts pc = count_parameters(model.config());
  fmt::print("zaya bench infer: {} ({:.1f}M parameters, {:.1f}M active), {} weights, {} threads\n", m.name,
             pc.total / 1e6, pc.active / 1e6, model.matrix_dtype(), omp_get_max_threads());
  fmt::print(
      "  bytes per decode step at batch 1: dense {:.2f} MB + one expert per layer {:.2f} MB + LM head {:.2f} MB"
      " (+ KV cache)\n",
      wb.dense / 1e6, wb.per_expert * model.config().num_blocks / 1e6, wb.lm_head / 1e6);
  const double L = double(std::max<int64_t>(model.config().num_blocks, 1));
  fmt::print("  bytes per layer: attention {:.3f} MB, router {:.3f} MB, experts {:.3f} MB ({:.3f} MB each)\n",
             wb.attention / L / 1e6, wb.router / L / 1e6, wb.per_expert * model.config().experts / 1e6,
             wb.per_expert / 1e6);
  fmt::print(
      "  decode kernels: f32/bf16 matvec {}, int8 matvec {}, mxfp4/fp8 matvec {}, mxfp4 x int8 {} (mxfp4 "
      "activations: {}), fp8 x bf16 {} (fp8 activations: {})\n",
      matvec_kernel_name(), matvec_q8_kernel_name(), matvec_lowbit_kernel_name(), matvec_mxfp4_q8_kernel_name(),
      mxfp4_int8_activations() ? "int8" : "float", matvec_fp8_bf16_kernel_name(),
      fp8_bf16_activations() ? "bf16" : "float");
  if (!m.loras.empty())
    fmt::print("  LoRA: {} random adapters of rank {} on every target; decode sequence s runs adapter s % {}\n",
               m.loras.size(), o.lora_rank, m.loras.size());
  if (m.draft)
    fmt::print("  draft model {} ({:.1f}M parameters, {} weights)\n", o.spec_model,
               count_parameters(m.draft->config()).total / 1e6, m.draft->matrix_dtype());
  const InferBenchResult r = run_infer_bench(model, bo, working_set_bandwidth_gbps, true);
  if (!o.json_out.empty()) write_file_atomic(o.json_out, infer_bench_job_json(m, bo, r).dump(2) + "\n");
}

}  // namespace

void add_bench_infer_command(CLI::App& bench) {
  auto o = std::make_shared<BenchInferCliOptions>();
  auto* cmd = bench.add_subcommand("infer", "prefill tokens/s and decode ms/token with the bandwidth roofline");
  cmd->add_option("--preset", o->preset, "random weights of a preset: tiny, small");
  cmd->add_option("--model", o->model, "a model directory (weights memory-mapped) or training checkpoint");
  cmd->add_option("--dtype", o->dtype, std::string(kWeightDtypeHelp) + " (default bf16)");
  cmd->add_option("--prefill", o->bench.prefill_lengths, "prompt lengths to prefill (empty list: skip)")
      ->delimiter(',');
  cmd->add_option("--batch", o->bench.batches, "decode batch sizes")->delimiter(',');
  cmd->add_option("--context", o->bench.contexts, "decode context lengths")->delimiter(',');
  cmd->add_option("--spec-tokens", o->bench.spec_tokens,
                  "also time speculative verification steps checking K drafted tokens per sequence (0: off)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--spec-model", o->spec_model,
                  "with --spec-tokens K: also time this draft model drafting K tokens per sequence (random ids)");
  cmd->add_option("--decode-steps", o->bench.decode_steps, "timed decode steps per point")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--warmup", o->bench.warmup_steps, "untimed decode steps first")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--prefill-reps", o->bench.prefill_reps, "timed prefills per length (best is kept)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--step-tokens", o->bench.step_tokens, "prefill chunk (tokens per step)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--exact", o->exact,
                "f32 activations with bf16 weights in prefill, f32 KV cache (default: bf16 GEMMs and cache)");
  cmd->add_flag("--no-prefill", o->no_prefill, "skip the prefill measurements");
  cmd->add_flag("--no-decode", o->no_decode, "skip the decode measurements");
  cmd->add_flag("--no-working-set", o->no_working_set, "skip the working-set STREAM runs");
  cmd->add_option("--seed", o->bench.seed, "seed of the random weights and tokens");
  cmd->add_option("--lora-adapters", o->lora_adapters,
                  "decode with this many random LoRA adapters (every target), sequence s on adapter s % N, unmerged "
                  "in one batch (0: none)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--lora-rank", o->lora_rank, "rank of those adapters")->check(CLI::Range(1, 4096));
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: all)")->check(CLI::Range(0, 4096));
  cmd->add_option("--json", o->json_out, "write the results as JSON");
  cmd->callback([o] { bench_infer(*o); });
}

}  // namespace zaya::cli
