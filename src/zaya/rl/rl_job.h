#pragma once
// `zaya rl`: GRPO with verifiable rewards, on one process or dp x ep ranks
// (rl_dist.h, expert_gather.h; docs/rl.md). Each
// step: P prompts (rl.prompts_per_step, in a seeded order, epoch after
// epoch), G samples of each from the cached decoder over the current weights
// (rollout.h), rewards (reward.h), group-normalised advantages, the old
// policy's log-probabilities from the trainer's own forward (the same
// kernels and batch as the update's forward: on-policy, the first update's
// ratio is exactly 1, bit for bit), the reference's when rl.kl_coef > 0, then
// rl.updates_per_rollout optimizer steps of the clipped loss (grpo.h) through
// StepNumerics (AdamW or Muon, full-parameter or LoRA, as `zaya train`).
// Per step a record in OUT/metrics.jsonl and (every train.log_every) a
// progress line; held-out prompts (rl.eval_prompts) are scored greedily at
// the start, every rl.eval_every steps and at the end. Checkpoints as `zaya
// train` writes them ([checkpoint]; rl_checkpoint.h), a stop request (SIGTERM,
// the supervisor's control file) saves one and exits 75, and a resumed run
// repeats the uninterrupted one bit for bit; `zaya launch -- rl ...` restarts it.

#include <cstdint>
#include <string>

#include "zaya/train/train_config.h"

namespace zaya {

struct RlJobOptions {
  bool quiet = false;
  std::string resume;         // "" no, "latest", or a checkpoint directory (train/job_start.h)
  int64_t stop_at = 0;        // > 0: stop after this step with a checkpoint (no final evaluation or weights)
  std::string heartbeat_dir;  // set by `zaya launch`
};

struct RlSummary {
  int64_t first_step = 0;  // the step it started from (a resume's)
  bool already_complete = false;
  int64_t checkpoint_step = -1;  // the newest checkpoint on disk at the end (-1: none)
  int64_t steps = 0;
  double first_reward = 0, last_reward = 0;  // mean training reward of the first and the last step
  double eval_before = -1, eval_after = -1;  // held-out mean reward (-1: no rl.eval_prompts)
  int64_t eval_prompts = 0;
  double seconds = 0;
  std::string weights_dir;  // OUT/final, or OUT/adapter for LoRA ("" after --stop-at)
};

RlSummary run_rl(TrainConfig config, const RlJobOptions& options);

}  // namespace zaya
