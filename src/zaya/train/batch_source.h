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
  // Fills B x S input ids and next-token targets: sequences
  // rank * batch .. rank * batch + batch - 1 of a global draw of ranks * batch
  // sequences (every rank draws the same global batch and keeps its slice).
  // doc_pos_BS, when given, receives each token's position inside its
  // document (document masking, model/batch.h).
  virtual void next(int32_t* ids_BS, int32_t* targets_BS, int64_t batch, int64_t seq, int rank = 0, int ranks = 1,
                    int32_t* doc_pos_BS = nullptr) = 0;
  // Position for checkpoints (shard sources); synthetic sources report their counter as index.
  virtual SamplerState state() const = 0;
  virtual void set_state(const SamplerState& state) = 0;
  // Some targets may be -1 (a loss mask: fine-tuning data), so the loss is a
  // mean over fewer tokens than the batch has (step_numerics.h counts them).
  virtual bool loss_masked() const { return false; }
};

// Shuffled windows of a token shard (one epoch after another).
class ShardBatchSource : public BatchSource {
 public:
  // `read` is passed to ShardReader::open (a Megatron dataset needs its vocab_size).
  ShardBatchSource(const std::string& prefix, int64_t seq, uint64_t seed, SamplerOrder order,
                   const ShardReadOptions& read = {});
  void next(int32_t* ids_BS, int32_t* targets_BS, int64_t batch, int64_t seq, int rank = 0, int ranks = 1,
            int32_t* doc_pos_BS = nullptr) override {
    sampler_->next_slice(ids_BS, targets_BS, batch, seq, int64_t(rank) * batch, int64_t(ranks) * batch, doc_pos_BS);
  }
  SamplerState state() const override { return sampler_->state(); }
  void set_state(const SamplerState& s) override { sampler_->set_state(s); }
  bool loss_masked() const override { return sampler_->loss_masked(); }
  void reset() { sampler_->reset(); }
  const ShardReader& shard() const { return *shard_; }
  uint64_t windows_per_epoch() const { return sampler_->windows_per_epoch(); }

 private:
  std::unique_ptr<ShardReader> shard_;
  std::unique_ptr<TokenSampler> sampler_;
};

// Uniform random ids in [0, vocab): sequence i of the run comes from its own
// Philox stream, so any rank can produce any slice of a global batch. Each
// sequence is one document.
class SyntheticBatchSource : public BatchSource {
 public:
  SyntheticBatchSource(int64_t vocab, uint64_t seed) : vocab_(vocab), seed_(seed) {}
  void next(int32_t* ids_BS, int32_t* targets_BS, int64_t batch, int64_t seq, int rank = 0, int ranks = 1,
            int32_t* doc_pos_BS = nullptr) override;
  SamplerState state() const override { return {seed_, 0, sequences_}; }
  void set_state(const SamplerState& s) override { sequences_ = s.index; }

 private:
  int64_t vocab_;
  uint64_t seed_;
  uint64_t sequences_ = 0;  // sequences drawn so far (all ranks)
};

}  // namespace zaya
