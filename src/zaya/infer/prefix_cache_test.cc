#include "zaya/infer/prefix_cache.h"

#include <gtest/gtest.h>

namespace zaya {
namespace {

TEST(PrefixCache, LongestHeldPrefixAndLeastRecentlyUsedEviction) {
  PrefixCache cache({7, 8}, 2);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6}, b = {1, 2, 9, 9, 9};
  EXPECT_EQ(cache.find(a).slot, -1);
  EXPECT_EQ(cache.insert(a, 3), -1);  // not a block boundary
  EXPECT_EQ(cache.insert(a, 2), 7);
  EXPECT_EQ(cache.insert(a, 2), -1);  // held already
  EXPECT_EQ(cache.insert(a, 4), 8);
  // a itself: the 4-token snapshot (shorter than a); b shares only the first block.
  EXPECT_EQ(cache.find(a).slot, 8);
  EXPECT_EQ(cache.find(a).length, 4);
  EXPECT_EQ(cache.find(b).slot, 7);
  EXPECT_EQ(cache.find(b).length, 2);
  // A snapshot as long as the prompt leaves nothing to run: not used.
  EXPECT_EQ(cache.find({1, 2}).slot, -1);
  // Full: the least recently used (a[0, 4), since b just used a[0, 2)) goes.
  EXPECT_EQ(cache.insert(b, 4), 8);
  EXPECT_EQ(cache.find(a).length, 2);
  EXPECT_EQ(cache.find(b).length, 4);
  EXPECT_EQ(cache.size(), 2);
  PrefixCache none({}, 4);
  EXPECT_EQ(none.insert(a, 4), -1);
}

}  // namespace
}  // namespace zaya
