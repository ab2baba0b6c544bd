#pragma once
// Training and validation windows over a token shard (docs/formats-data.md,
// "Sampler").
//
// The shard's tokens are one stream (documents run together, each already
// framed by its bos/eos). Window w is the seq + 1 tokens starting at w * seq:
// its first seq tokens are the input, its last seq tokens the next-token
// targets. Windows start at multiples of seq, so consecutive windows share one
// token and every token is a target exactly once per epoch (except the first).
// There are floor((num_tokens - 1) / seq) windows per epoch.
//
// A shard with a loss mask (loss_mask.h: fine-tuning data) gives the target
// -1 ("no loss", ops/cross_entropy.h) wherever the mask does not select the
// target token; the inputs are unchanged. Without a mask every target counts.
//
// kShuffled draws every window once per epoch in the order of a seeded
// pseudo-random permutation (FeistelPermutation, stream = epoch), a new one
// each epoch. kSequential draws windows 0, 1, 2, ... and wraps to 0 (with
// epoch + 1), so validation evaluates the same windows every time after reset().
// A batch may straddle an epoch boundary: it simply continues into the next
// epoch. The whole position is SamplerState; restoring it and continuing
// yields exactly the batches an uninterrupted run would have.
//
// Document boundaries (for document masking): document_starts(w) lists the
// input positions p in [0, seq) of window w where a document begins, 0
// always first (the window's start is a sequence start). Input position p
// belongs to the document of the last start <= p; its target (token p + 1 of
// the window) is that document's next token unless p + 1 is itself a start,
// in which case the target is the next document's first token (its bos).
// document_positions(w) gives the same per token: each input position's
// offset from its document's start (0 at every start), what the model's
// document masking reads (model/batch.h).

#include <cstdint>
#include <vector>

#include "zaya/data/shard_reader.h"

namespace zaya {

// Saved in checkpoints. index = windows already drawn in `epoch`.
struct SamplerState {
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t index = 0;
};

enum class SamplerOrder { kShuffled, kSequential };

class TokenSampler {
 public:
  // `shard` must outlive the sampler. Fails if the shard has fewer than
  // seq + 1 tokens (not one window).
  TokenSampler(const ShardReader& shard, int64_t seq, SamplerOrder order, uint64_t seed = 0);

  // Fills input_BS and target_BS (batch x seq, row-major) with the next
  // `batch` windows; `seq` must equal the sampler's sequence length.
  void next(int32_t* input_BS, int32_t* target_BS, int64_t batch, int64_t seq);
  // Draws `total` windows (the whole global batch of every rank) but copies
  // only windows first .. first + batch - 1: data parallelism, where every rank
  // keeps the same sampler state and takes its own slice.
  // With doc_pos_BS, row b receives document_positions() of the slice's window b.
  void next_slice(int32_t* input_BS, int32_t* target_BS, int64_t batch, int64_t seq, int64_t first, int64_t total,
                  int32_t* doc_pos_BS = nullptr);

  // Copies window w (< windows_per_epoch()) into input_S and target_S.
  void window(uint64_t w, int32_t* input_S, int32_t* target_S) const;
  // The input positions of window w where documents begin (see above), ascending, starting with 0.
  void document_starts(uint64_t w, std::vector<int32_t>& starts) const;
  // Input position p of window w's offset from its document's start, for p in [0, seq) (allocates nothing).
  void document_positions(uint64_t w, int32_t* doc_pos_S) const;

  // The window drawn at position `index` of `epoch` (< windows_per_epoch()).
  uint64_t window_at(uint64_t epoch, uint64_t index) const;

  uint64_t windows_per_epoch() const { return num_windows_; }
  // The shard has a loss mask: some targets are -1.
  bool loss_masked() const { return shard_->has_loss_mask(); }
  int64_t seq() const { return seq_; }
  SamplerOrder order() const { return order_; }

  SamplerState state() const { return state_; }
  // Resumes from a saved state; fails if state.index exceeds the windows per
  // epoch (a state saved for another shard or sequence length).
  void set_state(const SamplerState& state);
  // Back to epoch 0, index 0 (the seed is kept).
  void reset() { state_ = SamplerState{state_.seed, 0, 0}; }

 private:
  const ShardReader* shard_;
  int64_t seq_;
  SamplerOrder order_;
  uint64_t num_windows_ = 0;
  SamplerState state_;
};

}  // namespace zaya
