#pragma once
// `zaya bench infer`: prefill throughput and decode latency of the cached
// decoder, with the bandwidth roofline beside each decode point.
//
// Decode reads, per step, every dense weight (attention, routers, norms), the
// experts the step's tokens chose (counted per step from the routing), the LM
// head, and the KV cache of every sequence; the roofline time is those bytes
// divided by the STREAM triad bandwidth measured in the same run. Two
// rooflines are reported: DRAM (STREAM on arrays far beyond the caches, the
// bound for real checkpoints) and working-set (STREAM on arrays as large as
// the step's bytes: the bound when the weights fit the last-level cache, as a
// small model's do on a CPU with a large L3).
//
// Decode points start from a synthetic context of the requested length
// (engine.fill_synthetic) rather than a prefill, so long contexts cost no
// prefill time; the cache contents do not change the work.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zaya/infer/infer_model.h"

namespace zaya {

struct InferBenchOptions {
  std::vector<int64_t> prefill_lengths = {128, 512, 2048};
  std::vector<int64_t> batches = {1, 4, 16};
  std::vector<int64_t> contexts = {128, 1024, 4096};
  int64_t decode_steps = 16;
  int64_t warmup_steps = 2;
  int64_t prefill_reps = 2;
  int64_t step_tokens = 512;  // prefill chunk
  bool bf16_activations = true;
  uint64_t seed = 1;
  bool working_set_roofline = true;
  // > 0: each decode point also times speculative verification steps (a chunk of
  // 1 + spec_tokens tokens per sequence, then keep_draft of the first token: the
  // cost of checking K drafted tokens, docs/inference.md "Speculative decoding").
  int64_t spec_tokens = 0;
  // LoRA adapters applied unmerged at the decode points: sequence s decodes
  // with loras[s % size] (StepChunk::lora, infer/step_lora.h). Empty: none.
  std::vector<const LoraAdapters*> loras;
  // With spec_tokens: each decode point also times a draft model drafting K
  // tokens per sequence (ModelDrafter, spec_model.h); not owned.
  const InferModel* draft_model = nullptr;
};

struct PrefillPoint {
  int64_t tokens = 0;
  double seconds = 0;  // best of the repetitions
  double tokens_per_second = 0;
};

struct DecodePoint {
  int64_t batch = 0, context = 0;
  double ms_per_step = 0;  // mean over the timed steps (one token per sequence)
  double best_ms_per_step = 0;
  double tokens_per_second = 0;  // batch / step time
  double bytes_per_step = 0;     // weights + KV read by one step (mean)
  double weight_bytes_per_step = 0;
  double kv_bytes_per_step = 0;
  double expert_loads_per_step = 0;
  double roofline_ms = 0;        // bytes / DRAM bandwidth
  double ratio = 0;              // ms_per_step / roofline_ms
  double ws_bandwidth_gbps = 0;  // STREAM at the step's working-set size
  double ws_roofline_ms = 0;
  double ws_ratio = 0;
  double verify_ms_per_step = 0;  // with spec_tokens: one verification step (K + 1 tokens per sequence)
  // With draft_model: drafting K tokens per sequence (after a fully accepted draft: the catch-up of K + 1 tokens,
  // then K - 1 one-token steps); -1 when the context does not fit the draft model's positions.
  double draft_ms_per_step = 0;
};

struct InferBenchResult {
  double dram_gbps = 0;
  std::vector<PrefillPoint> prefill;
  std::vector<DecodePoint> decode;
};

// bandwidth_gbps(bytes): sustained bandwidth for a working set of `bytes`
// (0: DRAM), e.g. STREAM triad (bench/stream.h), measured by the caller.
using BandwidthProbe = std::function<double(int64_t)>;

InferBenchResult run_infer_bench(const InferModel& model, const InferBenchOptions& options,
                                 const BandwidthProbe& bandwidth_gbps, bool verbose);

nlohmann::json infer_bench_json(const InferModel& model, const InferBenchOptions& options,
                                const InferBenchResult& result);

}  // namespace zaya
