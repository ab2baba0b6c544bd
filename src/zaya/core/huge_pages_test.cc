#include "zaya/core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace zaya {
namespace {

bool aligned_to(const void* p, size_t to) { return reinterpret_cast<uintptr_t>(p) % to == 0; }

TEST(HugePages, RegionIsWholeAlignedHugePages) {
  for (size_t bytes : {size_t(1), kHugePageBytes - 1, kHugePageBytes, kHugePageBytes + 1, size_t(5) << 20}) {
    HugePageRegion r(bytes);
    ASSERT_NE(r.data(), nullptr) << bytes;
    EXPECT_TRUE(aligned_to(r.data(), kHugePageBytes)) << bytes;
    EXPECT_EQ(r.size() % kHugePageBytes, 0u) << bytes;
    EXPECT_GE(r.size(), bytes);
    EXPECT_LT(r.size(), bytes + kHugePageBytes);
    std::memset(r.data(), 0x5a, r.size());  // all of it is writable
    EXPECT_EQ(r.data()[r.size() - 1], 0x5a);
  }
  HugePageRegion empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.size(), 0u);
}

TEST(HugePages, RegionMovesItsMapping) {
  HugePageRegion a(kHugePageBytes);
  uint8_t* p = a.data();
  p[7] = 42;
  HugePageRegion b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is part of the contract
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[7], 42);
  HugePageRegion c(kHugePageBytes);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
}

// Under THP "always" or "madvise" the kernel accepts the advice (whether a fault then gets a huge page depends on
// free memory, so that is measured in docs/performance.md, not asserted here).
TEST(HugePages, AdviceTakenWhereTheKernelHasThp) {
  const std::string mode = transparent_huge_pages_mode();
  HugePageRegion r(kHugePageBytes);
  if (mode == "always" || mode == "madvise") {
    EXPECT_TRUE(r.advised()) << mode;
  }
  if (mode.empty()) {
    EXPECT_FALSE(r.advised());
  }
  EXPECT_GT(memory_available_bytes(), 0);
}

TEST(HugePages, ArenaSlicesAreAlignedDistinctAndHeld) {
  HugePageArena arena(size_t(4) << 20);
  std::vector<std::pair<uint8_t*, size_t>> slices;
  const size_t sizes[] = {1, 0, 63, 64, 65, 1000, size_t(3) << 20, 17, size_t(9) << 20, 5};
  for (size_t n : sizes) {
    auto* p = static_cast<uint8_t*>(arena.alloc(n));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned_to(p, 64)) << n;
    EXPECT_TRUE(arena.holds(p)) << n;
    if (n > 0) {
      EXPECT_TRUE(arena.holds(p + n - 1)) << n;
    }
    std::memset(p, int(slices.size()), n);
    slices.emplace_back(p, n);
  }
  // No slice overwrote another.
  for (size_t i = 0; i < slices.size(); ++i)
    for (size_t k = 0; k < slices[i].second; ++k) ASSERT_EQ(slices[i].first[k], uint8_t(i)) << i;
  // A request larger than the region size gets a region of its own, whole huge pages from a 2 MiB boundary.
  EXPECT_TRUE(aligned_to(slices[8].first, kHugePageBytes));
  EXPECT_TRUE(aligned_to(slices[0].first, kHugePageBytes));
  EXPECT_GE(arena.reserved_bytes(), arena.used_bytes());
  EXPECT_EQ(arena.reserved_bytes() % kHugePageBytes, 0u);
  int on_stack = 0;
  EXPECT_FALSE(arena.holds(&on_stack));
  std::vector<float> heap(16);
  EXPECT_FALSE(arena.holds(heap.data()));
  const std::string mode = transparent_huge_pages_mode();
  if (mode == "always" || mode == "madvise") {
    EXPECT_EQ(arena.advised_bytes(), arena.reserved_bytes());
  }
}

}  // namespace
}  // namespace zaya
