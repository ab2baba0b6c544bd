#pragma once
// When an op's loop opens an OpenMP region: one rule for every op (issue 39).
//
// libgomp enters its team code for every `#pragma omp parallel`, also for one
// that runs on a single thread (an `if` clause that is false, a SerialIf
// scope, omp_set_num_threads(1)): once the process has run a two-thread
// region, each entry costs a futex call. A decode step at `small`, batch 1 made
// about 155 such entries for its norms, residual merges, RoPE and routing
// (docs/performance.md, "single-thread OpenMP regions"). These helpers run the
// loop on the calling thread, without entering OpenMP, when the region would
// run one thread or the loop is too small to be worth one; otherwise they open
// the region the op always opened (`schedule(static)`), so the split of the
// indices over threads is unchanged. Every op's result is independent of that
// split (each index writes its own outputs, column sums run in a fixed order),
// so serial and parallel runs are bitwise identical. A serial loop's body sees
// one thread (omp_get_max_threads() == 1), as a region's thread would: a
// library it calls (oneDNN's GEMM in the attention core) stays on the caller,
// whose bits do not depend on the thread count either.
//
//   parallel_for(n, work, body)          body(i), i in [0, n)
//   parallel_for_simd(n, work, body)     the same, a vectorised loop (`for simd`)
//   parallel_for_2d(n0, n1, work, body)  body(i, j), the two loops collapsed
//   parallel_region(work, body)          body(thread, threads) once per thread
//
// `work` is the loop's size in floats read and written (about): loops under
// kParallelMinWork run serially.

#include <omp.h>

#include <cstdint>

#include "zaya/ops/serial_if.h"

namespace zaya {

// Below this many floats a loop runs on the calling thread: a few microseconds
// of work, about what waking a team and joining it costs.
inline constexpr int64_t kParallelMinWork = 8192;

// True when a loop of `work` floats should not open a region: too small, one
// thread allowed (SerialIf, OMP_NUM_THREADS=1), or already inside a region
// (where a nested one would run a team of one).
inline bool run_serially(int64_t work) {
  return work < kParallelMinWork || omp_get_max_threads() == 1 || omp_in_parallel() != 0;
}

template <typename Body>
void parallel_for(int64_t n, int64_t work, Body&& body) {
  if (n <= 1 || run_serially(work)) {
    SerialIf one_thread(omp_get_max_threads() > 1);
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

template <typename Body>
void parallel_for_simd(int64_t n, int64_t work, Body&& body) {
  if (run_serially(work)) {
    SerialIf one_thread(omp_get_max_threads() > 1);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) body(i);
}

template <typename Body>
void parallel_for_2d(int64_t n0, int64_t n1, int64_t work, Body&& body) {
  if (n0 * n1 <= 1 || run_serially(work)) {
    SerialIf one_thread(omp_get_max_threads() > 1);
    for (int64_t i = 0; i < n0; ++i)
      for (int64_t j = 0; j < n1; ++j) body(i, j);
    return;
  }
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i = 0; i < n0; ++i)
    for (int64_t j = 0; j < n1; ++j) body(i, j);
}

template <typename Body>
void parallel_region(int64_t work, Body&& body) {
  if (run_serially(work)) {
    SerialIf one_thread(omp_get_max_threads() > 1);
    body(0, 1);
    return;
  }
#pragma omp parallel
  body(omp_get_thread_num(), omp_get_num_threads());
}

}  // namespace zaya
