#pragma once
// The data of a recipe's phases (recipe.h): every dataset's shards opened
// once for the run, each phase's training mixture as a BatchSource, and its
// validation data.

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "zaya/data/mixture.h"
#include "zaya/train/batch_source.h"
#include "zaya/train/train_config.h"

namespace zaya {

// A phase's training data: the MixtureSampler behind the BatchSource contract
// (every rank draws the same global batch and keeps its slice).
class MixtureBatchSource : public BatchSource {
 public:
  explicit MixtureBatchSource(std::unique_ptr<MixtureSampler> sampler) : sampler_(std::move(sampler)) {}
  void next(int32_t* ids_BS, int32_t* targets_BS, int64_t batch, int64_t seq, int rank = 0, int ranks = 1,
            int32_t* doc_pos_BS = nullptr) override {
    sampler_->next_slice(ids_BS, targets_BS, batch, seq, int64_t(rank) * batch, int64_t(ranks) * batch, doc_pos_BS);
  }
  // {mixture seed, 0, global sequences drawn}; set_state replays the choices
  // up to that position (exact, but costs one hash per sequence drawn).
  SamplerState state() const override { return {sampler_->seed(), 0, sampler_->state().position}; }
  void set_state(const SamplerState& s) override { sampler_->set_state(sampler_->state_at(s.index)); }
  bool loss_masked() const override { return sampler_->loss_masked(); }
  // The full position (checkpoints).
  MixtureState mixture_state() const { return sampler_->state(); }
  void set_mixture_state(const MixtureState& s) { sampler_->set_state(s); }
  const MixtureSampler& sampler() const { return *sampler_; }

 private:
  std::unique_ptr<MixtureSampler> sampler_;
};

class RecipeData {
 public:
  // Opens the train and val shards of every dataset of every phase of
  // `config` (which must have phases). Fails, naming the file and the phase,
  // when a shard is missing or damaged, when two datasets use different
  // vocabularies (naming both directories), or when a shard is too short for
  // its phase's sequence length.
  explicit RecipeData(const TrainConfig& config);

  // The vocabulary every dataset shares.
  uint32_t vocab_size() const { return vocab_size_; }
  // Phase `phase`'s training mixture, sequences of `seq` tokens; the choices
  // and the dataset orders are seeded from (seed, phase).
  std::unique_ptr<MixtureBatchSource> train_source(size_t phase, int64_t seq, uint64_t seed) const;
  // The validation split of the phase's highest-weight dataset, in order (the
  // same windows at every evaluation).
  std::unique_ptr<ShardBatchSource> val_source(size_t phase, int64_t seq) const;
  // The training shard of the phase's highest-weight dataset.
  const ShardReader& main_train_shard(size_t phase) const;

 private:
  std::vector<PhaseConfig> phases_;
  std::map<std::string, std::unique_ptr<ShardReader>> train_;  // by directory
  uint32_t vocab_size_ = 0;
};

nlohmann::json mixture_state_to_json(const MixtureState& state);
MixtureState mixture_state_from_json(const nlohmann::json& j);

}  // namespace zaya
