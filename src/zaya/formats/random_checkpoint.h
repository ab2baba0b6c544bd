#pragma once
// `zaya ckpt random` (docs/cli.md): a randomly initialised model written as a
// model directory (config.json + safetensors, either layout) tensor by tensor,
// never holding the whole model: what ZayaModel::init(seed) followed by a save
// in that layout and dtype would write, for models whose float32 copy does not
// fit in memory (ZAYA1-8B: 8.8B parameters, 35 GB in float32, 17.7 GB in bf16).
//
// The tensors are planned first (names, shapes, dtypes: the shards of at most
// max_shard_bytes), then each shard is filled one parameter at a time
// (init_param, rounded to bf16) and written atomically; the index last. Peak
// memory: one shard's bytes plus the largest parameter in float32.

#include <cstdint>
#include <string>

#include "zaya/formats/model_directory.h"
#include "zaya/model/config.h"

namespace zaya {

struct RandomCheckpointOptions {
  uint64_t seed = 1;
  DirectoryLayout layout = DirectoryLayout::kNative;
  std::string dtype = "bf16";                    // bf16 or f32 (the balancing biases always F32)
  uint64_t max_shard_bytes = uint64_t(1) << 30;  // of tensor data per safetensors file
};

struct RandomCheckpointSummary {
  int64_t tensors = 0, files = 0;
  uint64_t bytes = 0;  // tensor data written
};

// Writes the directory `dir` (created; an existing non-empty one is refused).
RandomCheckpointSummary write_random_model_directory(const ZayaConfig& config, const std::string& dir,
                                                     const RandomCheckpointOptions& options);

}  // namespace zaya
