#pragma once
// Where training batches come from: token shards through the deterministic
// sampler (training), or seeded random tokens (benchmarks, no data needed).

#include <cstdint>
#include <memory>
#include <string>

#include "zaya/core/rng.h"
#include "zaya/data/sampler.h"
#include "zaya/data/shard_reader.h"

namespace zaya {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills B x S input ids and next-token targets.
  virtual void next(int32_t* ids_BS, int32_t* targets_BS, int64_t batch, int64_t seq) = 0;
  // Position for checkpoints (shard sources); synthetic sources report their counter as index.
  virtual SamplerState state() const = 0;
  virtual void set_state(const SamplerState& state) = 0;
};

// Shuffled windows of a token shard (one epoch after another).
class ShardBatchSource : public BatchSource {
 public:
  ShardBatchSource(const std::string& prefix, int64_t seq, uint64_t seed, SamplerOrder order);
  void next(int32_t* ids_BS, int32_t* targets_BS, int64_t batch, int64_t seq) override {
    sampler_->next(ids_BS, targets_BS, batch, seq);
  }
  SamplerState state() const override { return sampler_->state(); }
  void set_state(const SamplerState& s) override { sampler_->set_state(s); }
  void reset() { sampler_->reset(); }
  const ShardReader& shard() const { return *shard_; }
  uint64_t windows_per_epoch() const { return sampler_->windows_per_epoch(); }

 private:
  std::unique_ptr<ShardReader> shard_;
  std::unique_ptr<TokenSampler> sampler_;
};

// Uniform random ids in [0, vocab) from a counter-based generator.
class SyntheticBatchSource : public BatchSource {
 public:
  SyntheticBatchSource(int64_t vocab, uint64_t seed) : vocab_(vocab), rng_{seed, 0x5eed, 0} {}
  void next(int32_t* ids_BS, int32_t* targets_BS, int64_t batch, int64_t seq) override;
  SamplerState state() const override { return {rng_.seed, 0, rng_.counter}; }
  void set_state(const SamplerState& s) override { rng_.counter = s.index; }

 private:
  int64_t vocab_;
  Rng rng_;
};

}  // namespace zaya
