#pragma once
// A deterministic weighted mixture of token shards (a recipe phase's data,
// docs/context-extension.md, "Recipes and phases").
//
// Global sequence i of the mixture (counted from 0 over all ranks) comes from
// dataset
//
//   k(i) = the first k with u_i < (w_0 + ... + w_k) / (w_0 + ... + w_{K-1}),
//   u_i  = 53-bit uniform in [0, 1) from Philox(key = seed, counter = (stream, i)),
//
// and is that dataset's next window from its own TokenSampler (shuffled,
// epoch after epoch, seeded from (seed, stream, k)). The choice depends only on
// (seed, stream, i), so every rank of a data-parallel run makes the same draws
// and keeps its slice, and the whole position is MixtureState: the mixture
// position plus each dataset's sampler state.

#include <cstdint>
#include <vector>

#include "zaya/data/sampler.h"
#include "zaya/data/shard_reader.h"

namespace zaya {

struct MixtureState {
  uint64_t position = 0;               // global sequences drawn
  std::vector<SamplerState> datasets;  // one per dataset, in order
};

class MixtureSampler {
 public:
  // `shards` must outlive the sampler; weights > 0 (normalised here), one per
  // shard. `stream` separates mixtures of one seed (a recipe uses the phase index).
  MixtureSampler(const std::vector<const ShardReader*>& shards, const std::vector<double>& weights, int64_t seq,
                 uint64_t seed, uint64_t stream);

  // The dataset global sequence i is drawn from.
  size_t dataset_of(uint64_t i) const;

  // Draws `total` sequences (the global batch of every rank) and copies only
  // sequences first .. first + batch - 1 (TokenSampler::next_slice's contract,
  // doc_pos_BS too: each token's position in its document).
  void next_slice(int32_t* input_BS, int32_t* target_BS, int64_t batch, int64_t seq, int64_t first, int64_t total,
                  int32_t* doc_pos_BS = nullptr);

  MixtureState state() const;
  // Restores a saved state; fails when it has another number of datasets or a
  // sampler position beyond its shard (a state of another mixture).
  void set_state(const MixtureState& state);
  // The state after `position` sequences drawn from the start: replays the
  // choices (position hash evaluations, no data is read).
  MixtureState state_at(uint64_t position) const;

  size_t datasets() const { return samplers_.size(); }
  // Some dataset has a loss mask (its sequences have targets of -1).
  bool loss_masked() const;
  int64_t seq() const { return seq_; }
  uint64_t seed() const { return seed_; }

 private:
  std::vector<TokenSampler> samplers_;
  std::vector<double> cumulative_;  // normalised cumulative weights, the last exactly 1
  int64_t seq_;
  uint64_t seed_, stream_;
  uint64_t position_ = 0;
};

}  // namespace zaya
