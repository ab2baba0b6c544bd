#pragma once
// `zaya bench gemm` from its command-line options: the run's options (data
// types, timing, peaks, memory cap, padding), the shapes of a sweep (layouts x
// --shape, or the M x N x K product) or a model's GEMMs (--model), and what
// the summary lines add up (a model's GEMM time per micro-batch, fall-offs).

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/bench/gemm_run.h"

namespace zaya {

struct GemmJobOptions {
  std::string m = "256:4096:*4", n = "256:4096:*4", k = "256:4096:*4";  // parse_dim_list's forms
  std::vector<std::string> shapes;                                      // "MxNxK": instead of the product
  std::vector<std::string> dtypes = {"f32", "bf16"}, layouts = {"nn"};
  std::string model;  // a preset, config.json or model directory: its GEMMs instead of a sweep
  int64_t micro_batch = 8, seq_len = 256, ep = 1, expert_tokens = 0;  // --model
  double skip_fraction = 0;                                           // --model
  int64_t align = -1;                                                 // -1: 64 with --model, else 0 (no padded timing)
  int64_t peak_side = 0;                                              // 0: gemm_run.h's sides
  double falloff = 0.85, min_time = 0.1, peak_f32 = 0, peak_bf16 = 0, membw = 0;
  int min_calls = 3;
  std::string max_memory = "8G";
};

GemmRunOptions gemm_run_options(const GemmJobOptions& options);

// For each layout in turn: the --shape shapes, or every M x N x K (M outermost).
std::vector<GemmShape> gemm_sweep_shapes(const GemmJobOptions& options);

// The sweep, or with --model that model's forward and backward GEMMs;
// `on_entry` sees every measured or skipped shape.
GemmEfficiencyTable run_gemm_job(const GemmJobOptions& options, const GemmRunOptions& run,
                                 const GemmProgress& on_entry = {});

// One micro-batch's GEMMs of a model table in one data type: the measured ones
// (a skipped shape has no time), each counted as often as the step calls it.
struct GemmModelTotal {
  double seconds = 0;
  double flops = 0;
};
GemmModelTotal gemm_model_total(const GemmEfficiencyTable& table, GemmDType dtype);

int count_falloffs(const GemmEfficiencyTable& table);

}  // namespace zaya
