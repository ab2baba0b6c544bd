#pragma once
// A fixed team of helper threads for the many short parallel loops of a decode
// step (docs/performance.md, "Decoding": one OpenMP region per product cost a
// fork and a join barrier each, tens per step, and a barrier waits for every
// team thread, even one the scheduler has not run yet).
//
// pool_for(n, threads, f) runs f(i, worker) for every i in [0, n) on the
// calling thread (worker 0) and up to threads - 1 helper threads (workers
// 1..threads-1), each claiming the next index from a shared counter. The
// caller waits only for the indices that were claimed: a helper that is not
// running when the loop starts simply takes none, so a busy machine slows a
// loop down, never stalls it. Which worker runs an index changes from run to
// run, so f must give each index's result independently of the worker (each
// index its own output rows; `worker` only picks scratch), which keeps results
// bitwise identical at any thread count.
//
// The loop runs serially on the calling thread (worker 0) when threads <= 1,
// n <= 1, inside an OpenMP region, on a helper (no nesting), or while another
// thread's loop holds the pool. f must not throw. Helpers spin briefly after a
// loop (the next one of a decode step comes within microseconds), then sleep;
// OMP_WAIT_POLICY=ACTIVE makes them spin longer. With OMP_WAIT_POLICY=PASSIVE
// the loop is an OpenMP region instead (index i on thread i mod threads, the
// threads sleeping between regions): on the shared 2-core machine that policy
// measured faster with libgomp's team than with these helpers
// (docs/performance.md, "Decoding").

#include <cstdint>
#include <type_traits>

namespace zaya {

using PoolChunkFn = void (*)(void* ctx, int64_t index, int worker);

// The type-erased form of pool_for.
void pool_run(int64_t n, int threads, PoolChunkFn fn, void* ctx);

template <typename F>
void pool_for(int64_t n, int threads, F&& f) {
  using Fn = std::remove_reference_t<F>;
  pool_run(
      n, threads, [](void* ctx, int64_t i, int worker) { (*static_cast<Fn*>(ctx))(i, worker); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

// Helper threads started so far (tests).
int pool_helpers();

}  // namespace zaya
