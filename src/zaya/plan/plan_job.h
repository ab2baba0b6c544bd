#pragma once
// `zaya plan`: every prediction of one config on one hardware profile and
// layout (plan_options.h): the training step, its largest GEMMs, memory per
// device, inference latency on one device and, optionally, the MoE width
// trade-off at equal expert parameters; and the JSON document of --json.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/model/params.h"
#include "zaya/plan/latency_model.h"
#include "zaya/plan/memory_model.h"
#include "zaya/plan/moe_tradeoff.h"
#include "zaya/plan/plan_options.h"
#include "zaya/plan/step_model.h"

namespace zaya {

struct PlanJobOptions {
  PlanCommonOptions common;
  int64_t batch = 1, context = 4096;  // inference
  std::string infer_dtype;            // inference weights and KV cache; empty: the training dtype
  bool tradeoff = true;
};

struct PlanJobResult {
  PlanSetup setup;
  ParamCounts counts;
  StepPrediction step;
  std::vector<GemmTime> gemms_by_time;  // step.gemms, the slowest first
  MemoryPrediction memory;
  InferenceLayout inference;
  LatencyPrediction latency;
  std::vector<MoeTradeoffRow> tradeoff;  // empty without options.tradeoff
};

PlanJobResult run_plan_job(const PlanJobOptions& options);

// The document of `zaya plan --json` (format_version 1); `model` as given.
nlohmann::json plan_json(const PlanJobResult& result, const std::string& model);

}  // namespace zaya
