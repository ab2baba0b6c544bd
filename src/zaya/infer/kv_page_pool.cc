#include "zaya/infer/kv_page_pool.h"

#include <algorithm>
#include <cstring>

#include "zaya/core/error.h"

namespace zaya {

KvPagePool::KvPagePool(const KvPoolShape& s)
    : page_tokens_(s.page_tokens), elem_bytes_(s.elem_bytes), kv_heads_(s.kv_heads), head_dim_(s.head_dim) {
  ZAYA_CHECK(s.page_tokens >= 1 && s.slots >= 1 && s.max_context >= 1 && s.pool_bytes >= 0 &&
                 (s.elem_bytes == 2 || s.elem_bytes == 4),
             "invalid KV pool shape ({} tokens per page, {} slots, context {}, {} bytes, {}-byte elements)",
             s.page_tokens, s.slots, s.max_context, s.pool_bytes, s.elem_bytes);
  // One kind of pages per attention pattern, in the order blocks first use it.
  const int64_t B = int64_t(s.block_windows.size());
  kind_of_.assign(B, -1);
  layer_in_kind_.assign(B, 0);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t W = s.block_windows[b];
    int64_t k = 0;
    while (k < int64_t(kinds_.size()) && kinds_[k].window != W) ++k;
    if (k == int64_t(kinds_.size())) {
      kinds_.emplace_back();
      kinds_.back().window = W;
    }
    kind_of_[b] = k;
    layer_in_kind_[b] = kinds_[k].layers++;
  }
  page_elems_ = s.kv_heads * s.page_tokens * s.head_dim;
  // Every slot at full context, or pool_bytes shared among the kinds in the
  // proportion one slot at full context needs them.
  const std::vector<int64_t> per_slot = max_pages(s.max_context);
  int64_t slot_bytes = 0;
  for (size_t k = 0; k < kinds_.size(); ++k) slot_bytes += per_slot[k] * page_bytes(int64_t(k));
  for (size_t k = 0; k < kinds_.size(); ++k) {
    Kind& kd = kinds_[k];
    kd.pages = s.pool_bytes == 0 || slot_bytes == 0
                   ? s.slots * per_slot[k]
                   : s.pool_bytes / slot_bytes * per_slot[k] + s.pool_bytes % slot_bytes * per_slot[k] / slot_bytes;
    ZAYA_CHECK(kd.pages < (int64_t(1) << 31), "KV pool of {} pages is too large; allowed: < 2^31 pages", kd.pages);
    // The pages are left untouched (and so unallocated by the OS) until used.
    const size_t bytes = size_t(std::max<int64_t>(1, kd.layers * kd.pages * page_elems_ * elem_bytes_));
    kd.k = aligned_alloc_array<char>(bytes);
    kd.v = aligned_alloc_array<char>(bytes);
    kd.refs.assign(kd.pages, 0);
    kd.free.resize(kd.pages);
    for (int64_t i = 0; i < kd.pages; ++i) kd.free[i] = int32_t(kd.pages - 1 - i);  // low pages first
  }
  tables_.assign(s.slots, Tables(kinds_.size()));
}

std::vector<int64_t> KvPagePool::max_pages(int64_t length) const {
  const int64_t P = page_tokens_, all = (length + P - 1) / P;
  std::vector<int64_t> out(kinds_.size());
  for (size_t k = 0; k < kinds_.size(); ++k) {
    const int64_t W = kinds_[k].window;
    // A sliding kind holds the pages of its last W - 1 positions, and during a
    // step as many again for the ones it writes.
    out[k] = W == 0 ? all : W == 1 ? 0 : std::min(all, 2 * ((W - 1 + P - 1) / P + 1));
  }
  return out;
}

void KvPagePool::written(int64_t kind, int64_t past, int64_t count, int64_t& lo, int64_t& hi, bool all) const {
  const int64_t W = kinds_[kind].window;
  hi = past + count;
  lo = W == 0 || all ? past : std::max(past, hi - (W - 1));
}

std::vector<int64_t> KvPagePool::held(int32_t slot) const {
  std::vector<int64_t> out(kinds_.size(), 0);
  for (size_t k = 0; k < kinds_.size(); ++k)
    for (int32_t page : tables_[slot][k]) out[k] += page >= 0;
  return out;
}

void KvPagePool::add_needed(int32_t slot, int64_t past, int64_t count, std::vector<int64_t>& need, bool all) const {
  const int64_t P = page_tokens_;
  for (size_t k = 0; k < kinds_.size(); ++k) {
    int64_t lo = 0, hi = 0;
    written(int64_t(k), past, count, lo, hi, all);
    const std::vector<int32_t>& table = tables_[slot][k];
    for (int64_t i = lo / P; lo < hi && i <= (hi - 1) / P; ++i) need[k] += i >= int64_t(table.size()) || table[i] < 0;
  }
}

void KvPagePool::map_written(int32_t slot, int64_t past, int64_t count, bool all) {
  const int64_t P = page_tokens_;
  for (size_t k = 0; k < kinds_.size(); ++k) {
    int64_t lo = 0, hi = 0;
    written(int64_t(k), past, count, lo, hi, all);
    if (lo >= hi) continue;
    std::vector<int32_t>& table = tables_[slot][k];
    if (int64_t(table.size()) <= (hi - 1) / P) table.resize((hi - 1) / P + 1, -1);
    for (int64_t i = lo / P; i <= (hi - 1) / P; ++i)
      if (table[i] < 0) table[i] = take_page(int64_t(k));
  }
}

int32_t KvPagePool::take_page(int64_t kind) {
  Kind& k = kinds_[kind];
  ZAYA_ASSERT(!k.free.empty());
  const int32_t page = k.free.back();
  k.free.pop_back();
  k.refs[page] = 1;
  return page;
}

void KvPagePool::drop_page(int64_t kind, int32_t page) {
  Kind& k = kinds_[kind];
  ZAYA_ASSERT(k.refs[page] > 0);
  if (--k.refs[page] == 0) k.free.push_back(page);
}

void KvPagePool::release_out_of_window(int32_t slot, int64_t length) {
  const int64_t P = page_tokens_;
  for (size_t k = 0; k < kinds_.size(); ++k) {
    const int64_t W = kinds_[k].window;
    if (W == 0) continue;
    // Page i holds positions [iP, (i+1)P); the next query (at `length`) sees positions >= length - W + 1.
    std::vector<int32_t>& table = tables_[slot][k];
    const int64_t first = length - W + 1;
    for (int64_t i = 0; i < int64_t(table.size()) && (i + 1) * P <= first; ++i)
      if (table[i] >= 0) {
        drop_page(int64_t(k), table[i]);
        table[i] = -1;
      }
  }
}

void KvPagePool::truncate(int32_t slot, int64_t length) {
  const int64_t P = page_tokens_;
  for (size_t k = 0; k < kinds_.size(); ++k) {
    std::vector<int32_t>& table = tables_[slot][k];
    const int64_t keep = (length + P - 1) / P;  // pages holding a position < length
    for (int64_t i = keep; i < int64_t(table.size()); ++i)
      if (table[i] >= 0) drop_page(int64_t(k), table[i]);
    if (int64_t(table.size()) > keep) table.resize(size_t(keep));
  }
}

void KvPagePool::clear(int32_t slot) {
  for (size_t k = 0; k < kinds_.size(); ++k) {
    for (int32_t page : tables_[slot][k])
      if (page >= 0) drop_page(int64_t(k), page);
    tables_[slot][k].clear();
  }
}

void KvPagePool::copy(int32_t src, int32_t dst, int64_t length) {
  if (src == dst) return;
  clear(dst);
  const int64_t P = page_tokens_, partial = length / P, rows = length % P;
  for (size_t k = 0; k < kinds_.size(); ++k) {
    Kind& kd = kinds_[k];
    const std::vector<int32_t>& from = tables_[src][k];
    const bool copy_last = rows > 0 && partial < int64_t(from.size()) && from[partial] >= 0;
    ZAYA_CHECK(!copy_last || !kd.free.empty(),
               "the KV pool is full: copying sequence slot {} needs a free page (all {} are in use; "
               "EngineOptions.kv_pool_bytes)",
               src, kd.pages);
    std::vector<int32_t>& to = tables_[dst][k];
    to = from;
    for (int64_t i = 0; i < int64_t(to.size()); ++i) {
      if (to[i] < 0) continue;
      if (i != partial) {
        ++kd.refs[to[i]];
        continue;
      }
      // The partial last page is written by both sequences from here on: each gets its own.
      to[i] = take_page(int64_t(k));
      const int64_t bytes = elem_bytes_ * rows * head_dim_;
      for (int64_t layer = 0; layer < kd.layers; ++layer) {
        const int64_t to_page = (layer * kd.pages + to[i]) * page_elems_ * elem_bytes_;
        const int64_t from_page = (layer * kd.pages + from[i]) * page_elems_ * elem_bytes_;
        for (int64_t j = 0; j < kv_heads_; ++j) {
          const int64_t at = j * P * head_dim_ * elem_bytes_;
          std::memcpy(kd.k.get() + to_page + at, kd.k.get() + from_page + at, size_t(bytes));
          std::memcpy(kd.v.get() + to_page + at, kd.v.get() + from_page + at, size_t(bytes));
        }
      }
    }
  }
}

KvPagePool::Tables KvPagePool::share(int32_t slot) {
  Tables t = tables_[slot];
  for (size_t k = 0; k < kinds_.size(); ++k)
    for (int32_t page : t[k])
      if (page >= 0) ++kinds_[k].refs[page];
  return t;
}

void KvPagePool::adopt(const Tables& t, int32_t slot) {
  ZAYA_CHECK(t.size() == kinds_.size(), "page tables of {} kinds given to a pool of {}", t.size(), kinds_.size());
  clear(slot);
  tables_[slot] = t;
  for (size_t k = 0; k < kinds_.size(); ++k)
    for (int32_t page : t[k])
      if (page >= 0) ++kinds_[k].refs[page];
}

void KvPagePool::release(Tables& t) {
  for (size_t k = 0; k < t.size(); ++k)
    for (int32_t page : t[k])
      if (page >= 0) drop_page(int64_t(k), page);
  t.clear();
}

}  // namespace zaya
