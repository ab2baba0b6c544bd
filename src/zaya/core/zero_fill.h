#pragma once
// Zeroing of large arrays on all OpenMP threads. The step loop zeroes
// gradient buffers before ops add into them; a lone memset there runs on one
// thread while the others spin at the next barrier (at 2 threads on `small`
// the serial memsets were 7% of a bf16 step, docs/performance.md).

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace zaya {

// Below this many bytes (or inside a parallel region) one memset is cheaper.
inline constexpr int64_t kParallelZeroBytes = int64_t(128) << 10;

// p[0, n) = 0 for arithmetic T (all-zero bits).
template <typename T>
void zero_fill(T* p, int64_t n) {
  static_assert(std::is_arithmetic_v<T>);
  const int64_t bytes = n * int64_t(sizeof(T));
  if (bytes < kParallelZeroBytes || omp_in_parallel()) {
    if (bytes > 0) std::memset(p, 0, size_t(bytes));
    return;
  }
  constexpr int64_t kChunk = int64_t(64) << 10;
  char* base = reinterpret_cast<char*>(p);
  const int64_t chunks = (bytes + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) std::memset(base + c * kChunk, 0, size_t(std::min(kChunk, bytes - c * kChunk)));
}

}  // namespace zaya
