#pragma once
// How fast the training sampler hands out batches (bench/sampler_throughput.sh,
// docs/performance.md "Data pipeline"): one rank's share of data-parallel
// draws, timed.

#include <cstdint>

#include "zaya/data/shard_reader.h"

namespace zaya {

struct SamplerSpeedOptions {
  int64_t seq = 4096;           // tokens per sequence
  int64_t batch = 4;            // sequences this rank copies per step (micro-batch x grad-accum)
  int64_t ranks = 1;            // data-parallel ranks drawing the same global batch
  double min_seconds = 2.0;     // time at least this long
  bool document_starts = true;  // also compute each token's document position (document masking)
};

struct SamplerSpeed {
  int64_t steps = 0;  // batches drawn
  double seconds = 0.0;
  double seconds_per_step = 0.0;
  double tokens_per_second = 0.0;  // input tokens copied per second (this rank)
};

// Draws shuffled batches (TokenSampler::next_slice, slice 0 of ranks x batch)
// until min_seconds have passed.
SamplerSpeed measure_sampler_speed(const ShardReader& shard, const SamplerSpeedOptions& options);

}  // namespace zaya
