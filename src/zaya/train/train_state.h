#pragma once
// The train state: one checkpoint of a training job assembled from its
// components' own state, and read back into them. The tensors are those of
// state_tensors.h; metadata.json's "state" holds
//
//   step                                    the job: steps done
//   optimizer_state, optimizer_step, balance_step            StepNumerics
//   loss_window, grad_norm_window, window_count, consecutive_skips   StepGuard
//   data, recipe (phase, name, phase_start, mixture)          PhaseController
//
// and the header records the training config, the model config and the
// tokenizer (ckpt/checkpoint_model.h reads the last two without the trainer).

#include <cstdint>
#include <vector>

#include "zaya/ckpt/reader.h"
#include "zaya/ckpt/writer.h"
#include "zaya/train/phase_controller.h"
#include "zaya/train/step_guard.h"
#include "zaya/train/step_numerics.h"
#include "zaya/train/train_config.h"

namespace zaya {

// The components a checkpoint holds (the job wires them).
struct TrainStateParts {
  const TrainConfig& config;
  StepNumerics& numerics;
  StepGuard& guard;
  PhaseController& phases;
};

// This rank's tensors of a checkpoint (root: with the replicated state).
std::vector<SnapshotTensor> state_snapshot(TrainStateParts parts, bool root);
// The checkpoint's metadata (state, configs, tokenizer) at `step`.
CheckpointMeta state_header(TrainStateParts parts, int64_t step);

// The numerics' part alone (StepNumerics: parameters, buffers, optimizer and
// controller moments), for a job without a step guard or data phases (`zaya
// rl`, rl/rl_checkpoint.h): this rank's tensors to write, and the read-back
// with read_state's checks (returns whether the checkpoint held optimizer state).
std::vector<SnapshotTensor> numerics_snapshot(const TrainConfig& config, StepNumerics& numerics, bool root);
bool read_numerics_state(const TrainConfig& config, StepNumerics& numerics, const CheckpointReader& ck, bool note);

// What a checkpoint says about the run it continues.
struct StateOnDisk {
  bool with_optimizer = false;  // false: weights only (an imported model): optimizer, guard and data start afresh
  size_t phase = 0;             // the recipe phase to continue in
  int64_t step = 0;
};

// Checks that the checkpoint holds this run's model (the RoPE base and the
// longest position may differ: a context extension; `note` prints when they
// do), and reads this rank's parameters, buffers and, with optimizer state,
// its moments. Errors name the checkpoint.
StateOnDisk read_state(TrainStateParts parts, const CheckpointReader& ck, bool note);
// After the job entered the checkpoint's phase: the step counts, the guard's
// window and the data position.
void restore_state(TrainStateParts parts, const nlohmann::json& state);

}  // namespace zaya
