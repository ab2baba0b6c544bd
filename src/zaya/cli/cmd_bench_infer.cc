// zaya bench infer: prefill tokens/s and decode ms/token vs batch and context
// length, with the bandwidth roofline (STREAM measured in the same run).
#include <fmt/format.h>
#include <omp.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "zaya/bench/stream.h"
#include "zaya/cli/commands.h"
#include "zaya/core/error.h"
#include "zaya/infer/benchmark.h"
#include "zaya/io/atomic_file.h"
#include "zaya/model/params.h"

namespace zaya::cli {
namespace {

struct BenchInferOptions {
  std::string preset, model, dtype = "bf16", json_out;
  InferBenchOptions bench;
  int threads = 0;
  bool exact = false, no_working_set = false, no_prefill = false, no_decode = false;
};

void bench_infer(const BenchInferOptions& o) {
  ZAYA_CHECK(o.preset.empty() != o.model.empty(), "zaya bench infer: give exactly one of --preset and --model");
  check_weight_dtype_option(o.dtype, "--dtype");
  if (o.threads > 0) omp_set_num_threads(o.threads);
  std::unique_ptr<ZayaModel> random;
  std::unique_ptr<InferModel> model;
  std::string name;
  if (!o.preset.empty()) {
    ZayaConfig c = preset_config(o.preset);
    ZAYA_CHECK(o.preset != "zaya1-base",
               "--preset zaya1-base: random weights of 8.8B parameters need 35 GB in f32; benchmark the real "
               "checkpoint with --model DIR instead");
    random = std::make_unique<ZayaModel>(c);
    random->init(o.bench.seed);
    model = InferModel::from_model(*random, o.dtype);
    name = "preset " + o.preset;
  } else {
    InferLoadOptions lo;
    lo.dtype = o.dtype;
    lo.prefetch = true;  // time the decoder, not the disk
    model = InferModel::open(o.model, lo);
    name = o.model;
  }
  InferBenchOptions bo = o.bench;
  bo.bf16_activations = !o.exact;
  bo.working_set_roofline = !o.no_working_set;
  if (o.no_prefill) bo.prefill_lengths.clear();
  if (o.no_decode) bo.batches.clear();
  const WeightBytes& wb = model->weight_bytes();
  const ParamCounts pc = count_parameters(model->config());
  fmt::print("zaya bench infer: {} ({:.1f}M parameters, {:.1f}M active), {} weights, {} threads\n", name,
             pc.total / 1e6, pc.active / 1e6, model->matrix_dtype(), omp_get_max_threads());
  fmt::print(
      "  bytes per decode step at batch 1: dense {:.2f} MB + one expert per layer {:.2f} MB + LM head {:.2f} MB"
      " (+ KV cache)\n",
      wb.dense / 1e6, wb.per_expert * model->config().num_blocks / 1e6, wb.lm_head / 1e6);
  auto bandwidth = [](int64_t bytes) {
    if (bytes <= 0) return measure_dram_bandwidth_gbps(0);
    // Triad over three arrays holding `bytes` in all (at least 24 MB).
    const int64_t elements = std::max<int64_t>(int64_t(1) << 20, bytes / 24);
    return run_stream(StreamKernel::kTriad, elements, 0, 10).best_gbps;
  };
  const InferBenchResult r = run_infer_bench(*model, bo, bandwidth, true);
  if (!o.json_out.empty()) {
    nlohmann::json j = infer_bench_json(*model, bo, r);
    j["model"] = name;
    write_file_atomic(o.json_out, j.dump(2) + "\n");
  }
}

}  // namespace

void add_bench_infer_command(CLI::App& bench) {
  auto o = std::make_shared<BenchInferOptions>();
  auto* cmd = bench.add_subcommand("infer", "prefill tokens/s and decode ms/token with the bandwidth roofline");
  cmd->add_option("--preset", o->preset, "random weights of a preset: tiny, small");
  cmd->add_option("--model", o->model, "a model directory (weights memory-mapped) or training checkpoint");
  cmd->add_option("--dtype", o->dtype, "weights: bf16 (default), f32, or auto (as stored)");
  cmd->add_option("--prefill", o->bench.prefill_lengths, "prompt lengths to prefill (empty list: skip)")
      ->delimiter(',');
  cmd->add_option("--batch", o->bench.batches, "decode batch sizes")->delimiter(',');
  cmd->add_option("--context", o->bench.contexts, "decode context lengths")->delimiter(',');
  cmd->add_option("--decode-steps", o->bench.decode_steps, "timed decode steps per point")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--warmup", o->bench.warmup_steps, "untimed decode steps first")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--prefill-reps", o->bench.prefill_reps, "timed prefills per length (best is kept)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--step-tokens", o->bench.step_tokens, "prefill chunk (tokens per step)")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--exact", o->exact, "f32 activations with bf16 weights in prefill (default: bf16 GEMMs)");
  cmd->add_flag("--no-prefill", o->no_prefill, "skip the prefill measurements");
  cmd->add_flag("--no-decode", o->no_decode, "skip the decode measurements");
  cmd->add_flag("--no-working-set", o->no_working_set, "skip the working-set STREAM runs");
  cmd->add_option("--seed", o->bench.seed, "seed of the random weights and tokens");
  cmd->add_option("--threads", o->threads, "OpenMP threads (0: all)")->check(CLI::Range(0, 4096));
  cmd->add_option("--json", o->json_out, "write the results as JSON");
  cmd->callback([o] { bench_infer(*o); });
}

}  // namespace zaya::cli
