#pragma once
// Which prompt prefixes the serving loop holds decode-state snapshots of
// (serving_loop.h): each snapshot is the state of a sequence after the first
// L tokens of some prompt, L a multiple of the block size, kept in an engine
// slot of its own. A new prompt starts from the longest snapshot that is a
// prefix of it (and leaves at least one of its tokens to run, for the logits
// of the first generated token), so a repeated system prompt, the `n`
// choices of one request or the rounds of an aggregation loop are not
// prefilled again. The snapshots live in a fixed number of slots (the memory
// budget over the state of one slot); a new one replaces the least recently
// used. A snapshot is copied into the sequence's slot when it is used, so
// nothing is shared while a sequence runs and no reference counts are needed.
//
// Only the bookkeeping: the loop copies the engine state.

#include <cstdint>
#include <vector>

namespace zaya {

class PrefixCache {
 public:
  // `slots`: the engine slots reserved for snapshots; `block`: tokens per block (>= 1).
  PrefixCache(std::vector<int32_t> slots, int64_t block);

  int64_t block() const { return block_; }
  int64_t capacity() const { return int64_t(slots_.size()); }
  int64_t size() const { return int64_t(entries_.size()); }

  struct Hit {
    int32_t slot = -1;   // the engine slot holding the snapshot; -1: none
    int64_t length = 0;  // tokens it covers
  };
  // The longest snapshot that is a prefix of `prompt` and shorter than it (marked as just used).
  Hit find(const std::vector<int32_t>& prompt);
  // The slot to copy a snapshot of prompt[0, length) into, or -1 when it is
  // held already, length is not a positive multiple of the block, or there
  // are no slots; evicts the least recently used snapshot when full.
  int32_t insert(const std::vector<int32_t>& prompt, int64_t length);

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    int32_t slot = -1;
    uint64_t used = 0;
  };
  std::vector<int32_t> slots_;
  int64_t block_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace zaya
