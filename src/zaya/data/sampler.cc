#include "zaya/data/sampler.h"

#include <algorithm>
#include <cstring>

#include "zaya/core/error.h"
#include "zaya/data/permutation.h"

namespace zaya {

TokenSampler::TokenSampler(const ShardReader& shard, int64_t seq, SamplerOrder order, uint64_t seed)
    : shard_(&shard), seq_(seq), order_(order), state_{seed, 0, 0} {
  ZAYA_CHECK(seq >= 1, "{}: sequence length {} must be at least 1", shard.idx_path(), seq);
  const uint64_t tokens = shard.num_tokens();
  const uint64_t useq = static_cast<uint64_t>(seq);
  ZAYA_CHECK(tokens > useq, "{}: shard has {} tokens, too few for one window of sequence length {} (needs {} tokens)",
             shard.idx_path(), tokens, seq, useq + 1);
  num_windows_ = (tokens - 1) / useq;
}

uint64_t TokenSampler::window_at(uint64_t epoch, uint64_t index) const {
  ZAYA_ASSERT(index < num_windows_);
  if (order_ == SamplerOrder::kSequential) return index;
  // Constructing the permutation is a handful of integer operations, so it
  // is rebuilt per call rather than cached per epoch.
  return FeistelPermutation(num_windows_, state_.seed, epoch)(index);
}

void TokenSampler::window(uint64_t w, int32_t* input_S, int32_t* target_S) const {
  ZAYA_CHECK(w < num_windows_, "{}: window {} requested, but there are {} windows of length {}", shard_->idx_path(), w,
             num_windows_, seq_);
  const uint64_t start = w * static_cast<uint64_t>(seq_);
  const uint32_t vocab = shard_->vocab_size();
  // input_S receives the seq + 1 tokens (the last in target_S's end), then
  // the targets are the same tokens shifted by one.
  uint32_t* t = reinterpret_cast<uint32_t*>(input_S);
  uint32_t last = 0;
  if (shard_->token_bytes() == 4) {
    std::memcpy(t, shard_->data() + 4 * start, 4 * static_cast<size_t>(seq_));
    std::memcpy(&last, shard_->data() + 4 * (start + static_cast<uint64_t>(seq_)), 4);
  } else {
    shard_->read_tokens(start, static_cast<uint64_t>(seq_), t);
    last = shard_->token(start + static_cast<uint64_t>(seq_));
  }
  // A corrupt id would index past the embedding table; the check costs one
  // compare per token and turns that into an error naming the position.
  for (int64_t i = 0; i < seq_; ++i)
    ZAYA_CHECK(t[i] < vocab, "{}: token {} is {}, not below the vocab size {}", shard_->bin_path(), start + i, t[i],
               vocab);
  ZAYA_CHECK(last < vocab, "{}: token {} is {}, not below the vocab size {}", shard_->bin_path(),
             start + static_cast<uint64_t>(seq_), last, vocab);
  for (int64_t i = 0; i + 1 < seq_; ++i) target_S[i] = static_cast<int32_t>(t[i + 1]);
  target_S[seq_ - 1] = static_cast<int32_t>(last);
  // A loss mask (fine-tuning data): targets that do not count become -1, which
  // the cross-entropy ignores; target i is token start + i + 1.
  if (shard_->has_loss_mask())
    for (int64_t i = 0; i < seq_; ++i)
      if (!shard_->loss_selected(start + static_cast<uint64_t>(i) + 1)) target_S[i] = -1;
}

void TokenSampler::document_starts(uint64_t w, std::vector<int32_t>& starts) const {
  ZAYA_CHECK(w < num_windows_, "{}: window {} requested, but there are {} windows of length {}", shard_->idx_path(), w,
             num_windows_, seq_);
  const uint64_t start = w * static_cast<uint64_t>(seq_), end = start + static_cast<uint64_t>(seq_);
  const std::vector<uint64_t>& o = shard_->offsets();
  starts.assign(1, 0);
  // Documents whose first token lies in (start, end); empty documents share
  // their offset with the next one and count once.
  auto it = std::upper_bound(o.begin(), o.end(), start);
  for (; it != o.end() && *it < end; ++it)
    if (static_cast<int32_t>(*it - start) != starts.back()) starts.push_back(static_cast<int32_t>(*it - start));
}

void TokenSampler::document_positions(uint64_t w, int32_t* doc_pos_S) const {
  ZAYA_CHECK(w < num_windows_, "{}: window {} requested, but there are {} windows of length {}", shard_->idx_path(), w,
             num_windows_, seq_);
  const uint64_t start = w * static_cast<uint64_t>(seq_);
  const std::vector<uint64_t>& o = shard_->offsets();
  auto it = std::upper_bound(o.begin(), o.end(), start);  // the first document start after the window's
  int64_t cur = 0;                                        // input position of the current document's start
  for (int64_t p = 0; p < seq_; ++p) {
    if (it != o.end() && *it == start + static_cast<uint64_t>(p)) {
      cur = p;
      while (it != o.end() && *it == start + static_cast<uint64_t>(p)) ++it;  // empty documents share the offset
    }
    doc_pos_S[p] = static_cast<int32_t>(p - cur);
  }
}

void TokenSampler::next(int32_t* input_BS, int32_t* target_BS, int64_t batch, int64_t seq) {
  next_slice(input_BS, target_BS, batch, seq, 0, batch);
}

void TokenSampler::next_slice(int32_t* input_BS, int32_t* target_BS, int64_t batch, int64_t seq, int64_t first,
                              int64_t total, int32_t* doc_pos_BS) {
  ZAYA_CHECK(seq == seq_, "{}: next() asked for sequence length {}, but the sampler was built for {}",
             shard_->idx_path(), seq, seq_);
  ZAYA_CHECK(batch >= 0 && first >= 0 && first + batch <= total, "{}: slice {}..{} of a draw of {} windows is invalid",
             shard_->idx_path(), first, first + batch, total);
  for (int64_t i = 0; i < total; ++i) {
    if (state_.index == num_windows_) {
      ++state_.epoch;
      state_.index = 0;
    }
    const uint64_t index = state_.index++;
    if (i < first || i >= first + batch) continue;  // another rank's window: only the position advances
    const uint64_t w = window_at(state_.epoch, index);
    window(w, input_BS + (i - first) * seq_, target_BS + (i - first) * seq_);
    if (doc_pos_BS != nullptr) document_positions(w, doc_pos_BS + (i - first) * seq_);
  }
}

void TokenSampler::set_state(const SamplerState& state) {
  ZAYA_CHECK(state.index <= num_windows_,
             "{}: sampler state index {} exceeds the {} windows per epoch of this shard at sequence length {} "
             "(was the state saved for another shard or sequence length?)",
             shard_->idx_path(), state.index, num_windows_, seq_);
  state_ = state;
}

}  // namespace zaya
