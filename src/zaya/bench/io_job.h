#pragma once
// `zaya bench io` from its command-line options: sizes parsed, and with
// --model the checkpoint that model's training writes (f32 weights and
// AdamW's two f32 moments: 12 bytes per parameter) split into one shard file
// per rank, each rounded up to whole 4 KiB pages.

#include <cstdint>
#include <string>

#include "zaya/bench/io_bench.h"

namespace zaya {

struct IoJobOptions {
  IoBenchOptions io;                                // file_bytes, block_bytes and (with --model) files are set here
  std::string file_size = "1G", block_size = "4M";  // byte_size.h's forms
  std::string model;                                // a preset, config.json or model directory
  int ranks = 1;                                    // --model: shard files
};

struct IoJobPlan {
  IoBenchOptions io;
  bool from_model = false;
  int64_t model_params = 0;       // --model
  uint64_t checkpoint_bytes = 0;  // --model: all shards, before rounding
};

IoJobPlan plan_io_job(const IoJobOptions& options);

}  // namespace zaya
