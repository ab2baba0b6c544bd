#pragma once
// What a `zaya rl` checkpoint holds (docs/rl.md "Checkpoints and resume"),
// written and read with `zaya train`'s machinery (train/checkpoint_manager.h,
// train/train_state.h): the numerics' tensors (parameters, buffers, the
// optimizer's and the balancing controller's moments; LoRA: the adapters) and
// step counts, and in metadata.json's "state":
//
//   step               RL steps done
//   rl.prompt_epochs   the prompt order's epochs begun (prompt_order.h)
//   rl.prompt_position the prompts taken of the current epoch
//   rl.optimizer_steps optimizer steps taken (the schedule's count)
//
// The sampling needs no state: step s's samples draw from seeds that are a
// function of (train.seed, s) (rl_job.cc). The KL reference is rebuilt as the
// run started (model.init_from, or the seed). So a resumed run repeats the
// uninterrupted one bit for bit.

#include <cstdint>

#include "zaya/ckpt/reader.h"
#include "zaya/ckpt/writer.h"
#include "zaya/rl/prompt_order.h"
#include "zaya/train/step_numerics.h"
#include "zaya/train/train_config.h"

namespace zaya {

struct RlProgress {
  int64_t step = 0;
  int64_t optimizer_steps = 0;
};

// The checkpoint's metadata at `progress.step` (configs, tokenizer, state).
CheckpointMeta rl_checkpoint_header(const TrainConfig& config, const StepNumerics& numerics, const PromptOrder& order,
                                    const RlProgress& progress);

// Reads this rank's tensors into `numerics` (the model and adapters checked
// against this config's) and the state into it and `order`. Fails naming the
// checkpoint when it is not a `zaya rl` one (a `zaya train` checkpoint: use
// model.init_from with its final weights instead).
RlProgress read_rl_checkpoint(const TrainConfig& config, StepNumerics& numerics, PromptOrder& order,
                              const CheckpointReader& ck, bool note);

}  // namespace zaya
