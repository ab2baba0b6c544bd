#pragma once
// `zaya bench infer` from its command-line options (benchmark.h measures):
// the model to time, either random weights of a preset or a model directory /
// training checkpoint, and the benchmark's options with the switches applied.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/infer/benchmark.h"
#include "zaya/infer/infer_model.h"
#include "zaya/model/model.h"

namespace zaya {

struct InferBenchJobOptions {
  std::string preset;          // random weights (seeded by bench.seed) of a preset
  std::string model;           // or a model directory / training checkpoint: exactly one of the two
  std::string dtype = "bf16";  // weights: bf16, f32 or auto (as stored)
  std::string spec_model;      // a draft model to time beside the verification steps (bench.spec_tokens > 0)
  InferBenchOptions bench;
  bool exact = false;           // f32 activations in prefill (default: bf16 GEMMs)
  bool no_working_set = false;  // skip the working-set rooflines
  bool no_prefill = false, no_decode = false;
  // Random LoRA adapters (every target, this rank) for the decode points:
  // sequence s decodes with adapter s % lora_adapters (InferBenchOptions::loras).
  int64_t lora_adapters = 0;
  int64_t lora_rank = 16;
};

struct InferBenchModel {
  std::unique_ptr<ZayaModel> random;  // the preset's weights (from_model's views point into them)
  std::unique_ptr<InferModel> model;
  std::unique_ptr<InferModel> draft;                 // --spec-model, in the same dtype
  std::string name;                                  // "preset NAME" or the directory
  std::vector<std::unique_ptr<LoraAdapters>> loras;  // lora_adapters of them
};

// Checks the choice of model and dtype, then builds or opens the model and the draft model (a
// directory's weights are prefetched: the benchmark times the decoder, not
// the disk). zaya1-base's random weights would need 35 GB: refused.
InferBenchModel open_infer_bench_model(const InferBenchJobOptions& options);

// The options with the switches applied, the model's adapters and its draft model bound.
InferBenchOptions infer_bench_options(const InferBenchJobOptions& options, const InferBenchModel& model);

// infer_bench_json with the model's name.
nlohmann::json infer_bench_job_json(const InferBenchModel& model, const InferBenchOptions& options,
                                    const InferBenchResult& result);

}  // namespace zaya
