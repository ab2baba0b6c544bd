#pragma once
// Memory for the weights a decode step streams, backed by 2 MiB transparent
// huge pages where the kernel gives them (docs/performance.md, "Decode weights
// in huge pages").
//
// A batch-1 decode step reads every weight it uses once (210 MB at ZAYA1-8B
// widths, 2 blocks): over 4 KiB pages that is ~51,000 page translations a
// step, each a dTLB miss and often a page walk; over 2 MiB pages ~100. With
// THP in `madvise` mode (the usual distribution default) only anonymous memory
// advised with MADV_HUGEPAGE gets huge pages, so:
//
//  * HugePageRegion: one anonymous mapping, its start and size whole 2 MiB
//    pages, advised MADV_HUGEPAGE before anything touches it. The advice is
//    only advice: when madvise fails (a kernel without THP) or THP is `never`,
//    the region is ordinary 4 KiB-page memory and everything still works.
//  * HugePageArena: a bump allocator over such regions (64-byte aligned
//    slices, no per-slice free), what the inference weight builder allocates
//    every matrix and vector from, so small tensors share huge pages instead
//    of each rounding up to 2 MiB. Untouched tails of a region cost address
//    space only.
//
// transparent_huge_pages_mode() reads the system setting, which decides
// whether copying a memory-mapped weight into the arena can pay off (the
// builder keeps the file mapping in place when it is "never").

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zaya {

inline constexpr size_t kHugePageBytes = size_t(2) << 20;

class HugePageRegion {
 public:
  HugePageRegion() = default;
  // At least `bytes` (rounded up to whole huge pages; 0 gives an empty region); fails (zaya::Error) when the
  // kernel gives no memory.
  explicit HugePageRegion(size_t bytes);
  ~HugePageRegion();
  HugePageRegion(HugePageRegion&& other) noexcept;
  HugePageRegion& operator=(HugePageRegion&& other) noexcept;
  HugePageRegion(const HugePageRegion&) = delete;
  HugePageRegion& operator=(const HugePageRegion&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Whether madvise(MADV_HUGEPAGE) was accepted (the kernel still decides per fault whether a huge page is free).
  bool advised() const { return advised_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool advised_ = false;
};

class HugePageArena {
 public:
  // Regions are at least `region_bytes` (rounded up to huge pages); a larger request gets a region of its own size.
  explicit HugePageArena(size_t region_bytes = size_t(64) << 20);

  // `bytes` (0 allowed), 64-byte aligned; valid as long as the arena.
  void* alloc(size_t bytes);
  template <typename T>
  T* alloc_array(int64_t count) {
    return static_cast<T*>(alloc(size_t(count) * sizeof(T)));
  }
  // Whether p points into memory this arena handed out.
  bool holds(const void* p) const;

  size_t used_bytes() const { return used_; }
  size_t reserved_bytes() const;
  // Reserved bytes whose region took the MADV_HUGEPAGE advice.
  size_t advised_bytes() const;

 private:
  size_t region_bytes_;
  std::vector<HugePageRegion> regions_;
  size_t offset_ = 0;  // first free byte of regions_.back()
  size_t used_ = 0;
};

// The bracketed choice of /sys/kernel/mm/transparent_hugepage/enabled ("always", "madvise", "never"), or "" when the
// file is missing or unreadable (a kernel without THP, or not Linux).
std::string transparent_huge_pages_mode();

// MemAvailable of /proc/meminfo in bytes (what can be allocated without swapping, page cache included), or -1 when
// it cannot be read.
int64_t memory_available_bytes();

}  // namespace zaya
