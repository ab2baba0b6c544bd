// The KV page pool alone, with no model: pages come from and go back to the
// pool, shared pages are counted, copy() copies the partial last page and
// shares the full ones, a sliding kind keeps only its window's pages, and an
// exhausted pool says so before it changes anything.
#include "zaya/infer/kv_page_pool.h"

#include <gtest/gtest.h>

#include <cstring>

#include "zaya/core/error.h"

namespace zaya {
namespace {

// Two full blocks and one sliding block (window 5), pages of 4 tokens, 1 head of 2 floats.
KvPoolShape shape(int64_t slots, int64_t context_pages) {
  KvPoolShape s;
  s.block_windows = {0, 5, 0};
  s.kv_heads = 1;
  s.head_dim = 2;
  s.page_tokens = 4;
  s.elem_bytes = 4;
  s.slots = slots;
  s.max_context = 4 * context_pages;
  return s;
}

TEST(KvPagePool, KindsAndSizes) {
  KvPagePool pool(shape(2, 4));  // context 16: 4 full pages per slot
  ASSERT_EQ(pool.kinds(), 2);
  EXPECT_EQ(pool.kind_of(0), 0);
  EXPECT_EQ(pool.kind_of(1), 1);
  EXPECT_EQ(pool.kind_of(2), 0);
  EXPECT_EQ(pool.window(1), 5);
  EXPECT_EQ(pool.page_bytes(0), 4 * 2 * 2 * (1 * 4 * 2));  // f32, K and V, 2 layers, [1, 4, 2]
  EXPECT_EQ(pool.page_bytes(1), 4 * 2 * 1 * (1 * 4 * 2));
  // Sliding: min(all, 2 * (ceil(4 / 4) + 1)) = 4 pages at 16 tokens; 2 at 5 tokens.
  EXPECT_EQ(pool.max_pages(16), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(pool.max_pages(5), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(pool.pages(0), 8);
  EXPECT_EQ(pool.pages(1), 8);
}

TEST(KvPagePool, AllocAndFree) {
  KvPagePool pool(shape(2, 4));
  std::vector<int64_t> need(2, 0);
  pool.add_needed(0, 0, 6, need);
  EXPECT_EQ(need, (std::vector<int64_t>{2, 2}));  // positions 0..5: pages 0 and 1 (sliding writes its last 4: 2..5)
  pool.map_written(0, 0, 6);
  EXPECT_EQ(pool.held(0), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(pool.table(0, 0), (std::vector<int32_t>{0, 1}));  // low pages first
  EXPECT_EQ(pool.refs(0, 0), 1);
  // Appending within the partial page takes nothing; past it, one page.
  need.assign(2, 0);
  pool.add_needed(0, 6, 2, need);
  EXPECT_EQ(need[0], 0);
  need.assign(2, 0);
  pool.add_needed(0, 6, 3, need);
  EXPECT_EQ(need[0], 1);
  pool.clear(0);
  EXPECT_EQ(pool.held(0), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(pool.free_pages(0), 8);
  EXPECT_EQ(pool.free_pages(1), 8);
  EXPECT_EQ(pool.refs(0, 0), 0);
}

TEST(KvPagePool, SharingCountsReferences) {
  KvPagePool pool(shape(3, 4));
  pool.map_written(0, 0, 8);  // two full pages of kind 0
  KvPagePool::Tables snap = pool.share(0);
  for (int32_t page : snap[0]) EXPECT_EQ(pool.refs(0, page), 2);
  pool.adopt(snap, 1);
  pool.adopt(snap, 2);
  for (int32_t page : snap[0]) EXPECT_EQ(pool.refs(0, page), 4);
  const int64_t free_before = pool.free_pages(0);
  pool.clear(0);
  pool.clear(1);
  EXPECT_EQ(pool.free_pages(0), free_before);  // still referenced by the snapshot and slot 2
  for (int32_t page : snap[0]) EXPECT_EQ(pool.refs(0, page), 2);
  pool.release(snap);
  EXPECT_TRUE(snap.empty());
  pool.clear(2);
  EXPECT_EQ(pool.free_pages(0), pool.pages(0));
  EXPECT_EQ(pool.free_pages(1), pool.pages(1));
}

TEST(KvPagePool, CopySharesFullPagesAndCopiesThePartialOne) {
  KvPagePool pool(shape(2, 4));
  pool.map_written(0, 0, 6);  // page 0 full, page 1 holds positions 4, 5
  // Mark every row of slot 0's pages in both full-attention layers (blocks 0 and 2).
  const int32_t full = pool.table(0, 0)[0], partial = pool.table(0, 0)[1];
  for (int64_t block : {0, 2})
    for (int32_t page : {full, partial})
      for (int64_t i = 0; i < 8; ++i) {
        reinterpret_cast<float*>(pool.kpage(block, page))[i] = float(100 * block + 10 * page + i);
        reinterpret_cast<float*>(pool.vpage(block, page))[i] = -float(100 * block + 10 * page + i);
      }
  pool.copy(0, 1, 6);
  EXPECT_EQ(pool.table(1, 0)[0], full);
  EXPECT_EQ(pool.refs(0, full), 2);
  const int32_t own = pool.table(1, 0)[1];
  EXPECT_NE(own, partial);
  EXPECT_EQ(pool.refs(0, partial), 1);
  EXPECT_EQ(pool.refs(0, own), 1);
  // The rows written so far (2 of 4, d = 2: 4 floats) came along, in every layer, K and V.
  for (int64_t block : {0, 2})
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_EQ(reinterpret_cast<float*>(pool.kpage(block, own))[i], float(100 * block + 10 * partial + i));
      EXPECT_EQ(reinterpret_cast<float*>(pool.vpage(block, own))[i], -float(100 * block + 10 * partial + i));
    }
  // A copy of a sequence that ends on a page boundary shares everything.
  pool.clear(1);
  pool.copy(0, 1, 4);
  EXPECT_EQ(pool.table(1, 0)[0], full);
  EXPECT_EQ(pool.refs(0, full), 2);
}

TEST(KvPagePool, SlidingWindowReleasesOldPages) {
  KvPagePool pool(shape(1, 8));  // window 5: the next query sees its last 4 positions
  pool.map_written(0, 0, 12);
  // The sliding kind maps only positions 8..11 (page 2); the full kind pages 0..2.
  EXPECT_EQ(pool.held(0), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(pool.table(0, 1), (std::vector<int32_t>{-1, -1, 0}));
  pool.map_written(0, 12, 1);  // position 12: page 3
  EXPECT_EQ(pool.held(0), (std::vector<int64_t>{4, 2}));
  pool.release_out_of_window(0, 13);  // the next query (13) sees 9..13: page 2 and 3 stay
  EXPECT_EQ(pool.held(0)[1], 2);
  pool.map_written(0, 13, 3);
  pool.release_out_of_window(0, 16);  // sees 12..16: page 2 (8..11) goes
  EXPECT_EQ(pool.table(0, 1), (std::vector<int32_t>{-1, -1, -1, 1}));
  EXPECT_EQ(pool.refs(1, 0), 0);
  EXPECT_EQ(pool.held(0)[0], 4);  // full attention keeps everything
}

TEST(KvPagePool, ExhaustionIsReportedBeforeAnythingChanges) {
  KvPoolShape s = shape(2, 4);
  s.block_windows = {0};
  s.pool_bytes = 3 * (4 * 2 * 1 * 8);  // three pages
  KvPagePool pool(s);
  ASSERT_EQ(pool.pages(0), 3);
  pool.map_written(0, 0, 11);  // three pages, the last partial
  EXPECT_EQ(pool.free_pages(0), 0);
  std::vector<int64_t> need(1, 0);
  pool.add_needed(1, 0, 1, need);
  EXPECT_EQ(need[0], 1);  // more than the 0 free: the caller must not map
  // A copy needs its own partial page: refused, and no reference taken.
  EXPECT_THROW(pool.copy(0, 1, 11), Error);
  for (int32_t page : pool.table(0, 0)) EXPECT_EQ(pool.refs(0, page), 1);
  pool.clear(0);
  EXPECT_EQ(pool.free_pages(0), 3);
}

}  // namespace
}  // namespace zaya
