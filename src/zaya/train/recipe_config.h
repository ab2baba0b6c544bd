#pragma once
// Internal to the training-config parser (train_config.cc): the [[phase]]
// tables of a recipe (recipe.h, docs/context-extension.md).

#include <toml++/toml.h>
#include <cstdint>
#include <string>
#include <vector>

#include "zaya/train/recipe.h"

namespace zaya {

// What a phase inherits when it does not set a key, and the limits its keys must respect.
struct PhaseDefaults {
  int64_t micro_batch = 16;           // train.micro_batch
  double lr = 3e-3;                   // optim.lr
  double rope_theta = 10000;          // model.rope_theta
  double sliding_rope_theta = 10000;  // model.sliding_rope_theta
  bool sliding = false;               // the model has sliding-window blocks (else sliding_rope_theta is refused)
  int64_t max_position = 4096;        // model.max_position_embeddings: the longest seq_len
  int cp = 1;                         // parallel.cp: a phase's default cp
  int ep = 1;                         // parallel.ep: a phase may change cp only with ep = 1
};

// The [[phase]] tables of `root` (empty when there are none), validated.
std::vector<PhaseConfig> parse_phases(const toml::table& root, const std::string& source,
                                      const PhaseDefaults& defaults);

// Applies "phase.N.key=value" (N counts from 1) to the N-th [[phase]] table of
// `root`, as `zaya train --set phase.2.tokens=1000000` does; a mistake in it
// is a UsageError naming the flag.
void apply_phase_override(toml::table& root, const std::string& assignment);

}  // namespace zaya
