#pragma once
// [rl]: reinforcement learning with verifiable rewards (GRPO), the settings of
// `zaya rl` (rl/rl_job.h, docs/rl.md). Declared here, beside the other
// sections of a training config, so that its keys are rows of
// train_fields.cc like every other key; only `zaya rl` reads them.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/core/enum_names.h"

namespace zaya {

// rl.reward: how a completion is scored (rl/reward.h).
enum class RewardKind { kExact, kBoxed, kRegex, kCommand, kNumeric };
inline constexpr EnumName<RewardKind> kRewardKindNames[] = {{RewardKind::kExact, "exact"},
                                                            {RewardKind::kBoxed, "boxed"},
                                                            {RewardKind::kRegex, "regex"},
                                                            {RewardKind::kCommand, "command"},
                                                            {RewardKind::kNumeric, "numeric"}};

struct RlConfig {
  bool enabled = false;      // the section is present
  std::string prompts;       // JSONL: "prompt" (text) or "messages" (a chat), plus the fields the reward reads
  std::string eval_prompts;  // held-out JSONL of the same form, scored greedily ("" : none)
  int64_t eval_every = 0;    // steps between held-out evaluations (0: at the start and the end only)
  int64_t prompts_per_step = 8;
  int64_t group_size = 4;  // G: samples per prompt
  int64_t max_new_tokens = 32;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  std::vector<std::string> stop;  // stop strings (besides the chat template's end of turn)
  RewardKind reward = RewardKind::kExact;
  std::string answer_field = "answer";  // the record's field the built-in verifiers compare with
  std::string pattern;                  // rl.reward = "regex": its regular expression (ECMAScript)
  double tolerance = 1e-6;              // rl.reward = "numeric": |x - answer| <= tolerance
  std::string command;                  // rl.reward = "command": run by /bin/sh -c
  double timeout = 60.0;                // seconds the command may take per step
  double clip = 0.2;                    // the policy ratio's clip range [1 - clip, 1 + clip]
  double kl_coef = 0.0;                 // KL penalty to the frozen reference (with LoRA: the base)
  bool std_normalize = true;            // divide the group-centred rewards by the group's std (GRPO); false: Dr. GRPO
  int64_t updates_per_rollout = 1;      // optimizer steps on each rollout (1: on-policy)
  bool routing_replay = false;          // the trainer routes by the decoder's recorded experts (docs/rl.md)
  bool sample_with_trainer = false;     // sample from the trainer's forward: rollout log-probs bitwise the trainer's
};

}  // namespace zaya
