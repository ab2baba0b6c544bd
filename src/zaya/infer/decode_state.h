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

  // Speculative verification (spec_verify.h): a chunk of `count` tokens whose
  // tail may be rejected. The slot keeps the state it started from and what
  // each position left (its raw q|k row and delayed-value product: (C + K/2)
  // floats per position and block), so that keep_draft() restores the state
  // after any prefix of the chunk exactly, as if the rest had never been fed.
  // draft_begin before the step; draft_record per block before the step
  // updates that block's state (raw_TP: the chunk's fused projection rows,
  // row stride ld; the delayed product at column `vprev_col`); keep_draft
  // after it. Any other change of the slot (reset, restore) ends the draft.
  void draft_begin(int64_t slot, int64_t count);
  void draft_record(int64_t block, int64_t slot, const float* raw_TP, int64_t ld, int64_t vprev_col);
  bool drafting(int64_t slot) const { return drafts_[size_t(slot)].count > 0; }
  int64_t draft_past(int64_t slot) const { return drafts_[size_t(slot)].past; }
  // The slot holds its first `length` tokens (draft_past .. draft_past + count), the draft ends.
  void keep_draft(int64_t slot, int64_t length);

 private:
  const float* conv(int64_t block, int64_t slot) const { return const_cast<DecodeState*>(this)->conv(block, slot); }
  const float* vprev(int64_t block, int64_t slot) const { return const_cast<DecodeState*>(this)->vprev(block, slot); }

  struct Draft {
    int64_t past = 0, count = 0;  // count 0: no draft
    std::vector<float> log;       // per block: conv state [H, C], v_prev [K/2], rows [count, C], products [count, K/2]
  };
  int64_t draft_floats(int64_t count) const { return conv_rows_ * channels_ + half_ + count * (channels_ + half_); }

  int64_t blocks_, conv_rows_, channels_, half_;
  AlignedPtr<float> conv_, vprev_;
  std::vector<int64_t> lengths_;
  std::vector<Draft> drafts_;
};

}  // namespace zaya
