#pragma once
// The paged KV cache's memory, apart from the forward that fills and reads it
// (docs/developer-guide.md, "Inference components"; /work/shared/ARCHITECTURE.md:
// llama.cpp keeps its KV cache apart from the graph for the same reason: the
// page bookkeeping is tested alone, and every decode loop shares it).
//
// One pool per attention kind (full, or sliding of one window), numbered in
// the order blocks first use them. A page holds `page_tokens` positions of
// every layer of its kind: [layers][pages][kv_heads][page_tokens][head_dim]
// elements of `elem_bytes` each, for K and for V. A slot's page table maps
// page index i (positions i*page_tokens ..) to a pool page, -1 where a
// sliding kind released it.
//
// Pages are reference-counted: copy() and snapshots (share(), adopt()) take
// references to full pages instead of copying them. A page that more than one
// holder references is never written: a sequence writes only positions >= its
// length, which lie in its last, partial page or in new pages, and copy()
// gives the destination its own copy of the partial page (copy-on-write).
// A sliding kind of window W keeps only the pages holding a slot's last W - 1
// positions (release_out_of_window); the rest go back to the pool.
// The memory is allocated untouched, so a large pool costs nothing until used.

#include <cstdint>
#include <vector>

#include "zaya/core/arena.h"

namespace zaya {

struct KvPoolShape {
  std::vector<int64_t> block_windows;  // per block: its attention window, 0 for full attention
  int64_t kv_heads = 1;
  int64_t head_dim = 1;
  int64_t page_tokens = 16;
  int64_t elem_bytes = 4;   // 4: f32, 2: bf16
  int64_t slots = 1;        // sequences with a page table
  int64_t max_context = 1;  // tokens per slot
  int64_t pool_bytes = 0;   // bytes of pages; 0: every slot at max_context
};

class KvPagePool {
 public:
  // Page tables of one sequence, per kind (a snapshot's references).
  using Tables = std::vector<std::vector<int32_t>>;

  explicit KvPagePool(const KvPoolShape& shape);
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  int64_t page_tokens() const { return page_tokens_; }
  int64_t kinds() const { return int64_t(kinds_.size()); }
  int64_t kind_of(int64_t block) const { return kind_of_[block]; }
  int64_t window(int64_t kind) const { return kinds_[kind].window; }
  int64_t pages(int64_t kind) const { return kinds_[kind].pages; }
  int64_t free_pages(int64_t kind) const { return int64_t(kinds_[kind].free.size()); }
  int64_t refs(int64_t kind, int32_t page) const { return kinds_[kind].refs[page]; }
  int64_t elem_bytes() const { return elem_bytes_; }
  // Bytes of one page of a kind (K and V of all its layers).
  int64_t page_bytes(int64_t kind) const { return elem_bytes_ * 2 * kinds_[kind].layers * page_elems_; }
  // The most pages of each kind one sequence holds at once while it grows to `length` tokens (any chunking).
  std::vector<int64_t> max_pages(int64_t length) const;
  // Positions [lo, hi) that appending `count` tokens after `past` writes to a kind's pages
  // (a sliding kind of window W: only the last W - 1; every one with `all`, a speculative chunk
  // that truncate() may cut back, whose kept positions' window must be in the pages).
  void written(int64_t kind, int64_t past, int64_t count, int64_t& lo, int64_t& hi, bool all = false) const;

  // A page's K or V of one block.
  char* kpage(int64_t block, int32_t page) { return base(kinds_[kind_of_[block]].k, block, page); }
  char* vpage(int64_t block, int32_t page) { return base(kinds_[kind_of_[block]].v, block, page); }

  const std::vector<int32_t>& table(int32_t slot, int64_t kind) const { return tables_[slot][kind]; }
  // Pages of each kind a slot references now.
  std::vector<int64_t> held(int32_t slot) const;
  // Adds to need[kind] the new pages appending `count` tokens to a slot of `past` tokens takes.
  void add_needed(int32_t slot, int64_t past, int64_t count, std::vector<int64_t>& need, bool all = false) const;
  // Maps fresh pages for the positions that append writes; the caller checked add_needed against free_pages.
  void map_written(int32_t slot, int64_t past, int64_t count, bool all = false);
  // The slot keeps positions < length only: the pages wholly at or past it are dropped (speculative
  // verification's rollback; the pages a step took for them were the slot's own, never shared).
  void truncate(int32_t slot, int64_t length);
  // Releases the sliding pages of a slot of `length` tokens that no later query sees.
  void release_out_of_window(int32_t slot, int64_t length);
  // Drops every reference the slot holds.
  void clear(int32_t slot);
  // dst (cleared first) references src's pages, a sequence of `length` tokens;
  // it gets its own copy of the partial last page. Fails when no page is free for it.
  void copy(int32_t src, int32_t dst, int64_t length);
  // The slot's tables with one more reference to each page.
  Tables share(int32_t slot);
  // The slot (cleared first) references the tables' pages.
  void adopt(const Tables& tables, int32_t slot);
  // Drops the tables' references and empties them.
  void release(Tables& tables);

 private:
  struct Kind {
    int64_t window = 0;  // 0: full attention
    int64_t layers = 0;  // blocks of this kind
    int64_t pages = 0;
    AlignedPtr<char> k, v;
    std::vector<int32_t> refs;
    std::vector<int32_t> free;  // pages with no reference, taken from the back
  };
  char* base(const AlignedPtr<char>& data, int64_t block, int32_t page) const {
    return data.get() + (layer_in_kind_[block] * kinds_[kind_of_[block]].pages + page) * page_elems_ * elem_bytes_;
  }
  int32_t take_page(int64_t kind);
  void drop_page(int64_t kind, int32_t page);

  int64_t page_tokens_, elem_bytes_, kv_heads_, head_dim_;
  int64_t page_elems_ = 0;  // kv_heads * page_tokens * head_dim
  std::vector<Kind> kinds_;
  std::vector<int64_t> kind_of_, layer_in_kind_;  // per block
  std::vector<Tables> tables_;                    // [slot][kind]
};

}  // namespace zaya
