// Anonymous memory in transparent huge pages (huge_pages.h).
#include "zaya/core/huge_pages.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "zaya/core/arena.h"
#include "zaya/core/error.h"

namespace zaya {

namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

HugePageRegion::HugePageRegion(size_t bytes) {
  if (bytes == 0) return;
  const size_t size = round_up(bytes, kHugePageBytes);
  // Over-map by one huge page and trim both ends, so that the region starts on a 2 MiB boundary: a huge page can
  // only back an aligned 2 MiB range that lies wholly inside the mapping.
  const size_t span = size + kHugePageBytes;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) fail("out of memory mapping {} bytes for weights: {}", span, std::strerror(errno));
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(start, kHugePageBytes);
  if (aligned > start) ::munmap(raw, aligned - start);
  const uintptr_t end = aligned + size;
  if (start + span > end) ::munmap(reinterpret_cast<void*>(end), start + span - end);
  data_ = reinterpret_cast<uint8_t*>(aligned);
  size_ = size;
  // Advice only: EINVAL on a kernel without THP leaves ordinary pages.
  advised_ = ::madvise(data_, size_, MADV_HUGEPAGE) == 0;
}

HugePageRegion::~HugePageRegion() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

HugePageRegion::HugePageRegion(HugePageRegion&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      advised_(std::exchange(other.advised_, false)) {}

HugePageRegion& HugePageRegion::operator=(HugePageRegion&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    advised_ = std::exchange(other.advised_, false);
  }
  return *this;
}

HugePageArena::HugePageArena(size_t region_bytes) : region_bytes_(round_up(region_bytes, kHugePageBytes)) {}

void* HugePageArena::alloc(size_t bytes) {
  const size_t need = round_up(bytes == 0 ? 1 : bytes, kAlignBytes);
  if (regions_.empty() || offset_ + need > regions_.back().size()) {
    regions_.emplace_back(std::max(need, region_bytes_));
    offset_ = 0;
  }
  uint8_t* p = regions_.back().data() + offset_;
  offset_ += need;
  used_ += need;
  return p;
}

bool HugePageArena::holds(const void* p) const {
  const auto* b = static_cast<const uint8_t*>(p);
  for (const HugePageRegion& r : regions_)
    if (b >= r.data() && b < r.data() + r.size()) return true;
  return false;
}

size_t HugePageArena::reserved_bytes() const {
  size_t n = 0;
  for (const HugePageRegion& r : regions_) n += r.size();
  return n;
}

size_t HugePageArena::advised_bytes() const {
  size_t n = 0;
  for (const HugePageRegion& r : regions_)
    if (r.advised()) n += r.size();
  return n;
}

std::string transparent_huge_pages_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return line.substr(open + 1, close - open - 1);
}

int64_t memory_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;  // the file's unit is kB
  }
  return -1;
}

}  // namespace zaya
