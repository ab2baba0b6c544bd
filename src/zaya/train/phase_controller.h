#pragma once
// The phase controller: the recipe's phases (recipe.h) laid out for this
// world, the phase the run is in, and the data each phase reads (token shards
// or a deterministic mixture of them, validation windows, or synthetic tokens
// for benchmarks). A config without [[phase]] tables is one phase.
//
// Entering a phase changes the job's config (train.micro_batch,
// train.seq_len, model.rope_theta) and switches the data; the job rebuilds
// what depends on them (the numerics' workspace, the cp groups). The data
// positions travel in checkpoints.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zaya/train/batch_source.h"
#include "zaya/train/recipe.h"
#include "zaya/train/recipe_data.h"
#include "zaya/train/train_config.h"

namespace zaya {

class PhaseController {
 public:
  // Plans the phases for `world_size` ranks and opens the data. With phases,
  // sets config.run (steps, first phase's batch shape) and model.rope_theta;
  // with real data, takes the model's vocabulary from the shards unless the
  // config set it (errors name the config and the shard directories).
  PhaseController(TrainConfig& config, int64_t world_size, bool synthetic_data);

  size_t phase() const { return phase_; }
  const PhasePlan& plan() const { return plans_[phase_]; }
  const std::vector<PhasePlan>& plans() const { return plans_; }
  bool has_phases() const { return has_phases_; }
  // The phase step `step` (0-based, about to run) belongs to, when the run has
  // just crossed into a later one; otherwise nullopt.
  std::optional<size_t> boundary_at(int64_t step) const;
  // Multiplier of optim.lr at step `step` (0-based) of the current phase.
  double lr_multiplier(int64_t step) const { return phase_lr_multiplier(plans_[phase_], step); }

  BatchSource& train_data() { return *train_data_; }
  // Null for synthetic data (no validation).
  ShardBatchSource* val_data() { return val_data_.get(); }
  // Of the training shard, nats/token (0 for synthetic data).
  double unigram_entropy() const { return unigram_entropy_; }

  // Moves to `phase` (no-op when already there): config.run's batch shape and
  // model.rope_theta, and the phase's training mixture and validation data.
  // Returns whether the phase changed.
  bool enter(size_t phase, TrainConfig& config);

  // A rollback from step `bad_phase`'s data position `data` to a checkpoint:
  // continue after the offending window. Within the phase the position moves
  // on now; a checkpoint of an earlier phase replays that phase, and the bad
  // phase starts after its bad batches when the run enters it again
  // (apply_data_after_rollback at the boundary).
  void skip_after_rollback(size_t bad_phase, const SamplerState& data);
  void apply_data_after_rollback();

  // Checkpoint state: "data" (the sampler position) and, with phases,
  // "recipe" (phase, name, start, every dataset's position).
  void save_state(nlohmann::json& state) const;
  // The phase a checkpoint's state is in (checked against this run's plan;
  // errors name `dir`).
  size_t checkpoint_phase(const nlohmann::json& state, int64_t step, const std::string& dir) const;
  // The data position of a checkpoint (after enter(checkpoint_phase(...))).
  void load_data_state(const nlohmann::json& state);

 private:
  bool has_phases_ = false;
  std::vector<PhasePlan> plans_;
  size_t phase_ = 0;
  uint64_t seed_ = 0;
  std::unique_ptr<RecipeData> recipe_data_;
  std::unique_ptr<BatchSource> train_data_;
  std::unique_ptr<ShardBatchSource> val_data_;
  MixtureBatchSource* mixture_ = nullptr;  // train_data_ as a mixture (null without phases or with synthetic data)
  std::optional<std::pair<size_t, SamplerState>> data_after_rollback_;
  double unigram_entropy_ = 0;
};

}  // namespace zaya
