#pragma once
// Multi-phase training recipes (docs/context-extension.md, "Recipes and
// phases"): a run made of phases, each with its own token budget, sequence
// length, RoPE base, data mixture and warmup-stable-decay learning-rate
// schedule, as ZAYA1 was pretrained (two 4K-context phases with different
// mixtures, then a 32K-context phase with a larger RoPE base;
// docs/systems-notes.md §5).
//
// A config without [[phase]] tables is one implicit phase made from [train],
// [schedule] and [data], and trains exactly as before.

#include <cstdint>
#include <string>
#include <vector>

#include "zaya/optim/schedule.h"

namespace zaya {

struct TrainConfig;

// One dataset of a phase's mixture: a directory made by `zaya data shards`.
struct PhaseData {
  std::string dir;      // holds train.{bin,idx} and val.{bin,idx}
  double weight = 1.0;  // > 0; the weights of a phase are normalised
};

// One [[phase]] table, every key resolved (defaults applied).
struct PhaseConfig {
  std::string name;    // default "phase N"
  int64_t tokens = 0;  // token budget (all data replicas together)
  int64_t seq_len = 0;
  double rope_theta = 0;          // default model.rope_theta
  double sliding_rope_theta = 0;  // the sliding blocks' RoPE base, default model.sliding_rope_theta
  int64_t micro_batch = 0;        // default train.micro_batch
  double lr = 0;                  // peak learning rate, default optim.lr
  int64_t warmup_steps = 0;       // linear warmup at the start of the phase
  double decay_fraction = 0.2;    // linear decay over the last share of the phase's steps (0: none)
  double min_lr_ratio = 0.1;      // learning rate at the end of the decay / lr
  int cp = 1;                     // context-parallel ranks, default parallel.cp (ZAYA1's 32K phase used 2)
  std::vector<PhaseData> data;

  // Index into `data` of the highest weight (the first of equals): its
  // validation split is the phase's validation data.
  size_t main_dataset() const;
};

// A phase laid out for a run: its steps for the run's global batch and where
// it starts. Without [[phase]] tables there is one, from [train] and [schedule].
struct PhasePlan {
  std::string name;
  int64_t first_step = 0;  // steps done before the phase
  int64_t steps = 0;       // ceil(tokens / global tokens per step)
  int64_t micro_batch = 0, seq_len = 0;
  int cp = 1;                 // context-parallel ranks
  int64_t data_replicas = 1;  // ranks reading distinct sequences: world / cp
  double rope_theta = 0;
  double sliding_rope_theta = 0;
  double lr_ratio = 1.0;    // the phase's peak learning rate / optim.lr
  ScheduleConfig schedule;  // over the phase's own steps (step 0 = its first)
  int64_t end_step() const { return first_step + steps; }
};

// Global tokens per optimizer step of a phase:
// micro_batch x seq_len x grad_accum x data_replicas.
int64_t phase_tokens_per_step(const PhaseConfig& phase, int64_t grad_accum, int64_t data_replicas);

// The phases of `config` for a world of `world_size` ranks (each phase reads
// distinct sequences on world / cp of them). Fails (naming the file
// and key) when a phase's cp does not divide the world or its warmup does
// not fit in its steps.
std::vector<PhasePlan> plan_phases(const TrainConfig& config, int64_t world_size);

// The phase that optimizer step `step` (0-based: the step about to run) belongs
// to; steps past the end belong to the last phase.
size_t phase_at_step(const std::vector<PhasePlan>& plans, int64_t step);

// Multiplier of optim.lr at optimizer step `step` (0-based, global) of `plan`.
double phase_lr_multiplier(const PhasePlan& plan, int64_t step);

// One line describing a phase (progress output): steps, batch, RoPE base, lr, data.
std::string describe_phase(const TrainConfig& config, size_t index, const PhasePlan& plan);

// The [[phase]] tables as TOML (train_config_to_toml), every key explicit
// (sliding_rope_theta only for a model with sliding-window blocks).
std::string phases_to_toml(const std::vector<PhaseConfig>& phases, bool sliding);

}  // namespace zaya
