#pragma once
// Writing checkpoints without a running job, for `zaya ckpt reshape` (lay a
// checkpoint out for another dp x ep mesh) and `zaya ckpt import` (a
// Hugging Face model directory as a step-0 checkpoint): which tensors each
// rank writes is the training schema's (train/state_tensors.h); files are
// written here one tensor at a time through one reusable buffer, then
// published atomically like the training job's checkpoints.

#include <functional>
#include <string>
#include <vector>

#include "zaya/ckpt/format.h"

namespace zaya {

struct OfflineTensor {
  std::string name;
  CkptDType dtype = CkptDType::kF32;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

// Writes ROOT/step_XXXXXXXX for `meta` (run_id, step, state, config_toml are
// taken from it; layout and tensors from the arguments). fill(t, dst) writes
// tensor t's values into dst. Fails if the step directory exists.
void write_checkpoint_offline(const std::string& root, const CheckpointMeta& meta, int dp, int ep,
                              const std::vector<std::vector<OfflineTensor>>& per_rank,
                              const std::function<void(const OfflineTensor&, void*)>& fill);

}  // namespace zaya
