#pragma once
// Which prompt prefixes the serving loop holds decode-state snapshots of
// (serving_loop.h), and the snapshots themselves: each is the state of a
// sequence after the first L tokens of some prompt, L a multiple of the
// engine's page (engine.h), as references to the sequence's KV pages plus a
// copy of its small per-sequence state (convolution state, delayed value). A
// new prompt starts from the longest snapshot that is a prefix of it (and
// leaves at least one of its tokens to run, for the logits of the first
// generated token): its slot references the snapshot's pages instead of
// copying them, so a repeated system prompt, the `n` choices of one request or
// the rounds of an aggregation loop are not prefilled again and cost their
// pages once. Snapshots of one prompt at several lengths share their first
// pages too.
//
// The memory budget is the engine's page pool: when a step needs pages that
// are not free, make_room() evicts snapshots, least recently used first,
// those whose pages no running sequence references before those still in use.
// Evicting a snapshot only drops its references: a page goes back to the pool
// when nothing references it, so a page a sequence reads is never freed.

#include <cstdint>
#include <vector>

#include "zaya/infer/engine.h"

namespace zaya {

class PrefixCache {
 public:
  explicit PrefixCache(InferenceEngine& engine);
  ~PrefixCache();  // releases every snapshot
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  int64_t block() const { return engine_.page_tokens(); }
  int64_t size() const { return int64_t(entries_.size()); }
  int64_t evictions() const { return evictions_; }
  // Pages of each kind the snapshots reference (some shared with running sequences).
  std::vector<int64_t> pages() const;

  // Starts `slot` from the longest snapshot that is a prefix of `prompt` and
  // shorter than it (marked as just used), taken under the same LoRA adapter
  // (`adapter`: LoraAdapters::serial(), 0 for none: a state computed with one
  // adapter is never another's); returns the tokens it covers (0: none, the
  // slot is left as it was).
  int64_t start(const std::vector<int32_t>& prompt, int32_t slot, uint64_t adapter = 0);
  // Snapshots `slot`, which holds prompt[0, engine.length(slot)) computed under
  // `adapter`, unless that prefix is held already or its length is not a
  // positive multiple of the page. Returns whether it took one.
  bool insert(const std::vector<int32_t>& prompt, int32_t slot, uint64_t adapter = 0);
  // Evicts snapshots until `need[k]` pages of each kind are free, or none is
  // left to evict; returns whether the pages are free.
  bool make_room(const std::vector<int64_t>& need);
  // Evicts the least recently used snapshot (unused ones first); false when there is none.
  bool evict_one();

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    uint64_t adapter = 0;  // the LoRA adapter it was computed under (0: none)
    InferenceEngine::Snapshot state;
    uint64_t used = 0;
  };
  bool in_use(const Entry& e) const;  // a running sequence references one of its pages

  InferenceEngine& engine_;
  std::vector<Entry> entries_;
  std::vector<std::vector<int32_t>> refs_;  // per kind and page: the snapshots' references
  uint64_t clock_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace zaya
