#pragma once
// The small per-sequence decode state beside the KV pages (spec §3, "Decode /
// cache state"; the pages are KvPagePool's, kv_page_pool.h), apart from the
// forward that reads and updates it (engine.h), as the page pool is:
//   length                        tokens the slot holds
//   conv    [H, C] per block      the raw (pre-conv) q|k vectors of the last H = (cca_time0 - 1) +
//                                 (cca_time1 - 1) tokens (ZAYA1: 2), zero at start
//   v_prev  [K/2] per block       val_proj2 applied to the last token's normed input
// The spec keeps prev_hs (the last normed input, [D]) and applies val_proj2 to
// it at the next step; we keep its product instead, which the fused projection
// of the last step already computed: the same numbers, 16x less state and no
// second read of val_proj2.

#include <cstdint>
#include <vector>

#include "zaya/core/arena.h"
#include "zaya/infer/kv_page_pool.h"
#include "zaya/model/config.h"

namespace zaya {

// A sequence after `length` tokens (a multiple of the page): references to its
// pages and a copy of its small state (prefix snapshots, prefix_cache.h).
struct SequenceSnapshot {
  int64_t length = 0;
  KvPagePool::Tables pages;  // per kind: the page table (-1: released, sliding)
  std::vector<float> small;  // DecodeState::save: conv state and delayed value of every block
};

class DecodeState {
 public:
  DecodeState(const ZayaConfig& config, int64_t slots);
  DecodeState(const DecodeState&) = delete;
  DecodeState& operator=(const DecodeState&) = delete;

  int64_t slots() const { return int64_t(lengths_.size()); }
  int64_t length(int64_t slot) const { return lengths_[size_t(slot)]; }
  void set_length(int64_t slot, int64_t length) { lengths_[size_t(slot)] = length; }
  // Rows H of a block's conv state, and its row width C.
  int64_t conv_rows() const { return conv_rows_; }
  float* conv(int64_t block, int64_t slot) { return conv_.get() + (block * slots() + slot) * conv_rows_ * channels_; }
  float* vprev(int64_t block, int64_t slot) { return vprev_.get() + (block * slots() + slot) * half_; }
  // Floats (and bytes) of one slot's small state over every block.
  int64_t floats_per_slot() const { return blocks_ * (conv_rows_ * channels_ + half_); }
  int64_t bytes_per_slot() const { return int64_t(sizeof(float)) * floats_per_slot(); }

  // The slot back to zero (no tokens).
  void reset(int64_t slot);
  // dst becomes a copy of src.
  void copy(int64_t src, int64_t dst);
  // The slot's small state (floats_per_slot() floats), and the slot from one, holding `length` tokens.
  std::vector<float> save(int64_t slot) const;
  void restore(const std::vector<float>& small, int64_t length, int64_t slot);

 private:
  const float* conv(int64_t block, int64_t slot) const { return const_cast<DecodeState*>(this)->conv(block, slot); }
  const float* vprev(int64_t block, int64_t slot) const { return const_cast<DecodeState*>(this)->vprev(block, slot); }

  int64_t blocks_, conv_rows_, channels_, half_;
  AlignedPtr<float> conv_, vprev_;
  std::vector<int64_t> lengths_;
};

}  // namespace zaya
