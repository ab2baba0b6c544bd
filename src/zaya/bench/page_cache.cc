#include "zaya/bench/page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <unordered_set>

#include "zaya/core/error.h"
#include "zaya/io/file_descriptor.h"

namespace zaya {
namespace {

[[noreturn]] void sys_fail(const std::string& path, const char* what) {
  fail("{}: {} failed: {}", path, what, std::strerror(errno));
}

}  // namespace

uint64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) sys_fail(path, "stat");
  return uint64_t(st.st_size);
}

void evict(const std::string& path) {
  const FileDescriptor f = FileDescriptor::open_read(path);
  ::fdatasync(f.get());  // dirty pages cannot be dropped
  if (::posix_fadvise(f.get(), 0, 0, POSIX_FADV_DONTNEED) != 0) sys_fail(path, "posix_fadvise(DONTNEED)");
}

double resident_fraction(const std::string& path) {
  const uint64_t size = file_size(path);
  if (size == 0) return 0;
  const FileDescriptor f = FileDescriptor::open_read(path);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.get(), 0);
  if (p == MAP_FAILED) sys_fail(path, "mmap");
  const long page = sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> vec((size + uint64_t(page) - 1) / uint64_t(page));
  const int rc = ::mincore(p, size, vec.data());
  ::munmap(p, size);
  if (rc != 0) return -1;
  size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1u;
  return double(resident) / double(vec.size());
}

long major_faults() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_majflt;
}

double storage_read_bytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  double value = 0;
  while (in >> key >> value)
    if (key == "read_bytes:") return value;
  return -1;
}

std::vector<uint64_t> distinct_random(uint64_t n, uint64_t k, std::mt19937_64& rng) {
  k = std::min(k, n);
  std::vector<uint64_t> out;
  if (k * 2 >= n) {
    out.resize(n);
    for (uint64_t i = 0; i < n; ++i) out[i] = i;
    std::shuffle(out.begin(), out.end(), rng);
    out.resize(k);
    return out;
  }
  std::unordered_set<uint64_t> chosen;
  for (uint64_t j = n - k; j < n; ++j) {
    const uint64_t t = std::uniform_int_distribution<uint64_t>(0, j)(rng);
    const uint64_t v = chosen.count(t) ? j : t;
    chosen.insert(v);
    out.push_back(v);
  }
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

}  // namespace zaya
