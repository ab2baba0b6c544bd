#pragma once
// Writing checkpoints without a running job: `zaya ckpt reshape` (lay a
// checkpoint out for another dp x ep mesh) and `zaya ckpt import` (a
// Hugging Face model directory as a step-0 checkpoint). Files are written one
// tensor at a time through one reusable buffer, then published atomically like
// the training job's checkpoints.

#include <functional>
#include <string>
#include <vector>

#include "zaya/ckpt/format.h"
#include "zaya/model/config.h"

namespace zaya {

struct OfflineTensor {
  std::string name;
  CkptDType dtype = CkptDType::kF32;
  std::vector<int64_t> shape;
  int64_t numel() const;
};

// The tensors each rank of a dp x ep mesh writes, as the training job would:
// parameters and optimizer state of its ZeRO-1 shard, plus the replicated
// state (balancing biases and their controller) on rank 0.
// muon: optimizer.muon (Muon matrices have no second moment);
// with_optimizer: false for weights-only checkpoints.
std::vector<std::vector<OfflineTensor>> checkpoint_layout(const ZayaConfig& config, int dp, int ep, bool muon,
                                                          bool with_optimizer);

// Writes ROOT/step_XXXXXXXX for `meta` (run_id, step, state, config_toml are
// taken from it; layout and tensors from the arguments). fill(t, dst) writes
// tensor t's values into dst. Fails if the step directory exists.
void write_checkpoint_offline(const std::string& root, const CheckpointMeta& meta, int dp, int ep,
                              const std::vector<std::vector<OfflineTensor>>& per_rank,
                              const std::function<void(const OfflineTensor&, void*)>& fill);

}  // namespace zaya
